import Foundation

/// What `promtool check metrics` (Debian's prometheus package) says of `text`: nil where promtool
/// is not installed; otherwise its exit status and everything it printed (nothing, for clean text).
public func promtoolCheck(_ text: String) throws -> (status: Int32, said: String)? {
    let promtool = "/usr/bin/promtool"
    guard FileManager.default.isExecutableFile(atPath: promtool) else { return nil }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: promtool)
    process.arguments = ["check", "metrics"]
    let input = Pipe(), output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    try process.run()
    input.fileHandleForWriting.write(Data(text.utf8))
    try input.fileHandleForWriting.close()
    let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, said)
}
