import Foundation
import Testing
import TestSupport

/// GET on a loopback port: the status and body.
func get(_ port: Int, _ path: String) throws -> (Int, String) {
    let fd = connectLoopback(port: port)
    defer { close(fd) }
    try #require(fd >= 0)
    let request = Array("GET \(path) HTTP/1.1\r\nHost: t\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    let response = readUntilClosed(fd)
    let text = String(decoding: response, as: UTF8.self)
    let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
    return (status, text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n"))
}

@Suite(.serialized) struct JoinMetricsTests {

    /// A running call's metrics: media figures, the quality score, the candidate pair; and
    /// promtool (Debian's prometheus package), where installed, finds nothing to say.
    @Test func aRunningCallServesItsMetrics() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--no-stdin"]
        let recordings = FileManager.default.temporaryDirectory.appendingPathComponent("callend-metrics-rec-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: recordings) }
        let a = try launchJoined(["join", "m", "--token", try token("a", secret, room: "m"), "--metrics", "127.0.0.1:0",
                                  "--record-dir", recordings, "--duration", "60"] + common)
        let b = try launchJoined(["join", "m", "--token", try token("b", secret, room: "m"), "--duration", "5"] + common)
        defer { terminate(a.process); b.process.waitUntilExit() }
        #expect(a.log.wait(for: "metrics at http://127.0.0.1:", seconds: 10))
        let metricsPort = try #require(Int(a.log.text.components(separatedBy: "metrics at http://127.0.0.1:").last?.split(separator: "/").first ?? ""))
        // Media flows once a stats line has been printed.
        #expect(a.out.wait(for: "\"receivedFps\"", seconds: 20))
        let (status, text) = try get(metricsPort, "/metrics")
        #expect(status == 200)
        #expect(text.contains("callend_call_up 1"))
        #expect(text.contains(#"callend_call_quality{direction="received"}"#) && text.contains(#"callend_call_quality{direction="sent"}"#))
        #expect(text.contains(#"callend_call_candidate_pair_info{local="host",remote="host"} 1.0"#), "\(text)")
        #expect(text.contains("callend_call_frames_decoded_total") && text.contains("callend_call_estimate_kbps"))
        #expect(try get(metricsPort, "/").0 == 404)

        // The recording, for the alerts on a disk that fills or a direction not written.
        for name in ["callend_call_recording_bytes", "callend_call_recording_free_bytes"] {
            let sample = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            #expect((sample?.split(separator: " ").last).flatMap { Double($0) }.map { $0 > 0 } == true, "\(name): \(text)")
        }
        #expect(text.contains("callend_call_recording_failing 0") && !text.contains("callend_call_recording_quota_bytes"), "\(text)")

        // What the alert rules read is here (deploy/prometheus/callend-alerts.yml).
        let served = Set(text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { String($0.prefix { $0 != "{" && $0 != " " }) })
        let read = try PrometheusRulesTests.endpointMetrics()
        #expect(read.count >= 5 && read.isSubset(of: served), "the rules read \(read.subtracting(served).sorted()), not served")
        if let (status, said) = try promtoolCheck(text) {
            #expect(status == 0 && said.isEmpty, "promtool: \(said)")
        }

        // The peer leaves: the call is no longer up (the last second's figures are not served as
        // a call), though the endpoint waits on in the room.
        // A's log says so just after the session's end is reported.
        b.process.waitUntilExit()
        #expect(a.log.wait(for: "waiting for b to join again", seconds: 10), "\(a.log.text)")
        let after = try get(metricsPort, "/metrics").1
        #expect(after.contains("callend_call_up 0"), "callend_call_up stayed 1 with no peer: \(after)")
    }
}
