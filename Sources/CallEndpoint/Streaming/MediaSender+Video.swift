import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import Synchronization

/// The video stage: capture → camera mode and ladder → encoder (with pushback) → the media loop.
extension MediaSender {
    func sendVideo() throws {
        guard let track = videoTrack else { return }
        if let fanout = configuration.videoFanout { _ = try takeShared(fanout, track: track); return }
        // A camera's own H.264 goes to the call's peer as it comes (viewers' shared encoder, if
        // any, decodes it: `CameraPictureDecoder`); once the source delivers other pictures (a
        // switch), they are encoded as any are.
        if configuration.videoFormat == .h264, track.source.passesThrough {
            guard try passThrough(track), shouldContinue() else { return }
        }
        if let fanout = configuration.videoFanoutWhenWatched { return try shareWhileWatched(fanout, track: track) }
        try encodeOwn(track)
    }

    /// A call's peer beside viewers: its own encoder (its camera modes, its rate) while nobody
    /// watches; the viewers' shared encoder while one does, so that the endpoint encodes once for
    /// all (the call's peer is one more peer of the fan-out: its estimate has a say in the
    /// shared rate, and a thin link gets the layers that fit, as a viewer's does). Back to its
    /// own when the last viewer leaves. Each change costs a keyframe.
    func shareWhileWatched(_ fanout: VideoFanout, track: LocalVideoTrack) throws {
        func announce(_ from: String, _ to: String) {
            let estimate = encoding.withLock { $0.estimate?.bitrate } ?? 0
            report([EncodingDecision(time: elapsed.inSeconds, cause: "viewers", estimateKbps: estimate / 1000, change: "encoder", from: from, to: to)])
        }
        while shouldContinue() {
            var watched = false
            try encodeOwn(track) { [self] in
                watched = fanout.watchers(besides: self) > 0
                return watched
            }
            guard watched, shouldContinue() else { return }
            announce("own", "shared")
            // Until the last viewer has left.
            guard try takeShared(fanout, track: track, until: { [self] in fanout.watchers(besides: self) == 0 }) else { return }
            announce("shared", "own")
        }
    }

    /// This session's own encoder. `leaveWhen` is asked at each picture: true ends the loop (a
    /// viewer goes back to the shared encoder).
    func encodeOwn(_ track: LocalVideoTrack, leaveWhen: (() -> Bool)? = nil) throws {
        let source = track.source
        let frames = videoFrames
        let modeChanged = Atomic<Bool>(false)
        let loop = loop
        let cameraDecoder = CameraPictureDecoder()
        let sink = track.addSink { output in
            switch output {
            case .frame(let frame): frames.put(frame)
            case .encoded(let unit, let timestamp): if let frame = cameraDecoder.decode(unit, timestamp: timestamp) { frames.put(frame) }
            case .controlSet: break
            case .modeChanged: modeChanged.store(true, ordering: .relaxed)
            case .ended: frames.put(nil)
            case .lost: loop.post(.videoNote("camera lost"))
            case .restored: loop.post(.videoNote(nil))
            }
        }
        defer {
            track.removeSink(sink)
            if ownsTracks { source.stop() }
        }
        let auto = configuration.encodingMode == .auto && (configuration.transportSequenceExtensionID != nil || configuration.estimatesFromReports)
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
            if case .device = source.input, configuration.controlsCameraMode { return .forCamera(source.offeredModes, native: native) }
            return .forScaling(native: native)
        }
        var lastEncoded: Duration?
        /// The time libvpx was last told, and the sender's clock then.
        var shown: (encoder: Duration, clock: Duration)?
        var encoder: (any VideoEncoder)?
        while shouldContinue() {
            // Until a picture comes, the source ends, stop(), or the duration is over.
            guard let item = frames.take(timeout: configuration.duration.map { $0 - elapsed }) else { continue }
            guard var frame = item else { break }
            if let leaveWhen, leaveWhen() { break }
            if !track.isEnabled { frame = VideoFrame(width: frame.width, height: frame.height, timestamp: frame.timestamp, luma: 16) }
            let now = elapsed
            if auto {
                // The ladder comes from what the source really offers, once it delivers.
                let input = identity(source.input, frame)
                let rebuild = ladderInput != input
                ladderInput = input
                let (bitrate, mode, activeLadder, made) = encoding.withLock { e -> (Int, VideoMode, ModeLadder, [EncodingDecision]) in
                    var made: [EncodingDecision] = []
                    if rebuild, let old = e.controller {
                        var controller = EncodingController(ladder: ladder(for: frame), maxVideoBitrate: old.maxVideoBitrate, startBitrate: old.videoBitrate)
                        controller.audioRedundancy = old.audioRedundancy
                        controller.videoProtection = old.videoProtection
                        let estimate = e.estimate ?? (old.videoBitrate, 0)
                        made = publish(controller.update(estimate: estimate.bitrate, lossFraction: estimate.lossFraction, cause: "switch", now: now),
                                       controller: controller, in: &e)
                    }
                    if e.controller == nil { made = startController(ladder(for: frame), now: now, in: &e) }
                    return (e.controller!.videoBitrate, e.controller!.mode, e.controller!.ladder, made)
                }
                report(made)
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
                // Auto mode changes mode under congestion: its keyframes are capped.
                encoder = try configuration.videoFormat.makeEncoder(width: frame.width, height: frame.height, frameRate: rate,
                                                                   bitrate: configuration.videoBitrate, capsKeyframes: auto,
                                                                   h264Device: configuration.h264EncoderDevice)
            }
            guard let encoder else { break }
            // Encoder pushback: while the pacer still holds more than 100 ms of earlier frames, a
            // picture would only wait behind them; skip it (the rate controller sees the gap in
            // timestamps and the next frame carries the motion).
            if auto, SendPolicy.skipsPicture(pacerQueueDelay: pacerQueueDelay.load(ordering: .relaxed)) {
                encoding.withLock { $0.stats.framesHeldBack += 1 }
                continue
            }
            let recorderWants = configuration.recorder?.takeKeyframeRequest() == true
            if modeChanged.exchange(false, ordering: .relaxed) || keyframeWanted.exchange(false, ordering: .relaxed) || recorderWants { encoder.requestKeyframe() }
            // The RTP timestamp the core gives the frame follows this moment (90 kHz).
            let capturedAt = clock.now
            // The time libvpx is told follows the sender's clock, not the source's timestamps (a
            // looping file repeats them, and auto mode skips pictures to lower the frame rate);
            // but a gap of more than one and a half frame intervals (pictures held back by
            // pushback, a stalled source) counts as one interval: libvpx budgets a frame for the
            // time since the last, and a held-back gap became one oversized frame that filled
            // the pacer again.
            let frameInterval = Duration.microseconds(1_000_000 / Int64(max(1, appliedMode?.frameRate ?? Int(source.format.frameRate.rounded()))))
            let encoderTime = shown.map { $0.encoder + (now - $0.clock <= frameInterval * 3 / 2 ? now - $0.clock : frameInterval) } ?? now
            shown = (encoderTime, now)
            // The capture hop: the picture's age when the encoder takes it (its stamp is on the
            // monotonic clock, whatever clock the sender runs on).
            let age = MonotonicClock.now - frame.timestamp
            let encodeStart = MediaTime.now
            let encodedFrames = try encoder.encode(frame, at: encoderTime, forceKeyframe: false)
            let took = MediaTime.now - encodeStart
            encoding.withLock { $0.stats.encoderCalls += 1 }
            if auto {
                // The encoder's own state may step the mode down: too slow for the frame rate
                // (cpu) or at its coarsest quantizer (qp).
                let made = encoding.withLock { e -> [EncodingDecision] in
                    guard var controller = e.controller else { return [] }
                    return publish(controller.encoderReport(quantizer: encodedFrames.first?.quantizer, encodeTime: took, now: now), controller: controller, in: &e)
                }
                report(made)
            }
            for encoded in encodedFrames {
                loop.post(.encodedVideo(data: encoded.data, isKeyframe: encoded.isKeyframe, capturedAt: capturedAt))
                configuration.recorder?.video(encoded.data, stamp: .captured(capturedAt), isKeyframe: encoded.isKeyframe)
            }
            if !encodedFrames.isEmpty {
                encoding.withLock { e in
                    e.stats.videoWidth = frame.width
                    e.stats.videoHeight = frame.height
                    // A stamp from another clock (a file's own times) says nothing of the wait.
                    if age < .seconds(10) { e.stats.videoBudget.add(.capture, age) }
                    e.stats.videoBudget.add(.encode, took)
                }
            }
        }
    }

    /// The video comes from a shared encoder: this session keeps its own controller (its share
    /// of its estimate, which picks the layers it is sent, and its audio settings) and takes the
    /// fan-out's frames. A peer whose link cannot carry even the shared stream's base layer for
    /// `VideoFanout.starvedFor` encodes for itself instead (its own rate and size, one encode
    /// more), until the base layer has fitted with room to spare for `VideoFanout.fedFor`.
    ///
    /// With `until`, it returns true once that holds (asked every picture or 250 ms): the
    /// session goes back to its own encoder. False: the session is over.
    @discardableResult
    func takeShared(_ fanout: VideoFanout, track: LocalVideoTrack, until: (() -> Bool)? = nil) throws -> Bool {
        let format = fanout.track.source.format
        let native = VideoMode(width: format.width, height: format.height, frameRate: max(1, Int(format.frameRate.rounded())))
        let made = encoding.withLock { e -> [EncodingDecision] in
            let start = min(800_000, configuration.maxVideoBitrate)
            var controller = EncodingController(ladder: .forScaling(native: native), maxVideoBitrate: configuration.maxVideoBitrate, startBitrate: start)
            controller.audioRedundancy = configuration.payloadTypes.audioRED != nil && audioTrack != nil ? 1 : 0
            let estimate = e.estimate ?? (start, 0)
            return publish(controller.update(estimate: estimate.bitrate, lossFraction: estimate.lossFraction, cause: BandwidthEstimator.Cause.start.rawValue, now: elapsed),
                           controller: controller, in: &e)
        }
        report(made)
        let budget = { [self] in encoding.withLock { $0.judgedVideoBudget } }
        func announce(_ from: String, _ to: String) {
            let estimate = encoding.withLock { $0.estimate?.bitrate } ?? 0
            report([EncodingDecision(time: elapsed.inSeconds, cause: "thin", estimateKbps: estimate / 1000, change: "encoder", from: from, to: to)])
        }
        while shouldContinue() {
            fanout.attach(self)
            var starvedSince: Duration?
            var stopped = false, done = false
            // Until stop() (a nil picture), the duration is over, `until`, or the base layer has not fitted for long.
            while shouldContinue() {
                if case .some(nil) = videoFrames.take(timeout: .milliseconds(250)) {
                    stopped = true
                    break
                }
                if let until, until() {
                    done = true
                    break
                }
                if fanout.starves(budget: budget()) {
                    starvedSince = starvedSince ?? elapsed
                    if elapsed - starvedSince! >= VideoFanout.starvedFor { break }
                } else {
                    starvedSince = nil
                }
            }
            fanout.detach(self)
            guard !stopped, shouldContinue() else { return false }
            if done { return true }
            announce("shared", "own")
            var fedSince: Duration?
            try encodeOwn(track) { [self] in
                if let until, until() {
                    done = true
                    return true
                }
                guard fanout.feeds(budget: budget()) else {
                    fedSince = nil
                    return false
                }
                fedSince = fedSince ?? elapsed
                return elapsed - fedSince! >= VideoFanout.fedFor
            }
            guard shouldContinue() else { return false }
            // Nobody watches any more: it keeps an encoder of its own (one more keyframe).
            if done { return true }
            announce("own", "shared")
        }
        return false
    }
}
