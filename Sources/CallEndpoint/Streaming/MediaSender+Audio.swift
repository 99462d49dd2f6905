import Codecs
import MediaCore
import Devices
import Platform
import RTPTransport
import Synchronization

/// The audio stage: capture → Opus (bitrate and FEC from the controller) → the media loop. The
/// device's capture thread encodes each block as it delivers it: Opus takes a fraction of a
/// millisecond for 20 ms of sound, so a thread of the sender's own would only add a hop.
extension MediaSender {
    /// What the capture thread keeps between blocks (used on that thread only).
    final class AudioEncoding: @unchecked Sendable {
        var encoder: OpusEncoder?
        var settings: (bitrate: Int, fec: Int)
        init(bitrate: Int) { settings = (bitrate, -1) }
    }

    func startAudio() throws {
        guard let track = audioTrack else { return }
        let state = AudioEncoding(bitrate: configuration.audioBitrate)
        try track.device.startCapture { [weak self] samples in
            guard let self, !audioEnded.load(ordering: .relaxed) else { return }
            // The end of the duration, stop(), or a file source that ran out (an empty block).
            guard shouldContinue(), !samples.isEmpty else { return endAudio() }
            do {
                try encodeAudio(samples, track: track, state: state)
            } catch {
                errors.withLock { $0.append(error) }
                endAudio()
            }
        }
    }

    private func encodeAudio(_ block: [Int16], track: LocalAudioTrack, state: AudioEncoding) throws {
        var samples = block
        let channels = samples.count / AudioBlock.frames
        guard channels == 1 || channels == 2, samples.count == AudioBlock.frames * channels else { return }
        if state.encoder?.channels != channels {
            // The first block, or a microphone switch to a device with another channel count.
            let e = try OpusEncoder(channels: channels, application: .voip, bitrate: configuration.audioBitrate)
            try e.setInbandFEC(enabled: true, expectedLossPercent: 10)
            state.encoder = e
        }
        guard let encoder = state.encoder else { return }
        if !track.isEnabled { samples = [Int16](repeating: 0, count: samples.count) }
        // Auto mode: the controller's Opus bitrate and FEC (expected loss) follow the estimate.
        if let (bitrate, fec) = encoding.withLock({ e in e.controller.map { ($0.audioBitrate, $0.fecLossPercent) } }),
           bitrate != state.settings.bitrate || fec != state.settings.fec {
            try encoder.setBitrate(bitrate)
            try encoder.setInbandFEC(enabled: true, expectedLossPercent: max(fec, 5))
            state.settings = (bitrate, fec)
        }
        let payload = try encoder.encode(samples)
        // The timestamp is the block's first sample, taken one block before it was delivered.
        loop.post(.encodedAudio(payload: payload, samples: AudioBlock.frames, capturedAt: clock.now - AudioBlock.period))
    }

    /// Audio is over (once): the sender finishes when every stream has.
    func endAudio() {
        guard !audioEnded.exchange(true, ordering: .relaxed) else { return }
        mediaFinished.add(1, ordering: .relaxed)
        loop.wake()
    }

    /// Takes the encoder off the device (a call's microphone stays open for the next round).
    func stopAudio() {
        guard let device = audioTrack?.device else { return }
        endAudio()
        try? device.startCapture { _ in }
        if ownsTracks { device.stopCapture() }
    }
}
