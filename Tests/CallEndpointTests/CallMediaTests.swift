import Foundation
import RTPTransport
import Synchronization
import Testing
@testable import CallEndpoint

@Suite(.serialized) struct CallMediaTests {
    /// Two endpoints in one process: offer/answer, then video and audio both ways over SRTP with a
    /// key per direction, on one socket per media kind each.
    @Test func mediaFlowsBothWaysAfterOfferAnswer() throws {
        let a = try CallMedia(listenHost: "127.0.0.1"), b = try CallMedia(listenHost: "127.0.0.1")
        let offer = a.localDescription(candidateHost: "127.0.0.1")
        let answer = try OfferAnswer.answer(try CallSessionDescription(json: try offer.json()), local: b.localDescription(candidateHost: "127.0.0.1"))
        let callA = try OfferAnswer.negotiate(local: offer, remote: answer)
        let callB = try OfferAnswer.negotiate(local: answer, remote: offer)
        #expect(callA.srtp != nil && callA.srtp?.sendKey != callB.srtp?.sendKey)

        let resultB = Mutex<(SenderStatistics, ReceiverSummary)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            let r = try? b.run(callB, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(3))
            resultB.withLock { $0 = r.map { ($0.sent, $0.received) } }
            done.signal()
        }.start()
        let resultA = try a.run(callA, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(3))
        #expect(done.wait(timeout: .now() + 15) == .success)
        let (sentB, receivedB) = try #require(resultB.withLock { $0 })
        for (sent, received, who) in [(resultA.sent, receivedB, "A -> B"), (sentB, resultA.received, "B -> A")] {
            #expect(Double(received.framesDecoded) >= 0.95 * Double(sent.videoFrames), "\(who): \(received.framesDecoded) of \(sent.videoFrames) frames")
            #expect(received.audioDecoded >= sent.audioPackets * 9 / 10, "\(who): \(received.audioDecoded) of \(sent.audioPackets) audio frames")
            #expect(received.decodeErrors == 0)
        }
        // RTCP flowed both ways too: each sender measured a round trip from the other's reports.
        #expect(resultA.sent.roundTripTime != nil && sentB.roundTripTime != nil)
    }
}
