import Foundation
import Platform
import Synchronization

/// What a node hears from the others through the directory, for one of its own participants.
public struct ClusterEvent: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// `who` joined `room` (`detail` "1" for a rejoin).
        case joined
        /// `who` left (`detail` is the reason: "left", "disconnected", "timeout").
        case left
        /// `who` sent `to` a relay message (`detail` is the serialized message, `from` set).
        case relay
        /// `to` joined again on another node, which has its seat now.
        case replaced
    }
    public var kind: Kind
    public var room: String
    /// The participant on this node the event is for.
    public var to: String
    public var who: String
    public var detail: String

    public init(kind: Kind, room: String, to: String, who: String, detail: String) {
        (self.kind, self.room, self.to, self.who, self.detail) = (kind, room, to, who, detail)
    }

    /// Decodes a published envelope: a JSON array [kind, room, to, who, detail].
    init?(envelope: String) {
        guard let fields = try? JSONDecoder().decode([String].self, from: Data(envelope.utf8)), fields.count == 5,
              let kind = Kind(rawValue: fields[0]) else { return nil }
        self.init(kind: kind, room: fields[1], to: fields[2], who: fields[3], detail: fields[4])
    }
}

/// The outcome of taking a seat in a room through the directory.
public enum DirectoryJoin: Sendable, Equatable {
    case full
    /// Seated; `peers` are the room's other participants, on any node. `wasSeated`: the identity
    /// already had a seat (a client back on another node), so nobody is told it joined.
    case joined(peers: [String], wasSeated: Bool)
}

/// Rooms shared by any number of signaling nodes through one Redis (`serve --redis`).
///
/// Each room is two keys: a sorted set of its participants scored by when their seat's lease
/// runs out (Redis's clock, so the nodes' clocks do not matter), and a hash of which node holds
/// each one. Every change is a Lua script, which Redis runs alone: two joins racing for the last
/// seat on two nodes are taken one after the other, and the second finds the room full. A script
/// tells the nodes concerned by publishing on each node's own channel; a node subscribes to its
/// channel only. Nodes renew their seats' leases every second (`refresh`); the seats of a node
/// that died run out after `lease`, and the next script that touches the room tells the others
/// they left. After Redis restarts empty, the next renewal puts every live seat back.
///
/// Commands run on the caller's thread (the service's loop) over one connection; messages arrive
/// on a subscriber thread and wait in an inbox until `takeEvents()`, after `wake` is called.
public final class RedisRoomDirectory: @unchecked Sendable {  // `commands` is used by the service's loop thread only; the rest is atomics and mutexes
    public let address: RedisAddress
    public let node: String
    public let lease: Duration
    private let commands: RedisConnection
    private let inbox = Mutex<[ClusterEvent]>([])
    private let wake: @Sendable () -> Void
    private let log: @Sendable (LogMessage) -> Void
    private let stopping = Atomic<Bool>(false)
    /// The subscriber's socket, to interrupt its blocking read on stop (-1 when not connected).
    private let subscriberFD = Mutex<Int32>(-1)
    /// True while no subscriber thread runs.
    private let subscriberDone = Mutex<Bool>(true)
    private let subscribed = Atomic<Bool>(false)
    private let healthy = Atomic<Bool>(true)

    public struct Counters: Sendable, Equatable {
        public var commands = 0
        public var failures = 0
        public var eventsReceived = 0
    }
    private let countersLock = Mutex(Counters())
    public var counters: Counters { countersLock.withLock { $0 } }
    /// Whether the last command reached Redis and the subscriber is connected.
    public var isHealthy: Bool { healthy.load(ordering: .relaxed) && subscribed.load(ordering: .relaxed) }

    /// Connects (failing at once when Redis cannot be reached) and starts the subscriber.
    public init(address: RedisAddress, node: String? = nil, lease: Duration = .seconds(5),
                log: @escaping @Sendable (LogMessage) -> Void = { _ in }, wake: @escaping @Sendable () -> Void) throws(RedisError) {
        self.address = address
        self.node = node ?? Self.randomNode()
        self.lease = lease
        self.log = log
        self.wake = wake
        commands = RedisConnection(address: address)
        // A Redis that does not answer costs the service's loop one timeout per 2 s, not per message.
        commands.retryAfter = .seconds(2)
        let pong = try commands.command(["PING"])
        guard pong.text == "PONG" else { throw RedisError("\(address): PING answered \(pong)") }
        subscriberDone.withLock { $0 = false }
        startThread(named: "redis-sub") { [self] in subscribe() }
        // The node must hear the others before it seats anyone, or it could miss a peer's join.
        let deadline = ContinuousClock.now + .seconds(2)
        while !subscribed.load(ordering: .acquiring), ContinuousClock.now < deadline { usleep(1000) }
        guard subscribed.load(ordering: .acquiring) else {
            stop()
            throw RedisError("\(address): could not subscribe to the node's channel")
        }
    }

    deinit { stop() }

    static func randomNode() -> String {
        (0..<8).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    static func channel(of node: String) -> String { "callend:node:\(node)" }
    static func keys(_ room: String) -> [String] { ["callend:room:\(room):seats", "callend:room:\(room):nodes"] }

    /// Stops the subscriber and waits for it.
    public func stop() {
        guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        subscriberFD.withLock { fd in if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) } }
        while !subscriberDone.withLock({ $0 }) { usleep(1000) }
    }

    /// What the other nodes said since the last call.
    public func takeEvents() -> [ClusterEvent] {
        inbox.withLock { events in defer { events.removeAll() }; return events }
    }

    // MARK: Subscriber

    private func subscribe() {
        defer { subscriberDone.withLock { $0 = true } }
        let connection = RedisConnection(address: address)
        connection.retryAfter = .milliseconds(200)
        var lostSince: ContinuousClock.Instant?
        while !stopping.load(ordering: .sequentiallyConsistent) {
            do {
                try connection.connect(waitingForever: true)
                subscriberFD.withLock { $0 = connection.fileDescriptor }
                if stopping.load(ordering: .sequentiallyConsistent) { break }
                let reply = try connection.command(["SUBSCRIBE", Self.channel(of: node)])
                guard reply.elements.first?.text == "subscribe" else { throw RedisError("SUBSCRIBE answered \(reply)") }
                subscribed.store(true, ordering: .releasing)
                if let since = lostSince {
                    log("redis: subscribed again after \(String(format: "%.1f", (ContinuousClock.now - since).inSeconds)) s")
                    lostSince = nil
                }
                while let message = try connection.read() {
                    let parts = message.elements
                    guard parts.count == 3, parts[0].text == "message", let payload = parts[2].text,
                          let event = ClusterEvent(envelope: payload) else { continue }
                    inbox.withLock { $0.append(event) }
                    countersLock.withLock { $0.eventsReceived += 1 }
                    wake()
                }
                throw RedisError("\(address): connection lost")
            } catch {
                subscribed.store(false, ordering: .relaxed)
                subscriberFD.withLock { $0 = -1 }
                connection.disconnect()
                if stopping.load(ordering: .sequentiallyConsistent) { break }
                if lostSince == nil {
                    lostSince = .now
                    log(.warning("redis: subscriber: \(error); reconnecting"))
                }
                usleep(100_000)
            }
        }
        subscriberFD.withLock { $0 = -1 }
        connection.disconnect()
    }

    // MARK: Scripts

    /// Shared by every script: telling a node, and letting seats whose lease ran out go (the
    /// room's remaining members hear that they left, "timeout").
    static let prelude = """
    local seats, nodes = KEYS[1], KEYS[2]
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local function tell(node, kind, room, to, who, detail)
      redis.call('PUBLISH', 'callend:node:' .. node, cjson.encode({kind, room, to, who, detail}))
    end
    local function expire(room)
      local gone = redis.call('ZRANGEBYSCORE', seats, '-inf', now)
      if #gone == 0 then return end
      for _, who in ipairs(gone) do
        redis.call('ZREM', seats, who)
        redis.call('HDEL', nodes, who)
      end
      local rest = redis.call('HGETALL', nodes)
      for i = 1, #rest, 2 do
        for _, who in ipairs(gone) do tell(rest[i + 1], 'left', room, rest[i], who, 'timeout') end
      end
    end
    local function keep(lease)
      redis.call('PEXPIRE', seats, lease * 3)
      redis.call('PEXPIRE', nodes, lease * 3)
    end

    """

    /// ARGV: room, identity, node, lease (ms), most participants, rejoin ("1"/"0").
    /// Returns {"full"} or {"ok", "1" when it was seated already else "0", peer...}.
    static let joinScript = prelude + """
    local room, identity, node, lease, most, rejoin = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
    expire(room)
    local previous = redis.call('HGET', nodes, identity)
    if not previous and redis.call('ZCARD', seats) >= most then return {'full'} end
    redis.call('ZADD', seats, now + lease, identity)
    redis.call('HSET', nodes, identity, node)
    keep(lease)
    local result = {'ok', previous and '1' or '0'}
    local all = redis.call('HGETALL', nodes)
    for i = 1, #all, 2 do
      local who, at = all[i], all[i + 1]
      if who ~= identity then
        result[#result + 1] = who
        if not previous and at ~= node then tell(at, 'joined', room, who, identity, rejoin) end
      end
    end
    if previous and previous ~= node then tell(previous, 'replaced', room, identity, identity, '') end
    return result
    """

    /// ARGV: room, identity, node, reason. The seat goes only when this node still holds it.
    static let leaveScript = prelude + """
    local room, identity, node, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
    if redis.call('HGET', nodes, identity) ~= node then return 0 end
    redis.call('ZREM', seats, identity)
    redis.call('HDEL', nodes, identity)
    local all = redis.call('HGETALL', nodes)
    for i = 1, #all, 2 do
      if all[i + 1] ~= node then tell(all[i + 1], 'left', room, all[i], identity, reason) end
    end
    return 1
    """

    /// ARGV: room, from, to ("" for everyone), node, message. Returns how many on other nodes got it.
    static let relayScript = prelude + """
    local room, from, to, node, line = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
    local count = 0
    local all = redis.call('HGETALL', nodes)
    for i = 1, #all, 2 do
      local who, at = all[i], all[i + 1]
      if who ~= from and (to == '' or who == to) and at ~= node then
        local until_ = tonumber(redis.call('ZSCORE', seats, who))
        if until_ and until_ > now then
          tell(at, 'relay', room, who, from, line)
          count = count + 1
        end
      end
    end
    return count
    """

    /// ARGV: room, node, lease (ms), identity... Renews this node's seats (puts them back after
    /// Redis lost them) and returns those another node holds now.
    static let refreshScript = prelude + """
    local room, node, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
    expire(room)
    local lost = {}
    for i = 4, #ARGV do
      local who = ARGV[i]
      local at = redis.call('HGET', nodes, who)
      if not at or at == node then
        redis.call('ZADD', seats, now + lease, who)
        redis.call('HSET', nodes, who, node)
      else
        lost[#lost + 1] = who
      end
    end
    keep(lease)
    return lost
    """

    private var leaseMs: String { String(Int64(lease.inMilliseconds)) }

    private func run(_ commandsToRun: [[String]]) throws(RedisError) -> [RedisReply] {
        countersLock.withLock { $0.commands += commandsToRun.count }
        do throws(RedisError) {
            let replies = try commands.pipeline(commandsToRun)
            healthy.store(true, ordering: .relaxed)
            for case .error(let text) in replies { throw RedisError("\(address): \(text)") }
            return replies
        } catch {
            if healthy.exchange(false, ordering: .relaxed) { log(.warning("redis: \(error)")) }
            countersLock.withLock { $0.failures += 1 }
            throw error
        }
    }

    private static func eval(_ script: String, room: String, _ arguments: [String]) -> [String] {
        ["EVAL", script, "2"] + keys(room) + [room] + arguments
    }

    /// Takes a seat in `room` for `identity` on this node (a seat the identity holds on another
    /// node moves here, and that node is told).
    public func join(room: String, identity: String, maxParticipants: Int, rejoin: Bool) throws(RedisError) -> DirectoryJoin {
        let reply = try run([Self.eval(Self.joinScript, room: room, [identity, node, leaseMs, String(maxParticipants), rejoin ? "1" : "0"])])[0]
        let items = reply.elements.compactMap(\.text)
        guard let first = items.first else { throw RedisError("\(address): unexpected reply to a join: \(reply)") }
        guard first == "ok", items.count >= 2 else { return .full }
        return .joined(peers: Array(items.dropFirst(2)), wasSeated: items[1] == "1")
    }

    /// Gives up this node's seat (the others are told why).
    public func leave(room: String, identity: String, reason: String) {
        _ = try? run([Self.eval(Self.leaveScript, room: room, [identity, node, reason])])
    }

    /// Passes a relay message to the room's members on other nodes (`to` nil: all of them);
    /// returns how many it reached.
    public func relay(room: String, from: String, to: String?, line: String) throws(RedisError) -> Int {
        let reply = try run([Self.eval(Self.relayScript, room: room, [from, to ?? "", node, line])])[0]
        guard case .integer(let count) = reply else { throw RedisError("\(address): unexpected reply to a relay: \(reply)") }
        return Int(count)
    }

    /// Renews the leases of this node's seats, room by room in one round trip; returns the
    /// seats another node holds now. Nothing is lost when Redis cannot be reached: the seats are
    /// renewed (or put back) on the next call that can.
    public func refresh(seats: [String: [String]]) -> [(room: String, identity: String)] {
        guard !seats.isEmpty else { return [] }
        let rooms = Array(seats.keys)
        guard let replies = try? run(rooms.map { Self.eval(Self.refreshScript, room: $0, [node, leaseMs] + seats[$0]!) }) else { return [] }
        var lost: [(String, String)] = []
        for (room, reply) in zip(rooms, replies) {
            for identity in reply.elements.compactMap(\.text) { lost.append((room, identity)) }
        }
        return lost
    }
}
