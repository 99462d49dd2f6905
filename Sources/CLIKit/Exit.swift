import FoundationEssentials
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// Exit codes (documented in `callend --help`).
public enum ExitCode: Int32 {
    case success = 0
    case failure = 1
    case usage = 2
}

/// Writes "callend: ERROR" to standard error and exits with `code`.
public func fail(_ error: any Error, code: ExitCode) -> Never {
    // Under systemd the journal files it as an error; elsewhere the line stays as it was.
    let priority = LogWriter.standardErrorIsJournal(ProcessInfo.processInfo.environment) ? "<3>" : ""
    LogWriter.writeStandardError("\(priority)callend: \(error)\n")
    exit(code.rawValue)
}

/// The name of the lean service executable, installed beside `callend`.
public let serveExecutableName = "callend-serve"

/// The name of the benches' executable, installed beside `callend` (`callend bench` runs it).
public let benchExecutableName = "callend-bench"

/// The path of the executable `name` in the same folder as this process's own executable, when
/// it is there and may be run.
public func besideSelf(_ name: String) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard length > 0 else { return nil }
    let own = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    guard let slash = own.lastIndex(of: "/") else { return nil }
    let path = String(own[...slash]) + name
    return access(path, X_OK) == 0 ? path : nil
}

/// Replaces this process with `NAME ARGUMENTS` when that executable sits in the same folder as
/// this one (`swift build` makes them all; install them together); returns when it does not or
/// cannot be run.
public func execBeside<C: Collection>(_ name: String, _ arguments: C) where C.Element == String {
    guard let path = besideSelf(name) else { return }
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    execv(path, argv)
    for pointer in argv { free(pointer) }  // only reached when execv failed
}

/// Replaces this process with `callend-serve ARGUMENTS` (`execBeside`); returns when it is not
/// there, and the caller serves itself. CALLEND_SERVE_IN_PROCESS=1 keeps the service in this
/// process.
public func execServeBeside<C: Collection>(_ arguments: C) where C.Element == String {
    guard ProcessInfo.processInfo.environment["CALLEND_SERVE_IN_PROCESS"] != "1" else { return }
    execBeside(serveExecutableName, arguments)
}
