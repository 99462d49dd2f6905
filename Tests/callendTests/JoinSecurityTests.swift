import Foundation
import Testing
import TestSupport

/// The endpoint's side of TLS to the signaling service, and secrets kept off the command line
/// and out of other users' reach.
@Suite(.serialized) struct JoinSecurityTests {
    /// The documented step (`callend tls`) gives a service certificate and the CA file
    /// endpoints trust: over tls://, by name and by address, a call runs; the token comes from
    /// a file.
    @Test func aCallOverTLSWithTheTokenInAFile() throws {
        let secret = try SecretFile()
        let cert = try TestCertificate()
        let folder = cert.directory + "/tls"
        let made = try runCallend(["tls", "--host", "localhost", "--host", "127.0.0.1", "--out", folder])
        #expect(made.status == 0 && made.stdout.contains("--ca-file \(folder)/ca.pem"), "\(made)")
        #expect(mode(folder + "/server-key.pem") == 0o600 && mode(folder + "/ca-key.pem") == 0o600)
        let (server, port) = try startServe(secret, ["--tls-cert", folder + "/server.pem", "--tls-key", folder + "/server-key.pem"])
        defer { terminate(server) }
        let tokenFile = cert.directory + "/token"
        try (try token("roof", secret, room: "tls") + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let common = ["--ca-file", folder + "/ca.pem", "--video-size", "160x120", "--duration", "3"]
        let a = try launchJoined(["join", "tls", "--token-file", tokenFile, "--server", "tls://localhost:\(port)"] + common)
        let b = try launchJoined(["join", "tls", "--server", "tls://127.0.0.1:\(port)"] + common,
                                 environment: ["CALLEND_TOKEN": try token("bench", secret, room: "tls")])
        a.process.waitUntilExit()
        b.process.waitUntilExit()
        for (side, peer) in [(a, b), (b, a)] {
            let text = side.out.finalText
            #expect(side.process.terminationStatus == 0, "\(text) \(side.log.text)")
            let (decoded, sent) = (joinSummary(text).decoded, joinSummary(peer.out.finalText).sent)
            #expect(sent > 0 && decoded > 0, "\(text)")
        }
    }

    /// A certificate nobody vouches for, or one that names another host, ends the join at once
    /// with exit code 1 and says why: retrying will not make it trusted.
    @Test func aCertificateThatFailsIsAClearErrorWithExitCodeOne() throws {
        let secret = try SecretFile()
        let cert = try TestCertificate(commonName: "signal.example")
        let (server, port) = try startServe(secret, ["--tls-cert", cert.certificate, "--tls-key", cert.key])
        defer { terminate(server) }
        let tokenText = try token("roof", secret, room: "tls")
        // The system's CAs do not know this self-signed certificate.
        let untrusted = try runCallend(["join", "tls", "--token", tokenText, "--server", "tls://127.0.0.1:\(port)", "--duration", "30"])
        #expect(untrusted.status == 1, "\(untrusted.stderr)")
        #expect(untrusted.stderr.contains("certificate"), "\(untrusted.stderr)")
        // Trusted, but it names signal.example and 127.0.0.1, not localhost.
        let wrongName = try runCallend(["join", "tls", "--token", tokenText, "--server", "tls://localhost:\(port)",
                                        "--ca-file", cert.certificate, "--duration", "30"])
        #expect(wrongName.status == 1, "\(wrongName.stderr)")
        #expect(wrongName.stderr.contains("certificate"), "\(wrongName.stderr)")
        // Bad command lines about TLS and secrets: exit code 2.
        let cases: [([String], String)] = [
            (["join", "lab", "--token", "t", "--ca-file", cert.certificate], "--ca-file applies to --server tls://"),
            (["join", "lab", "--token", "t", "--server", "tls://localhost:1", "--ca-file", cert.directory + "/none.pem"], "cannot read --ca-file"),
            (["join", "lab", "--token", "t", "--server", "tls://nowhere"], "HOST:PORT"),
            (["join", "lab", "--token", "t", "--token-file", tokenFileThatExists(cert)], "alternatives"),
            (["join", "lab", "--token-file", cert.directory + "/missing"], "cannot read --token-file"),
            (["join", "lab", "--token-file", emptyFile(cert)], "is empty"),
            (["token", "--new-secret", "--out", cert.directory + "/no/such/folder/secret"], "cannot write"),
        ]
        for (arguments, message) in cases {
            let result = try runCallend(arguments)
            #expect(result.status == 2, "\(arguments) exited \(result.status): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }

    /// Plain TCP off loopback is refused on both ends, saying how to get TLS, unless the user
    /// says --insecure-plaintext; `callend tls` refuses what it cannot make.
    @Test func plaintextOffLoopbackIsRefusedUnlessAskedFor() throws {
        let secret = try SecretFile()
        // Kept for the whole test: its folder (which `tls --out` writes into) goes with it.
        let certificate = try TestCertificate()
        defer { withExtendedLifetime(certificate) {} }
        let folder = certificate.directory
        let refused: [[String]] = [
            ["serve", "--listen", "0.0.0.0:0", "--secret-file", secret.path],
            ["serve", "--listen", "[::]:0", "--secret-file", secret.path],
            ["serve", "--listen", "127.0.0.1:0", "--http", "0.0.0.0:0", "--secret-file", secret.path],
            ["serve", "--listen", "127.0.0.1:0", "--secret-file", secret.path, "--redis", "redis://10.0.0.5:6379"],
            ["join", "lab", "--token", "t", "--server", "192.0.2.1:7000"],
            ["join", "lab", "--token", "t", "--server", "127.0.0.1:7000,signal.example.org:7000"],
            ["publish", "http://whip.example.org/whip/live", "--duration", "1"],
            ["janus", "publish", "http://janus.example.org:8088/janus", "--room", "1234", "--duration", "1"],
            ["janus", "subscribe", "http://192.0.2.1:8088/janus", "--room", "1234", "--duration", "1"],
        ]
        for arguments in refused {
            let result = try runCallend(arguments)
            #expect(result.status == 2, "\(arguments) exited \(result.status): \(result.stderr)")
            #expect(result.stderr.contains("callend tls") && result.stderr.contains("--insecure-plaintext"), "\(arguments): \(result.stderr)")
        }
        // Asked for: the service listens, and says what it costs.
        let (server, out, err) = try launchCallend(["serve", "--listen", "0.0.0.0:0", "--secret-file", secret.path, "--insecure-plaintext"])
        defer { terminate(server) }
        #expect(String(decoding: out.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("listening on 0.0.0.0:"))
        #expect(StreamCollector(err).wait(for: "in the clear", seconds: 10))
        let bad: [([String], String)] = [
            (["join", "lab", "--token", "t", "--server", "tls://localhost:1", "--insecure-plaintext"], "applies to a plain --server"),
            (["serve", "--listen", "127.0.0.1:0", "--secret-file", secret.path, "--insecure-plaintext", "--tls-cert", "c", "--tls-key", "k"], "alternatives"),
            (["serve", "--listen", "127.0.0.1:0", "--secret-file", secret.path, "--allowed-origin", "app.example.org", "--http", "127.0.0.1:0"], "--allowed-origin takes an origin"),
            (["serve", "--listen", "127.0.0.1:0", "--secret-file", secret.path, "--allowed-host", "x"], "apply to the web side"),
            (["serve", "--listen", "127.0.0.1:0", "--secret-file", secret.path, "--seat-grace", "0"], "--seat-grace takes a positive duration"),
            (["serve", "--listen", "127.0.0.1:0", "--secret-file", secret.path, "--redis", "redis://127.0.0.1", "--redis-ca-file", "x"], "--redis-ca-file goes with --redis rediss://"),
            (["serve", "--listen", "127.0.0.1:0", "--secret-file", secret.path, "--max-sessions-per-identity", "0"], "--max-sessions-per-identity"),
            (["serve", "--listen", "127.0.0.1:0", "--secret-file", secret.path, "--max-token-lifetime", "31d"], "--max-token-lifetime takes a positive duration"),
            (["publish"], "publish needs the WHIP endpoint's URL"),
            (["publish", "rtmp://x/live"], "is not an http:// or https:// URL"),
            (["publish", "https://user:pass@x/live"], "credentials in a URL are refused"),
            (["publish", "http://127.0.0.1:1/w", "--ca-file", folder + "/ca.pem"], "--ca-file applies to an https:// URL only"),
            (["publish", "https://x/w", "--bearer-token-file", folder + "/missing"], "cannot read --bearer-token-file"),
            (["publish", "https://x/w", "--bearer-token", "t"], "unknown option '--bearer-token'"),
            (["publish", "https://x/w", "--video-source", "none", "--audio-source", "none"], "nothing to publish"),
            (["publish", "https://x/w", "--encoding", "fast"], "--encoding takes auto or manual"),
            (["janus"], "janus needs 'publish' or 'subscribe'"),
            (["janus", "watch", "http://127.0.0.1:1/janus"], "janus takes 'publish' or 'subscribe', not 'watch'"),
            (["janus", "publish"], "needs the URL of Janus's API"),
            (["janus", "publish", "http://127.0.0.1:1/janus"], "needs --room N"),
            (["janus", "publish", "http://127.0.0.1:1/janus", "--room", "0"], "--room"),
            (["janus", "subscribe", "http://127.0.0.1:1/janus", "--room", "1", "--feed", "5", "--display", "cam"], "--feed and --display both choose"),
            (["janus", "subscribe", "http://127.0.0.1:1/janus", "--room", "1", "--video-source", "pattern"], "--video-source"),
            (["janus", "publish", "http://127.0.0.1:1/janus", "--room", "1", "--api-secret-file", folder + "/missing"], "cannot read --api-secret-file"),
            (["janus", "publish", "http://127.0.0.1:1/janus", "--room", "1", "--video-source", "none", "--audio-source", "none"], "nothing to publish"),
            (["tls", "--out", folder + "/a"], "needs --host"),
            (["tls", "--host", "a b", "--out", folder + "/b"], "is not a DNS name or an IP address"),
            (["tls", "--host", "x", "--out", folder + "/c", "--days", "0"], "--days takes a whole number"),
            (["tls", "--host", "x"], "needs --out"),
        ]
        for (arguments, message) in bad {
            let result = try runCallend(arguments)
            #expect(result.status == 2, "\(arguments) exited \(result.status): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        // A CA whose key went missing is not silently replaced (endpoints trust the old one).
        #expect(try runCallend(["tls", "--host", "x", "--out", folder + "/d"]).status == 0)
        try FileManager.default.removeItem(atPath: folder + "/d/ca-key.pem")
        let halfCA = try runCallend(["tls", "--host", "y", "--out", folder + "/d"])
        #expect(halfCA.status == 2 && halfCA.stderr.contains("without the other"), "\(halfCA)")
    }

    /// Files that hold keys are the owner's alone, even where one stood before with a wider mode.
    @Test func filesThatHoldKeysAreWrittenModeSixHundred() throws {
        let cert = try TestCertificate()
        let secretPath = cert.directory + "/secret"
        try "old".write(toFile: secretPath, atomically: true, encoding: .utf8)
        chmod(secretPath, 0o644)
        let made = try runCallend(["token", "--new-secret", "--out", secretPath])
        #expect(made.status == 0 && made.stdout.isEmpty, "\(made)")
        #expect(mode(secretPath) == 0o600)
        let secretText = try String(contentsOfFile: secretPath, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(secretText.count == 64 && secretText != "old")
        // The secret works: a token minted from it.
        let minted = try runCallend(["token", "--room", "r", "--identity", "i", "--secret-file", secretPath])
        #expect(minted.status == 0 && minted.stdout.split(separator: ".").count == 3, "\(minted)")
        // An SDP file with SRTP keys in it.
        let sdpPath = cert.directory + "/send.sdp"
        let sent = try runCallend(["send", "--to", "127.0.0.1:9", "--sdp-out", sdpPath, "--srtp-key", "random",
                                   "--video-source", "none", "--duration", "1"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(try String(contentsOfFile: sdpPath, encoding: .utf8).contains("a=crypto:"))
        #expect(mode(sdpPath) == 0o600)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: cert.directory).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    private func mode(_ path: String) -> mode_t {
        var info = stat()
        stat(path, &info)
        return info.st_mode & 0o777
    }

    private func tokenFileThatExists(_ cert: TestCertificate) -> String {
        let path = cert.directory + "/some-token"
        try? "x.y.z".write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func emptyFile(_ cert: TestCertificate) -> String {
        let path = cert.directory + "/empty-token"
        try? "\n".write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
