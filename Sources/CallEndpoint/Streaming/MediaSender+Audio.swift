import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import Synchronization

/// The audio stage: capture → Opus (bitrate and FEC from the controller) → the media loop.
extension MediaSender {
    private func blocks(timeout: Duration?) -> [Int16]? { audioBlocks.take(timeout: timeout) }

    func sendAudio() throws {
        guard let track = audioTrack else { return }
        if let fanout = configuration.audioFanout {
            fanout.attach(self)
            defer { fanout.detach(self) }
            // Until stop() (an empty block) or the duration is over.
            while shouldContinue() {
                if blocks(timeout: configuration.duration.map { $0 - elapsed })?.isEmpty == true { break }
            }
            return
        }
        let device = track.device
        let blocks = audioBlocks
        let sink = try track.addSink { blocks.put($0) }
        defer {
            track.removeSink(sink)
            if ownsTracks { device.stopCapture() }
        }
        var encoder: OpusEncoder?
        // The encoder's lookahead: the decoded sound lags what went in by it (6.5 ms in voip).
        var codecDelay = Duration.zero
        var audioSettings = (bitrate: configuration.audioBitrate, fec: -1)
        // Blocks wait here until they fill a packet (one or two: 10 or 20 ms).
        var packet: [Int16] = []
        var blocksPerPacket = 1
        // Samples encoded so far: the recording's audio clock, exact where capture times jitter.
        var samplesEncoded: UInt32 = 0
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
                codecDelay = .microseconds(Int64(e.lookahead) * 1_000_000 / Int64(AudioFrame.sampleRate))
                packet = []
            }
            if !track.isEnabled { samples = [Int16](repeating: 0, count: samples.count) }
            // Auto mode: the controller's Opus bitrate, FEC (expected loss) and packet duration
            // follow the estimate; otherwise a packet is a block.
            if let (bitrate, fec, duration) = encoding.withLock({ e in e.controller.map { ($0.audioBitrate, $0.fecLossPercent, $0.audioPacket) } }) {
                if bitrate != audioSettings.bitrate || fec != audioSettings.fec {
                    try encoder!.setBitrate(bitrate)
                    try encoder!.setInbandFEC(enabled: true, expectedLossPercent: max(fec, 5))
                    audioSettings = (bitrate, fec)
                }
                // A change takes effect at a packet's boundary.
                if packet.isEmpty { blocksPerPacket = max(1, Int(duration / AudioBlock.period)) }
            }
            packet += samples
            guard packet.count >= AudioBlock.frames * channels * blocksPerPacket else { continue }
            let encodeStart = MediaTime.now
            let payload = try encoder!.encode(packet)
            let took = MediaTime.now - encodeStart
            let frames = packet.count / channels
            packet.removeAll(keepingCapacity: true)
            encoding.withLock { e in
                // The capture hop: the packet's first sample waited for the packet to fill.
                e.stats.audioBudget.add(.capture, AudioBlock.period * blocksPerPacket)
                e.stats.audioBudget.add(.encode, took + codecDelay)
            }
            // The timestamp is the packet's first sample, taken one packet's duration before its
            // last block was delivered.
            let capturedAt = clock.now - AudioBlock.period * blocksPerPacket
            loop.post(.encodedAudio(payload: payload, samples: frames, capturedAt: capturedAt))
            configuration.recorder?.audio(payload, stamp: .rtp(samplesEncoded, clockRate: AudioFrame.sampleRate))
            samplesEncoded &+= UInt32(frames)
        }
    }
}
