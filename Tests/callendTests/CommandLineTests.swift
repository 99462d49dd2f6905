import Foundation
import Testing

/// Runs the built `callend` binary, which sits next to the test bundle in the build folder.
func runCallend(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let buildDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let binary = buildDirectory.appendingPathComponent("callend")
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}

@Suite struct CommandLineTests {
    @Test func helpDescribesCommandsAndExitCodes() throws {
        for arguments in [["--help"], ["-h"], [], ["help"]] {
            let result = try runCallend(arguments)
            #expect(result.status == 0, "callend \(arguments)")
            #expect(result.stdout.contains("usage: callend COMMAND"))
            #expect(result.stdout.contains("bench codecs"))
            #expect(result.stdout.contains("exit codes"))
        }
        let bench = try runCallend(["bench", "codecs", "--help"])
        #expect(bench.status == 0 && bench.stdout.contains("--frames N"))
    }

    @Test func versionNamesTheLinkedLibraries() throws {
        let result = try runCallend(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("callend "))
        for library in ["libopus 1.", "libvpx: v1.", "libsrtp2", "OpenSSL 3", "alsa-lib: 1."] {
            #expect(result.stdout.contains(library), "missing \(library) in \(result.stdout)")
        }
    }

    @Test(arguments: [
        (["--bogus"], "unknown option '--bogus'"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["bench"], "'bench' needs a subject"),
        (["bench", "video"], "unknown bench 'video'"),
        (["bench", "codecs", "--frames"], "--frames needs a value"),
        (["bench", "codecs", "--frames", "ten"], "--frames takes a whole number"),
        (["bench", "codecs", "--sizes", "640by480"], "is not a size"),
        (["bench", "codecs", "--turbo"], "unknown option '--turbo' for 'bench codecs'"),
        (["--version", "extra"], "unexpected argument 'extra'"),
    ])
    func badCommandLinesExitWithCode2(arguments: [String], message: String) throws {
        let result = try runCallend(arguments)
        #expect(result.status == 2, "callend \(arguments) exited \(result.status)")
        #expect(result.stderr.contains(message), "stderr: \(result.stderr)")
        #expect(result.stdout.isEmpty)
    }
}
