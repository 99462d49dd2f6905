/// The signaling service as a state machine: it takes events (a connection opened, a line
/// arrived, time passed, a connection closed) and returns what to send and whom to disconnect.
/// It does no I/O and reads no clock, so tests drive it line by line with made-up time.
public final class SignalingServerCore {
    public typealias ConnectionID = UInt64

    public enum Action: Equatable, Sendable {
        case send(ConnectionID, SignalingMessage)
        /// Close after everything queued for the connection has been written.
        case close(ConnectionID)
    }

    struct Connection {
        var openedAt: Duration
        var lastActivity: Duration
        var tokens: Double
        var lastRefill: Duration
        var room: String?
        var identity: String?
        /// The credential the participant holds now: the one it joined with, or the last renewal.
        var claims: TokenClaims?
        /// The peer's IP address, when the server knows it.
        var address: String?
    }

    public let limits: ServerLimits
    let verifier: TokenVerifier
    private var connections: [ConnectionID: Connection] = [:]
    /// Room name → participants in join order.
    private var rooms: [String: [(identity: String, connection: ConnectionID)]] = [:]
    /// Open connections per IP address (only addresses with at least one).
    private var perAddress: [String: Int] = [:]

    public var connectionCount: Int { connections.count }
    public var roomCount: Int { rooms.count }

    /// STUN and TURN servers handed out with every `joined`.
    public let iceServers: ICEServerPolicy?

    /// Rooms shared with other nodes (`serve --redis`); nil: this service's rooms are its own.
    /// `rooms` then holds this node's participants only, and the directory has them all.
    public let directory: RedisRoomDirectory?

    public init(verifier: TokenVerifier, limits: ServerLimits = ServerLimits(), iceServers: ICEServerPolicy? = nil,
                directory: RedisRoomDirectory? = nil) {
        self.verifier = verifier
        self.limits = limits
        self.iceServers = iceServers
        self.directory = directory
    }

    public func participants(in room: String) -> [String] { rooms[room]?.map(\.identity) ?? [] }

    // MARK: Events

    /// A connection from `address` (the peer's IP address; nil when unknown) opened.
    public func connectionOpened(_ id: ConnectionID, now: Duration, address: String? = nil) -> [Action] {
        guard connections.count < limits.maxConnections else {
            return count([.send(id, .error(code: .serverFull, message: "the server has \(limits.maxConnections) connections; try again later", id: nil)), .close(id)])
        }
        if let address {
            guard perAddress[address, default: 0] < limits.maxConnectionsPerAddress else {
                return count([.send(id, .error(code: .addressLimit, message: "\(address) has \(limits.maxConnectionsPerAddress) connections open", id: nil)), .close(id)])
            }
            perAddress[address, default: 0] += 1
        }
        connections[id] = Connection(openedAt: now, lastActivity: now, tokens: limits.messageBurst, lastRefill: now, address: address)
        return []
    }

    /// Open connections from `address`.
    public func connections(from address: String) -> Int { perAddress[address] ?? 0 }

    public func lineTooLong(_ id: ConnectionID) -> [Action] {
        count([.send(id, .error(code: .lineTooLong, message: "a line is limited to \(limits.maxLineLength) bytes", id: nil)), .close(id)])
    }

    /// One line from a connection, without its newline. `wallClock` is Unix time in seconds for
    /// token expiry; `now` is the monotonic time the limits use.
    public func received(_ line: [UInt8], from id: ConnectionID, now: Duration, wallClock: Int64) -> [Action] {
        guard var connection = connections[id] else { return [] }
        // Token bucket (RFC 2697 style): refill by elapsed time, spend one per message.
        let elapsed = (now - connection.lastRefill).inSeconds
        connection.tokens = min(limits.messageBurst, connection.tokens + elapsed * limits.messagesPerSecond)
        connection.lastRefill = now
        connection.lastActivity = now
        guard connection.tokens >= 1 else {
            connections[id] = connection
            return count([.send(id, .error(code: .rateLimited, message: "more than \(Int(limits.messagesPerSecond)) messages per second", id: nil)), .close(id)])
        }
        connection.tokens -= 1
        connections[id] = connection

        let message: SignalingMessage
        do {
            message = try SignalingMessage(parsing: line)
        } catch {
            var actions: [Action] = [.send(id, .error(code: error.code, message: error.message, id: nil))]
            if error.code.closesConnection { actions.append(.close(id)) }
            return count(actions)
        }
        switch message {
        case .join(let room, let token, let rejoin):
            let actions = join(id, room: room, token: token, rejoin: rejoin, wallClock: wallClock)
            for case .send(id, .joined) in actions { counters.joins += 1 }
            return count(actions)
        case .relay(let relay):
            let actions = forward(relay, from: id)
            counters.relayed += actions.reduce(0) { n, a in if case .send(_, .relay) = a { return n + 1 }; return n }
            return count(actions)
        case .ping(let pingID):
            return [.send(id, .pong(id: pingID))]
        case .pong:
            return []
        case .joined, .peerJoined, .peerLeft, .ack, .error, .token:
            return [.send(id, .error(code: .badMessage, message: "that message type is sent by the server only", id: nil))]
        }
    }

    /// What the service has done since it started, for its metrics.
    public struct Counters: Sendable, Equatable {
        public var joins = 0
        public var relayed = 0
        /// Errors sent, by code: refused joins (room_full, token_*, ...), protocol errors, limits.
        public var errors: [SignalingErrorCode: Int] = [:]
    }
    public private(set) var counters = Counters()

    /// Counts the errors among `actions`, and returns them.
    private func count(_ actions: [Action]) -> [Action] {
        for case .send(_, .error(let code, _, _)) in actions { counters.errors[code, default: 0] += 1 }
        return actions
    }

    public func connectionClosed(_ id: ConnectionID) -> [Action] {
        guard let connection = connections.removeValue(forKey: id) else { return [] }
        if let address = connection.address {
            perAddress[address, default: 1] -= 1
            if perAddress[address] == 0 { perAddress[address] = nil }
        }
        return leave(connection, id: id, reason: "disconnected")
    }

    /// Enforces the join and keepalive timeouts and renews credentials that are about to expire;
    /// call about once a second. `wallClock` is Unix time in seconds.
    public func tick(now: Duration, wallClock: Int64) -> [Action] {
        var actions: [Action] = []
        for (id, connection) in connections {
            if connection.room == nil, now - connection.openedAt > limits.joinTimeout {
                actions += [.send(id, .error(code: .joinTimeout, message: "no successful join within \(limits.joinTimeout)", id: nil)), .close(id)]
            } else if now - connection.lastActivity > limits.keepaliveTimeout {
                actions += [.send(id, .error(code: .keepaliveTimeout, message: "nothing received for \(limits.keepaliveTimeout); send ping", id: nil)), .close(id)]
            } else if let claims = connection.claims, let renewed = Self.renewal(of: claims, at: wallClock) {
                connections[id]?.claims = renewed
                actions.append(.send(id, .token(token: TokenIssuer(secret: verifier.secret).mint(renewed), expires: renewed.expires)))
            }
        }
        return count(actions)
    }

    /// When each of this node's rooms last had its seats renewed in the directory.
    private var renewedAt: [String: Duration] = [:]

    /// Renews this node's seats in the directory, room by room, each room once per `interval`,
    /// at most `batch` rooms per call (oldest first), so that a node with thousands of rooms
    /// never holds its loop for one long round trip. A room seen here for the first time was
    /// just seated by its join. A seat another node took meanwhile costs its connection here.
    public func renewSeats(now: Duration, every interval: Duration, batch: Int = 200) -> [Action] {
        guard let directory else { return [] }
        var due: [(room: String, at: Duration)] = []
        for room in rooms.keys {
            guard let at = renewedAt[room] else {
                renewedAt[room] = now
                continue
            }
            if now - at >= interval { due.append((room, at)) }
        }
        if renewedAt.count > rooms.count { renewedAt = renewedAt.filter { rooms[$0.key] != nil } }
        guard !due.isEmpty else { return [] }
        if due.count > batch { due = Array(due.sorted { $0.at < $1.at }.prefix(batch)) }
        var seats: [String: [String]] = [:]
        for (room, _) in due {
            seats[room] = rooms[room]?.map(\.identity)
            renewedAt[room] = now
        }
        var actions: [Action] = []
        for (room, identity) in directory.refresh(seats: seats) { actions += unseat(identity, in: room) }
        return count(actions)
    }

    /// What the other nodes said (`RedisRoomDirectory.takeEvents()`), for this node's participants.
    public func clusterEvents(_ events: [ClusterEvent]) -> [Action] {
        var actions: [Action] = []
        for event in events {
            guard let member = rooms[event.room]?.first(where: { $0.identity == event.to }) else { continue }
            switch event.kind {
            case .joined:
                actions.append(.send(member.connection, .peerJoined(participant: event.who, rejoin: event.detail == "1")))
            case .left:
                // A seat of this node's that lapsed while the node was slow is still here.
                guard !(rooms[event.room]?.contains { $0.identity == event.who } ?? false) else { continue }
                actions.append(.send(member.connection, .peerLeft(participant: event.who, reason: event.detail)))
            case .relay:
                guard let message = try? SignalingMessage(parsing: Array(event.detail.utf8)), case .relay = message else { continue }
                actions.append(.send(member.connection, message))
            case .replaced:
                actions += unseat(event.to, in: event.room)
            }
        }
        return count(actions)
    }

    /// `identity` holds its seat on another node now: its connection here goes, and nobody here
    /// is told it left (it did not).
    private func unseat(_ identity: String, in room: String) -> [Action] {
        guard var members = rooms[room], let index = members.firstIndex(where: { $0.identity == identity }) else { return [] }
        let old = members.remove(at: index).connection
        rooms[room] = members.isEmpty ? nil : members
        connections[old]?.room = nil
        connections[old]?.identity = nil
        return [.send(old, .error(code: .replaced, message: "\(identity) joined again on another node", id: nil)), .close(old)]
    }

    /// A connected participant's credential is renewed before it expires, so that a rejoin after
    /// a dropped connection works however long the call has run: once a third of its lifetime is
    /// left (at least 5 s, at most 5 min before expiry), with the same identity, room grant,
    /// issuer and lifetime. A renewal says so (`rnw`) and serves a rejoin only: a participant who
    /// leaves and comes back later needs a token from whoever mints them.
    static func renewal(of claims: TokenClaims, at now: Int64) -> TokenClaims? {
        let lifetime = max(1, claims.expires - claims.issuedAt)
        let margin = min(300, max(5, lifetime / 3))
        guard claims.expires - now <= margin else { return nil }
        var renewed = TokenClaims(identity: claims.identity, room: claims.room, issuer: claims.issuer, issuedAt: now, expires: now + lifetime)
        renewed.renewal = true
        return renewed
    }

    // MARK: Rooms

    public static func isValidRoomName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 128 && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2d || c == 0x5f || c == 0x2e
        }
    }

    private func join(_ id: ConnectionID, room: String, token: String, rejoin: Bool, wallClock: Int64) -> [Action] {
        guard connections[id]?.room == nil else {
            return [.send(id, .error(code: .alreadyJoined, message: "this connection is already in room \(connections[id]?.room ?? "")", id: nil))]
        }
        guard Self.isValidRoomName(room) else {
            return [.send(id, .error(code: .badRoom, message: "room names are 1-128 characters of A-Z a-z 0-9 . _ -", id: nil))]
        }
        let claims: TokenClaims
        do {
            claims = try verifier.verify(token, room: room, now: wallClock)
        } catch {
            return [.send(id, .error(code: error.code, message: error.message, id: nil))]
        }
        if claims.renewal && !rejoin {
            return [.send(id, .error(code: .tokenRenewal, message: "a renewed credential serves a rejoin only; get a new token", id: nil))]
        }
        var actions: [Action] = []
        var members = rooms[room] ?? []
        var replaced = false
        var peersElsewhere: [String]?
        if let directory {
            // The directory decides the seat, for every node at once.
            do {
                switch try directory.join(room: room, identity: claims.identity, maxParticipants: limits.maxParticipantsPerRoom, rejoin: rejoin) {
                case .full:
                    return [.send(id, .error(code: .roomFull, message: "room \(room) has its \(limits.maxParticipantsPerRoom) participants", id: nil))]
                case .joined(let peers, let wasSeated):
                    peersElsewhere = peers
                    replaced = wasSeated
                }
            } catch {
                return [.send(id, .error(code: .unavailable, message: "the room directory cannot be reached (\(error)); try again", id: nil))]
            }
        }
        if let index = members.firstIndex(where: { $0.identity == claims.identity }) {
            // The same identity again (a client that reconnected before its old connection timed
            // out): the new connection takes the seat; the others see no churn.
            let old = members.remove(at: index).connection
            connections[old]?.room = nil
            connections[old]?.identity = nil
            actions += [.send(old, .error(code: .replaced, message: "\(claims.identity) joined again from another connection", id: nil)), .close(old)]
            replaced = true
        } else if peersElsewhere == nil, members.count >= limits.maxParticipantsPerRoom {
            return [.send(id, .error(code: .roomFull, message: "room \(room) has its \(limits.maxParticipantsPerRoom) participants", id: nil))]
        }
        let peers = peersElsewhere ?? members.map(\.identity)
        members.append((claims.identity, id))
        rooms[room] = members
        connections[id]?.room = room
        connections[id]?.identity = claims.identity
        connections[id]?.claims = claims
        actions.append(.send(id, .joined(room: room, participant: claims.identity, peers: peers,
                                         iceServers: iceServers?.servers(for: claims.identity, now: wallClock) ?? [])))
        if !replaced {
            for member in members.dropLast() {
                actions.append(.send(member.connection, .peerJoined(participant: claims.identity, rejoin: rejoin)))
            }
        }
        return actions
    }

    private func leave(_ connection: Connection, id: ConnectionID, reason: String) -> [Action] {
        guard let room = connection.room, let identity = connection.identity, var members = rooms[room] else { return [] }
        members.removeAll { $0.connection == id }
        directory?.leave(room: room, identity: identity, reason: reason)
        if members.isEmpty {
            rooms[room] = nil
            return []
        }
        rooms[room] = members
        return members.map { .send($0.connection, .peerLeft(participant: identity, reason: reason)) }
    }

    private func forward(_ message: RelayMessage, from id: ConnectionID) -> [Action] {
        guard let room = connections[id]?.room, let identity = connections[id]?.identity, let members = rooms[room] else {
            return [.send(id, .error(code: .notJoined, message: "join a room before sending \(message.kind.rawValue)", id: message.id))]
        }
        let targets = members.filter { $0.connection != id && (message.to == nil || $0.identity == message.to) }
        var relayed = message
        relayed.from = identity
        var elsewhere = 0
        if let directory, message.to == nil || targets.isEmpty {
            do {
                elsewhere = try directory.relay(room: room, from: identity, to: message.to,
                                                line: String(decoding: SignalingMessage.relay(relayed).serialized().dropLast(), as: UTF8.self))
            } catch where targets.isEmpty {
                return [.send(id, .error(code: .unavailable, message: "the room directory cannot be reached (\(error)); try again", id: message.id))]
            } catch {}
        }
        counters.relayed += elsewhere
        guard !targets.isEmpty || elsewhere > 0 else {
            let who = message.to.map { "\($0) is not in room \(room)" } ?? "nobody else is in room \(room)"
            return [.send(id, .error(code: .unknownPeer, message: who, id: message.id))]
        }
        return targets.map { .send($0.connection, .relay(relayed)) } + [.send(id, .ack(id: message.id))]
    }
}

