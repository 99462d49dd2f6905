import Dispatch
import Foundation
import MediaCore
import RTPTransport
import Synchronization
import Testing
@testable import CallEndpoint

/// Calls whose video is H.264: negotiated, encoded by OpenH264, packetized per RFC 6184 and
/// decoded by libavcodec, both ways over one ICE + DTLS-SRTP transport.
@Suite(.serialized) struct H264CallTests {
    /// Runs both sides of `pair` for `seconds`; a's and b's results.
    func run(_ pair: CallMediaPair, seconds: Int, renderer: (any VideoRenderer)? = nil) throws
        -> (a: (sent: SenderStatistics, received: ReceiverSummary), b: (sent: SenderStatistics, received: ReceiverSummary)) {
        let resultB = Mutex<(SenderStatistics, ReceiverSummary)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            var media = try? Call.Media.synthetic(width: 320, height: 240)
            if let renderer { media?.renderers = [renderer] }
            let r = try? media.map { try pair.b.run(pair.bCall, media: $0, duration: .seconds(seconds)) }
            resultB.withLock { $0 = r.map { ($0.sent, $0.received) } }
            done.signal()
        }.start()
        let a = try pair.a.run(pair.aCall, media: try Call.Media.synthetic(width: 320, height: 240), duration: .seconds(seconds))
        #expect(done.wait(timeout: .now() + 60) == .success)
        let b = try #require(resultB.withLock { $0 })
        pair.a.transport.close()
        pair.b.transport.close()
        return ((a.sent, a.received), (b.0, b.1))
    }

    /// Both sides offer H.264 only: each decodes the other's pictures at their size, with no
    /// decode error.
    @Test func anH264CallCarriesPicturesBothWays() throws {
        let pair = try CallMediaPair(videoCodecs: [.h264])
        #expect(pair.aCall.stream(.video)?.codec.name == "H264" && pair.bCall.stream(.video)?.codec.name == "H264")
        let sizes = SizeRecorder()
        let (a, b) = try run(pair, seconds: 3, renderer: sizes)
        for (sent, received, who) in [(a.sent, b.received, "A -> B"), (b.sent, a.received, "B -> A")] {
            #expect(sent.videoFrames >= 60, "\(who): \(sent.videoFrames) frames sent")
            #expect(Double(received.framesDecoded) >= 0.95 * Double(sent.videoFrames), "\(who): \(received.framesDecoded) of \(sent.videoFrames) frames")
            #expect(received.decodeErrors == 0 && received.keyframes >= 1, "\(who): \(received)")
        }
        #expect(sizes.sizes.withLock { $0 } == [Size(width: 320, height: 240)], "b saw \(sizes.sizes.withLock { $0 })")
    }

    /// H.264 preferred by one side, VP8 only on the other: the call is VP8 and works.
    @Test func aPeerWithoutH264GetsVP8() throws {
        let pair = try CallMediaPair(videoCodecs: [.h264, .vp8], answererCodecs: [.vp8])
        #expect(pair.aCall.stream(.video)?.codec.name == "VP8" && pair.bCall.stream(.video)?.codec.name == "VP8")
        let (a, _) = try run(pair, seconds: 2)
        #expect(a.received.framesDecoded >= 40 && a.received.decodeErrors == 0, "\(a.received)")
    }
}

struct Size: Hashable { let width: Int, height: Int }

/// Keeps the sizes of the pictures it is given.
final class SizeRecorder: VideoRenderer, Sendable {
    let sizes = Mutex<Set<Size>>([])
    func render(_ frame: VideoFrame) { _ = sizes.withLock { $0.insert(Size(width: frame.width, height: frame.height)) } }
}
