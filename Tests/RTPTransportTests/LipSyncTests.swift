import Testing
@testable import RTPTransport

struct LipSyncTests {
    /// Sender reports on one sender clock (Unix 1_800_000_000 s), RTP timestamps that wrap, and a
    /// receiver whose clock is 3 s off: only the difference of the delays matters.
    func reported() -> LipSync {
        var sync = LipSync()
        let ntp = NTPTime.timestamp(unixSeconds: 1_800_000_000)
        sync.video.senderReport(ntpTimestamp: ntp, rtpTimestamp: UInt32.max - 4_500)  // wraps 50 ms later
        sync.audio.senderReport(ntpTimestamp: ntp, rtpTimestamp: 1_000)
        return sync
    }
    let skew = 3.0

    @Test func aLatePictureHoldsTheSoundBack() {
        var sync = reported()
        // A picture taken at +1 s is shown 120 ms later; sound taken at +1 s is heard 40 ms later.
        for i in 0..<50 {
            let t = 1.0 + Double(i) * 0.02
            sync.videoShown(rtp: (UInt32.max - 4_500) &+ UInt32(t * 90_000), at: 1_800_000_000 + t + 0.120 + skew)
            sync.audioPlayed(rtp: 1_000 &+ UInt32(t * 48_000), at: 1_800_000_000 + t + 0.040 + skew)
        }
        #expect(abs(sync.offset! - 0.080) < 0.001)
        let holds = sync.holds(videoHold: 0, audioHold: 0)
        #expect(holds.video == 0 && abs(holds.audio - 0.080) < 0.001)
        // With the sound held 80 ms the two line up, and the holds stay as they are.
        for i in 0..<200 {
            let t = 2.0 + Double(i) * 0.02
            sync.videoShown(rtp: (UInt32.max - 4_500) &+ UInt32(t * 90_000), at: 1_800_000_000 + t + 0.120 + skew)
            sync.audioPlayed(rtp: 1_000 &+ UInt32(t * 48_000), at: 1_800_000_000 + t + 0.120 + skew)
        }
        #expect(abs(sync.offset!) < 0.001)
        let kept = sync.holds(videoHold: 0, audioHold: holds.audio)
        #expect(kept.video == 0 && kept.audio == holds.audio)
    }

    @Test func earlyPicturesWaitForTheSoundAndHoldsAreBounded() {
        var sync = reported()
        for i in 0..<100 {
            let t = 1.0 + Double(i) * 0.02
            sync.videoShown(rtp: (UInt32.max - 4_500) &+ UInt32(t * 90_000), at: 1_800_000_000 + t + 0.030 + skew)
            sync.audioPlayed(rtp: 1_000 &+ UInt32(t * 48_000), at: 1_800_000_000 + t + 2.0 + skew)
        }
        let holds = sync.holds(videoHold: 0, audioHold: 0)
        #expect(holds.audio == 0 && holds.video == sync.maximumHold, "never more than \(sync.maximumHold) s")
        // Within the tolerance nothing is held.
        var close = reported()
        close.videoShown(rtp: (UInt32.max - 4_500) &+ 90_000, at: 1_800_000_001.050)
        close.audioPlayed(rtp: 1_000 &+ 48_000, at: 1_800_000_001.040)
        #expect(close.holds(videoHold: 0, audioHold: 0) == (0, 0))
        // Nothing is known before both streams have a sender report.
        var silent = LipSync()
        silent.videoShown(rtp: 1, at: 5)
        #expect(silent.offset == nil && silent.holds(videoHold: 0.1, audioHold: 0) == (0.1, 0))
    }

    @Test func theJitterBufferSaysWhatItPlayedAndPausesForMoreDelay() {
        var buffer = AudioJitterBuffer(minimumDelay: .milliseconds(20))
        for seq: UInt16 in 0..<3 {
            buffer.insert(RTPPacket(payloadType: 111, sequenceNumber: 65_530 &+ seq, timestamp: 7_000 &+ UInt32(seq) * 960, ssrc: 1, payload: [1]),
                          arrival: .milliseconds(Int(seq) * 20))
        }
        _ = buffer.nextPlayout()
        let first = buffer.lastPlayedTimestamp!
        _ = buffer.nextPlayout()
        #expect(buffer.lastPlayedTimestamp == first &+ 960)
        buffer.setExtraDelay(.milliseconds(100), base: .milliseconds(20))
        #expect(buffer.nextPlayout() == .buffering, "playout waits until 120 ms are buffered")
    }
}
