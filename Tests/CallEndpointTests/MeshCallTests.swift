import Foundation
import Platform
import Signaling
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint

@Suite(.serialized) struct MeshCallTests {
    /// Three mesh participants in a room of four: each decodes what each other sends it, from one
    /// shared encode per sender; one leaves and comes back as a new session, which starts new
    /// sessions with the two others and ends nothing between them.
    @Test func threeParticipantsSeeEachOtherAndOneComesBack() throws {
        let service = try LabService(maxParticipants: 4)
        defer { service.server.stop() }
        func mesh(_ who: String, seconds: Int, log: LogLines) throws -> MeshCall {
            try MeshCall(options: try ConnectOptions(token: service.token(who)) { $0.roomName = "lab" }, server: ("127.0.0.1", service.port),
                                media: try Call.Media.synthetic(width: 160, height: 120), duration: .seconds(seconds), log: log.sink)
        }
        let results = Mutex<[String: MeshSummary]>([:])
        let done = DispatchGroup()
        func run(_ call: MeshCall, as name: String) {
            done.enter()
            startThread(named: name) {
                if let summary = try? call.run() { results.withLock { $0[name] = summary } }
                done.leave()
            }
        }
        let logs = ["a": LogLines(), "b": LogLines(), "c": LogLines(), "c2": LogLines()]
        let a = try mesh("a", seconds: 14, log: logs["a"]!), b = try mesh("b", seconds: 14, log: logs["b"]!)
        let c = try mesh("c", seconds: 14, log: logs["c"]!)
        run(a, as: "a")
        #expect(eventually(10) { logs["a"]!.contains("joined room lab") })
        run(b, as: "b")
        #expect(eventually(10) { logs["b"]!.contains("joined room lab") })
        run(c, as: "c")
        defer {
            for call in [a, b, c] { call.stop() }
            done.wait()
        }
        // Everyone connected to everyone: then c leaves.
        for (name, peers) in [("a", ["b", "c"]), ("b", ["a", "c"]), ("c", ["a", "b"])] {
            for peer in peers {
                #expect(eventually(15) { logs[name]!.contains("mesh: \(peer): dtls: connected") }, "\(name) never connected to \(peer)")
            }
        }
        c.stop()
        #expect(eventually(10) { results.withLock { $0["c"] } != nil })
        #expect(eventually(10) { logs["a"]!.contains("mesh: c: session over") && logs["b"]!.contains("mesh: c: session over") })
        // c comes back (a new session of the same participant).
        let c2 = try mesh("c", seconds: 5, log: logs["c2"]!)
        run(c2, as: "c2")
        defer { c2.stop() }
        done.wait()
        let r = results.withLock { $0 }
        guard let ra = r["a"], let rb = r["b"], let rc = r["c"], let rc2 = r["c2"] else {
            Issue.record("a participant did not finish: \(r.keys.sorted())")
            return
        }
        // a and b never stopped: one session each way, over the whole call.
        #expect(ra.peers["b"]?.sessions == 1 && rb.peers["a"]?.sessions == 1, "\(ra.peers) \(rb.peers)")
        #expect((ra.peers["b"]?.watched ?? .zero) > .seconds(11), "\(ra.peers)")
        // c came back: a second session with each.
        #expect(ra.peers["c"]?.sessions == 2 && rb.peers["c"]?.sessions == 2, "\(ra.peers) \(rb.peers)")
        // Each decodes what each other sent it (>= 90 %).
        func check(_ receiver: MeshSummary, from sender: MeshSummary, _ what: String) {
            let decoded = receiver.peers[sender.participant]?.framesDecoded ?? 0
            let sent = sender.peers[receiver.participant]?.framesSent ?? 0
            #expect(sent > 30 && Double(decoded) >= 0.9 * Double(sent), "\(what): decoded \(decoded) of \(sent)")
            #expect(receiver.peers[sender.participant]?.decodeErrors == 0, "\(what)")
        }
        check(ra, from: rb, "a from b")
        check(rb, from: ra, "b from a")
        // c's two sessions together against what a and b sent to both.
        for sender in [ra, rb] {
            let decoded = [rc, rc2].map { $0.peers[sender.participant]?.framesDecoded ?? 0 }
            let sent = sender.peers["c"]?.framesSent ?? 0
            #expect(decoded[1] > 30 && Double(decoded.reduce(0, +)) >= 0.9 * Double(sent), "c from \(sender.participant): decoded \(decoded) of \(sent)")
        }
        for (name, summary) in [("c", rc), ("c2", rc2)] { #expect(summary.participant == "c", "\(name)") }
    }
}
