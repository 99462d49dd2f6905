import Foundation
import Testing
@_exported import TestSupport

/// A temporary folder removed when the test is done with it.
final class TemporaryDirectory {
    let path: String

    init() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("callend-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        path = base.path
    }

    func file(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs an outside tool (ffmpeg) to make fixtures; a missing tool fails the test with the fix.
@discardableResult
func runTool(_ executable: String, _ arguments: [String]) throws -> String {
    guard let path = ["/usr/bin/", "/usr/local/bin/"].map({ $0 + executable }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw ToolMissing(name: executable)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw ToolFailed(command: ([executable] + arguments).joined(separator: " "), output: text)
    }
    return text
}

struct ToolMissing: Error, CustomStringConvertible {
    let name: String
    var description: String { "\(name) is not installed; run scripts/install-deps.sh" }
}

struct ToolFailed: Error, CustomStringConvertible {
    let command: String
    let output: String
    var description: String { "\(command) failed:\n\(output)" }
}

/// Makes a Y4M clip of ffmpeg's moving test pattern.
/// `testsrc2` has more motion and detail than `testsrc`, so at 1 Mbit/s it uses the whole rate.
func makeTestClip(in directory: TemporaryDirectory, width: Int, height: Int, frames: Int,
                  source: String = "testsrc", noise: Bool = false, name: String = "clip.y4m") throws -> String {
    let path = directory.file(name)
    // Temporal noise makes every picture cost bits, as a camera's sensor noise does.
    try runTool("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "\(source)=size=\(width)x\(height):rate=30"]
                + (noise ? ["-vf", "noise=alls=10:allf=t"] : []) + ["-frames:v", "\(frames)", "-pix_fmt", "yuv420p", path])
    return path
}
