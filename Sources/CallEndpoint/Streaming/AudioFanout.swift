import Codecs
import MediaCore
import Platform
import RTPTransport
import Synchronization

/// One Opus encoder for many peers (the WHEP viewers of an endpoint), beside `VideoFanout`:
/// each peer's session keeps its own RTP numbering, RED, pacing and reports, and takes the
/// shared encoder's packets instead of encoding its own. The sound is set for the thinnest peer:
/// the lowest Opus bitrate, the most in-band FEC and the longest packet any peer's controller
/// asks for (at most 32 kbit/s, so the others lose little), so every peer can take it; packets
/// of 20 ms or more.
final class AudioFanout: @unchecked Sendable {  // the members are behind their mutex; the encoder belongs to the fan-out thread
    let track: LocalAudioTrack
    private let members = FanoutMembers<MediaSender>(threadName: "audio-fanout")
    private let blocks = CaptureQueue<[Int16]>(capacity: 10)
    private let clock = MonotonicClock()
    /// Packets are 20 ms at least: a viewer's player holds tens of milliseconds of sound anyway,
    /// and half the packets halve what each viewer costs the sender in sends and wake-ups.
    static let leastPacket: Duration = .milliseconds(20)
    /// Packets encoded, for tests.
    let encoded = Atomic<Int>(0)

    init(track: LocalAudioTrack) { self.track = track }

    func attach(_ sender: MediaSender) { members.attach(sender, sender) { [self] in try run() } }
    func detach(_ sender: MediaSender) { members.detach(sender) }
    func stop() { members.stop { blocks.put([]) } }

    private func run() throws {
        let queue = blocks
        let sink = try track.addSink { queue.put($0) }
        defer { track.removeSink(sink) }
        var encoder: OpusEncoder?
        var settings = (bitrate: 0, fec: -1)
        var packet: [Int16] = []
        var blocksPerPacket = 1
        while members.isRunning {
            guard var samples = queue.take(timeout: .seconds(1)) else { continue }
            guard !samples.isEmpty else { break }
            let peers = members.current
            let channels = samples.count / AudioBlock.frames
            guard !peers.isEmpty, channels == 1 || channels == 2, samples.count == AudioBlock.frames * channels else {
                packet = []
                continue
            }
            if encoder?.channels != channels {
                encoder = try OpusEncoder(channels: channels, application: .voip, bitrate: 32_000)
                settings = (0, -1)
                packet = []
            }
            guard let encoder else { continue }
            if !track.isEnabled { samples = [Int16](repeating: 0, count: samples.count) }
            // What the thinnest peer's controller asks for (peers without one yet ask for nothing).
            let asked = peers.compactMap { peer in peer.encoding.withLock { e in e.controller.map { ($0.audioBitrate, $0.fecLossPercent, $0.audioPacket) } } }
            let bitrate = asked.map(\.0).min() ?? 32_000, fec = asked.map(\.1).max() ?? 0
            if bitrate != settings.bitrate || fec != settings.fec {
                try encoder.setBitrate(bitrate)
                try encoder.setInbandFEC(enabled: true, expectedLossPercent: max(fec, 5))
                settings = (bitrate, fec)
            }
            if packet.isEmpty { blocksPerPacket = max(1, Int(max(Self.leastPacket, asked.map(\.2).max() ?? Self.leastPacket) / AudioBlock.period)) }
            packet += samples
            guard packet.count >= AudioBlock.frames * channels * blocksPerPacket else { continue }
            let encodeStart = MediaTime.now
            let payload = try encoder.encode(packet)
            let took = MediaTime.now - encodeStart
            let frames = packet.count / channels
            packet.removeAll(keepingCapacity: true)
            let capturedAt = clock.now - AudioBlock.period * blocksPerPacket
            for peer in peers {
                peer.loop.post(.encodedAudio(payload: payload, samples: frames, capturedAt: capturedAt))
                peer.encoding.withLock { e in
                    e.stats.audioBudget.add(.capture, AudioBlock.period * blocksPerPacket)
                    e.stats.audioBudget.add(.encode, took)
                }
            }
            encoded.add(1, ordering: .relaxed)
        }
    }
}
