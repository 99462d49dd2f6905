/// Opus over RTP (RFC 7587): one Opus packet per RTP payload, no payload header. The RTP clock is
/// always 48 kHz whatever the encoder's internal rate (§4.1); the marker bit flags the first
/// packet after a DTX silence (§4.2) and is otherwise 0.
public enum OpusPayload {
    public static let clockRate: UInt32 = 48_000
    public static let encodingName = "opus"
    /// In SDP, Opus is always "opus/48000/2" even for mono streams (§7).
    public static let rtpmapChannels = 2

    /// An Opus payload must hold at least the TOC byte (RFC 6716 §3.1).
    public static func validate(_ payload: [UInt8]) throws(ParseError) {
        guard !payload.isEmpty else { throw ParseError("Opus payload", "empty: an Opus packet has at least its TOC byte") }
    }
}
