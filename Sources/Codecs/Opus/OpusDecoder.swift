import MediaCore
internal import COpus

/// Opus decoder at 48 kHz with packet-loss concealment and decoding of in-band FEC.
/// One owner of one libopus decoder state; use it from one thread at a time.
public final class OpusDecoder {
    public let channels: Int
    private let state: OpaquePointer
    /// Room for the longest Opus packet (120 ms) per channel.
    private static let maxSamplesPerChannel = 5760
    private var pcm: [Int16]

    public init(channels: Int) throws(MediaError) {
        guard channels == 1 || channels == 2 else {
            throw MediaError(.invalidArgument, "create Opus decoder", "\(channels) channels; supported: 1 or 2")
        }
        var error: Int32 = 0
        guard let state = opus_decoder_create(Int32(AudioFrame.sampleRate), Int32(channels), &error), error == OPUS_OK else {
            throw MediaError(.library, "create Opus decoder", OpusEncoder.message(error))
        }
        self.state = state
        self.channels = channels
        self.pcm = [Int16](repeating: 0, count: Self.maxSamplesPerChannel * channels)
    }

    deinit { opus_decoder_destroy(state) }

    /// Decodes one packet to interleaved samples.
    public func decode(_ packet: [UInt8]) throws(MediaError) -> [Int16] {
        guard !packet.isEmpty else {
            throw MediaError(.invalidData, "Opus decode", "empty packet; use decodeLoss for a missing one")
        }
        return try run("Opus decode", packet: packet, samplesPerChannel: Self.maxSamplesPerChannel, fec: false)
    }

    /// Conceals one lost frame of `samplesPerChannel` samples (packet-loss concealment).
    public func decodeLoss(samplesPerChannel: Int) throws(MediaError) -> [Int16] {
        try checkFrameSize(samplesPerChannel, "Opus loss concealment")
        return try run("Opus loss concealment", packet: nil, samplesPerChannel: samplesPerChannel, fec: false)
    }

    /// Recovers a lost frame from the FEC data carried in the packet that follows it. When that
    /// packet has no FEC data, libopus conceals instead, so the caller always gets audio.
    public func decodeFEC(from nextPacket: [UInt8], samplesPerChannel: Int) throws(MediaError) -> [Int16] {
        try checkFrameSize(samplesPerChannel, "Opus FEC decode")
        guard !nextPacket.isEmpty else { throw MediaError(.invalidData, "Opus FEC decode", "empty packet") }
        return try run("Opus FEC decode", packet: nextPacket, samplesPerChannel: samplesPerChannel, fec: true)
    }

    /// Samples per channel (at 48 kHz) a packet holds, from its table of contents (RFC 6716
    /// §3.1), without decoding it; nil for a packet libopus cannot read.
    public static func samplesPerChannel(in packet: [UInt8]) -> Int? {
        guard !packet.isEmpty else { return nil }
        let count = packet.withUnsafeBufferPointer { opus_packet_get_nb_samples($0.baseAddress!, Int32($0.count), Int32(AudioFrame.sampleRate)) }
        return count > 0 && Int(count) <= maxSamplesPerChannel ? Int(count) : nil
    }

    /// Samples per channel in the last packet decoded.
    public var lastPacketDuration: Int {
        var value: Int32 = 0
        _ = copus_decoder_get_last_packet_duration(state, &value)
        return Int(value)
    }

    private func checkFrameSize(_ samplesPerChannel: Int, _ operation: String) throws(MediaError) {
        // Concealment works in 2.5 ms steps up to the 120 ms maximum frame.
        guard samplesPerChannel > 0, samplesPerChannel % 120 == 0, samplesPerChannel <= Self.maxSamplesPerChannel else {
            throw MediaError(.invalidArgument, operation,
                             "\(samplesPerChannel) samples per channel; must be a multiple of 120 (2.5 ms) up to \(Self.maxSamplesPerChannel)")
        }
    }

    private func run(_ operation: String, packet: [UInt8]?, samplesPerChannel: Int, fec: Bool) throws(MediaError) -> [Int16] {
        let count: Int32 = pcm.withUnsafeMutableBufferPointer { out in
            if let packet {
                return packet.withUnsafeBufferPointer { data in
                    opus_decode(state, data.baseAddress, Int32(data.count), out.baseAddress!, Int32(samplesPerChannel), fec ? 1 : 0)
                }
            }
            return opus_decode(state, nil, 0, out.baseAddress!, Int32(samplesPerChannel), 0)
        }
        guard count >= 0 else { throw MediaError(.invalidData, operation, OpusEncoder.message(count)) }
        return Array(pcm[0..<(Int(count) * channels)])
    }
}
