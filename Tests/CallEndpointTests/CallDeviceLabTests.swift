import Devices
import Foundation
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
        let feeding = Feeder(pcm: "plughw:CARD=Loopback,DEV=0")
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

/// Plays 440 Hz into a PCM on its own thread until stopped.
final class Feeder: @unchecked Sendable {  // the PCM is used by the feeding thread only
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init(pcm: String) {
        Thread { [self] in
            defer { done.signal() }
            guard let out = try? ALSAPCM(name: pcm, direction: .playback) else { return }
            var tone = ToneSource(frequency: 440, amplitude: 0.3)
            while !stopping.load(ordering: .relaxed) { try? out.write(tone.next(samplesPerChannel: 480)) }
        }.start()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        done.wait()
    }
}
