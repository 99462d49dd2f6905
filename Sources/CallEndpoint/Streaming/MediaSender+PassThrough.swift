import Codecs
import MediaCore
import Devices
import FoundationEssentials
import Platform
import RTPTransport
import Synchronization

/// Turns a camera's own H.264 back into pictures, for a stage that encodes anew (a VP8 call, the
/// viewers' shared encoder). Access units before the first keyframe, and ones the decoder
/// refuses, give no picture.
final class CameraPictureDecoder: @unchecked Sendable {  // the decoder is used under its lock only
    private let decoder = Mutex<(any VideoDecoder)?>(nil)
    private let failed = Atomic<Bool>(false)

    func decode(_ unit: [UInt8], timestamp: Duration) -> VideoFrame? {
        guard !failed.load(ordering: .relaxed) else { return nil }
        return decoder.withLock { d -> VideoFrame? in
            if d == nil {
                do { d = try VideoPayloadFormat.h264.makeDecoder() } catch {
                    failed.store(true, ordering: .relaxed)
                    return nil
                }
            }
            return try? d?.decode(unit, timestamp: timestamp)
        }
    }
}

/// What the capture thread hands the pass-through loop.
enum CameraUnit: Sendable {
    /// An access unit, numbered by the sink (a gap: one was dropped, and the chain is broken).
    case unit([UInt8], timestamp: Duration, number: Int)
    case control(name: String, value: Int, error: String?)
}

extension MediaSender {
    /// A camera that encodes H.264 itself, sent without decoding or encoding: each access unit
    /// is packetized as it came (SPS and PPS put in front of every IDR). The automatic mode
    /// steers it through the camera: the video target becomes its V4L2_CID_MPEG_VIDEO_BITRATE,
    /// a keyframe request its V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME (or a restart of its stream),
    /// and, where it offers several H.264 modes, the ladder's steps become mode switches. A
    /// camera without a bitrate control is steered by its modes alone. Nothing can be dropped
    /// singly (later pictures refer to it): under pushback, or after a lost access unit, the
    /// sender waits for the next keyframe and asks for one. Muted, it sends nothing (no encoder
    /// runs to make black pictures) and tells the peer so in its RTCP note; unmuted, it starts
    /// again at a keyframe. Returns true when the source stopped delivering H.264 (switched to
    /// another camera or mode): the caller encodes from then on.
    func passThrough(_ track: LocalVideoTrack) throws -> Bool {
        let source = track.source
        let units = CaptureQueue<CameraUnit?>(capacity: 60)
        let modeChanged = Atomic<Bool>(false)
        let numbered = Atomic<Int>(0)
        let loop = loop
        let sink = track.addSink { output in
            switch output {
            case .encoded(let data, let timestamp): units.put(.unit(data, timestamp: timestamp, number: numbered.add(1, ordering: .relaxed).newValue))
            case .controlSet(let name, let value, let error): units.put(.control(name: name, value: value, error: error))
            case .modeChanged: modeChanged.store(true, ordering: .relaxed)
            case .ended: units.put(nil)
            case .lost: loop.post(.videoNote("camera lost"))
            case .restored: loop.post(.videoNote(nil))
            case .frame: break  // a lost camera's black stand-ins, or another input's pictures (the loop then leaves)
            }
        }
        defer {
            track.removeSink(sink)
            if ownsTracks { source.stop() }
        }
        let device = source.cameraDevice
        let bitrateControl = device?.bitrateControl
        let auto = configuration.encodingMode == .auto && (configuration.transportSequenceExtensionID != nil || configuration.estimatesFromReports)
        var parameterSets = H264ParameterSets()
        var expected = 1
        var waitingForKeyframe = false
        var appliedBitrate = 0
        var appliedMode: VideoMode?
        var muted = false
        func decide(_ cause: String, _ change: String, _ from: String, _ to: String) {
            let estimate = encoding.withLock { $0.estimate?.bitrate } ?? 0
            report([EncodingDecision(time: elapsed.inSeconds, cause: cause, estimateKbps: estimate / 1000, change: change, from: from, to: to)])
        }
        /// The camera is asked at most every 500 ms, and one without the keyframe button (whose
        /// stream each ask restarts) at most every 2 s: the peer's PLIs repeat until a keyframe
        /// comes, and a restart that loses the IDR on its way would only put the next one off.
        var askedAt: Duration?
        let askInterval: Duration = device?.keyframeControl != nil ? .milliseconds(500) : .seconds(2)
        func askKeyframe() {
            if let askedAt, elapsed - askedAt < askInterval { return }
            askedAt = elapsed
            source.requestCameraKeyframe()
        }
        if auto, bitrateControl == nil {
            decide("camera", "camera-bitrate", "-", "no V4L2_CID_MPEG_VIDEO_BITRATE: steered by its modes")
        }
        while shouldContinue() {
            guard let item = units.take(timeout: .milliseconds(250)) else {
                if !source.passesThrough { return true }
                continue
            }
            guard let item else { break }
            let now = elapsed
            switch item {
            case .control(let name, let value, let error):
                // The camera's answer to a control call: in the decision log, failed or not.
                let asked = name == "bitrate" ? "\(value / 1000)k" : "requested"
                decide("camera", "camera-\(name)", "-", error.map { "\(asked), failed: \($0)" } ?? asked)
                // A keyframe by restarting the stream may lose pictures on the way: send from the next IDR.
                if name == "keyframe", error != nil { waitingForKeyframe = true }
                continue
            case .unit(let data, let timestamp, let number):
                if number != expected {
                    // Access units were dropped (the sender fell behind): the chain is broken.
                    waitingForKeyframe = true
                    askKeyframe()
                }
                expected = number + 1
                if auto {
                    let (bitrate, mode, ladder, made) = encoding.withLock { e -> (Int, VideoMode, ModeLadder, [EncodingDecision]) in
                        var made: [EncodingDecision] = []
                        if e.controller == nil {
                            let format = source.format
                            let native = VideoMode(width: format.width, height: format.height, frameRate: max(1, Int(format.frameRate.rounded())))
                            let h264Modes = source.offeredModes.filter { CaptureDevice.passedThroughFormats.contains($0.fourCC) }
                            made = startController(.forCamera(h264Modes, native: native), now: now, in: &e)
                        }
                        return (e.controller!.videoBitrate, e.controller!.mode, e.controller!.ladder, made)
                    }
                    report(made)
                    if bitrate != appliedBitrate {
                        // Within the range the camera states (a driver may refuse the rest).
                        if let control = bitrateControl { source.setCameraBitrate(min(max(bitrate, control.minimum), max(control.minimum, control.maximum))) }
                        appliedBitrate = bitrate
                    }
                    if mode != appliedMode {
                        if ladder.usesCameraModes, case .device(let path, _) = source.input, appliedMode != nil {
                            let request = CameraModeRequest(width: mode.width, height: mode.height, frameRate: mode.frameRate, fourCC: "H264")
                            if (try? source.select(.device(path: path, mode: request))) == nil {
                                decide("camera", "camera-mode", appliedMode?.description ?? "-", "failed: \(request)")
                            }
                        }
                        appliedMode = mode
                    }
                    if SendPolicy.skipsPicture(pacerQueueDelay: pacerQueueDelay.load(ordering: .relaxed)) {
                        // Pushback: this picture and the ones that refer to it wait for a keyframe.
                        encoding.withLock { $0.stats.framesHeldBack += 1 }
                        waitingForKeyframe = true
                        askKeyframe()
                        continue
                    }
                }
                // A new mode is a new stream, which starts with an IDR: wait for it. Its encoder
                // may start at its default bitrate: the target is set again.
                if modeChanged.exchange(false, ordering: .relaxed) {
                    waitingForKeyframe = true
                    appliedBitrate = 0
                }
                if muted != !track.isEnabled {
                    muted.toggle()
                    loop.post(.videoNote(muted ? "video muted" : nil))
                    if !muted {
                        waitingForKeyframe = true
                        askKeyframe()
                    }
                }
                if muted { continue }
                let recorderWants = configuration.recorder?.takeKeyframeRequest() == true
                if keyframeWanted.exchange(false, ordering: .relaxed) || recorderWants { askKeyframe() }
                guard let (accessUnit, isKeyframe) = parameterSets.take(data) else {
                    // Nothing decodable yet (no SPS, PPS and IDR): ask for a keyframe.
                    waitingForKeyframe = true
                    askKeyframe()
                    continue
                }
                if waitingForKeyframe && !isKeyframe { continue }
                waitingForKeyframe = false
                let capturedAt = clock.now
                loop.post(.encodedVideo(data: accessUnit, isKeyframe: isKeyframe, capturedAt: capturedAt))
                configuration.recorder?.video(accessUnit, stamp: .captured(capturedAt), isKeyframe: isKeyframe)
                let age = MonotonicClock.now - timestamp
                encoding.withLock { e in
                    e.stats.framesPassedThrough += 1
                    let format = source.format
                    (e.stats.videoWidth, e.stats.videoHeight) = (format.width, format.height)
                    if age >= .zero, age < .seconds(10) { e.stats.videoBudget.add(.capture, age) }
                }
            }
        }
        return false
    }
}
