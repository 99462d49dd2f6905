import Dispatch
internal import CLinux
import FoundationEssentials
import Platform
import Signaling
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

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

}

/// What nodes publish to each other through Redis, authenticated: Redis is a trust boundary (any
/// client of it can PUBLISH, and an offer carries the DTLS fingerprint its call is secured by).
/// An envelope is "MAC JSON": the JSON array [kind, room, to, who, detail, to-node, from-node,
/// milliseconds] and, before it, the hex HMAC-SHA256 of those very bytes under the cluster key,
/// which the nodes derive from the token secret they share and Redis never sees. A node takes an
/// envelope only with the right MAC, addressed to itself, and within `maxAge` of its clock.
public struct ClusterEnvelope: Sendable {
    let key: [UInt8]
    /// Clocks of nodes differ by this much at most (NTP), and an envelope takes no longer.
    public static let maxAge: Int64 = 60_000

    /// The cluster key of nodes that share `secret`.
    public init(secret: TokenSecret) {
        key = Crypto.hmacSHA256(key: secret.bytes, data: Array("callend cluster envelope key v1".utf8))
    }

    public func seal(_ event: ClusterEvent, to node: String, from sender: String, at milliseconds: Int64) -> String {
        let fields: [JSONValue] = [event.kind.rawValue, event.room, event.to, event.who, event.detail, node, sender].map(JSONValue.string)
            + [.number(Double(milliseconds))]
        let json = JSONValue.array(fields).serialized
        return Crypto.hex(Crypto.hmacSHA256(key: key, data: json)) + " " + String(decoding: json, as: UTF8.self)
    }

    public enum Refusal: Error, Equatable { case malformed, forged, misaddressed, stale }

    /// The event an envelope carries for `node`, or why it is refused.
    public func open(_ envelope: String, for node: String, at milliseconds: Int64) -> Result<ClusterEvent, Refusal> {
        let bytes = Array(envelope.utf8)
        guard let space = bytes.firstIndex(of: 0x20), space == 64 else { return .failure(.malformed) }
        let json = Array(bytes[(space + 1)...])
        guard Crypto.constantTimeEquals(Array(Crypto.hex(Crypto.hmacSHA256(key: key, data: json)).utf8), Array(bytes[..<space])) else {
            return .failure(.forged)
        }
        guard case .array(let fields)? = try? JSONValue(parsing: json), fields.count == 8,
              let text = Optional(fields.prefix(7).compactMap(\.stringValue)), text.count == 7,
              let kind = ClusterEvent.Kind(rawValue: text[0]), let sent = fields[7].integer() as Int64? else { return .failure(.malformed) }
        guard text[5] == node else { return .failure(.misaddressed) }
        guard abs(milliseconds - sent) <= Self.maxAge else { return .failure(.stale) }
        return .success(ClusterEvent(kind: kind, room: text[1], to: text[2], who: text[3], detail: text[4]))
    }
}

/// Rooms shared by any number of signaling nodes through one Redis (`serve --redis`).
///
/// Each room is four keys: `seats`, a sorted set of the participants with a live connection
/// scored by when their seat's lease runs out (Redis's clock, so the nodes' clocks do not
/// matter); `nodes`, a hash of which node holds each; `grace`, a sorted set of seats whose
/// connection was lost, scored by when their grace ends; and `info`, a hash of each seat's name,
/// holder (the SHA-256 of the token that took it) and grant. Every change is a Lua script, which
/// Redis runs alone: two joins racing for the last seat on two nodes are taken one after the
/// other, and the second finds the room full; the rules of a seat are `SeatTable`'s. A script
/// tells the nodes concerned by publishing on each node's own channel; a node subscribes to its
/// channel only. Nodes renew their seats' leases every second (`refresh`); the seats of a node
/// that died run out after `lease` and start their grace, and the next script that touches the
/// room tells the others they left. After Redis restarts empty, the next renewal puts every
/// live seat back.
///
/// Nothing here runs on the service's loop: `submit` queues a request for a worker thread,
/// which sends what is queued in one pipeline (scripts by EVALSHA, loaded again when Redis has
/// forgotten them), and the answers wait in an inbox until `takeAnswers()`, after `wake` is
/// called. Messages from other nodes arrive on a subscriber thread and wait for `takeEvents()`.
public final class RedisRoomDirectory: Sendable {
    public let address: RedisAddress
    public let node: String
    private let envelope: ClusterEnvelope
    public let lease: Duration
    public let grace: Duration
    private let requests = BlockingQueue<DirectoryRequest>(capacity: 10_000)
    private let answers = Mutex<[(UInt64, DirectoryAnswer)]>([])
    private let inbox = Mutex<[ClusterEvent]>([])
    private let wake: @Sendable () -> Void
    private let log: @Sendable (LogMessage) -> Void
    private let stopping = Atomic<Bool>(false)
    /// The subscriber's socket, to interrupt its blocking read on stop (-1 when not connected).
    private let subscriberFD = Mutex<Int32>(-1)
    private let subscriberDone = DispatchSemaphore(value: 0)
    private let workerDone = DispatchSemaphore(value: 0)
    private let subscribedOnce = DispatchSemaphore(value: 0)
    /// Signalled by stop(), for the subscriber's pause between reconnections.
    private let stopped = DispatchSemaphore(value: 0)
    private let subscribed = Atomic<Bool>(false)
    private let healthy = Atomic<Bool>(true)

    public struct Counters: Sendable, Equatable {
        public var commands = 0
        public var failures = 0
        public var eventsReceived = 0
        /// Envelopes dropped: a MAC that is not the cluster's, another node's, too old, malformed.
        public var envelopesRefused = 0
    }
    private let countersLock = Mutex(Counters())
    public var counters: Counters { countersLock.withLock { $0 } }
    /// Whether the last command reached Redis and the subscriber is connected.
    public var isHealthy: Bool { healthy.load(ordering: .relaxed) && subscribed.load(ordering: .relaxed) }

    /// Connects (failing at once when Redis cannot be reached), starts the subscriber and waits
    /// until it listens (a node must hear the others before it seats anyone), then the worker.
    public init(address: RedisAddress, envelope: ClusterEnvelope, node: String? = nil, lease: Duration = .seconds(5), grace: Duration = .seconds(60),
                log: @escaping @Sendable (LogMessage) -> Void = { _ in }, wake: @escaping @Sendable () -> Void) throws(RedisError) {
        self.address = address
        self.envelope = envelope
        self.node = node ?? Self.randomNode()
        self.lease = lease
        self.grace = grace
        self.log = log
        self.wake = wake
        let probe = RedisConnection(address: address)
        let pong = try probe.command(["PING"])
        guard pong.text == "PONG" else { throw RedisError("\(address): PING answered \(pong)") }
        probe.disconnect()
        started.withLock { $0.subscriber = true }
        startThread(named: "redis-sub") { [self] in
            subscribe()
            subscriberDone.signal()
        }
        guard subscribedOnce.wait(for: .seconds(2)) else {
            stopping.store(true, ordering: .sequentiallyConsistent)
            interruptSubscriber()
            requests.close()
            subscriberDone.wait()
            throw RedisError("\(address): could not subscribe to the node's channel")
        }
        started.withLock { $0.worker = true }
        startThread(named: "redis-work") { [self] in
            work()
            workerDone.signal()
        }
    }

    /// The threads that run, for stop() to wait for.
    private let started = Mutex<(subscriber: Bool, worker: Bool)>((false, false))

    deinit { stop() }

    static func randomNode() -> String { Crypto.hex(Crypto.randomBytes(8)) }

    /// Wall-clock time (a named edge: envelopes carry it for their age check), in milliseconds.
    static var wallClockMilliseconds: Int64 {
        let now = WallClock.now
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    static func channel(of node: String) -> String { "callend:node:\(node)" }
    static func keys(_ room: String) -> [String] {
        ["seats", "nodes", "grace", "info"].map { "callend:room:\(room):\($0)" }
    }

    /// Stops the subscriber and the worker (requests still queued are answered as failed) and
    /// waits for both.
    public func stop() {
        guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        stopped.signal()
        interruptSubscriber()
        requests.close()
        let running = started.withLock { $0 }
        if running.subscriber { subscriberDone.wait() }
        if running.worker { workerDone.wait() }
    }

    private func interruptSubscriber() {
        subscriberFD.withLock { fd in if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) } }
    }

    /// Queues work; its answer comes through `takeAnswers()` (at once, as failed, when the
    /// queue is full: a Redis that cannot keep up costs joins, not the service's memory).
    public func submit(_ request: DirectoryRequest) {
        guard requests.append(request) else {
            answers.withLock { $0.append((request.id, .failed("\(address): \(requests.capacity) requests wait for Redis"))) }
            wake()
            return
        }
    }

    /// Answers to submitted requests since the last call.
    public func takeAnswers() -> [(UInt64, DirectoryAnswer)] {
        answers.withLock { all in defer { all.removeAll() }; return all }
    }

    /// What the other nodes said since the last call.
    public func takeEvents() -> [ClusterEvent] {
        inbox.withLock { events in defer { events.removeAll() }; return events }
    }

    // MARK: Subscriber

    private func subscribe() {
        let connection = RedisConnection(address: address)
        connection.retryAfter = .milliseconds(200)
        var lostSince: MediaTime?
        var first = true
        while !stopping.load(ordering: .sequentiallyConsistent) {
            do {
                try connection.connect(waitingForever: true)
                subscriberFD.withLock { $0 = connection.fileDescriptor }
                if stopping.load(ordering: .sequentiallyConsistent) { break }
                let reply = try connection.command(["SUBSCRIBE", Self.channel(of: node)])
                guard reply.elements.first?.text == "subscribe" else { throw RedisError("SUBSCRIBE answered \(reply)") }
                subscribed.store(true, ordering: .releasing)
                if first {
                    first = false
                    subscribedOnce.signal()
                }
                if let since = lostSince {
                    log("redis: subscribed again after \((MediaTime.now - since).inSeconds.fixed(1)) s")
                    lostSince = nil
                }
                while let message = try connection.read() {
                    let parts = message.elements
                    guard parts.count == 3, parts[0].text == "message", let payload = parts[2].text else { continue }
                    switch envelope.open(payload, for: node, at: Self.wallClockMilliseconds) {
                    case .success(let event):
                        inbox.withLock { $0.append(event) }
                        countersLock.withLock { $0.eventsReceived += 1 }
                        wake()
                    case .failure(let refusal):
                        // Someone but the nodes published on this node's channel: counted, and
                        // logged once per power of two so that a flood cannot fill the log.
                        let refused = countersLock.withLock { c in c.envelopesRefused += 1; return c.envelopesRefused }
                        if refused & (refused - 1) == 0 {
                            log(.warning("redis: dropped an envelope that is not the cluster's (\(refusal)); \(refused) so far"))
                        }
                    }
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
                // A pause before the next try, cut short by stop().
                stopped.wait(for: .milliseconds(100))
            }
        }
        subscriberFD.withLock { $0 = -1 }
        connection.disconnect()
    }

    // MARK: Worker

    private func work() {
        let connection = RedisConnection(address: address)
        connection.retryAfter = .milliseconds(500)
        while true {
            let batch = requests.take()
            if batch.isEmpty { break }  // closed and drained
            for chunk in stride(from: 0, to: batch.count, by: 256).map({ Array(batch[$0..<min($0 + 256, batch.count)]) }) {
                let done = execute(chunk, on: connection)
                answers.withLock { $0 += done }
            }
            wake()
        }
        connection.disconnect()
    }

    /// One pipeline for `batch`; a script Redis does not know (it restarted, or SCRIPT FLUSH)
    /// is loaded and its commands sent once more.
    private func execute(_ batch: [DirectoryRequest], on connection: RedisConnection) -> [(UInt64, DirectoryAnswer)] {
        if stopping.load(ordering: .relaxed) {
            return batch.map { ($0.id, .failed("the directory is stopping")) }
        }
        var commands: [[String]] = []
        var spans: [Range<Int>] = []
        for request in batch {
            let these = command(for: request.work)
            spans.append(commands.count..<commands.count + these.count)
            commands += these
        }
        countersLock.withLock { $0.commands += commands.count }
        do throws(RedisError) {
            let wasConnected = connection.isConnected
            var replies: [RedisReply]
            do throws(RedisError) {
                replies = try connection.pipeline(commands)
            } catch where wasConnected {
                // A connection Redis dropped (a restart) fails on first use: once more on a new
                // one. What may have run twice is safe to: a seat taken again by its holder, a
                // relay copy receivers drop by id, a renewal or departure repeated.
                connection.forgetFailure()
                replies = try connection.pipeline(commands)
            }
            let unknown = replies.indices.filter { if case .error(let text) = replies[$0] { return text.hasPrefix("NOSCRIPT") }; return false }
            if !unknown.isEmpty {
                _ = try connection.pipeline(Script.all.map { ["SCRIPT", "LOAD", $0.text] })
                let again = try connection.pipeline(unknown.map { commands[$0] })
                for (index, reply) in zip(unknown, again) { replies[index] = reply }
            }
            // What the scripts say to tell other nodes, sealed here (Redis never holds the key)
            // and published in the order the scripts ran.
            var told: [[String]] = []
            for index in replies.indices {
                guard case .array(let pair) = replies[index], pair.count == 2 else { continue }
                let events = pair[1].elements.compactMap(\.text)
                for at in stride(from: 0, to: events.count - events.count % 6, by: 6) {
                    guard let kind = ClusterEvent.Kind(rawValue: events[at + 1]) else { continue }
                    let event = ClusterEvent(kind: kind, room: events[at + 2], to: events[at + 3], who: events[at + 4], detail: events[at + 5])
                    told.append(["PUBLISH", Self.channel(of: events[at]), envelope.seal(event, to: events[at], from: node, at: Self.wallClockMilliseconds)])
                }
                replies[index] = pair[0]
            }
            if !told.isEmpty {
                countersLock.withLock { $0.commands += told.count }
                _ = try connection.pipeline(told)
            }
            if !healthy.exchange(true, ordering: .relaxed) { log("redis: \(address) answers again") }
            return zip(batch, spans).map { request, span in (request.id, answer(request.work, Array(replies[span]))) }
        } catch {
            if healthy.exchange(false, ordering: .relaxed) { log(.warning("redis: \(error)")) }
            countersLock.withLock { $0.failures += batch.count }
            return batch.map { ($0.id, .failed(error.description)) }
        }
    }

    private func command(for work: DirectoryRequest.Work) -> [[String]] {
        let leaseMs = String(lease.inMilliseconds), graceMs = String(grace.inMilliseconds)
        switch work {
        case .join(let claim, let most, let newSeat):
            let (kind, proof): (String, String) = switch claim.credential {
            case .token(let holder): ("token", Crypto.hex(holder))
            case .renewal(let seat): ("renewal", seat)
            }
            return [Script.join.call(room: claim.room, [claim.identity, node, leaseMs, graceMs, String(most), kind, proof, String(claim.grant), newSeat])]
        case .leave(let room, let identity, let reason):
            return [Script.leave.call(room: room, [identity, node, leaseMs, graceMs, reason])]
        case .relay(let room, let from, let to, let line):
            return [Script.relay.call(room: room, [from, to ?? "", node, line])]
        case .refresh(let seats):
            return seats.keys.sorted().map { room in
                Script.refresh.call(room: room, [node, leaseMs, graceMs] + seats[room]!.flatMap {
                    [$0.identity, $0.seat, Crypto.hex($0.holder), String($0.grant)]
                })
            }
        }
    }

    private func answer(_ work: DirectoryRequest.Work, _ replies: [RedisReply]) -> DirectoryAnswer {
        for case .error(let text) in replies {
            log(.warning("redis: \(address): \(text)"))
            return .failed("\(address): \(text)")
        }
        switch work {
        case .join(let claim, _, _):
            let items = replies.first?.elements.compactMap(\.text) ?? []
            switch items.first {
            case "full": return .joined(.full, peers: [])
            case "renewal": return .joined(.renewalRefused, peers: [])
            case "taken": return .joined(.taken, peers: [])
            case "ok":
                guard items.count >= 5, let previous = SeatOutcome.Previous(rawValue: items[1]), let grant = Int64(items[3]),
                      let holder = Self.bytes(hex: items[4]) else { break }
                return .joined(.seated(seat: items[2], grant: grant, holder: holder, previous: previous), peers: Array(items.dropFirst(5)))
            default: break
            }
            log(.warning("redis: \(address): unexpected reply to the join of \(claim.identity): \(replies)"))
            return .failed("\(address): unexpected reply to the join of \(claim.identity): \(replies)")
        case .leave:
            return .left
        case .relay:
            guard case .integer(let count)? = replies.first else { return .failed("\(address): unexpected reply to a relay: \(replies)") }
            return .relayed(Int(count))
        case .refresh(let seats):
            var lost: [RoomSeat] = []
            for (room, reply) in zip(seats.keys.sorted(), replies) {
                lost += reply.elements.compactMap(\.text).map { RoomSeat(room: room, identity: $0) }
            }
            return .refreshed(lost: lost)
        }
    }

    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(byte)
        }
        return out
    }

    // MARK: Scripts

    /// A Lua script Redis keeps in its cache under its SHA-1.
    struct Script: Sendable {
        let text: String
        let sha: String
        init(_ text: String) {
            self.text = text
            sha = Crypto.hex(Crypto.sha1(Array(text.utf8)))
        }
        func call(room: String, _ arguments: [String]) -> [String] {
            ["EVALSHA", sha, "4"] + RedisRoomDirectory.keys(room) + [room] + arguments
        }

        static let all = [join, leave, relay, refresh]

        /// Shared by every script: telling a node; letting seats whose grace is over go, and
        /// starting the grace of seats whose node stopped renewing them (the room's remaining
        /// members hear they left, "timeout"); keeping the keys while any of it can matter.
        static let prelude = """
        local seats, nodes, grace, info = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local told = {}
        local function tell(node, kind, room, to, who, detail)
          for _, v in ipairs({node, kind, room, to, who, detail}) do told[#told + 1] = v end
        end
        local function expire(room, graceMs)
          for _, who in ipairs(redis.call('ZRANGEBYSCORE', grace, '-inf', now)) do
            redis.call('ZREM', grace, who)
            redis.call('HDEL', info, who)
          end
          local gone = redis.call('ZRANGEBYSCORE', seats, '-inf', now)
          if #gone == 0 then return end
          for _, who in ipairs(gone) do
            redis.call('ZREM', seats, who)
            redis.call('HDEL', nodes, who)
            redis.call('ZADD', grace, now + graceMs, who)
          end
          local rest = redis.call('HGETALL', nodes)
          for i = 1, #rest, 2 do
            for _, who in ipairs(gone) do tell(rest[i + 1], 'left', room, rest[i], who, 'timeout') end
          end
        end
        local function keep(lease, graceMs)
          local ttl = math.max(lease * 3, graceMs + lease)
          for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ttl) end
        end

        """

        /// ARGV: room, identity, node, lease (ms), grace (ms), most participants, "token" or
        /// "renewal", the token's SHA-256 (hex) or the renewal's seat, grant (s), a new seat's name.
        /// Returns {"full"}, {"renewal"} (refused), {"taken"}, or {"ok", previous ("none", "lost",
        /// "live"), seat, grant, holder, peer...}.
        static let join = Script(prelude + """
        local room, identity, node, lease, graceMs, most, kind, proof, grant, fresh =
          ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9], ARGV[10]
        expire(room, graceMs)
        local at = redis.call('HGET', nodes, identity)
        local record = redis.call('HGET', info, identity)
        local seat, holder, held
        if record then seat, holder, held = string.match(record, '^(%S+) (%S+) (%S+)$') end
        local previous = 'none'
        if seat and at then previous = 'live' elseif seat and redis.call('ZSCORE', grace, identity) then previous = 'lost' end
        if kind == 'renewal' then
          if previous == 'none' or seat ~= proof then return {{'renewal'}, told} end
          grant = held
        else
          if previous == 'live' and holder ~= proof then return {{'taken'}, told} end
          if previous == 'none' then
            if redis.call('ZCARD', seats) + redis.call('ZCARD', grace) >= most then return {{'full'}, told} end
            seat = fresh
          elseif previous == 'lost' and holder ~= proof then
            seat = fresh
          end
          holder = proof
        end
        redis.call('ZREM', grace, identity)
        redis.call('ZADD', seats, now + lease, identity)
        redis.call('HSET', nodes, identity, node)
        redis.call('HSET', info, identity, seat .. ' ' .. holder .. ' ' .. grant)
        keep(lease, graceMs)
        local result = {'ok', previous, seat, grant, holder}
        local all = redis.call('HGETALL', nodes)
        for i = 1, #all, 2 do
          local who, on = all[i], all[i + 1]
          if who ~= identity then
            result[#result + 1] = who
            if on ~= node then tell(on, 'joined', room, who, identity, previous == 'none' and '0' or '1') end
          end
        end
        if previous == 'live' and at ~= node then tell(at, 'replaced', room, identity, identity, '') end
        return {result, told}
        """)

        /// ARGV: room, identity, node, lease (ms), grace (ms), reason. The seat's grace starts,
        /// only when this node still holds it.
        static let leave = Script(prelude + """
        local room, identity, node, lease, graceMs, reason = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
        if redis.call('HGET', nodes, identity) ~= node then return {0, told} end
        redis.call('ZREM', seats, identity)
        redis.call('HDEL', nodes, identity)
        redis.call('ZADD', grace, now + graceMs, identity)
        keep(lease, graceMs)
        local all = redis.call('HGETALL', nodes)
        for i = 1, #all, 2 do
          if all[i + 1] ~= node then tell(all[i + 1], 'left', room, all[i], identity, reason) end
        end
        return {1, told}
        """)

        /// ARGV: room, from, to ("" for everyone), node, message. Returns how many on other nodes got it.
        static let relay = Script(prelude + """
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
        return {count, told}
        """)

        /// ARGV: room, node, lease (ms), grace (ms), then identity, seat, holder, grant for each
        /// seat of this node's. Renews them (puts back those Redis lost, or that lapsed while the
        /// node was slow) and returns those another node holds now.
        static let refresh = Script(prelude + """
        local room, node, lease, graceMs = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
        expire(room, graceMs)
        local lost = {}
        for i = 5, #ARGV, 4 do
          local who = ARGV[i]
          local at = redis.call('HGET', nodes, who)
          if not at or at == node then
            redis.call('ZREM', grace, who)
            redis.call('ZADD', seats, now + lease, who)
            redis.call('HSET', nodes, who, node)
            redis.call('HSETNX', info, who, ARGV[i + 1] .. ' ' .. ARGV[i + 2] .. ' ' .. ARGV[i + 3])
          else
            lost[#lost + 1] = who
          end
        end
        keep(lease, graceMs)
        return {lost, told}
        """)
    }
}
