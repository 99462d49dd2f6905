import Foundation
import Testing
import TestSupport

/// `callend devices --doctor` where there is no camera or sound card (the device lab runs it
/// against vivid and snd-aloop): bad input, and nodes that are not cameras or may not be opened.
@Suite struct DoctorCommandTests {
    @Test func badDoctorCommandLines() throws {
        let cases: [([String], String)] = [
            (["devices", "--doctor", "--seconds", "0"], "--seconds takes 0.1 ... 60"),
            (["devices", "--doctor", "--seconds", "soon"], "--seconds takes"),
            (["devices", "--doctor", "--watch"], "give one"),
            (["devices", "--camera", "/dev/video0"], "apply to devices --doctor"),
            (["devices", "--no-audio"], "apply to devices --doctor"),
            (["devices", "--format", "YUYV"], "apply to devices --doctor"),
        ]
        for (arguments, message) in cases {
            let result = try runCallend(arguments)
            #expect(result.status == 2, "\(arguments) exited \(result.status)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }

    /// A node that is no camera fails, one that is missing fails, and one this user may not
    /// open is forbidden with its group named; the exit code says the box is not healthy.
    @Test func unusableNodesAreReportedWithTheReason() throws {
        let folder = try ScratchFolder()
        let locked = folder.path + "/video9"
        #expect(FileManager.default.createFile(atPath: locked, contents: Data(), attributes: [.posixPermissions: 0o600]))
        // The folder lets anyone through; the node is root's alone.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
        let plain = try runCallend(["devices", "--doctor", "--no-audio", "--camera", "/dev/null", "--camera", folder.path + "/video-missing", "--json"])
        #expect(plain.status == 1, "\(plain.stdout) \(plain.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(plain.stdout.utf8)) as? [String: Any])
        let cameras = try #require(report["cameras"] as? [[String: Any]])
        #expect(cameras.count == 2 && cameras.allSatisfy { $0["status"] as? String == "failed" }, "\(cameras)")
        #expect((cameras.first?["detail"] as? String)?.contains("not a V4L2 device") == true, "\(cameras)")

        // As nobody (root opens anything): forbidden, the group named, in words.
        guard getuid() == 0 else { Issue.record("needs root to run as nobody"); return }
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("callend").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", binary, "devices", "--doctor", "--no-audio", "--camera", locked]
        let out = Pipe()
        (process.standardOutput, process.standardError) = (out, out)
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1, "\(text)")
        #expect(text.contains("\(locked): forbidden; the device belongs to root, with no group for users (no udev rule gave it to the 'video' group"), "\(text)")
        #expect(text.contains("some devices do not work"), "\(text)")
    }
}
