import Platform
import MediaCore
import Testing
import TestSupport
@testable import RTPTransport

/// Video FEC (ULPFEC in RED) between two session cores over the simulated link.
@Suite struct VideoFECSessionTests {
    struct Run {
        var freezes: [Duration]
        var shown: Int
        var wrong: Int
        var sender: RTPSessionCore.Counters
        var receiver: RTPSessionCore.Counters
        var keyframeRequests: Int
    }

    /// 10 % random loss of everything both ways at a 100 ms round trip, 30 s of 30 fps video
    /// of about five packets a frame, with or without FEC.
    static func lossyCall(fec: Bool, seed: UInt64, loss: Double = 0.10, oneWay: Duration = .milliseconds(50), seconds: Double = 30, frameSize: Int = 10_000) -> Run {
        let (ca, cb) = SimulatedCall.configurations(auto: false, fec: fec)
        var call = SimulatedCall(a: ca, b: cb)
        call.delay = oneWay
        var random = SeededGenerator(seed: seed)
        call.link = { _, _, _, _ in Double.random(in: 0..<1, using: &random) < loss ? nil : .zero }
        let start = call.now
        call.scheduleVideo(from: .a, seconds: seconds, size: frameSize, keyframeSize: 50_000)
        call.run(until: start + .seconds(seconds + 1))
        var shown: [MediaTime] = []
        var wrong = 0
        for entry in call.actions[.b, default: []] {
            guard case .decode(let frames) = entry.action else { continue }
            for frame in frames {
                shown.append(entry.at)
                // scheduleVideo's frame n is n repeated (its first byte says key or delta).
                if frame.data.count > 1 && Set(frame.data.dropFirst()).count != 1 { wrong += 1 }
            }
        }
        let gaps = zip(shown, shown.dropFirst()).filter { $0.0 > start + .seconds(2) }.map { $1 - $0 }
        return Run(freezes: gaps.filter { $0 >= .milliseconds(300) }, shown: shown.count, wrong: wrong,
                   sender: call.a.counters, receiver: call.b.counters, keyframeRequests: call.a.counters.keyframeRequests)
    }

    /// LTE's case with a frame of eight to nine packets (2.5 Mbit/s at 30 fps), six runs of
    /// 30 s: FEC rebuilds over a third of what was lost with no round trip, every frame shows
    /// with the bytes that were sent, and no frame waits for a keyframe. Without FEC the same
    /// seeds froze twice and asked for two keyframes.
    @Test func fecRebuildsLossesAtTenPercentWithoutARoundTrip() {
        var freezes: [Duration] = [], rebuilt = 0, asked = 0, plis = 0
        for seed: UInt64 in 41...46 {
            let run = Self.lossyCall(fec: true, seed: seed)
            #expect(run.shown >= 899 && run.wrong == 0, "seed \(seed): \(run.shown) shown, \(run.wrong) with the wrong bytes")
            #expect(run.sender.fecPacketsSent > 0 && run.receiver.fecPacketsReceived > 0)
            freezes += run.freezes
            rebuilt += run.receiver.videoRecoveredByFEC
            asked += run.sender.retransmitted + run.receiver.videoRecoveredByFEC
            plis += run.receiver.pliSent
        }
        #expect(freezes.isEmpty, "\(freezes)")
        #expect(plis == 0)
        #expect(Double(rebuilt) >= 0.35 * Double(asked), "FEC rebuilt \(rebuilt) of \(asked) repairs")
    }

    /// A clean path: video goes in RED and shows, and no FEC is sent until the peer reports loss.
    @Test func noLossNoFEC() {
        let run = Self.lossyCall(fec: true, seed: 1, loss: 0, seconds: 5)
        #expect(run.shown == 150 && run.wrong == 0)
        #expect(run.sender.fecPacketsSent == 0 && run.receiver.pliSent == 0)
    }

    /// Only FEC packets are lost (every one): the frames around each lost one follow by picture
    /// ID, the holes they leave are not retransmitted (a NACK for one asks for nothing), and no
    /// keyframe is asked for.
    @Test func aLostFECPacketCostsNothing() throws {
        let (ca, cb) = SimulatedCall.configurations(auto: false, fec: true)
        var call = SimulatedCall(a: ca, b: cb)
        call.delay = .milliseconds(50)
        var random = SeededGenerator(seed: 7)
        var fecLost = 0
        call.link = { from, packet, _, _ in
            guard let packet else { return .zero }
            // Media packets lost at 10 % for the first 3 s (so that FEC turns on), then none.
            if packet.payloadType == 98, packet.payload.first == 100, from == .a {
                fecLost += 1
                return nil
            }
            return packet.payloadType == 98 && Double.random(in: 0..<1, using: &random) < 0.1 && fecLost == 0 ? nil : .zero
        }
        let start = call.now
        call.scheduleVideo(from: .a, seconds: 8, size: 10_000, keyframeSize: 30_000)
        call.run(until: start + .seconds(9))
        #expect(fecLost > 100, "FEC was on and every FEC packet was lost: \(fecLost)")
        let frames = call.decoded(by: .b)
        #expect(frames.count == 240)
        #expect(call.a.counters.keyframeRequests == 0 && call.b.counters.pliSent == 0)
        #expect(call.count(.a) { if case .keyframeNeeded = $0 { return true }; return false } == 0)
        let retransmittedAfter = call.a.counters.retransmitted
        #expect(retransmittedAfter < 200, "only the media lost in the first seconds was resent: \(retransmittedAfter)")
    }
}
