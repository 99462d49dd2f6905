import Codecs
import Devices
import Foundation
import MediaCore
import Platform
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint

let inCallDeviceLab = ProcessInfo.processInfo.environment["CALLEND_DEVICELAB"] == "1"

/// A call whose media comes from real drivers in the device lab VM (scripts/devicelab): vivid's
/// camera and snd-aloop's loopback card. The lab runs its suites one at a time (--no-parallel).
@Suite(.serialized, .timeLimit(.minutes(2)), .enabled(if: inCallDeviceLab, "runs only inside the device lab VM (scripts/devicelab/test.sh)"))
struct CallDeviceLab {
    /// Alice publishes /dev/video0 and the loopback card's capture side (fed with 440 Hz on its
    /// playback side); Bob decodes both. A mode switch through the control command reaches Bob
    /// as the new size without a new join.
    @Test func aCameraAndAMicrophoneInACallAndAModeSwitch() throws {
        let service = try TestService()
        let camera = try CameraSource(.device(path: "/dev/video0", mode: CameraModeRequest(width: 320, height: 180, frameRate: 15, fourCC: "YUYV")))
        #expect(!camera.offeredModes.isEmpty, "the camera's real modes are known (the ladder's input)")
        let mic = try ALSAAudioDevice { $0.capturePCM = "plughw:CARD=Loopback,DEV=1"; $0.playbackPCM = nil }
        let feeding = try Feeder(pcm: "plughw:CARD=Loopback,DEV=0")
        defer { feeding.stop() }
        let alice = try service.connect("alice", media: Call.Media(videoTrack: LocalVideoTrack(source: camera), audioTrack: LocalAudioTrack(device: mic)), seconds: 100,
                                      mode: .manual)  // the user's mode switch is under test here, not the ladder's
        let renderer = RecordingRenderer(), speaker = RecordingSpeaker()
        let bob = try service.connect("bob", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: try SyntheticAudioDevice(source: .silence)),
                                                               renderers: [renderer], audioPlayout: speaker), seconds: 100)
        defer { alice.disconnect(); bob.disconnect() }
        #expect(eventually(20) { renderer.frames >= 5 }, "bob decodes the camera: \(renderer.frames) frames")
        #expect(renderer.seen.withLock { ($0.width, $0.height) } == (320, 180))
        #expect(eventually(10) { speaker.rms > 500 }, "bob hears the loopback microphone: rms \(speaker.rms)")
        let reply = alice.perform("mode 640x360@15/YUYV")
        #expect(reply.contains(#""ok":true"#), "\(reply)")
        #expect(eventually(20) { renderer.seen.withLock { ($0.width, $0.height) == (640, 360) } }, "bob decodes the new mode: bob sees \(renderer.seen.withLock { $0 }), alice: \(alice.perform("stats")), bob: \(bob.perform("stats"))")
        let refused = alice.perform("mode 4000x4000@240")
        #expect(refused.contains(#""ok":false"#) && refused.contains("Supported modes"), "\(refused)")
    }
}

@Suite(.serialized, .timeLimit(.minutes(3)), .enabled(if: inCallDeviceLab, "runs only inside the device lab VM (scripts/devicelab/test.sh)"))
struct PassThroughDeviceLab {
    /// A camera that delivers H.264 (v4l2loopback, fed OpenH264's access units with an IDR each
    /// second, as a UVC 1.5 camera delivers its own) in an H.264 call: Alice sends what it
    /// delivers without decoding or encoding it (0 encoder calls, every picture passed through),
    /// Bob decodes it, and the decision log shows the camera's controls being asked: no bitrate
    /// control (its modes steer it), and a keyframe when sending starts again after a mute (this
    /// camera has no V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME, so its stream is restarted). Muted,
    /// nothing is sent and Bob is told; unmuted, the pictures come back; switched to the test
    /// pattern, Alice encodes it.
    @Test func aCameraThatEncodesH264IsSentAsItComes() throws {
        guard let (kernel, version) = labKernel() else { return }
        try #require(VideoCodec.h264.unavailableReason == nil, "OpenH264 and libavcodec load in the lab")
        let node = "/dev/video9"
        if !FileManager.default.fileExists(atPath: node) {
            let loaded = runTool("/usr/sbin/modprobe", ["-d", kernel, "-S", version, "v4l2loopback", "video_nr=9", "exclusive_caps=1", "card_label=H.264 camera"])
            try #require(loaded == 0, "modprobe v4l2loopback (scripts/devicelab/setup.sh builds it)")
        }
        // Two seconds of the test pattern at 320x240@15, an IDR each second.
        let encoder = try H264Encoder(configuration: H264EncoderConfiguration(width: 320, height: 240, frameRate: 15, targetBitrate: 300_000))
        var pattern = TestPatternSource(width: 320, height: 240, frameRate: 15)
        var units: [[UInt8]] = []
        for index in 0..<30 {
            if index % 15 == 0 { encoder.requestKeyframe() }
            units += try encoder.encode(pattern.nextFrame(captureTime: .milliseconds(Int64(index) * 66)), at: .milliseconds(Int64(index) * 66)).map(\.data)
        }
        try #require(units.count >= 25, "\(units.count) access units")
        let feeder = try LoopbackH264Camera(path: node, width: 320, height: 240, frameRate: 15, units: units)
        defer { feeder.stop() }
        // The capture side offers H264 once the writer has set it.
        var described: CaptureDevice?
        #expect(eventually(10) {
            described = try? CameraDevices.describe(path: node)
            return described?.formats.contains { $0.fourCC == "H264" } == true
        }, "\(node) offers H264: \(String(describing: described))")
        #expect(described?.deliversEncodedVideo == true)
        // The doctor runs its H.264 mode and says it can be passed through, and how it is steered.
        let doctor = DeviceDoctor.run(seconds: 1.5, cameras: [node], audio: false).cameras.first
        let h264Mode = doctor?.modes.first { $0.mode.hasPrefix("H264 320x240") }
        #expect((h264Mode?.frames ?? 0) >= 5 && h264Mode?.error == nil, "the doctor ran H264 320x240: \(String(describing: doctor))")
        #expect(doctor?.passThrough?.hasPrefix("yes") == true && doctor?.passThrough?.contains("no bitrate control and one H.264 mode") == true
                && doctor?.passThrough?.contains("no IDR came") == false, "\(String(describing: doctor?.passThrough))")
        let camera = try CameraSource(.device(path: node, mode: CameraModeRequest(width: 320, height: 240, frameRate: 15, fourCC: "H264")))
        #expect(camera.passesThrough)
        var sent = Call.Media(videoTrack: LocalVideoTrack(source: camera), audioTrack: nil)
        sent.videoCodecs = [.h264]
        let lines = Mutex<[String]>([])
        let bobEvents = EventRecorder()
        let alice = try service(sent, bobEvents: bobEvents, log: { line in lines.withLock { $0.append(line.text) } })
        let renderer = alice.renderer
        defer { alice.rooms.forEach { $0.disconnect() } }
        #expect(eventually(60) { renderer.frames >= 30 }, "bob decodes the camera's H.264: \(renderer.frames) frames")
        #expect(renderer.seen.withLock { ($0.width, $0.height) } == (320, 240))
        // The stats are the last second's status line.
        var stats = "", passed = 0
        #expect(eventually(10) {
            stats = alice.rooms[0].perform("stats")
            passed = stats.firstMatch(of: /"framesPassedThrough":(\d+)/).flatMap { Int($0.1) } ?? 0
            return passed >= 30
        }, "alice passed the camera's frames through: \(stats)")
        #expect(stats.contains(#""encoderCalls":0"#), "alice's encoder made nothing: \(stats)")
        var decisions: [String] { lines.withLock { $0.filter { $0.contains("encoding:") && $0.contains("camera-") } } }
        #expect(decisions.contains { $0.contains(#""change":"camera-bitrate""#) && $0.contains("steered by its modes") }, "\(decisions)")
        // Muted, nothing is sent and Bob is told; unmuted, the pictures come back from a keyframe.
        #expect(alice.rooms[0].perform("mute video").contains(#""ok":true"#))
        #expect(eventually(10) { bobEvents.contains { $0 == .peerVideoNote(participant: "alice", note: "video muted") } }, "bob is told")
        #expect(alice.rooms[0].perform("unmute video").contains(#""ok":true"#))
        #expect(eventually(10) { bobEvents.contains { $0 == .peerVideoNote(participant: "alice", note: nil) } }, "bob is told it is back")
        let atUnmute = renderer.frames
        #expect(eventually(20) { renderer.frames >= atUnmute + 15 }, "bob decodes the camera again: \(renderer.frames - atUnmute) frames")
        // Unmuted, sending starts from a keyframe asked of the camera (at the call's start it is
        // asked only when the first pictures the sender sees are not an IDR's).
        #expect(eventually(10) { decisions.contains { $0.contains(#""change":"camera-keyframe""#) } }, "the keyframe asked of the camera is in the log: \(decisions)")
        // Switched to another input (the test pattern), the pictures are encoded from then on.
        #expect(alice.rooms[0].perform("camera pattern 256x144@15").contains(#""ok":true"#))
        #expect(eventually(20) { renderer.seen.withLock { ($0.width, $0.height) == (256, 144) } }, "bob decodes the pattern: \(renderer.seen.withLock { $0 })")
        #expect(eventually(10) {
            stats = alice.rooms[0].perform("stats")
            return (stats.firstMatch(of: /"encoderCalls":(\d+)/).flatMap { Int($0.1) } ?? 0) > 0
        }, "alice encodes the pattern: \(stats)")
        print("devicelab: pass-through: bob decoded \(renderer.frames) frames, alice passed \(passed) through, \(feeder.written.load(ordering: .relaxed)) written; \(decisions.count) camera decisions")
    }

    /// Alice (the camera, H.264 only) and Bob (a renderer, H.264 only) in a room of their own.
    private func service(_ media: Call.Media, bobEvents: EventRecorder, log: @escaping @Sendable (LogMessage) -> Void) throws -> (rooms: [Room], renderer: RecordingRenderer, service: TestService) {
        let service = try TestService()
        let renderer = RecordingRenderer()
        let alice = try service.connect("alice", media: media, seconds: 100, log: log)
        var received = Call.Media(videoTrack: nil, audioTrack: nil, renderers: [renderer])
        received.videoCodecs = [.h264]
        let bobRoom = try service.connect("bob", media: received, seconds: 100, delegate: bobEvents)
        return ([alice, bobRoom], renderer, service)
    }
}

/// The lab kernel's module tree and version, which scripts/devicelab/test.sh passes (a test that
/// loads a module mid-run needs them); records an issue and gives nil without them.
func labKernel() -> (tree: String, version: String)? {
    let environment = ProcessInfo.processInfo.environment
    guard let tree = environment["CALLEND_DEVICELAB_KERNEL"], let version = environment["CALLEND_DEVICELAB_KERNEL_VERSION"] else {
        Issue.record("the lab passes CALLEND_DEVICELAB_KERNEL and CALLEND_DEVICELAB_KERNEL_VERSION (scripts/devicelab/test.sh)")
        return nil
    }
    return (tree, version)
}

/// Runs a tool to its end: its exit status (-1 when it could not start).
func runTool(_ tool: String, _ arguments: [String]) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    guard (try? process.run()) != nil else { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
}

/// Plays 440 Hz into a PCM on its own thread until stopped.
final class Feeder: @unchecked Sendable {  // the PCM is used by the feeding thread only
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    private let out: ALSAPCM

    /// Opens the PCM once it is free (the test before may still hold the substream: a feeder
    /// that gave up then fed nothing, and the test waited for a tone that never came).
    init(pcm: String) throws {
        out = try whenFree { try ALSAPCM(name: pcm, direction: .playback) }
        Thread { [self] in
            defer { done.signal() }
            var tone = ToneSource(frequency: 440, amplitude: 0.3)
            while !stopping.load(ordering: .relaxed) { try? out.write(tone.next(samplesPerChannel: 480)) }
        }.start()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        done.wait()
    }
}

/// A speaker that counts what it is given and keeps the last 200 ms for its level.
final class CountingSpeaker: AudioDevice, Sendable {
    let state = Mutex<(blocks: Int, recent: [Int16])>((0, []))
    var captureChannels: Int { 1 }
    func startCapture(_ deliver: @escaping @Sendable ([Int16]) -> Void) throws { throw ConfigurationError("a speaker only") }
    func stopCapture() {}
    func startPlayout() throws {}
    func play(_ samples: [Int16]) { state.withLock { $0 = ($0.blocks + 1, Array(($0.recent + samples).suffix(19_200))) } }
    func stopPlayout() {}
    var route: (capture: String, playback: String) { ("none", "counting") }
    var blocks: Int { state.withLock { $0.blocks } }
    var rms: Double {
        let s = state.withLock { $0.recent }
        return s.isEmpty ? 0 : (s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(s.count)).squareRoot()
    }
}

@Suite(.serialized, .timeLimit(.minutes(2)), .enabled(if: inCallDeviceLab, "runs only inside the device lab VM (scripts/devicelab/test.sh)"))
struct AudioRouteDeviceLab {
    /// A second sound card (snd-dummy, loaded mid-call) ranks first for Alice's microphone and
    /// speaker: both move to it within 1 s; when it is unbound (unplugged) they fall back to the
    /// loopback card within 1 s. Bob receives Alice's audio throughout (the loopback's 440 Hz,
    /// the dummy's silence), Alice plays Bob's tone on the loopback card again after the
    /// fallback, and the call never stops.
    @Test func theRouteFollowsASoundCardPluggedInAndRemoved() throws {
        guard let (kernel, version) = labKernel() else { return }
        let feeding = try Feeder(pcm: "plughw:CARD=Loopback,DEV=0,SUBDEV=0")
        defer { feeding.stop() }
        let device = try whenFree {
            try ALSAAudioDevice {
                $0.capturePCM = nil
                $0.playbackPCM = nil
                $0.preferredCapture = ["Dummy", "plughw:CARD=Loopback,DEV=1,SUBDEV=0"]
                $0.preferredPlayback = ["Dummy", "plughw:CARD=Loopback,DEV=0,SUBDEV=1"]
            }
        }
        #expect(device.route.capture == "plughw:CARD=Loopback,DEV=1,SUBDEV=0", "no Dummy yet: \(device.route)")
        let service = try TestService()
        let alice = try service.connect("alice", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: device), audioPlayout: device), seconds: 100)
        let speaker = CountingSpeaker()
        let bob = try service.connect("bob", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: try SyntheticAudioDevice(source: .tone)),
                                                               audioPlayout: speaker), seconds: 100)
        defer { alice.disconnect(); bob.disconnect() }
        #expect(eventually(20) { speaker.rms > 500 }, "bob hears the loopback microphone: rms \(speaker.rms)")

        // Plugged in.
        #expect(runTool("/usr/sbin/modprobe", ["-d", kernel, "-S", version, "snd-dummy"]) == 0, "modprobe snd-dummy")
        let plugged = Date()
        #expect(eventually(3) { device.route.capture.contains("CARD=Dummy") && device.route.playback.contains("CARD=Dummy") }, "\(device.route)")
        let moved = Date().timeIntervalSince(plugged)
        #expect(moved <= 1, "the route moved \(moved) s after the card appeared")
        let atMove = speaker.blocks
        #expect(eventually(5) { speaker.blocks >= atMove + 50 }, "audio keeps reaching bob from the dummy card: \(speaker.blocks - atMove) blocks")

        // Unplugged: the kernel disconnects the card at once.
        try "snd_dummy.0".write(toFile: "/sys/bus/platform/drivers/snd_dummy/unbind", atomically: false, encoding: .utf8)
        let removed = Date()
        #expect(eventually(3) { device.route.capture.contains("Loopback") && device.route.playback.contains("Loopback") }, "\(device.route)")
        let back = Date().timeIntervalSince(removed)
        #expect(back <= 1, "the route fell back \(back) s after the card went")
        #expect(eventually(10) { speaker.rms > 500 }, "bob hears the loopback microphone again: rms \(speaker.rms)")
        // The other way: what Alice plays (Bob's tone) comes out of the loopback card again.
        let heard = try whenFree { try ALSAPCM(name: "plughw:CARD=Loopback,DEV=1,SUBDEV=1", direction: .capture) }
        var played: [Int16] = []
        for _ in 0..<50 { played += try heard.read(frames: 960) }
        let tail = played.suffix(24_000)
        let level = (tail.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(tail.count)).squareRoot()
        #expect(level > 500, "alice plays bob's tone on the loopback card again: rms \(level)")
        #expect(device.routeChanges.count == 4, "capture and playback, each way: \(device.routeChanges)")
        let stats = alice.perform("stats")
        #expect(stats.contains(#""ok":true"#), "the call goes on: \(stats)")
        print("devicelab: route moved to Dummy in \(Int(moved * 1000)) ms, back to Loopback in \(Int(back * 1000)) ms")
    }
}

/// Opens `make` once the PCMs it needs are free: a call of the test before may still be
/// letting go of the loopback card's substreams when the next test starts.
func whenFree<T>(_ seconds: Double = 10, _ make: () throws -> T) throws -> T {
    var made: T?
    try eventually(seconds) {
        do { made = try make() } catch where "\(error)".contains("busy") { return false }
        return true
    }
    if let made { return made }
    return try make()  // still busy: the error says so
}

@Suite(.serialized, .timeLimit(.minutes(3)), .enabled(if: inCallDeviceLab, "runs only inside the device lab VM (scripts/devicelab/test.sh)"))
struct EchoDeviceLab {
    /// Speech (espeak-ng) played through the device's speaker into snd-aloop, whose capture side
    /// is the same device's microphone: a real ALSA echo path (the card's buffers both ways, at
    /// full level). Without voice processing the microphone hears it all; with `.voiceChat`'s
    /// echo canceller, what it delivers is that much quieter (the ERLE), and the delay is found.
    @Test func theEchoCancellerRemovesARealALSAEcho() throws {
        let dir = try ScratchFolder()
        defer { withExtendedLifetime(dir) {} }
        let speech = dir.path + "/speech.wav", tts = dir.path + "/tts.wav"
        let text = "The rooftop camera has been running since Tuesday. The link went down twice during the storm, but the call came back both times within a second. "
            + "Tomorrow we will move the antenna to the north side of the building and check the signal again."
        let steps: [(String, [String])] = [
            ("/usr/bin/espeak-ng", ["-v", "en-us", "-s", "165", "-w", tts, text]),
            ("/usr/bin/sox", [tts, "-r", "48000", "-c", "2", "-b", "16", speech, "norm", "-6"]),
        ]
        for (tool, arguments) in steps {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = arguments
            try process.run()
            process.waitUntilExit()
            try #require(process.terminationStatus == 0, "\(tool) failed")
        }
        let reader = try WAVReader(path: speech)
        var blocks: [[Int16]] = []
        while let block = reader.read(samplesPerChannel: AudioBlock.frames), block.count == AudioBlock.frames * 2 { blocks.append(block) }
        try #require(blocks.count > 300, "\(blocks.count) blocks of speech")
        typealias Run = (level: Double, stats: VoiceStats?, seconds: [Int], xruns: (Int, Int), cushion: Int)
        func measure(voice: Bool) throws -> Run {
            let device = try whenFree {
                try ALSAAudioDevice {
                    $0.capturePCM = "plughw:CARD=Loopback,DEV=1,SUBDEV=1"
                    $0.playbackPCM = "plughw:CARD=Loopback,DEV=0,SUBDEV=1"
                    // The VM emulates its CPU: its stalls underrun the card (which then plays silence
                    // the canceller never saw), and the playback cushion grows into this 160 ms
                    // buffer until it rides over them (100 ms: the cushion reached its cap of 90
                    // and the VM still underran it 6-12 times in some runs).
                    $0.periods = 16
                    if voice {
                        var processing = VoiceProcessing()
                        (processing.noiseSuppression, processing.gainControl, processing.highPass) = (0, false, false)
                        $0.mode = .voice(processing)
                    }
                }
            }
            let captured = Mutex<[Int16]>([])
            try device.startCapture { block in captured.withLock { $0 += block } }
            try device.startPlayout()
            // The far end arrives at its own pace, as from a call: a block every block's length.
            let start = ContinuousClock.now
            for (i, block) in blocks.enumerated() {
                device.play(block)
                let due = start + AudioBlock.period * (i + 1)
                if due > .now { Thread.sleep(forTimeInterval: (due - .now).inSeconds) }
            }
            let xruns = device.xruns, cushion = device.playbackCushion
            device.stopPlayout()
            device.stopCapture()
            // The last 40 % of the speech: converged, both runs over the same words.
            let all = captured.withLock { $0 }
            let half = all.dropFirst(all.count * 6 / 10)
            let power = half.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(1, half.count))
            var seconds: [Int] = []
            for i in stride(from: 0, to: all.count - 96_000, by: 96_000) {
                let p: Double = all[i..<i + 96_000].reduce(0.0) { $0 + Double($1) * Double($1) } / 96_000
                seconds.append(Int(10 * log10(max(1e-3, p) / (32768.0 * 32768.0))))
            }
            return (10 * log10(max(power, 1e-3) / (32768.0 * 32768.0)), device.voiceStats, seconds, xruns, cushion)
        }
        let without = try measure(voice: false)
        let echo = without.level
        #expect(echo > -40, "without processing the microphone hears the speaker: \(echo) dBFS")
        // The verdict is on a run the machine did not disturb. The VM emulates its CPU, and on a
        // busy host its stalls underrun the card (3-42 times in these 14 s), each a jump in the
        // echo's delay that the canceller must find again: 26-49 dB over fourteen runs, 4-16 dB
        // in a few on a loaded CI machine. How it re-converges after an xrun is judged on inputs
        // the test controls (VoiceProcessorTests.theCancellerReconvergesAfterEveryXrun); here a
        // run that saw underruns and fell short is run again, up to three in all, and a run that
        // saw none must meet the figure.
        var tries: [Run] = []
        for _ in 0..<3 {
            let run = try measure(voice: true)
            tries.append(run)
            let met = echo - run.level >= 20 && run.stats?.measuredDelayMilliseconds != nil
            if met || (run.xruns.0 == 0 && run.xruns.1 == 0) { break }
        }
        let with = tries.last!
        let residual = with.level, stats = with.stats
        let triesSeen = tries.map { "ERLE \(Int(echo - $0.level)) dB, xruns \($0.xruns)" }
        #expect(echo - residual >= 20, "ERLE \(echo - residual) dB (\(echo) -> \(residual) dBFS), \(String(describing: stats)); tries: \(triesSeen)")
        #expect(stats?.measuredDelayMilliseconds != nil, "the delay is found: \(String(describing: stats))")
        print("devicelab: echo through snd-aloop: \(Int(echo)) dBFS at the microphone, \(Int(residual)) dBFS after the canceller: "
              + "ERLE \(Int(echo - residual)) dB; delay found \(stats?.measuredDelayMilliseconds ?? -1) ms, the library's ERLE \(stats?.erleDB ?? -1) dB; "
              + "dBFS per second without \(without.seconds), with \(with.seconds); xruns \(without.xruns), \(with.xruns), restarts seen \(stats?.restarts ?? -1); "
              + "playback cushion \(without.cushion), \(with.cushion) blocks; tries \(triesSeen)")
    }
}

/// A renderer that keeps when each picture came and how bright it was.
final class TimelineRenderer: VideoRenderer, Sendable {
    let pictures = Mutex<[(at: Date, luma: Double)]>([])
    func render(_ frame: VideoFrame) {
        let samples = stride(from: 0, to: frame.y.count, by: 7)
        let luma = Double(samples.reduce(0) { $0 + Int(frame.y[$1]) }) / Double(max(1, samples.underestimatedCount))
        pictures.withLock { $0.append((Date(), luma)) }
    }
    var last: (at: Date, luma: Double)? { pictures.withLock { $0.last } }
    /// When the first picture brighter than black came after `time`.
    func firstBright(after time: Date) -> Date? { pictures.withLock { $0.first { $0.at > time && $0.luma > 30 }?.at } }
}

@Suite(.serialized, .timeLimit(.minutes(2)), .enabled(if: inCallDeviceLab, "runs only inside the device lab VM (scripts/devicelab/test.sh)"))
struct CameraReturnDeviceLab {
    static let stableName = "/dev/v4l/by-id/usb-callend_Lab_Camera-video-index0"
    static let vividOptions = ["n_devs=1", "node_types=0x1", "num_inputs=1", "input_types=0x0"]

    /// Alice's camera is unbound mid-call (pulled out), then its driver is removed and loaded
    /// again with the capture node at /dev/video3 (plugged into another port), the by-id link
    /// following it as udev's would. The call goes on with black pictures and the peer is told
    /// (RTCP SDES NOTE); Alice reopens the camera by its stable name and Bob sees its picture
    /// again within 2 s of the device.
    @Test func aCameraUnpluggedMidCallComesBackByItsStableName() throws {
        guard let (kernel, version) = labKernel() else { return }
        let files = FileManager.default
        try files.createDirectory(atPath: "/dev/v4l/by-id", withIntermediateDirectories: true)
        try? files.removeItem(atPath: Self.stableName)
        try files.createSymbolicLink(atPath: Self.stableName, withDestinationPath: "../../video0")
        // The lab as the next test expects it: vivid's capture node at /dev/video0, no link.
        defer {
            try? files.removeItem(atPath: Self.stableName)
            if !files.fileExists(atPath: "/dev/video0") {
                _ = eventually(5) { runTool("/usr/sbin/rmmod", ["vivid"]) == 0 }
                _ = runTool("/usr/sbin/modprobe", ["-d", kernel, "-S", version, "vivid"] + Self.vividOptions)
                _ = eventually(5) { files.fileExists(atPath: "/dev/video0") }
            }
        }

        let service = try TestService()
        let camera = try CameraSource(.device(path: "/dev/video0", mode: CameraModeRequest(width: 320, height: 180, frameRate: 15, fourCC: "YUYV")))
        let aliceEvents = EventRecorder(), bobEvents = EventRecorder()
        let alice = try service.connect("alice", media: Call.Media(videoTrack: LocalVideoTrack(source: camera), audioTrack: nil), seconds: 100,
                                        delegate: aliceEvents, mode: .manual)
        let renderer = TimelineRenderer()
        let bob = try service.connect("bob", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: try SyntheticAudioDevice(source: .silence)),
                                                               renderers: [renderer]), seconds: 100, delegate: bobEvents)
        var ended = false
        func end() {
            guard !ended else { return }
            ended = true
            alice.disconnect()
            bob.disconnect()
            camera.stop()
        }
        defer { end() }
        #expect(eventually(20) { renderer.pictures.withLock { $0.filter { $0.luma > 30 }.count } >= 5 }, "bob sees vivid's colour bars: \(String(describing: renderer.last))")

        // Pulled out: the kernel disconnects the device at once; udev would remove the link.
        try "vivid.0".write(toFile: "/sys/bus/platform/drivers/vivid/unbind", atomically: false, encoding: .utf8)
        let unplugged = Date()
        try files.removeItem(atPath: Self.stableName)
        #expect(eventually(5) { camera.lostReason != nil }, "alice's camera reports the loss")
        #expect(eventually(5) { bobEvents.contains { $0 == .peerVideoNote(participant: "alice", note: "camera lost") } }, "bob is told")
        let told = Date().timeIntervalSince(unplugged)
        #expect(eventually(5) { (renderer.last?.luma ?? 99) < 20 && renderer.last!.at > unplugged }, "bob sees black pictures: \(String(describing: renderer.last))")
        #expect(eventually(5) { aliceEvents.contains { if case .camera(.lost) = $0 { return true }; return false } }, "alice is told")

        // Plugged in elsewhere: the driver comes back with its capture node at /dev/video3
        // (every handle on the old device is closed, or the module could not be removed).
        #expect(eventually(5) { runTool("/usr/sbin/rmmod", ["vivid"]) == 0 }, "rmmod vivid")
        #expect(runTool("/usr/sbin/modprobe", ["-d", kernel, "-S", version, "vivid"] + Self.vividOptions + ["vid_cap_nr=3"]) == 0, "modprobe vivid")
        #expect(eventually(5) { files.fileExists(atPath: "/dev/video3") })
        try files.createSymbolicLink(atPath: Self.stableName, withDestinationPath: "../../video3")
        let plugged = Date()
        #expect(eventually(10) { renderer.firstBright(after: plugged) != nil }, "bob sees the camera again: \(String(describing: renderer.last))")
        let back = renderer.firstBright(after: plugged).map { $0.timeIntervalSince(plugged) } ?? .infinity
        #expect(back <= 2, "the picture came back \(back) s after the device")
        #expect(eventually(5) { bobEvents.contains { $0 == .peerVideoNote(participant: "alice", note: nil) } }, "bob is told the camera is back")
        #expect(eventually(5) { aliceEvents.contains { if case .camera(.back) = $0 { return true }; return false } }, "alice is told the camera is back")
        let events = camera.deviceEvents
        #expect(events.count == 2, "\(events)")
        if case .back(let path, _)? = events.last { #expect(path == "/dev/video3", "reopened by its stable name: \(events)") } else { Issue.record("no return: \(events)") }

        // Bob never stopped getting pictures: the longest wait between two, through it all.
        let times = renderer.pictures.withLock { $0.map(\.at) }.filter { $0 > unplugged.addingTimeInterval(-1) }
        let longest = zip(times, times.dropFirst()).map { $1.timeIntervalSince($0) }.max() ?? .infinity
        #expect(longest < 1, "bob's longest wait for a picture: \(longest) s")
        let stats = alice.perform("stats")
        #expect(stats.contains(#""ok":true"#), "the call goes on: \(stats)")
        end()
        print("devicelab: camera unplugged: peer told in \(Int(told * 1000)) ms; back at /dev/video3 \(Int(back * 1000)) ms after the device; bob's longest wait for a picture \(Int(longest * 1000)) ms")
    }
}
