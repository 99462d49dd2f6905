import Codecs
import MediaCore
import Devices
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint

/// A renderer that takes `cost` per picture (a Y4M file on a slow SD card, a snapshot encoder, a
/// debug build in a slow VM), and remembers how old each picture was when it got it.
final class SlowRenderer: VideoRenderer, Sendable {
    let cost: Duration
    /// Pictures so far, the number of the first 160x120 one, and how old each was.
    let seen = Mutex<(pictures: Int, firstSmall: Int?, ages: [Duration])>((0, nil, []))
    init(cost: Duration) { self.cost = cost }
    func render(_ frame: VideoFrame) {
        let age = TestPatternSource.captureAge(of: frame)
        seen.withLock { s in
            s.pictures += 1
            if s.firstSmall == nil && frame.width == 160 { s.firstSmall = s.pictures }
            if let age { s.ages.append(age) }
        }
        usleep(UInt32(cost.components.attoseconds / 1_000_000_000_000))
    }
}

@Suite(.serialized) struct SlowConsumerTests {
    /// Bob's renderer manages 6 pictures a second of the 30 Alice sends. It gets fewer pictures,
    /// but current ones. Before the decode stage it ran on the network thread: decoding kept the
    /// renderer's pace, every picture waited for the ones before it, the delay grew by most of a
    /// second every second (the socket buffer held up to 15 s here), and a camera switch reached
    /// the screen after every stale picture: the cause of the device lab's "bob decodes the new
    /// mode" failures, where a debug build's pixel statistics in a VM were this slow renderer.
    /// Judged by counts (what was decoded, what was rendered before the switch showed), not by
    /// how fast this machine is.
    @Test func aSlowRendererCostsPicturesNotDelay() throws {
        let service = try TestService()
        let alice = try service.connect("alice", media: try Call.Media.synthetic(width: 320, height: 240, frameRate: 30), seconds: 60, mode: .manual)
        let slow = SlowRenderer(cost: .milliseconds(150))
        let bob = try service.connect("bob", media: Call.Media(videoTrack: nil, audioTrack: LocalAudioTrack(device: try SyntheticAudioDevice(source: .silence)),
                                                               renderers: [slow]), seconds: 60)
        defer { alice.disconnect(); bob.disconnect() }
        #expect(eventually(30) { slow.seen.withLock { $0.pictures } >= 25 }, "\(slow.seen.withLock { $0.pictures }) pictures")
        let rendered = slow.seen.withLock { $0.pictures }
        let decoded = bob.call.current.withLock { $0.media }?.statistics()?.received.framesDecoded ?? 0
        #expect(decoded >= 2 * rendered, "decoding keeps the stream's pace, not the renderer's: \(decoded) decoded, \(rendered) rendered")
        let switched = alice.perform("camera pattern 160x120@15")
        #expect(switched.contains(#""ok":true"#), "\(switched)")
        #expect(eventually(30) { slow.seen.withLock { $0.firstSmall != nil } }, "the new camera reaches the renderer")
        let (atSwitch, firstSmall) = slow.seen.withLock { s in (rendered, s.firstSmall ?? .max) }
        #expect(firstSmall - atSwitch <= 8, "at most the pictures in flight come before the new camera: \(firstSmall - atSwitch) did; ages \(slow.seen.withLock { $0.ages.suffix(10) })")
    }
}
