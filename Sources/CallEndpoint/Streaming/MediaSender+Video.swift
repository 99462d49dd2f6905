import Codecs
import MediaCore
import Devices
import Foundation
import Platform
import RTPTransport
import Synchronization

/// The video stage: capture → camera mode and ladder → encoder (with pushback) → packetizer → pacer.
extension MediaSender {
    func sendVideo() throws {
        defer { mediaFinished.add(1, ordering: .relaxed) }
        guard let track = videoTrack else { return }
        let source = track.source
        let frames = CaptureQueue<VideoFrame?>(capacity: 1)  // the newest picture only: an encoder that falls behind skips
        let modeChanged = Atomic<Bool>(false)
        source.start { output in
            switch output {
            case .frame(let frame): frames.put(frame)
            case .modeChanged: modeChanged.store(true, ordering: .relaxed)
            case .ended: frames.put(nil)
            }
        }
        defer { ownsTracks ? source.stop() : source.detach() }
        let auto = configuration.encodingMode == .auto && configuration.transportSequenceExtensionID != nil
        var appliedBitrate = 0
        var appliedMode: VideoMode?
        // The ladder is built for the input it was made from: a switch to another camera, or a
        // pattern or file of another size or rate, builds a new one (the ladder's own mode
        // changes of a camera do not: a camera is known by its path).
        var ownRequest: CameraModeRequest?
        func identity(_ input: CameraInput, _ frame: VideoFrame) -> String {
            // A mode the user asked for is a new input; one the ladder asked for is not.
            if case .device(let path, let request) = input { return request == ownRequest ? path : "\(path) \(request?.description ?? "") \(frame.width)x\(frame.height)" }
            return "\(frame.width)x\(frame.height)@\(Int(source.format.frameRate.rounded()))"
        }
        var ladderInput: String?
        /// The ladder for what the source delivers now: the camera's real modes, or scaling.
        func ladder(for frame: VideoFrame) -> ModeLadder {
            let native = VideoMode(width: frame.width, height: frame.height, frameRate: max(1, Int(source.format.frameRate.rounded())))
            if case .device = source.input { return .forCamera(source.offeredModes, native: native) }
            return .forScaling(native: native)
        }
        var lastEncoded: Duration?
        /// The time libvpx was last told, and the sender's clock then.
        var shown: (encoder: Duration, clock: Duration)?
        var encoder: VP8Encoder?
        var packetizer = VP8Packetizer(initialPictureID: UInt16.random(in: 0...0x7fff))
        var sequence = UInt16.random(in: 0...UInt16.max)
        let timestampBase = UInt32.random(in: 0...UInt32.max)
        while shouldContinue(clock.now) {
            guard let item = frames.take(timeout: .milliseconds(100)) else { continue }
            guard var frame = item else { break }
            if !track.isEnabled { frame = VideoFrame(width: frame.width, height: frame.height, timestamp: frame.timestamp, luma: 16) }
            let now = clock.now
            if auto {
                // The ladder comes from what the source really offers, once it delivers.
                let input = identity(source.input, frame)
                let rebuild = ladderInput != input
                ladderInput = input
                let (bitrate, mode, activeLadder) = state.withLock { s -> (Int, VideoMode, ModeLadder) in
                    if rebuild, let estimator = s.estimator, let old = s.controller {
                        s.controller = EncodingController(ladder: ladder(for: frame), maxVideoBitrate: old.maxVideoBitrate, startBitrate: old.videoBitrate)
                        adapt(estimator: estimator, cause: "switch", state: &s)
                    }
                    if s.controller == nil {
                        let estimator = BandwidthEstimator(configuration: {
                            var c = BandwidthEstimator.Configuration()
                            c.startBitrate = min(800_000, configuration.maxVideoBitrate)
                            c.maxBitrate = configuration.maxVideoBitrate + 64_000
                            return c
                        }())
                        s.controller = EncodingController(ladder: ladder(for: frame), maxVideoBitrate: configuration.maxVideoBitrate, startBitrate: estimator.estimate)
                        s.estimator = estimator
                        adapt(estimator: estimator, cause: BandwidthEstimator.Cause.start.rawValue, state: &s)
                    }
                    return (s.controller!.videoBitrate, s.controller!.mode, s.controller!.ladder)
                }
                if mode != appliedMode {
                    if activeLadder.usesCameraModes, case .device(let path, _) = source.input {
                        // A real mode change: the camera delivers the new size (one keyframe follows).
                        let request = CameraModeRequest(width: mode.width, height: mode.height, frameRate: mode.frameRate)
                        if (try? source.select(.device(path: path, mode: request))) != nil {
                            ownRequest = request
                            ladderInput = identity(source.input, frame)
                        }
                    }
                    appliedMode = mode
                }
                // Sources that cannot change mode get scaled pictures and dropped frames.
                if (frame.width, frame.height) != (mode.width, mode.height) {
                    frame = try frame.scaled(width: mode.width, height: mode.height, filter: .bilinear)
                }
                let interval = Duration.microseconds(1_000_000 / Int64(max(1, mode.frameRate)))
                if let last = lastEncoded, now - last < interval - .milliseconds(8) { continue }
                lastEncoded = now
                if bitrate != appliedBitrate, let running = encoder {
                    try running.setTargetBitrate(bitrate)
                    appliedBitrate = bitrate
                }
            }
            if let running = encoder {
                try running.setResolution(width: frame.width, height: frame.height)
            } else {
                let rate = max(1, Int(source.format.frameRate.rounded()))
                var settings = VP8EncoderConfiguration(width: frame.width, height: frame.height, frameRate: rate, targetBitrate: configuration.videoBitrate)
                // Auto mode changes mode under congestion: a keyframe may cost at most three
                // average frames, so a step down does not overfill the smaller pipe.
                if auto { settings.maxIntraBitratePercent = 300 }
                encoder = try VP8Encoder(configuration: settings)
            }
            guard let encoder else { break }
            // Encoder pushback: while the pacer still holds more than 100 ms of earlier frames, a
            // picture would only wait behind them; skip it (the rate controller sees the gap in
            // timestamps and the next frame carries the motion).
            if auto, state.withLock({ s in
                guard SendPolicy.skipsPicture(pacerQueueDelay: s.pacer.queueDelay(now: now.inMicroseconds)) else { return false }
                s.stats.framesHeldBack += 1
                return true
            }) { continue }
            if modeChanged.exchange(false, ordering: .relaxed) || keyframeWanted.exchange(false, ordering: .relaxed) { encoder.requestKeyframe() }
            let timestamp = timestampBase &+ UInt32(truncatingIfNeeded: Int64(now.inSeconds * 90_000))
            // The time libvpx is told follows the sender's clock, not the source's timestamps (a
            // looping file repeats them, and auto mode skips pictures to lower the frame rate);
            // but a gap of more than one and a half frame intervals (pictures held back by
            // pushback, a stalled source) counts as one interval: libvpx budgets a frame for the
            // time since the last, and a held-back gap became one oversized frame that filled
            // the pacer again.
            let frameInterval = Duration.microseconds(1_000_000 / Int64(max(1, appliedMode?.frameRate ?? Int(source.format.frameRate.rounded()))))
            let encoderTime = shown.map { $0.encoder + (now - $0.clock <= frameInterval * 3 / 2 ? now - $0.clock : frameInterval) } ?? now
            shown = (encoderTime, now)
            let encodeStart = ContinuousClock.now
            let encodedFrames = try encoder.encode(frame, at: encoderTime)
            if auto {
                // The encoder's own state may step the mode down: too slow for the frame rate
                // (cpu) or at its coarsest quantizer (qp).
                let took = ContinuousClock.now - encodeStart
                state.withLock { s in
                    guard var controller = s.controller else { return }
                    let made = controller.encoderReport(quantizer: encodedFrames.first?.quantizer, encodeTime: took, now: now)
                    publish(made, controller: controller, state: &s)
                }
            }
            for encoded in encodedFrames {
                let payloads = packetizer.packetize(encoded.data)
                for (i, payload) in payloads.enumerated() {
                    let packet = RTPPacket(payloadType: configuration.payloadTypes.video, sequenceNumber: sequence, timestamp: timestamp,
                                           ssrc: videoSSRC, marker: i == payloads.count - 1, payload: payload)
                    sequence &+= 1
                    let sentAt = clock.now
                    state.withLock { s in
                        s.history.store(packet, sentAt: sentAt)
                        s.video.record(packet, at: now)  // the time the RTP timestamp says (lip sync)
                        s.stats.videoPackets += 1
                        s.stats.videoBytes += packet.serializedSize
                        let dropped = s.pacer.droppedPackets
                        s.pacer.enqueue(packet, size: packet.serializedSize, priority: .video, now: sentAt.inMicroseconds)
                        // The queue was at its bound: what went is lost to the receiver for good.
                        if s.pacer.droppedPackets != dropped { keyframeWanted.store(true, ordering: .relaxed) }
                    }
                    wakePacer()
                }
                state.withLock { s in
                    s.stats.videoFrames += 1
                    if encoded.isKeyframe { s.stats.keyframes += 1 }
                    s.stats.videoWidth = frame.width
                    s.stats.videoHeight = frame.height
                }
            }
        }
    }
}
