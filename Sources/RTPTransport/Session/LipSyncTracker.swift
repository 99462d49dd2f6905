import MediaCore
import Platform
/// Lip sync on the session's clock: the sender reports map each stream's RTP time to the
/// sender's wall clock (`LipSync`), shown pictures and heard sound are timed on the monotonic
/// media clock, and once a second the stream that plays ahead is held back a step more or less.
struct LipSyncTracker: Sendable {
    private(set) var sync = LipSync()
    /// What is held back now: the picture, the sound.
    private(set) var holds: (video: Duration, audio: Duration) = (.zero, .zero)

    mutating func videoSenderReport(ntp: UInt64, rtp: UInt32) { sync.video.senderReport(ntpTimestamp: ntp, rtpTimestamp: rtp) }
    mutating func audioSenderReport(ntp: UInt64, rtp: UInt32) { sync.audio.senderReport(ntpTimestamp: ntp, rtpTimestamp: rtp) }
    mutating func videoShown(rtp: UInt32, at now: MediaTime) { sync.videoShown(rtp: rtp, at: now.seconds) }
    mutating func audioPlayed(rtp: UInt32, at now: MediaTime) { sync.audioPlayed(rtp: rtp, at: now.seconds) }

    /// Video delay minus audio delay (s), once both are known.
    var offset: Double? { sync.offset }

    /// The next holds when they change (once a second).
    mutating func adjust() -> (video: Duration, audio: Duration)? {
        let next = sync.adjust(videoHold: holds.video.inSeconds, audioHold: holds.audio.inSeconds)
        let proposed = (video: Duration.microseconds(Int64(next.video * 1e6)), audio: Duration.microseconds(Int64(next.audio * 1e6)))
        guard proposed != holds else { return nil }
        holds = proposed
        return proposed
    }
}
