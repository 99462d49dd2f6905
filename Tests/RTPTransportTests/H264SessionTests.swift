import MediaCore
import Platform
import Testing
import TestSupport
@testable import RTPTransport

/// The media session core with H.264 (RFC 6184) instead of VP8: two cores over a simulated
/// link in virtual time, frames handed in as Annex B access units and handed out the same.
@Suite struct H264SessionTests {
    static func configurations() -> (SessionConfiguration, SessionConfiguration) {
        var (a, b) = SimulatedCall.configurations()
        a.video?.videoFormat = .h264
        a.receivedVideo?.videoFormat = .h264
        b.video?.videoFormat = .h264
        b.receivedVideo?.videoFormat = .h264
        return (a, b)
    }

    /// Access unit `n`: an IDR with its parameter sets every second, else one slice; bodies
    /// differ per picture and hold no start code.
    static func accessUnit(_ n: Int) -> [UInt8] {
        func unit(_ type: UInt8, _ size: Int) -> [UInt8] { [0x60 | type] + (1..<size).map { UInt8(truncatingIfNeeded: ($0 + n) % 200 + 20) } }
        return H264NALUnit.annexB(n % 30 == 0 ? [unit(7, 12), unit(8, 5), unit(5, 8_000)] : [unit(1, 1_500)])
    }

    /// Two lost packets come back on RTX; every picture comes out whole, in order, as sent.
    @Test func accessUnitsCrossALossyLinkAsTheyWereSent() throws {
        let (ca, cb) = Self.configurations()
        var call = SimulatedCall(a: ca, b: cb)
        var videoPackets = 0
        call.link = { from, packet, _, _ in
            guard from == .a, packet?.payloadType == 96 else { return .zero }
            videoPackets += 1
            return videoPackets == 3 || videoPackets == 40 ? nil : .zero  // one of the first keyframe's, one of a slice's
        }
        var sent: [[UInt8]] = []
        for n in 0..<60 {
            let at = call.now + .microseconds(Int64(n) * 33_333)
            sent.append(Self.accessUnit(n))
            call.schedule(.encodedVideo(data: sent[n], isKeyframe: n % 30 == 0, capturedAt: at), on: .a, at: at)
        }
        call.run(until: call.now + .seconds(3))
        let frames = call.decoded(by: .b)
        #expect(frames.count == 60, "\(frames.count) of 60")
        #expect(frames.map(\.data) == sent, "byte for byte")
        #expect(frames.map(\.isKeyframe) == (0..<60).map { $0 % 30 == 0 })
        #expect(call.b.counters.retransmissionsReceived == 2 && call.a.counters.retransmitted >= 2)
        #expect(call.count(.b) { if case .keyframeNeeded = $0 { return true }; return false } == 0)
    }

    /// A hole no retransmission fills (the link drops the resends too) is given up on and a
    /// keyframe asked for; the stream goes on from the next IDR.
    @Test func anUnrepairableHoleAsksForAnIDR() throws {
        let (ca, cb) = Self.configurations()
        var call = SimulatedCall(a: ca, b: cb)
        var videoPackets = 0
        call.link = { from, packet, _, _ in
            guard from == .a, let packet else { return .zero }
            if packet.payloadType == 97 { return nil }  // every retransmission
            guard packet.payloadType == 96 else { return .zero }
            videoPackets += 1
            // The first IDR is 8 packets (its parameter sets in a STAP-A, the slice in 7 FU-As);
            // the 10th is the end of picture 1.
            return videoPackets == 10 ? nil : .zero
        }
        for n in 0..<45 {
            let at = call.now + .microseconds(Int64(n) * 33_333)
            call.schedule(.encodedVideo(data: Self.accessUnit(n), isKeyframe: n % 30 == 0, capturedAt: at), on: .a, at: at)
        }
        call.run(until: call.now + .seconds(2))
        let frames = call.decoded(by: .b)
        #expect(frames.first?.isKeyframe == true && frames.filter(\.isKeyframe).count == 2)
        #expect(frames.count == 1 + 15, "the first IDR, then from the second IDR on: \(frames.count)")
        #expect(call.b.counters.pliSent >= 1)
    }
}
