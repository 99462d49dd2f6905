import Platform
import CallEndpoint
import Foundation

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
