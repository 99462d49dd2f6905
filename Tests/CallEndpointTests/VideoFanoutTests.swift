import Codecs
import Foundation
import MediaCore
@testable import RTPTransport
import Synchronization
import Testing
@testable import CallEndpoint

@Suite struct LayerSelectorTests {
    let pattern = TemporalPattern(layers: 3)

    /// Layers 0 ... k fit while their share (40, 60, 100 %) of the encoder's rate is within the
    /// peer's budget; a congested pacer or no room gets layer 0, a peer without an estimate all.
    @Test func aPeerHasRoomForTheLayersItsBudgetTakes() {
        func room(_ budget: Int?, congested: Bool = false) -> Int {
            LayerSelector.room(pattern: pattern, encoderBitrate: 1_000_000, peerBudget: budget, congested: congested)
        }
        #expect(room(2_000_000) == 2)
        #expect(room(1_000_000) == 2)
        #expect(room(900_000) == 1)
        #expect(room(600_000) == 1)
        #expect(room(500_000) == 0)
        #expect(room(200_000) == 0, "layer 0 goes even when it does not fit: the peer's only picture")
        #expect(room(nil) == 2)
        #expect(room(2_000_000, congested: true) == 0)
    }

    /// The encoder follows the least estimate of the well-connected peers: those at 60 % or more
    /// of the upper median's; a thin peer does not pull it down, a slower well-connected one does.
    @Test func theEncoderServesTheWellConnectedPeers() {
        #expect(VideoFanout.servedEstimate([], pattern: pattern) == nil)
        #expect(VideoFanout.servedEstimate([2_000_000], pattern: pattern) == 2_000_000)
        #expect(VideoFanout.servedEstimate([2_000_000, 1_800_000, 1_900_000, 300_000], pattern: pattern) == 1_800_000)
        #expect(VideoFanout.servedEstimate([2_000_000, 300_000], pattern: pattern) == 2_000_000)
        #expect(VideoFanout.servedEstimate([2_000_000, 1_300_000, 1_100_000], pattern: pattern) == 1_100_000)
        #expect(VideoFanout.servedEstimate([2_000_000, 1_300_000, 700_000], pattern: pattern) == 1_300_000)
        #expect(VideoFanout.servedEstimate([900_000, 1_000_000, 1_100_000, 950_000], pattern: pattern) == 900_000)
    }

    /// Nothing before a keyframe; a drop in room is taken at once, a rise one layer at a time at
    /// the next sync frame of that layer.
    @Test func layersAreLeftAtOnceAndTakenUpAtSyncFrames() {
        var selector = LayerSelector()
        func admits(_ layer: Int, sync: Bool, key: Bool = false, room: Int) -> Bool {
            selector.admits(layer: layer, sync: sync, isKeyframe: key, room: room)
        }
        #expect(!admits(2, sync: true, room: 2), "no keyframe yet")
        #expect(!admits(0, sync: false, room: 2))
        #expect(admits(0, sync: true, key: true, room: 2))
        #expect(admits(2, sync: true, room: 2))
        // Room falls to layer 0: the next layer-1 and layer-2 frames are not sent.
        #expect(!admits(1, sync: true, room: 0))
        #expect(!admits(2, sync: false, room: 0))
        #expect(admits(0, sync: false, room: 0))
        // Room for all again: a layer-2 frame is not sent before layer 1 is taken up, nor a
        // layer-2 frame that refers to layer 1 (no sync) right after it.
        #expect(!admits(2, sync: true, room: 2))
        #expect(admits(1, sync: true, room: 2))
        #expect(!admits(2, sync: false, room: 2))
        #expect(admits(0, sync: false, room: 2))
        #expect(admits(2, sync: true, room: 2))
        #expect(admits(2, sync: false, room: 2))
        #expect(selector.forwarding == 2)
    }
}

@Suite(.serialized) struct VideoFanoutTests {
    /// Three viewers of one endpoint on loopback, each its own call media session (ICE,
    /// DTLS-SRTP, pacer, estimate), their video and sound from one shared encoder each: the
    /// fan-outs encode each picture and each packet of sound once, and every viewer decodes
    /// >= 90 % of the pictures and of the sound sent to it, without a decode error. As the
    /// viewers of an endpoint run, the three sending sessions' loops share one thread (a
    /// `MediaLoopGroup`); and each with a thread of its own.
    @Test(arguments: [true, false]) func threeViewersDecodeOneEncode(sharedLoop: Bool) throws {
        let shared = try Call.Media.synthetic(width: 320, height: 240)
        defer { shared.close() }
        let fanout = VideoFanout(track: shared.videoTrack!, maxVideoBitrate: 1_500_000)
        let audioFanout = AudioFanout(track: shared.audioTrack!)
        let encoding = {
            var e = CallMedia.Encoding()
            e.fanout = fanout
            e.audioFanout = audioFanout
            return e
        }()
        let pairs = try (0..<3).map { _ in try CallMediaPair() }
        let loops = MediaLoopGroup(threadName: "test-loops")
        if sharedLoop { for pair in pairs { pair.a.loopGroup = loops } }
        let results = Mutex<[Int: (SenderStatistics, ReceiverSummary)]>([:])
        let group = DispatchGroup()
        for (index, pair) in pairs.enumerated() {
            group.enter()
            Thread {
                defer { group.leave() }
                if let r = try? pair.b.run(pair.bCall, media: Call.Media(videoTrack: nil, audioTrack: nil), duration: .seconds(5)) {
                    results.withLock { $0[index] = (r.sent, r.received) }
                }
            }.start()
        }
        let senders = DispatchGroup()
        let sentLock = Mutex<[SenderStatistics]>([])
        for pair in pairs {
            senders.enter()
            Thread {
                defer { senders.leave() }
                if let r = try? pair.a.run(pair.aCall, media: shared, encoding: encoding, duration: .seconds(4)) {
                    sentLock.withLock { $0.append(r.sent) }
                }
            }.start()
        }
        #expect(senders.wait(timeout: .now() + 60) == .success)
        #expect(group.wait(timeout: .now() + 60) == .success)
        fanout.stop()
        audioFanout.stop()
        let sent = sentLock.withLock { $0 }
        let encoded = fanout.counters.withLock { $0 }
        let received = results.withLock { $0 }
        #expect(sent.count == 3 && received.count == 3)
        // One encode: about 30 pictures a second for 4 s, not three times that.
        #expect((90...130).contains(encoded.encoded), "the fan-out encoded \(encoded.encoded) frames")
        let packets = audioFanout.encoded.load(ordering: .relaxed)
        // 4 s of sound in packets of 10 or 20 ms, once.
        #expect((180...440).contains(packets), "the audio fan-out encoded \(packets) packets")
        for (s, (_, r)) in zip(sent, received.sorted { $0.key < $1.key }.map(\.value)) {
            #expect(s.audioPackets >= packets * 8 / 10 && s.audioPackets <= packets, "sent \(s.audioPackets) of \(packets) packets of sound")
            #expect(r.audioDecoded >= s.audioPackets * 9 / 10, "decoded \(r.audioDecoded) of \(s.audioPackets) packets of sound")
            print("fanout: encoded \(encoded.encoded) (\(encoded.keyframes) keyframes) at \(encoded.bitrate / 1000) kbit/s \(encoded.mode); a viewer sent \(s.videoFrames), decoded \(r.framesDecoded), estimate \(s.estimateBitrate ?? 0)")
            #expect(Double(r.framesDecoded) >= 0.9 * Double(s.videoFrames), "decoded \(r.framesDecoded) of \(s.videoFrames) sent")
            #expect(Double(s.videoFrames) >= 0.85 * Double(encoded.encoded), "sent \(s.videoFrames) of \(encoded.encoded) encoded")
            #expect(r.decodeErrors == 0)
        }
        for pair in pairs {
            pair.a.transport.close()
            pair.b.transport.close()
        }
    }
}
