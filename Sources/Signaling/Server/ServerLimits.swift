/// Limits the signaling server enforces; each breach gets its own error code.
public struct ServerLimits: Sendable {
    public var maxLineLength = SignalingMessage.maxLineLength
    /// Sustained messages per second per connection, and the burst allowed above it.
    public var messagesPerSecond = 50.0
    public var messageBurst = 100.0
    public var maxConnections = 20_000
    /// Connections from one IP address: one host cannot take the whole service. Many endpoints
    /// behind one NAT share an address, so this is generous.
    public var maxConnectionsPerAddress = 1000
    /// Time a new connection has to send a successful `join`.
    public var joinTimeout: Duration = .seconds(10)
    /// Silence after which a connection is considered dead (clients ping every 10 s).
    public var keepaliveTimeout: Duration = .seconds(30)
    /// Participants per room: 2 for a peer-to-peer call.
    public var maxParticipantsPerRoom = 2

    public init() {}
}
