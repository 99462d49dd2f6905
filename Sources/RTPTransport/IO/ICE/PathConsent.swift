import Platform
import MediaCore

/// Consent to send on the path (RFC 7675), kept by the transport rather than by libnice.
///
/// RFC 7675 ends consent 30 s after the last sign that the peer still wants our packets. Signs
/// here are what only the peer can make: an SRTP or SRTCP packet that authenticated under the
/// keys agreed with it over DTLS on this path (every endpoint sends RTCP at least every second,
/// a receive-only one too), and an answered connectivity check (the ICE agent coming up again).
/// libnice's binding requests every 4-6 s keep the peer's consent to us and NAT bindings fresh,
/// and fail the pair after 50 s without an answer.
///
/// Random loss cannot end consent: even a receive-only peer sends RTCP every second, so 30 s
/// without a sign at 20 % loss would take 30 packets in a row lost (0.2^30), and a call carries
/// far more. Only a path or a peer that is really gone goes quiet that long. Pure: time is
/// passed in.
public struct PathConsent: Sendable, Equatable {
    /// RFC 7675 §5.1: consent expires 30 s after the last sign of it.
    public static let defaultExpiry: Duration = .seconds(30)
    public let expiry: Duration
    public private(set) var lastSign: MediaTime?

    public init(expiry: Duration = Self.defaultExpiry) { self.expiry = expiry }

    /// The peer showed it still takes our packets.
    public mutating func signOfLife(at now: MediaTime) {
        if lastSign.map({ now > $0 }) ?? true { lastSign = now }
    }

    /// Whether consent has expired at `now`: false before the first sign (nothing to expire).
    public func expired(at now: MediaTime) -> Bool {
        guard let lastSign else { return false }
        return now - lastSign > expiry
    }
}
