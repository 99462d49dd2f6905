import Foundation
import Testing
import TestSupport

/// `join --data-socket` and its options: what is refused, and why, before any join.
@Suite struct DataSocketOptionTests {
    @Test func badDataSocketOptions() throws {
        let cases: [([String], String)] = [
            (["--data-label", "x"], "give --data-socket PATH"),
            (["--data-mode", "bytes"], "give --data-socket PATH"),
            (["--data-unreliable"], "give --data-socket PATH"),
            (["--data-socket", "/tmp/callend-x.sock", "--data-mode", "frames"], "--data-mode takes lines or bytes, not 'frames'"),
            (["--data-socket", "/tmp/callend-x.sock", "--data-label", ""], "--data-label must be 1 ... 1024 bytes"),
        ]
        for (arguments, message) in cases {
            let result = try runCallend(["join", "lab", "--token", "t"] + arguments)
            #expect(result.status == 2, "\(arguments) exited \(result.status)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        // A path that cannot be a socket fails before joining (nothing listens on port 9).
        let folder = try ScratchFolder()
        for (path, message) in [(folder.path + "/no/such/data.sock", "data socket"), (folder.path + "/" + String(repeating: "d", count: 120), "longer than")] {
            let result = try runCallend(["join", "lab", "--token", "t", "--server", "127.0.0.1:9", "--data-socket", path])
            #expect(result.status == 1 && result.stderr.contains(message), "\(path): \(result.status) \(result.stderr)")
        }
        // A file that is not a socket is refused and left as it was, for --data-socket and
        // --control alike: before, whatever was at the path was unlinked.
        let precious = folder.path + "/notes.txt"
        try "keep me".write(toFile: precious, atomically: false, encoding: .utf8)
        for option in ["--data-socket", "--control"] {
            let result = try runCallend(["join", "lab", "--token", "t", "--server", "127.0.0.1:9", option, precious])
            #expect(result.status == 1 && result.stderr.contains("exists and is not a socket"), "\(option): \(result.status) \(result.stderr)")
            #expect((try? String(contentsOfFile: precious, encoding: .utf8)) == "keep me", "\(option) left the file as it was")
        }
    }
}
