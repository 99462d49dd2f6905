import Foundation
import Testing

/// The systemd units in deploy/systemd pass `systemd-analyze verify` with their callend path
/// pointed at the built binary, and the check can fail: a unit with a mistake is refused.
@Suite struct ServiceUnitTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let analyzer = "/usr/bin/systemd-analyze"

    /// Verifies the units (written into a temporary folder with `edit` applied); the exit status and output.
    func verify(_ edit: (String) -> String = { $0 }) throws -> (Int32, String) {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("callend").path
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("callend-units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var paths: [String] = []
        for (source, name) in [("callend-serve.service", "callend-serve.service"), ("callend-join@.service", "callend-join@roof.service")] {
            let text = try String(contentsOf: Self.repository.appendingPathComponent("deploy/systemd/" + source), encoding: .utf8)
            let path = folder.appendingPathComponent(name).path
            try edit(text.replacingOccurrences(of: "/usr/local/bin/callend", with: binary)).write(toFile: path, atomically: true, encoding: .utf8)
            paths.append(path)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.analyzer)
        process.arguments = ["verify"] + paths
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    /// systemd-analyze exits 0 on a setting it cannot parse (it says so and ignores it), so a
    /// unit passes only with nothing said at all.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: analyzer), "needs systemd-analyze"))
    func theUnitsVerify() throws {
        let (status, output) = try verify()
        #expect(status == 0 && output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(output)")
        let (_, complaint) = try verify { $0.replacingOccurrences(of: "Restart=on-failure", with: "Restart=sometimes") }
        #expect(complaint.contains("Failed to parse"), "a bad Restart= value went unnoticed: \(complaint)")
        let (missing, _) = try verify { $0.replacingOccurrences(of: "ExecStart=/", with: "ExecStart=/nonexistent/") }
        #expect(missing != 0)
    }

    @Test func theUnitsAreHardened() throws {
        for name in ["callend-serve.service", "callend-join@.service"] {
            let text = try String(contentsOf: Self.repository.appendingPathComponent("deploy/systemd/" + name), encoding: .utf8)
            for setting in ["DynamicUser=yes", "NoNewPrivileges=yes", "Restart=on-failure", "ProtectSystem=strict", "LoadCredential="] {
                #expect(text.contains(setting), "\(name) lacks \(setting)")
            }
        }
        let join = try String(contentsOf: Self.repository.appendingPathComponent("deploy/systemd/callend-join@.service"), encoding: .utf8)
        #expect(join.contains("SupplementaryGroups=video audio"))
    }
}
