import Foundation
import Testing

/// The systemd units in deploy/systemd (the package's) pass `systemd-analyze verify` with their
/// callend path pointed at the built binary, and the check can fail: a unit with a mistake is refused.
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
            try edit(text.replacingOccurrences(of: "/usr/bin/callend", with: binary)).write(toFile: path, atomically: true, encoding: .utf8)
            paths.append(path)
        }
        // The man pages the units name come with the package (its stage verifies them installed).
        return try Self.analyze(["verify", "--man=no"] + paths, environment: ["SYSTEMD_UNIT_PATH": folder.path + ":"])
    }

    /// systemd-analyze with `arguments`: its exit status and everything it said.
    static func analyze(_ arguments: [String], environment: [String: String] = [:]) throws -> (Int32, String) {
        try runTool(analyzer, arguments, environment: environment)
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
            for setting in ["User=callend", "NoNewPrivileges=yes", "Restart=", "ProtectSystem=strict", "ExecStart=/usr/bin/callend",
                            "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service", "ProtectClock=yes", "ProtectHostname=yes",
                            "ProtectKernelLogs=yes", "ProtectProc=invisible", "UMask=0077", "TasksMax=", "MemoryMax="] {
                #expect(text.contains(setting), "\(name) lacks \(setting)")
            }
            // Every setting comes from the config file: no secret, path or option on the command
            // line but the unit's own socket and standard input.
            let exec = text.split(separator: "\n").first { $0.hasPrefix("ExecStart=") }.map(String.init) ?? ""
            #expect(exec.contains("--config /etc/callend/") && !exec.contains("-file") && !exec.contains("$"), "\(name): \(exec)")
        }
        let join = try String(contentsOf: Self.repository.appendingPathComponent("deploy/systemd/callend-join@.service"), encoding: .utf8)
        for setting in ["SupplementaryGroups=video audio", "DevicePolicy=closed", "DeviceAllow=char-video4linux rw", "DeviceAllow=char-alsa rw",
                        "RuntimeDirectory=callend-%i", "--control %t/callend-%i/", "--config /etc/callend/join/%i.conf",
                        "ExecReload=/bin/kill -HUP $MAINPID", "StateDirectory=callend", "Restart=always", "RestartPreventExitStatus=2"] {
            #expect(join.contains(setting), "the join unit lacks \(setting)")
        }
        let serve = try String(contentsOf: Self.repository.appendingPathComponent("deploy/systemd/callend-serve.service"), encoding: .utf8)
        #expect(serve.contains("ExecStart=/usr/bin/callend-serve --config /etc/callend/serve.conf"), "\(serve)")
        // The package's serve.conf speaks TLS with the certificate its postinst made.
        let conf = try String(contentsOf: Self.repository.appendingPathComponent("deploy/etc/serve.conf"), encoding: .utf8)
        #expect(conf.contains("tls-cert = /etc/callend/tls/server.pem") && conf.contains("tls-key = /etc/callend/tls/server-key.pem"), "\(conf)")
    }

    /// systemd's own score of what each unit exposes: "OK" (2.0 or lower).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: analyzer), "needs systemd-analyze"))
    func theUnitsExposeLittle() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("callend-units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for (source, name) in [("callend-serve.service", "callend-serve.service"), ("callend-join@.service", "callend-join@roof.service")] {
            let path = folder.appendingPathComponent(name).path
            try FileManager.default.copyItem(atPath: Self.repository.appendingPathComponent("deploy/systemd/" + source).path, toPath: path)
            let (_, text) = try Self.analyze(["security", "--offline=true", "--no-pager", path])
            let line = text.split(separator: "\n").first { $0.contains("Overall exposure level") } ?? ""
            let score = line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) }
            #expect(score.map { $0 <= 2.0 } == true, "\(name): \(line)")
        }
    }
}

/// Runs `tool` with `arguments` (in `directory`, with `environment` added): its exit status and
/// everything it wrote to standard output and error.
func runTool(_ tool: String, _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:]) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    if let directory { process.currentDirectoryURL = directory }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, text)
}
