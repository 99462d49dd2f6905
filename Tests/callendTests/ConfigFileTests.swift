import Foundation
import Testing
import TestSupport

/// `--config F` for join and serve: options from a file, the command line winning, secrets only
/// from files no other user can read, and `--check` showing the settings without starting.
@Suite struct ConfigFileTests {
    /// A folder of config files, removed at the end.
    final class Folder {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("callend-config-\(UUID().uuidString)").path
        init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false) }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        /// Writes `text` to `name` in the folder with `mode`; returns its path.
        func write(_ name: String, _ text: String, mode: Int = 0o600) throws -> String {
            let file = path + "/" + name
            try text.write(toFile: file, atomically: false, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
            return file
        }
    }

    @Test func checkShowsEverySettingAndWhereItCameFromWithTheCommandLineWinning() throws {
        let folder = try Folder()
        let secret = try SecretFile()
        let tokenFile = try folder.write("token", try token("roof", secret, room: "roof"))
        let config = try folder.write("roof.conf", """
            # the roof box
            room = roof
            token-file = \(tokenFile)
            server = 127.0.0.1:7100
            video-source = pattern
            no-stdin
            measure-latency = false
            ice-server = stun:127.0.0.1:3478
            ice-server = stun:127.0.0.2:3478
            duration = 30

            """, mode: 0o644)
        let result = try runCallend(["join", "--config", config, "--check", "--duration", "9"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(lines.first == "callend join: settings OK (room roof); nothing was started", "\(result.stdout)")
        for expected in ["room = roof    # \(config) line 2", "token-file = \(tokenFile)    # \(config) line 3",
                         "server = 127.0.0.1:7100    # \(config) line 4", "no-stdin    # \(config) line 6",
                         "ice-server = stun:127.0.0.1:3478    # \(config) line 8", "ice-server = stun:127.0.0.2:3478    # \(config) line 9",
                         "duration = 9    # command line"] {
            #expect(lines.contains(expected), "no '\(expected)' in \(result.stdout)")
        }
        // The command line replaced the file's duration; 'false' left the flag out.
        #expect(!result.stdout.contains("duration = 30") && !result.stdout.contains("measure-latency"), "\(result.stdout)")
        // A token on the command line is shown masked.
        let text = try token("roof", secret, room: "roof")
        let masked = try runCallend(["join", "roof", "--token", text, "--check"])
        #expect(masked.status == 0 && masked.stdout.contains("token = ********") && !masked.stdout.contains(text), "\(masked)")
    }

    @Test func badConfigFilesAreRefusedWithTheirLine() throws {
        let folder = try Folder()
        let secret = try SecretFile()
        let tokenFile = try folder.write("token", try token("roof", secret, room: "roof"))
        let open = try folder.write("open-token", try token("roof", secret, room: "roof"), mode: 0o644)
        let cases: [(String, String)] = [
            ("token-file = \(open)\n", "line 1: token-file \(open) is readable by every user (mode 0644)"),
            ("room = roof\ntoken = abc\n", "line 2: a secret is not written into a config file"),
            ("room = roof\ntoken-file = \(tokenFile)\nno-stdin = yes\n", "line 3: 'no-stdin' takes no value"),
            ("room = roof\ntoken-file = \(tokenFile)\nserver\nno-stdin\n", "line 3: 'server' needs a value"),
            ("room = roof\ntoken-file = \(tokenFile)\nvideo-sauce = x\n", "line 3: unknown option 'video-sauce' for 'join'"),
            ("Room$ = 1\n", "line 1: \"Room$\" is not an option name"),
            ("room =\n", "line 1: 'room' has no value"),
            ("room = \"roof\n", "line 1: a quoted value must end with its quote"),
            ("config = /etc/other.conf\n", "line 1: a config file cannot name another"),
            ("token-file = \(folder.path)/missing\n", "line 1: token-file \(folder.path)/missing: No such file or directory"),
        ]
        for (index, (text, message)) in cases.enumerated() {
            let config = try folder.write("bad\(index).conf", text)
            let result = try runCallend(["join", "--config", config, "--check"])
            #expect(result.status == 2, "\(text) exited \(result.status)")
            #expect(result.stderr.contains("\(config) \(message)"), "\(text): \(result.stderr)")
        }
        let missing = try runCallend(["join", "roof", "--config", folder.path + "/nothing.conf"])
        #expect(missing.status == 2 && missing.stderr.contains("No such file or directory"), "\(missing.stderr)")
        let folderGiven = try runCallend(["join", "roof", "--config", folder.path])
        #expect(folderGiven.status == 2 && folderGiven.stderr.contains("is not a regular file"), "\(folderGiven.stderr)")
        let huge = try folder.write("huge.conf", String(repeating: "# padding\n", count: 7000))
        let tooBig = try runCallend(["join", "roof", "--config", huge])
        #expect(tooBig.status == 2 && tooBig.stderr.contains("at most 65536"), "\(tooBig.stderr)")
    }

    /// The whole path: a service and two endpoints, each from its own config file, call each other.
    @Test func aServiceAndTwoEndpointsRunFromTheirConfigFiles() throws {
        let folder = try Folder()
        let secret = try SecretFile()
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secret.path)
        let serveConfig = try folder.write("serve.conf", "listen = 127.0.0.1:0\nsecret-file = \(secret.path)\nmax-participants = 2\n")
        let (server, out, _) = try launchCallend(["serve", "--config", serveConfig])
        defer { terminate(server) }
        let first = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        let port = try #require(Int(first.split(separator: ":").last?.split(separator: " ").first ?? ""), "\(first)")
        var joins: [(process: Process, out: StreamCollector, log: StreamCollector)] = []
        for who in ["roof", "lab"] {
            let tokenFile = try folder.write("\(who).token", try token(who, secret, room: "deck"))
            let config = try folder.write("\(who).conf", """
                room = deck
                token-file = \(tokenFile)
                server = 127.0.0.1:\(port)
                video-size = 320x240
                duration = 4
                no-stdin
                """)
            joins.append(try launchJoined(["join", "--config", config]))
        }
        for join in joins { join.process.waitUntilExit() }
        let (roof, lab) = (joins[0].out.finalText, joins[1].out.finalText)
        #expect(joins.allSatisfy { $0.process.terminationStatus == 0 }, "\(roof) \(lab)")
        #expect(roof.contains("<- lab") && lab.contains("<- roof"), "\(roof) \(lab)")
        let (decoded, sent) = (joinSummary(roof).decoded, joinSummary(lab).sent)
        #expect(sent > 0 && Double(decoded) >= 0.9 * Double(sent), "roof decoded \(decoded) of the \(sent) frames lab sent")
    }

    @Test func serveChecksItsConfigAndRefusesASecretEveryoneCanRead() throws {
        let folder = try Folder()
        let secret = try SecretFile()
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: secret.path)
        let config = try folder.write("serve.conf", "listen = 127.0.0.1:0\nsecret-file = \(secret.path)\nmax-participants = 4\n")
        let checked = try runCallend(["serve", "--config", config, "--check", "--max-participants", "3"])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stdout.contains("max-participants = 3    # command line") && !checked.stdout.contains("max-participants = 4"), "\(checked.stdout)")
        #expect(checked.stdout.contains("secret-file = \(secret.path)    # \(config) line 2"), "\(checked.stdout)")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: secret.path)
        let refused = try runCallend(["serve", "--config", config, "--check"])
        #expect(refused.status == 2 && refused.stderr.contains("secret-file \(secret.path) is readable by every user (mode 0644)"), "\(refused.stderr)")
        // A TLS key is a secret too.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secret.path)
        let key = try folder.write("server-key.pem", "not a key\n", mode: 0o644)
        let keyConfig = try folder.write("tls.conf", "listen = 127.0.0.1:0\nsecret-file = \(secret.path)\ntls-cert = /dev/null\ntls-key = \(key)\n")
        let keyRefused = try runCallend(["serve", "--config", keyConfig, "--check"])
        #expect(keyRefused.status == 2 && keyRefused.stderr.contains("line 4: tls-key \(key) is readable by every user (mode 0644)"), "\(keyRefused.stderr)")
    }

    /// SIGHUP (`systemctl reload`) reads the config file again while the call goes on: a new
    /// token, ICE servers and recording quota are taken (the quota shows in the metrics); a file
    /// that became unsafe is refused and changes nothing.
    @Test func aReloadTakesTheNewTokenICEServersAndQuotaWithoutEndingTheCall() throws {
        let folder = try Folder()
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let recordings = folder.path + "/recordings"
        let tokenFile = try folder.write("roof.token", try token("roof", secret, room: "deck"))
        func configure(quota: String, iceServer: String?) throws -> String {
            try folder.write("roof.conf", """
                room = deck
                token-file = \(tokenFile)
                server = 127.0.0.1:\(port)
                video-size = 320x240
                record-dir = \(recordings)
                record-quota = \(quota)
                metrics = 127.0.0.1:0
                no-stdin
                """ + (iceServer.map { "\nice-server = \($0)\n" } ?? "\n"), mode: 0o644)
        }
        let config = try configure(quota: "8M", iceServer: nil)
        let roof = try launchJoined(["join", "--config", config])
        let lab = try launchJoined(["join", "deck", "--token", try token("lab", secret, room: "deck"), "--server", "127.0.0.1:\(port)",
                                    "--video-size", "320x240", "--no-stdin"])
        defer { terminate(roof.process); terminate(lab.process) }
        #expect(roof.log.wait(for: "metrics at http://127.0.0.1:", seconds: 10))
        let metricsPort = try #require(Int(roof.log.text.components(separatedBy: "metrics at http://127.0.0.1:").last?.split(separator: "/").first ?? ""))
        #expect(roof.out.wait(for: "\"receivedFps\"", seconds: 20), "no media: \(roof.log.text.suffix(400))")
        #expect(try get(metricsPort, "/metrics").1.contains("callend_call_recording_quota_bytes 8388608"))

        _ = try runCallend(["token", "--room", "deck", "--identity", "roof", "--secret-file", secret.path, "--ttl", "2h"]).stdout
            .write(toFile: tokenFile, atomically: false, encoding: .utf8)
        _ = try configure(quota: "16M", iceServer: "stun:127.0.0.1:3478")
        kill(roof.process.processIdentifier, SIGHUP)
        let taken = "reload: a new token, ICE servers stun:127.0.0.1:3478, record quota 16777216; the call goes on"
        #expect(roof.log.wait(for: taken, seconds: 10), "\(roof.log.text.suffix(600))")
        let metrics = try get(metricsPort, "/metrics").1
        #expect(metrics.contains("callend_call_recording_quota_bytes 16777216") && metrics.contains("callend_call_up 1"), "\(metrics)")

        // A token file everyone can read: refused, the running settings stay, the call goes on.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: tokenFile)
        _ = try configure(quota: "32M", iceServer: nil)
        kill(roof.process.processIdentifier, SIGHUP)
        #expect(roof.log.wait(for: "reload refused: \(config) line 2: token-file \(tokenFile) is readable by every user", seconds: 10), "\(roof.log.text.suffix(600))")
        let still = try get(metricsPort, "/metrics").1
        #expect(still.contains("callend_call_recording_quota_bytes 16777216") && still.contains("callend_call_up 1"), "\(still)")
        #expect(roof.process.isRunning && lab.process.isRunning)
        #expect(!roof.log.text.contains("ended:"), "\(roof.log.text.suffix(600))")
    }
}
