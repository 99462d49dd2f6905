import Foundation
import Testing
import TestSupport

/// `callend publish` into the /whip/ROOM of a `callend serve --http`: the room's `callend join`
/// takes the publisher as its peer and decodes what it sent; a join with --max-viewers 0
/// refuses WHEP players; the publisher's DELETE ends its session, not the endpoint.
@Suite(.serialized) struct WebRTCHTTPTests {
    @Test func publishIntoARoomWhoseEndpointRecordsIt() throws {
        let secret = try SecretFile()
        let (server, out, _) = try launchCallend(["serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--secret-file", secret.path])
        defer { terminate(server) }
        let lines = StreamCollector(out)
        #expect(lines.wait(for: "web page at", seconds: 10))
        let ports = lines.text.matches(of: /127\.0\.0\.1:(\d+)/).compactMap { Int($0.1) }
        let (port, web) = (try #require(ports.first), try #require(ports.dropFirst().first))
        let tokenFile = secret.path + ".publisher"
        defer { try? FileManager.default.removeItem(atPath: tokenFile) }
        try token("cam", secret, room: "studio").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let endpoint = try launchJoined(["join", "studio", "--server", "127.0.0.1:\(port)", "--duration", "60", "--no-stdin", "--max-viewers", "0"],
                                        environment: ["CALLEND_TOKEN": try token("roof", secret, room: "studio")])
        defer { terminate(endpoint.process) }
        let published = try runCallend(["publish", "http://127.0.0.1:\(web)/whip/studio", "--bearer-token-file", tokenFile,
                                         "--video-size", "320x240", "--duration", "4", "--no-stdin"])
        #expect(published.status == 0, "\(published.stderr)")
        let sent = joinSummary(published.stdout).sent
        #expect(published.stdout.contains("session deleted") && sent > 60, "\(published.stdout)")
        // The DELETE ends the publisher's session; the endpoint stays for the next one.
        #expect(endpoint.log.wait(for: "the WHIP publisher ended its session: waiting", seconds: 15), "\(endpoint.log.text)")
        #expect(endpoint.process.isRunning)
        // --max-viewers 0: a WHEP player is refused with 403, and the service says why.
        let viewer = try runCallend(["publish", "http://127.0.0.1:\(web)/whep/studio", "--bearer-token-file", tokenFile, "--duration", "2", "--no-stdin"])
        #expect(viewer.status == 1 && viewer.stderr.contains("403") && viewer.stderr.contains("takes no viewers"), "\(viewer.stderr)")
        terminate(endpoint.process)
        let decoded = joinSummary(endpoint.out.text).decoded
        #expect(decoded >= sent * 9 / 10, "the endpoint decoded \(decoded) of \(sent)")
    }
}
