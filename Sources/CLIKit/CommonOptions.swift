import Dispatch
import FoundationEssentials
import Platform
import Signaling
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// What the executables' command lines share: options every command reads the same way, the
// service's secret, the version, and signals turned into actions.

/// The log's writer for a command, with --log-level's threshold.
public func logWriter(program: String, _ args: inout Arguments) throws(UsageError) -> LogWriter {
    var threshold = LogMessage.Level.info
    if let name = try args.value("--log-level") {
        guard let level = LogMessage.Level(name: name) else {
            throw UsageError(description: "--log-level: \(name) is not one of error, warning, info, debug")
        }
        threshold = level
    }
    return LogWriter(program: program, threshold: threshold)
}

/// Reads the shared secret from --secret-file or CALLEND_SECRET, never echoing it.
public func loadSecret(_ args: inout Arguments) throws -> TokenSecret {
    if let path = try args.value("--secret-file") {
        do { return try TokenSecret(contentsOfFile: path) } catch { throw UsageError(description: error.message) }
    }
    if let value = ProcessInfo.processInfo.environment["CALLEND_SECRET"], !value.isEmpty {
        do { return try TokenSecret(Array(value.utf8)) } catch { throw UsageError(description: "CALLEND_SECRET: \(error.message)") }
    }
    throw UsageError(description: "no secret: give --secret-file F or set CALLEND_SECRET (make one with 'callend token --new-secret')")
}

public func parseHostPort(_ text: String, option: String) throws(UsageError) -> (host: String, port: Int) {
    guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
        throw UsageError(description: "\(option) takes HOST:PORT (port 0 ... 65535), not '\(text)'")
    }
    var host = String(text[..<colon])
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    return (host, port)
}

public func parseDuration(_ text: String, option: String = "--ttl", maxDays: Int64 = 30) throws(UsageError) -> Int64 {
    let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
    var number = Substring(text), unit: Int64 = 1
    if let last = text.last, let scale = units[last] {
        number = text.dropLast()
        unit = scale
    }
    guard let value = Int64(number), value > 0, value <= maxDays * 86400 / unit else {
        throw UsageError(description: "\(option) takes a positive duration up to \(maxDays)d such as 90, 15m, 1h or 7d, not '\(text)'")
    }
    return value * unit
}

/// A size in bytes: 500000, 64k, 500M, 2G (powers of 1024).
public func parseByteSize(_ text: String, option: String, minimum: Int64) throws(UsageError) -> Int64 {
    let units: [Character: Int64] = ["k": 1 << 10, "K": 1 << 10, "m": 1 << 20, "M": 1 << 20, "g": 1 << 30, "G": 1 << 30, "t": 1 << 40, "T": 1 << 40]
    var number = Substring(text), unit: Int64 = 1
    if let last = text.last, let scale = units[last] {
        number = text.dropLast()
        unit = scale
    }
    guard let value = Int64(number), value > 0, value <= Int64.max / unit, value * unit >= minimum else {
        throw UsageError(description: "\(option) takes a size of at least \(minimum >> 20) MiB such as 500M or 20G, not '\(text)'")
    }
    return value * unit
}

/// Raises the open-file limit to the hard limit: a service or bench holding thousands of sockets needs it.
public func raiseFileLimit() {
    var limit = rlimit()
    if getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0, limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(RLIMIT_NOFILE_VALUE, &limit)
    }
}

#if canImport(Glibc)
let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#endif

/// callend's version: `callend --version`, `callend serve --version`, `callend-serve --version`.
public let callendVersion = "0.1.0"

/// SIGINT and SIGTERM run `action` (on a dispatch queue) instead of killing the process, so a
/// command can stop cleanly: leave its call, remove its namespaces, print what it measured.
public func onTerminationSignals(_ action: @escaping @Sendable () -> Void) {
    onSignals([SIGINT, SIGTERM], action)
}

/// Each of `signals` (SIGINT, SIGTERM, SIGHUP) runs `action` on a dispatch queue instead of its
/// default (SIGHUP: a reload).
public func onSignals(_ signals: [Int32], _ action: @escaping @Sendable () -> Void) {
    takeStopSignals()
    StopSignals.shared.actions.withLock { actions in
        for sig in signals {
            precondition(StopSignals.taken.contains(sig), "signal \(sig) is not one takeStopSignals takes")
            actions[sig] = action
        }
    }
}

/// Takes SIGINT, SIGTERM and SIGHUP for the whole process: call it first in `main`, before any
/// thread starts, so every thread inherits a mask that blocks them. Dispatch reads them from a
/// signalfd, which sees a signal only while it is pending: a signal that reached a thread which had
/// it unblocked while it was ignored, or before dispatch had installed its handler, was dropped.
/// That lost a SIGTERM sent the moment `serve` said it listens (20 % of tries on an idle machine,
/// 75 % on a busy one). A signal no command asked for ends the process as its default would (with
/// status 128 + the signal's number), after flushing standard output.
public func takeStopSignals() {
    _ = StopSignals.shared
}

private final class StopSignals: Sendable {
    static let taken: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    static let shared = StopSignals()
    let actions = Mutex<[Int32: @Sendable () -> Void]>([:])
    nonisolated(unsafe) private var sources: [any DispatchSourceSignal] = []  // written once, in init

    private init() {
        var mask = sigset_t()
        sigemptyset(&mask)
        for sig in Self.taken { sigaddset(&mask, sig) }
        pthread_sigmask(SIG_BLOCK, &mask, nil)
        for sig in Self.taken {
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [self] in
                if let action = actions.withLock({ $0[sig] }) {
                    action()
                } else {
                    fflush(nil)
                    _exit(128 + sig)
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}
