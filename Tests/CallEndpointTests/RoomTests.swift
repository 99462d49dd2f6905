import Codecs
import MediaCore
import Devices
import Foundation
import Platform
import Signaling
import SignalingService
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint

/// A renderer that keeps what a test needs to see: frames, the last size, the last mean luma.
final class RecordingRenderer: VideoRenderer, Sendable {
    let seen = Mutex<(frames: Int, width: Int, height: Int, luma: Double)>((0, 0, 0, 0))
    func render(_ frame: VideoFrame) {
        // Every 7th sample is enough for a mean level, and costs a debug build a seventh.
        let samples = stride(from: 0, to: frame.y.count, by: 7)
        let luma = Double(samples.reduce(0) { $0 + Int(frame.y[$1]) }) / Double(max(1, samples.underestimatedCount))
        seen.withLock { $0 = ($0.frames + 1, frame.width, frame.height, luma) }
    }
    var frames: Int { seen.withLock { $0.frames } }
}

/// A speaker that keeps the level of the last 100 ms it was given.
final class RecordingSpeaker: AudioDevice, Sendable {
    let recent = Mutex<[Int16]>([])
    var captureChannels: Int { 1 }
    func startCapture(_ deliver: @escaping @Sendable ([Int16]) -> Void) throws { throw ConfigurationError("a speaker only") }
    func stopCapture() {}
    func startPlayout() throws {}
    func play(_ samples: [Int16]) { recent.withLock { $0 = Array(($0 + samples).suffix(9600)) } }
    func stopPlayout() {}
    var route: (capture: String, playback: String) { ("none", "recording") }
    var rms: Double {
        let s = recent.withLock { $0 }
        return s.isEmpty ? 0 : (s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(s.count)).squareRoot()
    }
}

final class EventRecorder: RoomDelegate, Sendable {
    let events = Mutex<[RoomEvent]>([])
    func room(_ room: Room, didReceive event: RoomEvent) { events.withLock { $0.append(event) } }
    func contains(_ predicate: (RoomEvent) -> Bool) -> Bool { events.withLock { $0.contains(where: predicate) } }
}

/// A signaling service in this process and tokens for it.
final class TestService {
    let secret = TokenSecret.random()
    let server: SignalingServer
    /// The delegates that wait for each join (a room holds its delegate weakly).
    private let waiters = Mutex<[JoinWaiter]>([])
    init(maxParticipants: Int = 2) throws {
        var configuration = SignalingServerConfiguration(host: "127.0.0.1", port: 0, secret: secret)
        configuration.limits.maxParticipantsPerRoom = maxParticipants
        server = try SignalingServer(configuration: configuration)
        server.start()
    }
    deinit { server.stop() }

    func options(_ who: String, room: String = "lab", mode: VideoEncodingMode = .auto) throws -> ConnectOptions {
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: who, room: room, issuedAt: now, expires: now + 600))
        return try ConnectOptions(token: token) { $0.roomName = room; $0.videoEncodingMode = mode }
    }

    /// Joins and returns once the service has said `joined`, so that the order of two connects
    /// is the order of the joins (the participant who joins second offers).
    func connect(_ who: String, media: Call.Media, seconds: Int, delegate: (any RoomDelegate)? = nil, mode: VideoEncodingMode = .auto,
                 log: (@Sendable (LogMessage) -> Void)? = nil) throws -> Room {
        let waiter = JoinWaiter(forwardingTo: delegate)
        waiters.withLock { $0.append(waiter) }
        let printing = Self.log(who)
        var logged: @Sendable (LogMessage) -> Void = printing
        if let log { logged = { line in log(line); printing(line) } }
        let room = try Room.connect(options: try options(who, mode: mode), server: ("127.0.0.1", server.port), media: media, duration: .seconds(seconds),
                                    delegate: waiter, log: logged)
        if !waiter.joined.wait(timeout: 30) { Issue.record("\(who) did not join within 30 s") }
        return room
    }
}

extension TestService {
    /// CALLEND_TEST_LOG=1 prints each call's log lines with the time, to see where a slow test spends it.
    static func log(_ who: String) -> @Sendable (LogMessage) -> Void {
        guard ProcessInfo.processInfo.environment["CALLEND_TEST_LOG"] == "1" else { return { _ in } }
        return { line in print(String(format: "%.3f %@: %@", Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 1000), who, line.text)) }
    }
}

/// Signals when the room is joined, and passes every event on.
final class JoinWaiter: RoomDelegate, Sendable {
    let joined = DispatchSemaphore(value: 0)
    private let next: (any RoomDelegate)?
    init(forwardingTo next: (any RoomDelegate)?) { self.next = next }
    func room(_ room: Room, didReceive event: RoomEvent) {
        if case .connected(_, rejoined: false) = event { joined.signal() }
        next?.room(room, didReceive: event)
    }
}

extension DispatchSemaphore {
    /// Waits up to `seconds`; false when it timed out.
    func wait(timeout seconds: Double) -> Bool { wait(timeout: .now() + seconds) == .success }
}

@Suite(.serialized) struct RoomTests {
    /// Room events in order, and every control command on a running call: the camera mode
    /// changes what the peer decodes, mute sends black and silence, a bad command or a camera
    /// that does not exist is refused while the call goes on, and leave ends it.
    @Test func eventsSwitchingAndMutingDuringACall() throws {
        let service = try TestService()
        let renderer = RecordingRenderer(), speaker = RecordingSpeaker(), events = EventRecorder()
        let alice = try service.connect("alice", media: try Call.Media.synthetic(width: 320, height: 240), seconds: 30, delegate: events)
        var bobMedia = try Call.Media.synthetic(width: 320, height: 240)
        bobMedia.renderers = [renderer]
        bobMedia.audioPlayout = speaker
        let bob = try service.connect("bob", media: bobMedia, seconds: 30)
        defer { alice.disconnect(); bob.disconnect() }

        #expect(eventually(5) { renderer.frames > 10 && speaker.rms > 1000 }, "bob gets alice's video and audio")
        #expect(renderer.seen.withLock { ($0.width, $0.height) } == (320, 240))

        // The camera mode: the peer decodes the new size; pictures keep coming.
        let switched = alice.perform("camera pattern 160x120@15")
        #expect(switched.contains(#""ok":true"#) && switched.contains(#""size":"160x120""#), "\(switched)")
        #expect(eventually(3) { renderer.seen.withLock { ($0.width, $0.height) == (160, 120) } }, "\(renderer.seen.withLock { $0 }) \(alice.perform("stats"))")
        let before = renderer.frames
        #expect(eventually(2) { renderer.frames >= before + 10 }, "video goes on after the switch")

        // Mute: black pictures and silence reach the peer; unmute brings them back.
        #expect(alice.perform("mute").contains(#""ok":true"#))
        #expect(eventually(3) { renderer.seen.withLock { $0.luma } < 25 && speaker.rms < 50 }, "muted: luma \(renderer.seen.withLock { $0.luma }), rms \(speaker.rms)")
        #expect(alice.perform("unmute audio").contains(#""muted":false"#))
        #expect(eventually(3) { speaker.rms > 1000 })
        #expect(renderer.seen.withLock { $0.luma } < 25, "video stays muted")
        #expect(alice.perform("unmute video").contains(#""ok":true"#))
        #expect(eventually(3) { renderer.seen.withLock { $0.luma } > 40 })

        // Stats, and refusals that leave the call as it was.
        let stats = alice.perform("stats")
        #expect(stats.contains(#""status":{"#) && stats.contains(#""sentResolution":"160x120""#), "\(stats)")
        let unknown = alice.perform("fly away")
        #expect(unknown.contains(#""ok":false"#) && unknown.contains("unknown command"), "\(unknown)")
        let noCamera = alice.perform("camera /dev/callend-no-such-camera")
        #expect(noCamera.contains(#""ok":false"#) && noCamera.contains(#""input":"pattern 160x120@15""#), "\(noCamera)")
        let noALSA = alice.perform("mic default")
        #expect(noALSA.contains(#""ok":false"#) && noALSA.contains("--mic"), "\(noALSA)")
        let framesNow = renderer.frames
        #expect(eventually(2) { renderer.frames > framesNow + 10 }, "the refusals did not stop the video")

        // Leave: alice ends, and her events tell the story in order.
        #expect(alice.perform("leave").contains(#""ok":true"#))
        let summary = try alice.wait()
        #expect(summary.endReason == "stopped")
        let names = events.events.withLock { $0 }.map { event -> String in
            switch event {
            case .connected: "connected"
            case .participantJoined: "joined"
            case .trackSubscribed(_, let kind): "subscribed-\(kind)"
            case .stats: "stats"
            case .disconnected: "disconnected"
            case .participantLeft: "left"
            case .reconnecting: "reconnecting"
            case .camera: "camera"
            case .peerVideoNote: "peer-video-note"
            }
        }
        #expect(names.first == "connected" && names.last == "disconnected", "\(names)")
        #expect(names.contains("joined") && names.contains("subscribed-video") && names.contains("subscribed-audio") && names.contains("stats"), "\(names)")
        let firstJoin = try #require(names.firstIndex(of: "joined")), firstSubscribe = try #require(names.firstIndex(of: "subscribed-video"))
        #expect(firstJoin < firstSubscribe)
    }

    /// The event stream is an async sequence that ends when the room does.
    @Test func eventStreamEndsWithTheCall() async throws {
        let service = try TestService()
        // Both join at once (no await between them: a busy task pool could delay a sleep past the call).
        let alice = try service.connect("alice", media: try Call.Media.synthetic(width: 160, height: 120), seconds: 6)
        let bob = try service.connect("bob", media: try Call.Media.synthetic(width: 160, height: 120), seconds: 6)
        var seen: [RoomEvent] = []
        for await event in alice.events { seen.append(event) }
        #expect(seen.contains { if case .trackSubscribed(participant: "bob", kind: .video) = $0 { return true }; return false }, "\(seen)")
        if case .disconnected = seen.last {} else { Issue.record("last event: \(String(describing: seen.last))") }
        bob.disconnect()
    }

    /// Microphone and speaker switch between ALSA PCMs during the call (alsa-lib's file plugin:
    /// real snd_pcm capture and playback). Alice's microphone plays 440 Hz, then 880 Hz; Bob's
    /// speaker writes to one file, then another: each file holds what was played while it was the speaker.
    @Test func microphoneAndSpeakerSwitchDuringACall() throws {
        #expect(ALSATestConfiguration.ready)
        let dir = try ScratchFolder()
        defer { withExtendedLifetime(dir) {} }  // the folder (and the PCMs' files) outlive the call
        func toneFile(_ name: String, _ frequency: Double) throws -> String {
            let path = "\(dir.path)/\(name).raw"
            let samples = (0..<(48_000 * 30)).map { Int16(8000 * sin(2 * Double.pi * frequency * Double($0) / 48_000)) }
            try Data(littleEndianBytes(samples)).write(to: URL(fileURLWithPath: path))
            return "callend_test_in:FILE=\(path)"
        }
        let low = try toneFile("low", 440), high = try toneFile("high", 880)
        let (out1, out2) = ("\(dir.path)/out1.raw", "\(dir.path)/out2.raw")
        let service = try TestService()
        let mic = try ALSAAudioDevice { $0.capturePCM = low; $0.playbackPCM = nil }
        let alice = try service.connect("alice", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: mic)), seconds: 30)
        let speaker = try ALSAAudioDevice { $0.capturePCM = nil; $0.playbackPCM = "callend_test_out:FILE=\(out1)" }
        let bob = try service.connect("bob", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: try SyntheticAudioDevice(source: .silence)),
                                                               audioPlayout: speaker), seconds: 30)
        defer { alice.disconnect(); bob.disconnect() }
        #expect(eventually(5) { fileSize(out1) > 48_000 * 2 }, "a second of audio reaches the first speaker")
        let speakerReply = bob.perform("speaker callend_test_out:FILE=\(out2)")
        #expect(speakerReply.contains(#""ok":true"#) && speakerReply.contains("out2.raw"), "\(speakerReply)")
        #expect(eventually(5) { fileSize(out2) > 48_000 * 2 * 2 })
        let micReply = alice.perform("mic \(high)")
        #expect(micReply.contains(#""ok":true"#) && micReply.contains("high.raw"), "\(micReply)")
        let bad = alice.perform("mic callend-no-such-pcm")
        #expect(bad.contains(#""ok":false"#) && bad.contains("high.raw"), "a failed switch keeps the microphone: \(bad)")
        let atSwitch = fileSize(out2)
        #expect(eventually(20) { fileSize(out2) > atSwitch + 48_000 * 2 * 2 * 2 }, "two seconds played after the switch")
        alice.disconnect()
        _ = try alice.wait()
        bob.disconnect()
        _ = try bob.wait()

        let first = stereoToMono(try Data(contentsOf: URL(fileURLWithPath: out1)))
        let second = stereoToMono(try Data(contentsOf: URL(fileURLWithPath: out2)))
        let firstTail = Array(first.suffix(24_000))
        #expect(goertzel(firstTail, 440) > 20 * goertzel(firstTail, 880), "the first speaker played the 440 Hz microphone")
        let secondHead = Array(second.prefix(48_000)), secondTail = Array(second.suffix(48_000).prefix(24_000))
        #expect(goertzel(secondHead, 440) > 20 * goertzel(secondHead, 880), "the second speaker began with 440 Hz")
        #expect(goertzel(secondTail, 880) > 20 * goertzel(secondTail, 440), "and played 880 Hz after the microphone switch")
    }

    /// A 4-channel capture (a microphone array through alsa-lib's file plugin) whose channels
    /// carry 300, 500, 700 and 900 Hz: the microphone is channel 3, so the peer hears 700 Hz;
    /// with --voice on the same device its voice processing runs in the call and reports.
    @Test(arguments: [false, true])
    func theMicrophoneIsTheChannelPicked(voice: Bool) throws {
        #expect(ALSATestConfiguration.ready)
        let dir = try ScratchFolder()
        defer { withExtendedLifetime(dir) {} }  // the folder (and the PCMs' files) outlive the call
        let frequencies = [300.0, 500, 700, 900]
        var samples: [Int16] = []
        samples.reserveCapacity(48_000 * 30 * 4)
        for i in 0..<(48_000 * 30) {
            for f in frequencies { samples.append(Int16(6000 * sin(2 * Double.pi * f * Double(i) / 48_000))) }
        }
        try Data(littleEndianBytes(samples)).write(to: URL(fileURLWithPath: "\(dir.path)/array.raw"))
        let out = "\(dir.path)/out.raw", echo = "\(dir.path)/speaker.raw"
        let service = try TestService()
        let mic = try ALSAAudioDevice {
            $0.capturePCM = "callend_test_in:FILE=\(dir.path)/array.raw"
            $0.playbackPCM = voice ? "callend_test_out:FILE=\(echo)" : nil
            $0.captureChannels = 4
            $0.microphone = .channel(3)
            if voice {
                var processing = VoiceProcessing.voiceChat
                processing.noiseSuppression = 0  // a steady tone is what noise suppression removes
                $0.mode = .voice(processing)
            }
        }
        #expect(mic.captureChannels == 1)
        let alice = try service.connect("alice", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: mic),
                                                                   audioPlayout: voice ? mic : nil), seconds: 30)
        let speaker = try ALSAAudioDevice { $0.capturePCM = nil; $0.playbackPCM = "callend_test_out:FILE=\(out)" }
        let bob = try service.connect("bob", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: try SyntheticAudioDevice(source: .tone)),
                                                               audioPlayout: speaker), seconds: 30)
        defer { alice.disconnect(); bob.disconnect() }
        #expect(eventually(10) { fileSize(out) > 48_000 * 2 * 2 * 3 }, "three seconds of audio reach the speaker")
        if voice {
            #expect(eventually(10) { (mic.voiceStats?.capturedChunks ?? 0) > 200 && (mic.voiceStats?.renderedChunks ?? 0) > 200 },
                    "voice processing runs on both sides: \(String(describing: mic.voiceStats))")
            #expect(mic.voiceStats?.errors == 0)
        }
        alice.disconnect()
        _ = try alice.wait()
        bob.disconnect()
        _ = try bob.wait()
        let heard = Array(stereoToMono(try Data(contentsOf: URL(fileURLWithPath: out))).suffix(48_000).prefix(24_000))
        let powers = frequencies.map { goertzel(heard, $0) }
        #expect(powers[2] > 20 * (powers[0] + powers[1] + powers[3]), "powers at 300/500/700/900 Hz: \(powers)")
    }

    @Test func microphoneSelectionsAreCheckedAndApplied() throws {
        #expect(MicrophoneSelection.channel(2).apply([1, 2, 3, 4, 5, 6], channels: 3) == [2, 5])
        #expect(MicrophoneSelection.mix([0.5, 0.5]).apply([100, 300, -100, 100], channels: 2) == [200, 0])
        #expect(MicrophoneSelection.all.apply([1, 2], channels: 2) == [1, 2])
        #expect(throws: ConfigurationError.self) { try MicrophoneSelection.channel(5).validate(channels: 4) }
        #expect(throws: ConfigurationError.self) { try MicrophoneSelection.channel(0).validate(channels: 4) }
        #expect(throws: ConfigurationError.self) { try MicrophoneSelection.mix([1, 0]).validate(channels: 4) }
        #expect(throws: ConfigurationError.self) { try MicrophoneSelection.mix([0, 0]).validate(channels: 2) }
        #expect(throws: ConfigurationError.self) { try MicrophoneSelection.mix([.nan, 1]).validate(channels: 2) }
        #expect(throws: ConfigurationError.self, "4 channels cannot be sent as they are") { try MicrophoneSelection.all.validate(channels: 4) }
        #expect(throws: ConfigurationError.self) { try ALSAAudioDevice { $0.capturePCM = nil; $0.playbackPCM = nil; $0.captureChannels = 2; $0.microphone = .channel(3) } }
    }

    @Test func controlCommandsParseAndRefuseBadInput() throws {
        #expect(try ControlCommand(parsing: "mute") == .mute(nil))
        #expect(try ControlCommand(parsing: "  unmute   VIDEO ") == .unmute(.video))
        #expect(try ControlCommand(parsing: "camera /dev/video2 1280x720@30/MJPG")
                == .camera(.device(path: "/dev/video2", mode: CameraModeRequest(width: 1280, height: 720, frameRate: 30, fourCC: "MJPG"))))
        #expect(try ControlCommand(parsing: "camera /dev/video0") == .camera(.device(path: "/dev/video0", mode: nil)))
        #expect(try ControlCommand(parsing: "camera clip.y4m") == .camera(.file(path: "clip.y4m")))
        #expect(try ControlCommand(parsing: "mode 640x360") == .mode(CameraModeRequest(width: 640, height: 360)))
        #expect(try ControlCommand(parsing: "speaker plughw:CARD=Loopback,DEV=0") == .speaker("plughw:CARD=Loopback,DEV=0"))
        for bad in ["", "dance", "mute sideways", "mute audio video", "mode 640", "mode 640x480@0", "mode 99999x480", "mode 640x480/YUY",
                    "camera", "camera a b c", "camera clip.y4m 640x480", "mic", "speaker a b", "stats now", "leave please"] {
            #expect(throws: ConfigurationError.self, "'\(bad)'") { try ControlCommand(parsing: bad) }
        }
    }

    /// The control socket answers each line with one reply line, handles several clients, refuses
    /// an overlong line, refuses a second socket on a live path, and removes its file when stopped.
    @Test func controlSocketAnswersLines() throws {
        let dir = try ScratchFolder()
        defer { withExtendedLifetime(dir) {} }  // the folder (and the PCMs' files) outlive the call
        let path = dir.path + "/control.sock"
        let socket = try ControlSocket(path: path) { "reply to \($0)" }
        #expect(throws: ConfigurationError.self) { try ControlSocket(path: path) { $0 } }
        let client = try UnixClient(path: path)
        client.send("stats\n\nmute audio\n")
        #expect(client.readLines(2) == ["reply to stats", "reply to mute audio"])
        let other = try UnixClient(path: path)
        other.send("help\n")
        #expect(other.readLines(1) == ["reply to help"])
        other.send(String(repeating: "x", count: 5000))
        #expect(other.readLines(1).first?.contains("longer than 4096") == true)
        socket.stop()
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(throws: ConfigurationError.self) { try ControlSocket(path: String(repeating: "p", count: 200)) { $0 } }
    }
}

func fileSize(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }

/// Left channel of 16-bit little-endian stereo.
func stereoToMono(_ data: Data) -> [Int16] {
    let bytes = [UInt8](data)
    return stride(from: 0, to: bytes.count - 3, by: 4).map { Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8) }
}

/// Signal power at one frequency (Goertzel).
func goertzel(_ samples: [Int16], _ frequency: Double, rate: Double = 48_000) -> Double {
    let coefficient = 2 * cos(2 * Double.pi * frequency / rate)
    var (s1, s2) = (0.0, 0.0)
    for sample in samples {
        let s = Double(sample) + coefficient * s1 - s2
        (s2, s1) = (s1, s)
    }
    return s1 * s1 + s2 * s2 - coefficient * s1 * s2
}

