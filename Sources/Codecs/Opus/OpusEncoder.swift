import MediaCore
internal import COpus

/// Opus encoder (RFC 6716) at 48 kHz. One owner of one libopus encoder state; use it from one
/// thread at a time.
public final class OpusEncoder {
    public enum Application: Sendable {
        /// Speech: favours intelligibility, enables SILK and so in-band FEC at low rates.
        case voip
        /// Music and mixed content: favours fidelity.
        case audio
        /// Lowest algorithmic delay; CELT only, so no in-band FEC.
        case restrictedLowDelay
    }

    /// Frame sizes libopus accepts at 48 kHz, in samples per channel (2.5 ms to 60 ms).
    public static let supportedFrameSizes = [120, 240, 480, 960, 1920, 2880]
    /// Largest packet libopus produces for one frame of up to 60 ms (RFC 6716 §3.4 bound, rounded up).
    static let maxPacketSize = 4000

    public let channels: Int
    public let application: Application
    private let state: OpaquePointer
    private var output = [UInt8](repeating: 0, count: OpusEncoder.maxPacketSize)

    public init(channels: Int, application: Application = .voip, bitrate: Int = 32_000, complexity: Int = 10) throws(MediaError) {
        guard channels == 1 || channels == 2 else {
            throw MediaError(.invalidArgument, "create Opus encoder", "\(channels) channels; supported: 1 or 2")
        }
        let app: Int32 = switch application {
        case .voip: copus_application_voip()
        case .audio: copus_application_audio()
        case .restrictedLowDelay: copus_application_restricted_lowdelay()
        }
        var error: Int32 = 0
        guard let state = opus_encoder_create(Int32(AudioFrame.sampleRate), Int32(channels), app, &error), error == OPUS_OK else {
            throw MediaError(.library, "create Opus encoder", OpusEncoder.message(error))
        }
        self.state = state
        self.channels = channels
        self.application = application
        try setBitrate(bitrate)
        try setComplexity(complexity)
    }

    deinit { opus_encoder_destroy(state) }

    /// Target bitrate in bits per second (libopus accepts 500 ... 512000); takes effect on the next frame.
    public func setBitrate(_ bitsPerSecond: Int) throws(MediaError) {
        guard (500...512_000).contains(bitsPerSecond) else {
            throw MediaError(.invalidArgument, "set Opus bitrate", "\(bitsPerSecond) bit/s; supported: 500 ... 512000")
        }
        try check(copus_encoder_set_bitrate(state, Int32(bitsPerSecond)), "set Opus bitrate \(bitsPerSecond)")
    }

    public var bitrate: Int {
        var value: Int32 = 0
        _ = copus_encoder_get_bitrate(state, &value)
        return Int(value)
    }

    /// Computational complexity 0 (fastest) ... 10 (best quality).
    public func setComplexity(_ complexity: Int) throws(MediaError) {
        guard (0...10).contains(complexity) else {
            throw MediaError(.invalidArgument, "set Opus complexity", "\(complexity); supported: 0 ... 10")
        }
        try check(copus_encoder_set_complexity(state, Int32(complexity)), "set Opus complexity")
    }

    /// In-band forward error correction (RFC 6716 §2.1.7): each packet carries a low-rate copy of
    /// the previous frame, sized for the expected loss percentage.
    public func setInbandFEC(enabled: Bool, expectedLossPercent: Int) throws(MediaError) {
        guard (0...100).contains(expectedLossPercent) else {
            throw MediaError(.invalidArgument, "set Opus expected loss", "\(expectedLossPercent) %; supported: 0 ... 100")
        }
        try check(copus_encoder_set_inband_fec(state, enabled ? 1 : 0), "set Opus in-band FEC")
        try check(copus_encoder_set_packet_loss_perc(state, Int32(expectedLossPercent)), "set Opus expected loss")
    }

    /// Discontinuous transmission: during silence the encoder emits packets of at most two bytes,
    /// which a sender need not transmit (RFC 7587 §3.1.3).
    public func setDTX(enabled: Bool) throws(MediaError) {
        try check(copus_encoder_set_dtx(state, enabled ? 1 : 0), "set Opus DTX")
    }

    public func setVBR(enabled: Bool) throws(MediaError) {
        try check(copus_encoder_set_vbr(state, enabled ? 1 : 0), "set Opus VBR")
    }

    /// Samples per channel by which decoded output lags the input (encoder lookahead).
    public var lookahead: Int {
        var value: Int32 = 0
        _ = copus_encoder_get_lookahead(state, &value)
        return Int(value)
    }

    /// Whether a packet is a DTX packet (silence, need not be sent).
    public static func isDTXPacket(_ packet: [UInt8]) -> Bool { packet.count <= 2 }

    /// Encodes one frame of interleaved samples; the count per channel must be a supported frame size.
    public func encode(_ samples: [Int16]) throws(MediaError) -> [UInt8] {
        let perChannel = samples.count / channels
        guard samples.count % channels == 0, Self.supportedFrameSizes.contains(perChannel) else {
            throw MediaError(.invalidArgument, "Opus encode",
                             "\(samples.count) samples over \(channels) channel(s); frames must be 2.5, 5, 10, 20, 40 or 60 ms (\(Self.supportedFrameSizes.map(String.init).joined(separator: ", ")) samples per channel)")
        }
        let capacity = output.count
        let length = samples.withUnsafeBufferPointer { pcm in
            output.withUnsafeMutableBufferPointer { out in
                opus_encode(state, pcm.baseAddress!, Int32(perChannel), out.baseAddress!, Int32(capacity))
            }
        }
        guard length >= 0 else { throw MediaError(.library, "Opus encode", Self.message(length)) }
        return Array(output[0..<Int(length)])
    }

    public func encode(_ frame: AudioFrame) throws(MediaError) -> [UInt8] {
        guard frame.channels == channels else {
            throw MediaError(.invalidArgument, "Opus encode", "frame has \(frame.channels) channel(s), encoder \(channels)")
        }
        return try encode(frame.samples)
    }

    private func check(_ result: Int32, _ operation: String) throws(MediaError) {
        guard result == OPUS_OK else { throw MediaError(.library, operation, Self.message(result)) }
    }

    static func message(_ code: Int32) -> String {
        "libopus error \(code): \(String(cString: opus_strerror(code)))"
    }
}
