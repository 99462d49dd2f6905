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

    /// Pictures shown `video` s and sound heard `audio` s after capture, for a second from `t`.
    func feed(_ sync: inout LipSync, from t: Double, video: Double, audio: Double, count: Int = 50) {
        for i in 0..<count {
            let at = t + Double(i) * 0.02
            sync.videoShown(rtp: (UInt32.max - 4_500) &+ UInt32(at * 90_000), at: 1_800_000_000 + at + video + skew)
            sync.audioPlayed(rtp: 1_000 &+ UInt32(at * 48_000), at: 1_800_000_000 + at + audio + skew)
        }
    }

    /// The sound's jitter buffer deepens by 60 ms (a loaded or jittery path): the offset says so
    /// within three seconds, so that the picture is held for it (a five-second minimum, as the
    /// picture's, would show the picture 60 ms before its sound for five seconds).
    @Test func aDeeperSoundBufferIsSeenWithinThreeSeconds() {
        var sync = reported()
        for second in 1...6 { feed(&sync, from: Double(second), video: 0.080, audio: 0.080) }
        #expect(abs(sync.offset!) < 0.001)
        for second in 7...9 { feed(&sync, from: Double(second), video: 0.080, audio: 0.140) }
        #expect(abs(sync.offset! + 0.060) < 0.001, "\(sync.offset!)")
        let holds = sync.adjust(videoHold: 0, audioHold: 0)
        #expect(holds.video > 0 && holds.audio == 0, "the picture waits for the sound: \(holds)")
    }

    @Test func aLatePictureHoldsTheSoundBackInSteps() {
        var sync = reported()
        // The picture takes 120 ms from capture to screen, the sound 40 ms to the speaker.
        feed(&sync, from: 1, video: 0.120, audio: 0.040)
        #expect(sync.offset == nil, "less than a second measured")
        feed(&sync, from: 2, video: 0.120, audio: 0.040)
        #expect(abs(sync.offset! - 0.080) < 0.001)
        var holds = (video: 0.0, audio: 0.0)
        var steps: [Double] = []
        for second in 3..<15 {
            let before = holds
            holds = sync.adjust(videoHold: holds.video, audioHold: holds.audio)
            steps.append(holds.audio)
            if holds != before {
                // The sound is measured afresh: no offset until a second of it under the new hold,
                // and none from the first few samples (the least of a few is not the delay).
                #expect(sync.offset == nil)
                feed(&sync, from: Double(second), video: 0.120, audio: 0.040 + holds.audio, count: 5)
                #expect(sync.offset == nil)
                #expect(sync.adjust(videoHold: holds.video, audioHold: holds.audio) == holds, "no step on a stream not measured yet")
            }
            feed(&sync, from: Double(second), video: 0.120, audio: 0.040 + holds.audio)
        }
        #expect(holds.video == 0 && abs(holds.audio - 0.080) < 0.001, "\(holds)")
        #expect(abs(steps[0] - sync.maximumStep) < 0.001, "no jump: \(steps)")
        #expect(abs(sync.offset!) < 0.002)
        // Lined up, the holds stay as they are.
        let kept = sync.holds(videoHold: holds.video, audioHold: holds.audio)
        #expect(kept.video == holds.video && kept.audio == holds.audio)
        // Pictures a second late for a while (a sender's queue let go after an outage) say
        // nothing of the pipeline: the holds stay.
        for second in 10..<13 { feed(&sync, from: Double(second), video: 1.2, audio: 0.040 + holds.audio) }
        let after = sync.adjust(videoHold: holds.video, audioHold: holds.audio)
        #expect(after.video == holds.video && after.audio == holds.audio, "\(after)")
    }

    @Test func earlyPicturesWaitForTheSoundAndHoldsAreBounded() {
        var sync = reported()
        for i in 0..<100 {
            let t = 1.0 + Double(i) * 0.02
            sync.videoShown(rtp: (UInt32.max - 4_500) &+ UInt32(t * 90_000), at: 1_800_000_000 + t + 0.030 + skew)
            sync.audioPlayed(rtp: 1_000 &+ UInt32(t * 48_000), at: 1_800_000_000 + t + 2.0 + skew)
        }
        var holds = (video: 0.0, audio: 0.0)
        for second in 2..<42 {
            holds = sync.adjust(videoHold: holds.video, audioHold: holds.audio)
            feed(&sync, from: Double(second), video: 0.030 + holds.video, audio: 2.0)
        }
        #expect(holds.audio == 0 && abs(holds.video - sync.maximumHold) < 1e-9, "never more than \(sync.maximumHold) s: \(holds)")
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

    /// Sound whose delay moves (a jitter buffer stretching and giving back) counts at its mean:
    /// the least of it would line the picture up with the sound's best moments only.
    @Test func theSoundsDelayIsItsUsualOneNotItsLeast() {
        var sync = LipSync()
        sync.audio.senderReport(ntpTimestamp: NTPTime.timestamp(unixSeconds: 1_800_000_000), rtpTimestamp: 0)
        for i in 0..<200 {
            sync.audioPlayed(rtp: UInt32(i * 480), at: 1_800_000_000 + Double(i) * 0.01 + (i % 2 == 0 ? 0.02 : 0.06))
        }
        #expect(abs(sync.audioDelay! - 0.04) < 0.002, "\(sync.audioDelay!)")
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
