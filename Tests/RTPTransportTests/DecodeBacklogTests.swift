import Testing
@testable import RTPTransport

@Suite struct DecodeBacklogTests {
    func frame(_ n: Int64, key: Bool = false) -> VideoJitterBuffer.Frame {
        VideoJitterBuffer.Frame(data: [UInt8(n & 0xff)], rtpTimestamp: UInt32(n * 3000), isKeyframe: key, firstSequence: n, lastSequence: n, completedAt: .zero)
    }

    /// A decoder that keeps up decodes and renders every frame, a burst included.
    @Test func everyFrameWhileTheDecoderKeepsUp() {
        var backlog = DecodeBacklog()
        for n in 0..<3 { backlog.push(frame(Int64(n), key: n == 0), now: .milliseconds(1000)) }
        var out: [(Int64, Bool)] = []
        while let item = backlog.pop(now: .milliseconds(1010)) { out.append((item.frame.firstSequence, item.render)) }
        #expect(out.map(\.0) == [0, 1, 2])
        #expect(out.allSatisfy { $0.1 }, "a burst released together after a retransmission is rendered in full")
        #expect(backlog.framesSkipped == 0 && backlog.picturesNotRendered == 0 && !backlog.keyframeNeeded)
    }

    /// A renderer slower than the frame rate: pictures that waited are decoded (the reference
    /// chain needs them) but only the newest is rendered.
    @Test func aSlowRendererCostsPicturesNotDelay() {
        var backlog = DecodeBacklog()
        for n in 0..<4 { backlog.push(frame(Int64(n), key: n == 0), now: .milliseconds(Int64(n) * 33)) }
        var out: [(Int64, Bool)] = []
        while let item = backlog.pop(now: .milliseconds(300)) { out.append((item.frame.firstSequence, item.render)) }
        #expect(out.map(\.0) == [0, 1, 2, 3])
        #expect(out.map(\.1) == [false, false, false, true])
        #expect(backlog.picturesNotRendered == 3 && backlog.framesSkipped == 0)
    }

    /// Behind by more than half a second: skip to the newest waiting keyframe.
    @Test func farBehindSkipsToTheNewestKeyframe() {
        var backlog = DecodeBacklog()
        for n in 0..<30 { backlog.push(frame(Int64(n), key: n == 0 || n == 20), now: .milliseconds(Int64(n) * 33)) }
        let first = backlog.pop(now: .milliseconds(1200))
        #expect(first?.frame.firstSequence == 20 && first?.frame.isKeyframe == true)
        #expect(backlog.framesSkipped == 20)
        #expect(!backlog.keyframeNeeded, "a keyframe was waiting: nothing to ask for")
    }

    /// Behind with no keyframe waiting: drop everything, refuse inter frames until a keyframe
    /// comes, and ask for one.
    @Test func farBehindWithoutAKeyframeAsksForOne() {
        var backlog = DecodeBacklog()
        for n in 1..<20 { backlog.push(frame(Int64(n)), now: .milliseconds(Int64(n) * 33)) }
        #expect(backlog.pop(now: .milliseconds(1000)) == nil)
        #expect(backlog.keyframeNeeded && backlog.framesSkipped == 19)
        backlog.clearKeyframeRequest()
        backlog.push(frame(20), now: .milliseconds(1010))
        #expect(backlog.pop(now: .milliseconds(1011)) == nil, "an inter frame cannot be decoded without its references")
        backlog.push(frame(21, key: true), now: .milliseconds(1020))
        backlog.push(frame(22), now: .milliseconds(1030))
        #expect(backlog.pop(now: .milliseconds(1031))?.frame.firstSequence == 21)
        #expect(backlog.pop(now: .milliseconds(1032))?.frame.firstSequence == 22)
        #expect(backlog.framesSkipped == 20)
    }
}
