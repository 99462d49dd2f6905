#if canImport(Glibc)
import Glibc
import Signaling
#endif

/// Limits the signaling server enforces; each breach gets its own error code.
public struct ServerLimits: Sendable {
    public var maxLineLength = SignalingMessage.maxLineLength
    /// Sustained messages per second per connection, and the burst allowed above it.
    public var messagesPerSecond = 50.0
    public var messageBurst = 100.0
    public var maxConnections = 20_000
    /// Connections from one address block (an IPv4 address, an IPv6 /64: one host's share):
    /// one host cannot take the whole service. Many endpoints behind one NAT share an address,
    /// so this is generous.
    public var maxConnectionsPerAddress = 1000
    /// Connections from one address block that have not joined yet: what a host can hold
    /// without a valid token is small, so filling the service takes many hosts, not one /64.
    public var maxPendingPerAddress = 32
    /// Time a new connection has to send a successful `join`.
    public var joinTimeout: Duration = .seconds(10)
    /// Silence after which a connection is considered dead (clients ping every 10 s).
    public var keepaliveTimeout: Duration = .seconds(30)
    /// Participants per room: 2 for a peer-to-peer call.
    public var maxParticipantsPerRoom = 2
    /// How long a seat waits for its participant after its connection is lost: within it, only
    /// that participant's token or the seat's renewal takes the seat back.
    public var seatGrace: Duration = .seconds(60)
    /// The longest a renewed credential lives, whatever the token granted.
    public var maxTokenLifetime: Int64 = 86_400
    /// WHIP/WHEP sessions one identity may hold at once, in all rooms together.
    public var maxSessionsPerIdentity = 4
    /// The longest a WHIP/WHEP session lives, in seconds, whatever its token's lifetime.
    public var maxSessionLifetime: Int64 = 86_400
    /// TLS handshakes under way at once. Past it, an address block that holds fewer gets the
    /// oldest slot of the block that holds the most; one that would not is reset.
    public var maxTLSHandshakes = 64
    /// TLS handshakes under way from one address block (`AddressBlock`).
    public var maxHandshakesPerAddress = 8
    /// The time a new connection has to send its first byte (a TLS ClientHello, a request, a
    /// join): a client sends at once, so an idle connection holds nothing for long.
    public var firstByteTimeout: Duration = .seconds(3)
    /// The time a TLS handshake may take.
    public var tlsHandshakeTimeout: Duration = .seconds(5)
    /// The time a request on the metrics listener may take, from accept to the last byte.
    public var metricsTimeout: Duration = .seconds(5)

    public init() {}
}

/// The block a connection's address counts against: an IPv4 address itself, or the /64 of an
/// IPv6 address (RFC 6177: what one site, often one host, gets), so that a host cannot step
/// around a per-address limit with the 2^64 addresses it has. IPv4-mapped IPv6 is IPv4.
public enum AddressBlock {
    public static func of(_ numericAddress: String) -> String {
        var v6 = in6_addr()
        guard numericAddress.contains(":"), inet_pton(AF_INET6, numericAddress, &v6) == 1 else { return numericAddress }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
            return "\(bytes[12]).\(bytes[13]).\(bytes[14]).\(bytes[15])"
        }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }
}
