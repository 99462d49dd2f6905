import Signaling

/// The service's metrics in the Prometheus text format (version 0.0.4), for `serve --metrics`.
public struct ServerMetrics: Sendable {
    /// Upper bounds of the relay-time histogram, in seconds.
    public static let relayBuckets: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05]
    private(set) var relayCounts = [Int](repeating: 0, count: ServerMetrics.relayBuckets.count)
    private(set) var relaySum = 0.0
    private(set) var relayTotal = 0

    public init() {}

    /// One relayed message: from reading it to having written it to every recipient's socket.
    public mutating func relayed(seconds: Double) {
        for (i, bound) in Self.relayBuckets.enumerated() where seconds <= bound { relayCounts[i] += 1 }
        relaySum += seconds
        relayTotal += 1
    }

    /// The room directory's health, when the service shares rooms through Redis.
    public struct Directory: Sendable {
        public var healthy: Bool
        public var counters: RedisRoomDirectory.Counters
        public init(healthy: Bool, counters: RedisRoomDirectory.Counters) { (self.healthy, self.counters) = (healthy, counters) }
    }

    /// What the service's shell counts besides the core: connections it could not take.
    public struct Refusals: Sendable {
        /// Accepted and closed at once: no file descriptor was left (EMFILE).
        public var noDescriptor = 0
        /// TLS handshakes that did not finish in time.
        public var handshakeTimeouts = 0
        /// Connections that sent nothing within the first-byte deadline.
        public var firstByteTimeouts = 0
        /// TLS connections reset at once: their address block had its unauthenticated connections.
        public var addressLimit = 0
        /// TLS connections reset at once: no handshake slot was theirs to take (their block holds
        /// its share, or every slot is held by blocks that hold no more).
        public var handshakeSlots = 0
        /// Handshakes under way dropped to give their slot to a block that held fewer.
        public var handshakesEvicted = 0
        public init() {}
    }

    public func render(connections: Int, rooms: Int, counters: SignalingServerCore.Counters, refusals: Refusals = Refusals(), directory: Directory? = nil, certificateNotAfter: Int64? = nil) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for (labels, value) in samples { out += "\(name)\(labels) \(value)\n" }
        }
        metric("callend_signaling_connections", "gauge", "Open connections: signaling, WebSocket and HTTP.", [("", "\(connections)")])
        metric("callend_signaling_rooms", "gauge", "Rooms with at least one participant.", [("", "\(rooms)")])
        metric("callend_signaling_joins_total", "counter", "Successful joins and rejoins.", [("", "\(counters.joins)")])
        metric("callend_signaling_errors_total", "counter", "Errors sent, by code: refused joins (room_full, token_*, ...), protocol errors and limits.",
               SignalingErrorCode.allCases.map { (#"{code="\#($0.rawValue)"}"#, "\(counters.errors[$0] ?? 0)") })
        metric("callend_signaling_refused_total", "counter", "Connections closed before a word: no file descriptor left (raise LimitNOFILE), a TLS handshake past its deadline, no first byte in time, too many unauthenticated from one address, no fair handshake slot, a slot given to another address.",
               [(#"{reason="no_descriptor"}"#, "\(refusals.noDescriptor)"), (#"{reason="tls_handshake_timeout"}"#, "\(refusals.handshakeTimeouts)"),
                (#"{reason="first_byte_timeout"}"#, "\(refusals.firstByteTimeouts)"), (#"{reason="address_limit"}"#, "\(refusals.addressLimit)"),
                (#"{reason="handshake_slots"}"#, "\(refusals.handshakeSlots)"), (#"{reason="handshake_evicted"}"#, "\(refusals.handshakesEvicted)")])
        metric("callend_signaling_relayed_total", "counter", "Messages relayed to a participant.", [("", "\(counters.relayed)")])
        var buckets = zip(Self.relayBuckets, relayCounts).map { (#"{le="\#($0.0)"}"#, "\($0.1)") }
        buckets.append((#"{le="+Inf"}"#, "\(relayTotal)"))
        out += "# HELP callend_signaling_relay_seconds Time from reading a relayed message to writing it to its recipients.\n"
        out += "# TYPE callend_signaling_relay_seconds histogram\n"
        for (labels, value) in buckets { out += "callend_signaling_relay_seconds_bucket\(labels) \(value)\n" }
        out += "callend_signaling_relay_seconds_sum \(relaySum)\ncallend_signaling_relay_seconds_count \(relayTotal)\n"
        if let certificateNotAfter {
            metric("callend_signaling_certificate_expiry_timestamp_seconds", "gauge", "When the TLS certificate the service presents stops being valid (seconds since 1970 UTC): alert well before it.",
                   [("", "\(certificateNotAfter)")])
        }
        if let directory {
            metric("callend_signaling_redis_up", "gauge", "1 when the last Redis command succeeded and the node's subscription is live.", [("", directory.healthy ? "1" : "0")])
            metric("callend_signaling_redis_commands_total", "counter", "Commands and scripts sent to Redis.", [("", "\(directory.counters.commands)")])
            metric("callend_signaling_redis_failures_total", "counter", "Commands that failed: Redis unreachable, or an error reply.", [("", "\(directory.counters.failures)")])
            metric("callend_signaling_redis_events_total", "counter", "Messages from other nodes: joins, departures, relays, seats taken.", [("", "\(directory.counters.eventsReceived)")])
            metric("callend_signaling_redis_envelopes_refused_total", "counter", "Messages on this node's channel dropped: not sealed with the cluster's key, for another node, too old or malformed.",
                   [("", "\(directory.counters.envelopesRefused)")])
        }
        return out
    }
}
