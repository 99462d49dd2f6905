import Signaling

/// The signaling service as a state machine: it takes events (a connection opened, a line
/// arrived, time passed, a connection closed, the room directory answered) and returns what to
/// send, whom to disconnect, and what to ask the directory. It does no I/O and reads no clock, so
/// tests drive it line by line with made-up time.
public final class SignalingServerCore {
    public typealias ConnectionID = UInt64

    public enum Action: Equatable, Sendable {
        case send(ConnectionID, SignalingMessage)
        /// Close after everything queued for the connection has been written.
        case close(ConnectionID)
        /// Work for the room directory the nodes share (`serve --redis`), done off the loop; its
        /// answer comes back through `directoryAnswered`.
        case directory(DirectoryRequest)
        /// Answer a WHIP/WHEP request on the web side, then close its connection.
        case respond(ConnectionID, HTTPReply)
    }

    /// What the service knows of a seated participant's credential.
    struct Credential {
        /// The seat's name, which its renewals carry.
        var seat: String
        /// The SHA-256 of the token that holds the seat.
        var holder: [UInt8]
        /// Seconds each renewal lives.
        var grant: Int64
        /// When the credential the participant holds now expires (Unix seconds).
        var expires: Int64
        var issuer: String
        /// The token's room claim ("*" or the room).
        var roomGrant: String
    }

    struct Connection {
        var openedAt: Duration
        var lastActivity: Duration
        var tokens: Double
        var lastRefill: Duration
        /// The address block the peer counts against (`AddressBlock`), when the server knows it.
        var address: String?
        /// Counted among its block's connections that have not joined.
        var pending = true
        /// A join waits for the directory's answer.
        var joining = false
        var room: String?
        var identity: String?
        var credential: Credential?
    }

    /// A join that waits for the directory.
    struct JoinAttempt {
        var connection: ConnectionID
        var claims: TokenClaims
        var room: String
        var grant: Int64
    }

    enum Pending {
        case join(JoinAttempt)
        /// A relay message nobody on this node took: its sender learns from the answer whether it arrived.
        case relay(ConnectionID, messageID: String)
        /// Asked without waiting for anything (a leave, a copy for other nodes, a renewal of leases).
        case quiet
    }

    public let limits: ServerLimits
    let verifier: TokenVerifier
    private var connections: [ConnectionID: Connection] = [:]
    /// Room name → this node's participants with a live connection, in join order.
    var rooms: [String: [(identity: String, connection: ConnectionID)]] = [:]
    /// WHIP/WHEP sessions by ID, and the web connections whose request waits for an endpoint.
    var webRTCHTTPSessions: [String: WebRTCHTTPSession] = [:]
    var waitingHTTP: [ConnectionID: String] = [:]
    var webRTCHTTPMessages: UInt64 = 0
    /// Seats, when this service's rooms are its own; with a directory the seats live there.
    private var seats: SeatTable
    /// Open connections per address block, and those of them that have not joined.
    private var perAddress: [String: Int] = [:]
    private var pendingPerAddress: [String: Int] = [:]
    private var pending: [UInt64: Pending] = [:]
    /// What other nodes said for a participant whose join here waits for the directory: a peer
    /// can hear of the seat (and send to it) before this node has the answer, which comes on
    /// another Redis connection. Played once the participant is seated, dropped if it is not.
    private var awaitingSeat: [RoomSeat: [ClusterEvent]] = [:]
    private var nextRequestID: UInt64 = 1
    private let newSeatID: () -> String

    public var connectionCount: Int { connections.count }
    public var roomCount: Int { rooms.count }

    /// STUN and TURN servers handed out with every `joined` and renewal.
    public let iceServers: ICEServerPolicy?

    /// Rooms shared with other nodes (`serve --redis`): seats, and participants on other nodes,
    /// are the directory's; `rooms` holds this node's participants only.
    public let clustered: Bool

    public init(verifier: TokenVerifier, limits: ServerLimits = ServerLimits(), iceServers: ICEServerPolicy? = nil,
                clustered: Bool = false, newSeatID: @escaping () -> String = SignalingServerCore.randomSeatID) {
        self.verifier = verifier
        self.limits = limits
        self.iceServers = iceServers
        self.clustered = clustered
        self.newSeatID = newSeatID
        seats = SeatTable(grace: limits.seatGrace)
    }

    /// 128 random bits in hex: a seat's name cannot be guessed from its room and identity.
    public static func randomSeatID() -> String { Crypto.hex(Crypto.randomBytes(16)) }

    public func participants(in room: String) -> [String] { rooms[room]?.map(\.identity) ?? [] }

    /// Seats held or waiting within their grace in `room` (this service's own rooms).
    public func seatCount(in room: String) -> Int { seats.count(in: room) }

    // MARK: Events

    /// A connection from `address` (its address block, `AddressBlock.of`; nil when unknown) opened.
    public func connectionOpened(_ id: ConnectionID, now: Duration, address: String? = nil) -> [Action] {
        guard connections.count < limits.maxConnections else {
            return count([.send(id, .error(code: .serverFull, message: "the server has \(limits.maxConnections) connections; try again later", id: nil)), .close(id)])
        }
        if let address {
            guard perAddress[address, default: 0] < limits.maxConnectionsPerAddress else {
                return count([.send(id, .error(code: .addressLimit, message: "\(address) has \(limits.maxConnectionsPerAddress) connections open", id: nil)), .close(id)])
            }
            guard pendingPerAddress[address, default: 0] < limits.maxPendingPerAddress else {
                return count([.send(id, .error(code: .addressLimit, message: "\(address) has \(limits.maxPendingPerAddress) connections that have not joined yet", id: nil)), .close(id)])
            }
            perAddress[address, default: 0] += 1
            pendingPerAddress[address, default: 0] += 1
        }
        connections[id] = Connection(openedAt: now, lastActivity: now, tokens: limits.messageBurst, lastRefill: now, address: address)
        return []
    }

    /// Open connections from `address`'s block, and those of them that have not joined.
    public func connections(from address: String) -> (open: Int, pending: Int) {
        (perAddress[address] ?? 0, pendingPerAddress[address] ?? 0)
    }

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
        case .join(let room, let token, _):
            // The client's `rejoin` is a hint the service does not need: the seat says whether
            // this is a participant coming back.
            return count(join(id, room: room, token: token, now: now, wallClock: wallClock))
        case .relay(let relay):
            return count(forward(relay, from: id, now: now, wallClock: wallClock))
        case .ping(let pingID):
            return [.send(id, .pong(id: pingID))]
        case .pong:
            return []
        case .joined, .peerJoined, .peerLeft, .ack, .error, .token:
            return count([.send(id, .error(code: .badMessage, message: "that message type is sent by the server only", id: nil))])
        }
    }

    /// What the service has done since it started, for its metrics.
    public struct Counters: Sendable, Equatable {
        public var joins = 0
        public var relayed = 0
        /// Errors sent, by code: refused joins (room_full, token_*, ...), protocol errors, limits.
        public var errors: [SignalingErrorCode: Int] = [:]
    }
    public internal(set) var counters = Counters()

    /// Counts the errors among `actions`, and returns them.
    private func count(_ actions: [Action]) -> [Action] {
        for case .send(_, .error(let code, _, _)) in actions { counters.errors[code, default: 0] += 1 }
        return actions
    }

    public func connectionClosed(_ id: ConnectionID, now: Duration) -> [Action] {
        guard let connection = connections.removeValue(forKey: id) else { return [] }
        if let address = connection.address {
            perAddress[address, default: 1] -= 1
            if perAddress[address] == 0 { perAddress[address] = nil }
            if connection.pending { release(pendingOf: address) }
        }
        return webRTCHTTPConnectionClosed(id) + webRTCHTTPEndpointLeft(id) + leave(connection, id: id, reason: "disconnected", now: now)
    }

    private func release(pendingOf address: String) {
        pendingPerAddress[address, default: 1] -= 1
        if pendingPerAddress[address] == 0 { pendingPerAddress[address] = nil }
    }

    /// Enforces the join and keepalive timeouts, renews credentials that are about to expire and
    /// ends the grace of seats whose participant did not come back; call about once a second.
    /// `wallClock` is Unix time in seconds.
    public func tick(now: Duration, wallClock: Int64) -> [Action] {
        var actions: [Action] = []
        for (id, connection) in connections {
            if connection.room == nil, waitingHTTP[id] == nil, now - connection.openedAt > limits.joinTimeout {
                actions += [.send(id, .error(code: .joinTimeout, message: "no successful join within \(limits.joinTimeout)", id: nil)), .close(id)]
            } else if now - connection.lastActivity > limits.keepaliveTimeout {
                actions += [.send(id, .error(code: .keepaliveTimeout, message: "nothing received for \(limits.keepaliveTimeout); send ping", id: nil)), .close(id)]
            } else if let credential = connection.credential, let room = connection.room, let identity = connection.identity,
                      credential.roomGrant != "*", let expires = Self.renewal(expiring: credential.expires, grant: credential.grant, at: wallClock) {
                // A token for every room is not renewed: its holder's seat ends with it (below).
                connections[id]?.credential?.expires = expires
                var renewed = TokenClaims(identity: identity, room: credential.roomGrant, issuer: credential.issuer, issuedAt: wallClock, expires: expires)
                renewed.renewal = true
                renewed.seat = credential.seat
                renewed.can = .join
                actions.append(.send(id, .token(token: TokenIssuer(secret: verifier.secret).mint(renewed), expires: expires,
                                                iceServers: iceServers?.servers(for: identity, room: room, now: wallClock, notAfter: expires) ?? [])))
            } else if let credential = connection.credential, credential.expires + verifier.leeway < wallClock {
                // Not renewed (a token for every room, or one presented at its very end): the
                // session ends with the credential.
                actions += [.send(id, .error(code: .tokenExpired, message: "this participant's credential expired at \(credential.expires); join again with a new token", id: nil)), .close(id)]
            }
        }
        seats.expire(now: now)
        return count(actions + webRTCHTTPTick(now: now, wallClock: wallClock))
    }

    /// When a seated participant's credential is renewed, and until when the renewal lives: once
    /// a third of the grant is left (at least 2 s, at most 5 min before expiry), for the grant
    /// again. The grant is what the token the participant first presented had left then (at most
    /// the service's maximum), so no renewal outlives what its original was worth. A token
    /// presented at its very end grants nothing to renew.
    static func renewal(expiring expires: Int64, grant: Int64, at now: Int64) -> Int64? {
        guard grant > 0 else { return nil }
        let margin = min(300, max(2, grant / 3))
        guard expires - now <= margin else { return nil }
        return now + grant
    }

    /// When each of this node's rooms last had its seats renewed in the directory.
    private var renewedAt: [String: Duration] = [:]

    /// Renews this node's seats in the directory, room by room, each room once per `interval`,
    /// at most `batch` rooms per request (oldest first), so that one request never carries
    /// thousands of rooms. A room seen here for the first time was just seated by its join. A
    /// seat another node took meanwhile costs its connection here (in the answer).
    public func renewSeats(now: Duration, every interval: Duration, batch: Int = 200) -> [Action] {
        guard clustered else { return [] }
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
        var renewing: [String: [SeatRecord]] = [:]
        for (room, _) in due {
            renewing[room] = rooms[room]?.compactMap { member in
                connections[member.connection]?.credential.map {
                    SeatRecord(identity: member.identity, seat: $0.seat, holder: $0.holder, grant: $0.grant)
                }
            }
            renewedAt[room] = now
        }
        return [.directory(request(.refresh(seats: renewing), .quiet))]
    }

    /// The directory's answer to request `id`. `failed` answers carry Redis's words for the log:
    /// participants are told only that the directory is unavailable.
    public func directoryAnswered(_ id: UInt64, _ answer: DirectoryAnswer, now: Duration, wallClock: Int64) -> [Action] {
        guard let waiting = pending.removeValue(forKey: id) else { return [] }
        switch (waiting, answer) {
        case (.join(let attempt), .joined(let outcome, let peers)):
            connections[attempt.connection]?.joining = false
            let held = awaitingSeat.removeValue(forKey: RoomSeat(room: attempt.room, identity: attempt.claims.identity)) ?? []
            guard connections[attempt.connection] != nil else {
                // Gone while the directory seated it: the seat starts its grace at once.
                if case .seated = outcome { return [.directory(request(.leave(room: attempt.room, identity: attempt.claims.identity, reason: "disconnected"), .quiet))] }
                return []
            }
            return count(seat(attempt, outcome, peers: peers, now: now, wallClock: wallClock)) + clusterEvents(held)
        case (.join(let attempt), _):
            connections[attempt.connection]?.joining = false
            awaitingSeat[RoomSeat(room: attempt.room, identity: attempt.claims.identity)] = nil
            return count([.send(attempt.connection, .error(code: .unavailable, message: Self.unavailable, id: nil))])
        case (.relay(let sender, let messageID), .relayed(let reached)):
            counters.relayed += reached
            guard reached > 0 else {
                return count([.send(sender, .error(code: .unknownPeer, message: "nobody it was for is in the room", id: messageID))])
            }
            return [.send(sender, .ack(id: messageID))]
        case (.relay(let sender, let messageID), _):
            return count([.send(sender, .error(code: .unavailable, message: Self.unavailable, id: messageID))])
        case (.quiet, .relayed(let reached)):
            counters.relayed += reached
            return []
        case (.quiet, .refreshed(let lost)):
            return count(lost.flatMap { unseat($0.identity, in: $0.room) })
        case (.quiet, _):
            return []
        }
    }

    static let unavailable = "the room directory is unavailable; try again"

    /// What the other nodes said (`RedisRoomDirectory.takeEvents()`), for this node's participants.
    public func clusterEvents(_ events: [ClusterEvent]) -> [Action] {
        var actions: [Action] = []
        for event in events {
            let target = RoomSeat(room: event.room, identity: event.to)
            if awaitingSeat[target] != nil {
                awaitingSeat[target]?.append(event)
                continue
            }
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
        detach(old)
        return webRTCHTTPEndpointLeft(old) + [.send(old, .error(code: .replaced, message: "\(identity) joined again from another connection", id: nil)), .close(old)]
    }

    private func detach(_ id: ConnectionID) {
        connections[id]?.room = nil
        connections[id]?.identity = nil
        connections[id]?.credential = nil
    }

    private func request(_ work: DirectoryRequest.Work, _ waiting: Pending) -> DirectoryRequest {
        let id = nextRequestID
        nextRequestID += 1
        pending[id] = waiting
        return DirectoryRequest(id: id, work: work)
    }

    // MARK: Rooms

    public static func isValidRoomName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 128 && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2d || c == 0x5f || c == 0x2e
        }
    }

    private func join(_ id: ConnectionID, room: String, token: String, now: Duration, wallClock: Int64) -> [Action] {
        guard let connection = connections[id], connection.room == nil, !connection.joining else {
            let state = connections[id]?.room.map { "is already in room \($0)" } ?? "has a join under way"
            return [.send(id, .error(code: .alreadyJoined, message: "this connection \(state)", id: nil))]
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
        guard claims.can.contains(.join) else {
            return [.send(id, .error(code: .tokenScope, message: "this token allows \(claims.can.isEmpty ? "nothing" : claims.can.description), not joining as a peer", id: nil))]
        }
        // Names of WHIP/WHEP sessions are the service's: a participant under one could pass for a session.
        guard !Self.isSessionName(claims.identity) else {
            return [.send(id, .error(code: .badMessage, message: "identities that begin with whip~ or whep~ are the service's own", id: nil))]
        }
        // What the token is worth from now on is all its renewals may be worth.
        let grant = max(0, min(claims.expires - wallClock, limits.maxTokenLifetime))
        let claim = SeatClaim(room: room, identity: claims.identity,
                              credential: claims.renewal ? .renewal(seat: claims.seat ?? "") : .token(holder: Crypto.sha256(Array(token.utf8))),
                              grant: grant)
        let attempt = JoinAttempt(connection: id, claims: claims, room: room, grant: grant)
        if clustered {
            connections[id]?.joining = true
            awaitingSeat[RoomSeat(room: room, identity: claims.identity), default: []] = []
            return [.directory(request(.join(claim, maxParticipants: limits.maxParticipantsPerRoom, newSeatID: newSeatID()), .join(attempt)))]
        }
        let outcome = seats.take(claim, now: now, maxParticipants: limits.maxParticipantsPerRoom, newSeatID: newSeatID())
        return seat(attempt, outcome, peers: nil, now: now, wallClock: wallClock)
    }

    /// Carries out the seat's decision for a join; `peers` nil: this node's members are the room.
    private func seat(_ attempt: JoinAttempt, _ outcome: SeatOutcome, peers: [String]?, now: Duration, wallClock: Int64) -> [Action] {
        let (id, room, identity) = (attempt.connection, attempt.room, attempt.claims.identity)
        let (seat, grant, holder, previous): (String, Int64, [UInt8], SeatOutcome.Previous)
        switch outcome {
        case .full:
            return [.send(id, .error(code: .roomFull, message: "room \(room) has its \(limits.maxParticipantsPerRoom) participants", id: nil))]
        case .renewalRefused:
            return [.send(id, .error(code: .tokenRenewal, message: "a renewed credential takes back its own seat only, while the seat is held or within \(limits.seatGrace) after its connection was lost; get a new token", id: nil))]
        case .taken:
            return [.send(id, .error(code: .seatTaken, message: "\(identity) holds a seat in room \(room) on a live connection with another credential; try again once that connection ends", id: nil))]
        case .seated(let s, let g, let h, let p):
            (seat, grant, holder, previous) = (s, g, h, p)
        }
        var actions: [Action] = []
        var members = rooms[room] ?? []
        if let index = members.firstIndex(where: { $0.identity == identity }) {
            // The seat's live connection on this node (its client reconnected before the old
            // connection timed out): the new connection takes the seat, the old one is told.
            let old = members.remove(at: index).connection
            detach(old)
            actions += [.send(old, .error(code: .replaced, message: "\(identity) joined again from another connection", id: nil)), .close(old)]
        }
        let others = peers ?? members.map(\.identity)
        members.append((identity, id))
        rooms[room] = members
        let expires = attempt.claims.expires
        connections[id]?.room = room
        connections[id]?.identity = identity
        connections[id]?.credential = Credential(seat: seat, holder: holder, grant: grant, expires: expires, issuer: attempt.claims.issuer, roomGrant: attempt.claims.room)
        if connections[id]?.pending == true {
            connections[id]?.pending = false
            if let address = connections[id]?.address { release(pendingOf: address) }
        }
        counters.joins += 1
        actions.append(.send(id, .joined(room: room, participant: identity, peers: others,
                                         iceServers: iceServers?.servers(for: identity, room: room, now: wallClock, notAfter: expires) ?? [])))
        // The others hear of every change of hands: a new participant, one back, or the seat on
        // a new connection.
        for member in members.dropLast() {
            actions.append(.send(member.connection, .peerJoined(participant: identity, rejoin: previous != .none)))
        }
        return actions
    }

    private func leave(_ connection: Connection, id: ConnectionID, reason: String, now: Duration) -> [Action] {
        guard let room = connection.room, let identity = connection.identity, var members = rooms[room] else { return [] }
        members.removeAll { $0.connection == id }
        var actions: [Action] = []
        if clustered {
            actions.append(.directory(request(.leave(room: room, identity: identity, reason: reason), .quiet)))
        } else {
            seats.lose(room: room, identity: identity, now: now)
        }
        rooms[room] = members.isEmpty ? nil : members
        return actions + members.map { .send($0.connection, .peerLeft(participant: identity, reason: reason)) }
    }

    private func forward(_ message: RelayMessage, from id: ConnectionID, now: Duration, wallClock: Int64) -> [Action] {
        guard let room = connections[id]?.room, let identity = connections[id]?.identity, let members = rooms[room] else {
            return [.send(id, .error(code: .notJoined, message: "join a room before sending \(message.kind.rawValue)", id: message.id))]
        }
        // The target in the form identities are kept in (what Redis compares, byte by byte).
        var message = message
        message.to = message.to.map(CanonicalName.of)
        if let toSession = forwardToSession(message, from: id, identity: identity, now: now, wallClock: wallClock) { return toSession }
        let targets = members.filter { $0.connection != id && (message.to == nil || $0.identity == message.to) }
        var relayed = message
        relayed.from = identity
        var actions: [Action] = targets.map { .send($0.connection, .relay(relayed)) }
        counters.relayed += targets.count
        if clustered, message.to == nil || targets.isEmpty {
            let line = String(decoding: SignalingMessage.relay(relayed).serialized().dropLast(), as: UTF8.self)
            // Nobody here took it: the sender hears from the directory's answer whether anyone did.
            let waiting: Pending = targets.isEmpty ? .relay(id, messageID: message.id) : .quiet
            actions.append(.directory(request(.relay(room: room, from: identity, to: message.to, line: line), waiting)))
            if targets.isEmpty { return actions }
        }
        guard !targets.isEmpty else {
            let who = message.to.map { "\($0) is not in room \(room)" } ?? "nobody else is in room \(room)"
            return [.send(id, .error(code: .unknownPeer, message: who, id: message.id))]
        }
        return actions + [.send(id, .ack(id: message.id))]
    }
}
