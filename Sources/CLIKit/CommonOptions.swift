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

/// Each of `signals` runs `action` on the process's `signals` thread instead of its default
/// (SIGHUP: a reload).
///
/// The handler is in place when this returns: a signal handler of our own writes the signal's
/// number to a pipe that the `signals` thread reads. Dispatch's own signal sources install their
/// handler later, on its manager thread; until then the signal was ignored and the kernel dropped
/// it, which lost a SIGTERM sent the moment `serve` said it listens (1 in 5 tries on an idle
/// machine, 3 in 4 on a busy one). The pipe was read by a dispatch source until a `join` was seen
/// not to stop on SIGTERM (a few in a hundred test runs on a loaded machine): its handler never
/// ran, with the handler's byte written; a thread blocked in read(2) has no such step to miss.
/// Nothing is blocked or ignored, so a child process starts with the default handling of every
/// signal. The signals are unblocked in the calling thread (call this on the main thread): a
/// process inherits its parent's mask, and a test runner's threads block every signal.
public func onSignals(_ signals: [Int32], _ action: @escaping @Sendable () -> Void) {
    let router = SignalRouter.shared
    router.actions.withLock { actions in
        for sig in signals { actions[sig] = action }
    }
    for sig in signals {
        var handling = sigaction()
        handling.__sigaction_handler.sa_handler = { sig in
            // Async-signal-safe: one write to a pipe, errno kept for the interrupted code.
            let saved = errno
            var byte = UInt8(truncatingIfNeeded: sig)
            _ = write(signalPipeWriteEnd, &byte, 1)
            errno = saved
        }
        handling.sa_flags = SA_RESTART
        sigemptyset(&handling.sa_mask)
        sigaction(sig, &handling, nil)
    }
    var mask = sigset_t()
    sigemptyset(&mask)
    for sig in signals { sigaddset(&mask, sig) }
    pthread_sigmask(SIG_UNBLOCK, &mask, nil)
}

/// The write end of `SignalRouter`'s pipe, for the signal handler (which captures nothing).
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

private final class SignalRouter: Sendable {
    static let shared = SignalRouter()
    let actions = Mutex<[Int32: @Sendable () -> Void]>([:])

    private init() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { fatalError("cannot make the signal pipe: errno \(errno)") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        // The handler's end never blocks (a full pipe drops a repeat of a signal already there);
        // the thread's end does.
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        signalPipeWriteEnd = ends[1]
        let readEnd = ends[0]
        startThread(named: "signals") { [self] in
            var bytes = [UInt8](repeating: 0, count: 64)
            while true {
                let count = read(readEnd, &bytes, bytes.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return }
                for sig in bytes.prefix(count) {
                    actions.withLock { $0[Int32(sig)] }?()
                }
            }
        }
    }
}
