import Codecs
import MediaCore
import Devices
import Foundation
import Platform
import RTPTransport
import Synchronization

/// The audio stage: capture → Opus (bitrate and FEC from the controller) → transport.
extension MediaSender {
    func sendAudio() throws {
        defer { mediaFinished.add(1, ordering: .relaxed) }
        guard let track = audioTrack else { return }
        let device = track.device
        let blocks = CaptureQueue<[Int16]>(capacity: 10)  // 200 ms: a stalled encoder drops the oldest
        try device.startCapture { blocks.put($0) }
        defer { ownsTracks ? device.stopCapture() : try? device.startCapture { _ in } }
        var encoder: OpusEncoder?
        var audioSettings = (bitrate: configuration.audioBitrate, fec: -1)
        var sequence = UInt16.random(in: 0...UInt16.max)
        var timestamp = UInt32.random(in: 0...UInt32.max)
        var first = true
        while shouldContinue(clock.now) {
            guard var samples = blocks.take(timeout: .milliseconds(100)) else { continue }
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
            if let (bitrate, fec) = state.withLock({ s in s.controller.map { ($0.audioBitrate, $0.fecLossPercent) } }),
               bitrate != audioSettings.bitrate || fec != audioSettings.fec {
                try encoder!.setBitrate(bitrate)
                try encoder!.setInbandFEC(enabled: true, expectedLossPercent: max(fec, 5))
                audioSettings = (bitrate, fec)
            }
            let payload = try encoder!.encode(samples)
            let packet = RTPPacket(payloadType: configuration.payloadTypes.audio, sequenceNumber: sequence, timestamp: timestamp,
                                   ssrc: audioSSRC, marker: first, payload: payload)
            first = false
            let now = clock.now
            state.withLock { s in
                // The timestamp is the block's first sample, taken one block before it was delivered.
                s.audio.record(packet, at: now - AudioBlock.period)
                s.stats.audioPackets += 1
                s.stats.audioBytes += packet.serializedSize
                // Through the pacer's first lane: never held by its budget or congestion window, but
                // stamped with a transport-wide sequence number there, so the estimate sees audio too.
                s.pacer.enqueue(packet, size: packet.serializedSize, priority: .audio, now: now.inMicroseconds)
            }
            wakePacer()
            sequence &+= 1
            timestamp &+= UInt32(AudioBlock.frames)
        }
    }
}
