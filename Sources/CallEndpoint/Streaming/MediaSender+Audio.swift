import Codecs
import MediaCore
import Devices
import Foundation
import Platform
import RTPTransport
import Synchronization

/// The audio stage: capture → Opus (bitrate and FEC from the controller) → the media loop.
extension MediaSender {
    func sendAudio() throws {
        guard let track = audioTrack else { return }
        let device = track.device
        let blocks = audioBlocks
        let sink = try track.addSink { blocks.put($0) }
        defer {
            track.removeSink(sink)
            if ownsTracks { device.stopCapture() }
        }
        var encoder: OpusEncoder?
        var audioSettings = (bitrate: configuration.audioBitrate, fec: -1)
        while shouldContinue() {
            // Until a block comes, the source ends or stop() (an empty block), or the duration is over.
            guard var samples = blocks.take(timeout: configuration.duration.map { $0 - elapsed }) else { continue }
            guard !samples.isEmpty else { break }  // a file source ran out
            let channels = samples.count / AudioBlock.frames
            guard channels == 1 || channels == 2, samples.count == AudioBlock.frames * channels else { continue }
            if encoder?.channels != channels {
                // The first block, or a microphone switch to a device with another channel count.
                let e = try OpusEncoder(channels: channels, application: .voip, bitrate: configuration.audioBitrate)
                try e.setInbandFEC(enabled: true, expectedLossPercent: 10)
                encoder = e
            }
            if !track.isEnabled { samples = [Int16](repeating: 0, count: samples.count) }
            // Auto mode: the controller's Opus bitrate and FEC (expected loss) follow the estimate.
            if let (bitrate, fec) = encoding.withLock({ e in e.controller.map { ($0.audioBitrate, $0.fecLossPercent) } }),
               bitrate != audioSettings.bitrate || fec != audioSettings.fec {
                try encoder!.setBitrate(bitrate)
                try encoder!.setInbandFEC(enabled: true, expectedLossPercent: max(fec, 5))
                audioSettings = (bitrate, fec)
            }
            let payload = try encoder!.encode(samples)
            // The timestamp is the block's first sample, taken one block before it was delivered.
            loop.post(.encodedAudio(payload: payload, samples: AudioBlock.frames, capturedAt: clock.now - AudioBlock.period))
        }
    }
}
