import Platform
import CallEndpoint
import Foundation
import Synchronization

/// Runs an outside program (ffmpeg, vpxenc, opusenc) for benches and set-up, with its output
/// captured and its wall time measured.
struct ExternalTool {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    struct Result {
        let output: String
        let wallTime: Duration
    }

    static func locate(_ name: String) throws -> String {
        if name.contains("/") {
            guard FileManager.default.isExecutableFile(atPath: name) else { throw Failure(description: "\(name) is not an executable file") }
            return name
        }
        let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        guard let found = paths.map({ "\($0)/\(name)" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure(description: "\(name) is not installed; run scripts/install-deps.sh (it installs ffmpeg, vpx-tools and opus-tools)")
        }
        return found
    }

    @discardableResult
    static func run(_ name: String, _ arguments: [String]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try locate(name))
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        let clock = MonotonicClock()
        let start = clock.now
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let elapsed = clock.now - start
        let output = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw Failure(description: "\(name) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus):\n\(output)")
        }
        return Result(output: output, wallTime: elapsed)
    }

    /// An empty file, open for writing (a peer's log).
    static func newFile(_ path: String) throws -> FileHandle {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw Failure(description: "cannot write \(path)")
        }
        return handle
    }

    /// Runs `process` with its standard output and error copied to the file `log`, and returns
    /// once it has printed `ready` (its "listening" line): what comes next follows that event,
    /// not a guess of how long a start takes. A process that exits first, or does not say it
    /// within `within`, is stopped and the start fails.
    static func start(_ process: Process, log: String, ready: String, within: Duration) throws {
        let file = try newFile(log)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let said = Atomic<Bool>(false)
        let answered = DispatchSemaphore(value: 0)
        let marker = Array(ready.utf8)
        Thread {
            var seen: [UInt8] = []
            while true {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                file.write(chunk)
                guard !said.load(ordering: .relaxed) else { continue }
                seen = Array((seen + chunk).suffix(4096))
                if seen.indices.contains(where: { seen[$0...].starts(with: marker) }) {
                    said.store(true, ordering: .relaxed)
                    answered.signal()
                }
            }
            try? file.close()
            answered.signal()  // it ended: whoever waits stops waiting
        }.start()
        guard answered.wait(for: within), said.load(ordering: .relaxed) else {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            throw Failure(description: "\(process.executableURL?.lastPathComponent ?? "a process") \(process.arguments?.joined(separator: " ") ?? "") did not say '\(ready)' within \(within) (its log: \(log))")
        }
    }

    /// Calls `body` on a thread of its own with each line `pipe` yields and when it arrived,
    /// until the pipe closes.
    static func forEachLine(of pipe: Pipe, clock: MonotonicClock, _ body: @escaping @Sendable (String, MediaTime) -> Void) {
        Thread {
            var pending = Data()
            while true {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                let at = clock.now
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    body(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self), at)
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
        }.start()
    }
}

/// The processes a bench needs up while it runs (its peers): a wait for a moment of the
/// schedule ends early, and says so, the moment one of them exits.
final class PeerWatch: @unchecked Sendable {  // `watch` and `stayUp` on the bench's thread only
    private let exited = DispatchSemaphore(value: 0)
    private var processes: [Process] = []

    init(_ processes: [Process] = []) { processes.forEach(watch) }

    func watch(_ process: Process) {
        process.terminationHandler = { [exited] _ in exited.signal() }
        processes.append(process)
    }

    /// Waits `duration`; false when a watched process has exited (before or meanwhile).
    func stayUp(for duration: Duration) -> Bool {
        if processes.contains(where: { !$0.isRunning }) { return false }
        if exited.wait(for: duration) {
            exited.signal()  // still exited for the next wait
            return false
        }
        return true
    }
}
