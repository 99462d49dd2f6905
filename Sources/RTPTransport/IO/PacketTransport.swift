/// The two kinds of media a session carries.
public enum MediaKind: String, Sendable, Equatable, CaseIterable {
    case audio, video
}

/// A packet a transport received, decrypted when the transport encrypts.
public struct ReceivedPacket: Sendable {
    public var bytes: [UInt8]
    /// RTCP (RFC 5761 §4: second byte 192 ... 223) rather than RTP.
    public var isRTCP: Bool
    /// The kind, when the transport knows it from where the packet came (a port per kind); nil
    /// on a bundled transport, where the receiver tells kinds apart by payload type.
    public var kind: MediaKind?
    /// How long before it was handed over the packet arrived (a kernel receive stamp), when known.
    public var age: Duration
}

/// Where a media session's packets go: two UDP ports for `callend send` and `receive` (the SDP
/// files GStreamer and ffmpeg read), or one bundled ICE/DTLS-SRTP transport for a call. Senders
/// and receivers hand it clear RTP and RTCP; the transport protects and addresses them.
/// Received packets go to the handler given when the transport starts delivering.
public protocol PacketTransport: AnyObject, Sendable {
    /// Sends one clear RTP packet; false when it could not go out (no path yet, a send error).
    @discardableResult func sendRTP(_ packet: [UInt8], kind: MediaKind) -> Bool
    /// Sends one clear RTCP compound packet.
    @discardableResult func sendRTCP(_ packet: [UInt8], kind: MediaKind) -> Bool
    /// Bytes the transport adds to each packet (the SRTP tag), for congestion accounting.
    var overhead: Int { get }
    /// Delivers received packets to `handler` (on the transport's receive thread) from now on.
    func startDelivering(to handler: @escaping @Sendable (ReceivedPacket) -> Void)
    /// Stops delivering and sending; what the transport owns is closed.
    func close()
}
