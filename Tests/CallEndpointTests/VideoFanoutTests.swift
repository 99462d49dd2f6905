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

    /// A viewer is judged thin on what its feedback says, never on its start estimate (a WHEP
    /// viewer was given an encoder of its own 2 s in on its 800 kbit/s start, for 10-14 s).
    @Test func aStartEstimateIsNoBudgetToJudgeAViewerBy() {
        var e = MediaSender.Encoding()
        e.controller = EncodingController(ladder: .forScaling(native: VideoMode(width: 640, height: 480, frameRate: 30)),
                                          maxVideoBitrate: 2_500_000, startBitrate: 800_000)
        e.estimated(bitrate: 800_000, lossFraction: 0, cause: "start")
        #expect(e.judgedVideoBudget == nil)
        e.estimated(bitrate: 820_000, lossFraction: 0, cause: "increase")
        #expect(e.judgedVideoBudget == e.controller?.videoBitrate && e.judgedVideoBudget != nil)
        e.estimated(bitrate: 800_000, lossFraction: 0, cause: "start")
        #expect(e.judgedVideoBudget != nil, "once judged, judged")
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
        // By pair: the senders end in any order, and each is judged against its own viewer.
        let sentLock = Mutex<[Int: SenderStatistics]>([:])
        for (index, pair) in pairs.enumerated() {
            senders.enter()
            Thread {
                defer { senders.leave() }
                if let r = try? pair.a.run(pair.aCall, media: shared, encoding: encoding, duration: .seconds(4)) {
                    sentLock.withLock { $0[index] = r.sent }
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
        for (index, s) in sent.sorted(by: { $0.key < $1.key }).map({ ($0.key, $0.value) }) {
            guard let (_, r) = received[index] else { continue }
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

    /// A call's peer beside viewers: it has its own encoder until a viewer watches, then takes the
    /// viewers' shared encoder (one encode for both), and its own again when the viewer has
    /// gone; its peer decodes >= 90 % of what it sent throughout, without a decode error.
    @Test func theCallsPeerTakesTheViewersEncoderWhileOneWatches() throws {
        let shared = try Call.Media.synthetic(width: 320, height: 240)
        defer { shared.close() }
        let fanout = VideoFanout(track: shared.videoTrack!, maxVideoBitrate: 1_500_000)
        defer { fanout.stop() }
        let decisions = Mutex<[EncodingDecision]>([])
        // Signalled at the call's first decision: its own encoder has taken its first picture.
        let encodingOwn = DispatchSemaphore(value: 0)
        let callEncoding = {
            var e = CallMedia.Encoding()
            e.fanoutWhenWatched = fanout
            e.onDecision = { d in
                let first = decisions.withLock { all -> Bool in
                    all.append(d)
                    return all.count == 1
                }
                if first { encodingOwn.signal() }
            }
            return e
        }()
        let viewerEncoding = {
            var e = CallMedia.Encoding()
            e.fanout = fanout
            return e
        }()
        let call = try CallMediaPair(), viewer = try CallMediaPair()
        defer {
            for pair in [call, viewer] {
                pair.a.transport.close()
                pair.b.transport.close()
            }
        }
        let done = DispatchGroup()
        let results = Mutex<(sent: SenderStatistics?, received: ReceiverSummary?)>((nil, nil))
        func start(_ body: @escaping @Sendable () -> Void) {
            done.enter()
            Thread {
                defer { done.leave() }
                body()
            }.start()
        }
        start {
            if let r = try? call.b.run(call.bCall, media: Call.Media(videoTrack: nil, audioTrack: nil), duration: .seconds(9)) { results.withLock { $0.received = r.received } }
        }
        start {
            if let r = try? call.a.run(call.aCall, media: shared, encoding: callEncoding, duration: .seconds(9)) { results.withLock { $0.sent = r.sent } }
        }
        // The call runs on its own encoder first.
        #expect(encodingOwn.wait(timeout: .now() + 20) == .success)
        #expect(decisions.withLock { $0.first?.cause } == "start", "the call's first decision: \(decisions.withLock { $0.first?.line ?? "none" })")
        #expect(fanout.counters.withLock { $0.encoded } == 0, "the shared encoder ran before anyone watched")
        start { _ = try? viewer.b.run(viewer.bCall, media: Call.Media(videoTrack: nil, audioTrack: nil), duration: .seconds(4)) }
        start {
            _ = try? viewer.a.run(viewer.aCall, media: shared, encoding: viewerEncoding, duration: .seconds(3))
        }
        #expect(done.wait(timeout: .now() + 60) == .success)
        let changes = decisions.withLock { $0 }.filter { $0.change == "encoder" }.map { "\($0.cause): \($0.from) -> \($0.to)" }
        #expect(changes == ["viewers: own -> shared", "viewers: shared -> own"])
        let encoded = fanout.counters.withLock { $0.encoded }
        // About 3 s of the viewer's 30 fps, encoded once for it and the call's peer.
        #expect((60...130).contains(encoded), "the shared encoder encoded \(encoded) frames")
        let sent = try #require(results.withLock { $0.sent }), received = try #require(results.withLock { $0.received })
        print("call beside a viewer: sent \(sent.videoFrames) frames, decoded \(received.framesDecoded); the shared encoder \(encoded)")
        // 9 s at 30 fps, two changes of encoder on the way.
        #expect(sent.videoFrames >= 230, "the call's peer was sent \(sent.videoFrames) frames in 9 s")
        #expect(Double(received.framesDecoded) >= 0.9 * Double(sent.videoFrames), "decoded \(received.framesDecoded) of \(sent.videoFrames)")
        #expect(received.decodeErrors == 0)
    }
}
