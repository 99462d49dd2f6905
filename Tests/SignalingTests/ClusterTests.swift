@testable import EndpointSignaling
import Foundation
@testable import SignalingService
import Synchronization
import Testing
import TestSupport
@testable import Signaling

/// Several signaling nodes sharing rooms through a real redis-server (skipped where Debian's
/// redis-server is not installed).
@Suite(.serialized) struct ClusterTests {
    static let hasRedis = FileManager.default.isExecutableFile(atPath: RedisProcess.executable)

    func node(_ redis: RedisProcess, lease: Duration = .seconds(5), participants: Int = 2, grace: Duration = .seconds(60)) throws -> SignalingServer {
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret)
        configuration.redis = RedisAddress(host: "127.0.0.1", port: redis.port)
        configuration.redisLease = lease
        configuration.limits.seatGrace = grace
        configuration.limits.maxParticipantsPerRoom = participants
        let server = try SignalingServer(configuration: configuration)
        server.start()
        return server
    }

    /// A client of the first node, with the others as its next servers.
    func client(_ ports: [Int], room: String = "lab", identity: String) -> (SignalingClient, EventLog) {
        makeClient(port: ports[0], room: room, identity: identity, alternates: Array(ports.dropFirst()))
    }

    func scrape(_ port: Int) throws -> String {
        try WebClient(port: port).request("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n").body
    }

    /// "roof" joined on node `a`, then "bench" on node `b`.
    func roofAndBench(_ a: SignalingServer, _ b: SignalingServer) async -> (SignalingClient, EventLog, SignalingClient, EventLog) {
        let (roof, roofLog) = client([a.port], identity: "roof")
        #expect(await roofLog.wait(isJoined) != nil)
        let (bench, benchLog) = client([b.port], identity: "bench")
        #expect(await benchLog.wait(isJoined) != nil)
        return (roof, roofLog, bench, benchLog)
    }

    func received(_ log: EventLog, id: String, from: String) async -> Bool {
        await log.wait { if case .message(let m) = $0 { return m.id == id && m.from == from }; return false } != nil
    }

    @Test(.enabled(if: hasRedis)) func participantsOnTwoNodesCallEachOther() async throws {
        let redis = try #require(try RedisProcess())
        let a = try node(redis), b = try node(redis)
        defer { a.stop(); b.stop() }
        let (roof, roofLog) = client([a.port], identity: "roof")
        #expect(await roofLog.wait(isJoined) == .joined(participant: "roof", peers: [], rejoined: false))
        let (bench, benchLog) = client([b.port], identity: "bench")
        #expect(await benchLog.wait(isJoined) == .joined(participant: "bench", peers: ["roof"], rejoined: false))
        #expect(await roofLog.wait { $0 == .peerJoined("bench", rejoin: false) } != nil, "told across nodes")

        let offer = roof.send(RelayMessage(kind: .offer, id: "", to: "bench", payload: .object(["sdp": .string("v=0")])))
        #expect(await received(benchLog, id: offer, from: "roof"))
        let broadcast = bench.send(RelayMessage(kind: .candidate, id: "", payload: .object(["candidate": .string("c")])))
        let got = await received(roofLog, id: broadcast, from: "bench")
        #expect(got, "roof heard \(roofLog.all); bench heard \(benchLog.all)")
        // To someone in no node's room: the sender is told, as on one node.
        let lost = roof.send(RelayMessage(kind: .bye, id: "", to: "nobody"))
        #expect(await roofLog.wait { if case .undelivered(let m, .unknownPeer, _) = $0 { return m.id == lost }; return false } != nil)

        bench.stop()
        #expect(await roofLog.wait { $0 == .peerLeft("bench", reason: "disconnected") } != nil)
        roof.stop()
        #expect(!roofLog.all.contains { if case .undelivered(let m, _, _) = $0 { return m.id != lost }; return false })
    }

    /// A Redis that stalls for a second and a half (forking for a dump, starved on a loaded host)
    /// delays a relay across nodes and loses none: the node waits for its reply. Before, a reply
    /// given up on after half a second, twice, told the sender the directory was unavailable
    /// (and the message, depending on where the stall caught it, went or never came).
    @Test(.enabled(if: hasRedis)) func aStalledRedisDelaysARelayAndLosesNone() async throws {
        let redis = try #require(try RedisProcess())
        let a = try node(redis), b = try node(redis)
        defer { a.stop(); b.stop() }
        let (roof, roofLog, bench, benchLog) = await roofAndBench(a, b)
        #expect(await roofLog.wait { $0 == .peerJoined("bench", rejoin: false) } != nil)
        redis.pause()
        let directory = try #require(b.directory)
        let issued = directory.counters.commands
        // Once bench's node has sent Redis its next command (the relay, unless a renewal fell due
        // in the same millisecond), the stall lasts 1.5 s: the fault's length, past the old
        // timeout and its retry, not an order of events. A thread of its own ends it: the test
        // pool's threads can be busy with other suites' work for seconds on a loaded machine,
        // which stretched the stall past the node's 3 s reply timeout.
        let resumed = DispatchSemaphore(value: 0)
        Thread {
            let deadline = Date().addingTimeInterval(10)
            while directory.counters.commands <= issued && Date() < deadline { usleep(1000) }
            Thread.sleep(forTimeInterval: 1.5)
            redis.resume()
            resumed.signal()
        }.start()
        let broadcast = bench.send(RelayMessage(kind: .candidate, id: "", payload: .object(["candidate": .string("c")])))
        #expect(await received(roofLog, id: broadcast, from: "bench"))
        resumed.wait()
        #expect(directory.counters.commands > issued, "the relay reached Redis during the stall")
        #expect(!benchLog.all.contains { if case .undelivered(let m, _, _) = $0 { return m.id == broadcast }; return false },
                "the sender was told its message went nowhere")
        bench.stop()
        roof.stop()
    }

    /// The rules of a seat hold across nodes, decided in Redis: another token of a seated
    /// identity is told to wait; the seat's renewal takes it to another node (the old connection
    /// is replaced, the room told), and back within the grace after its connection is lost; a
    /// seat in its grace holds its place; after the grace, the renewal is refused.
    @Test(.enabled(if: hasRedis)) func seatRulesHoldAcrossNodes() async throws {
        let redis = try #require(try RedisProcess())
        let a = try node(redis, grace: .seconds(2)), b = try node(redis, grace: .seconds(2))
        defer { a.stop(); b.stop() }
        let now = Int64(Date().timeIntervalSince1970)
        func join(_ node: SignalingServer, _ token: String) throws -> RawConnection {
            let connection = try RawConnection(port: node.port)
            connection.send(#"{"type":"join","room":"lab","token":"\#(token)"}"# + "\n")
            return connection
        }
        func token(_ identity: String, ttl: Int64, at issued: Int64 = now) -> String {
            TokenIssuer(secret: testSecret).mint(TokenClaims(identity: identity, room: "lab", issuedAt: issued, expires: issued + ttl))
        }
        let bench = try join(b, token("bench", ttl: 600))
        guard case .joined? = bench.receive() else { Issue.record("bench not seated"); return }
        // A 3 s token: its renewal comes within a second or two.
        let roof = try join(a, token("roof", ttl: 3))
        guard case .joined? = roof.receive() else { Issue.record("roof not seated"); return }
        #expect(bench.receive() == .peerJoined(participant: "roof", rejoin: false))
        let other = try join(b, token("roof", ttl: 600, at: now + 1))
        #expect(errorCodeOf(other.receive()) == .seatTaken)
        guard case .token(let renewal, _, _)? = roof.receive() else { Issue.record("no renewal"); return }
        // The renewal on the other node: the seat moves, a's connection is replaced, bench hears.
        let moved = try join(b, renewal)
        guard case .joined(_, "roof", ["bench"], _)? = moved.receive() else { Issue.record("the renewal did not take the seat"); return }
        #expect(errorCodeOf(roof.receive()) == .replaced)
        #expect(bench.receive() == .peerJoined(participant: "roof", rejoin: true))
        // Its connection lost, the seat waits: a newcomer finds the room full; the renewal takes it back on a.
        moved.close()
        #expect(bench.receive() == .peerLeft(participant: "roof", reason: "disconnected"))
        #expect(errorCodeOf(try join(a, token("late", ttl: 600)).receive()) == .roomFull)
        let back = try join(a, renewal)
        guard case .joined(_, "roof", ["bench"], _)? = back.receive() else { Issue.record("not back within the grace"); return }
        #expect(bench.receive() == .peerJoined(participant: "roof", rejoin: true))
        back.close()
        #expect(bench.receive() == .peerLeft(participant: "roof", reason: "disconnected"))
        // After the grace the seat is gone, and the renewal is good for nothing.
        let gone = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < gone { try await Task.sleep(for: .milliseconds(100)) }
        #expect(errorCodeOf(try join(b, renewal).receive()) == .tokenRenewal)
        guard case .joined? = try join(b, token("late", ttl: 600)).receive() else { Issue.record("the seat's place was not freed"); return }
    }

    /// Three participants of a room of two, each joining on its own node at the same moment:
    /// every time, two get in and one is told the room is full.
    @Test(.enabled(if: hasRedis)) func racingJoinsOnThreeNodesKeepARoomOfTwo() throws {
        let redis = try #require(try RedisProcess())
        let nodes = try (0..<3).map { _ in try node(redis) }
        defer { for n in nodes { n.stop() } }
        let now = Int64(Date().timeIntervalSince1970)
        for round in 0..<30 {
            let room = "race-\(round)"
            // Every connection stays open until all three have their answer (one that left
            // would free its seat for the next).
            nonisolated(unsafe) let connections = try nodes.map { try RawConnection(port: $0.port) }
            let lines = (0..<3).map { i in
                let token = TokenIssuer(secret: testSecret).mint(TokenClaims(identity: "p\(i)", room: room, issuedAt: now, expires: now + 600))
                return #"{"type":"join","room":"\#(room)","token":"\#(token)"}"# + "\n"
            }
            let outcomes = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 3) { i in
                connections[i].send(lines[i])
                let reply = connections[i].receive()
                let outcome = switch reply {
                case .joined?: "joined"
                case .error(let code, _, _)?: code.rawValue
                default: "nothing"
                }
                outcomes.withLock { $0.append(outcome) }
            }
            let seen = outcomes.withLock { $0 }.sorted()
            #expect(seen == ["joined", "joined", "room_full"], "round \(round): \(seen)")
        }
    }

    /// A node that dies without a word: its participants' seats run out after the lease, and the
    /// others hear they left ("timeout").
    @Test(.enabled(if: hasRedis)) func aDeadNodesParticipantsExpire() async throws {
        let redis = try #require(try RedisProcess())
        let a = try node(redis, lease: .seconds(1)), b = try node(redis, lease: .seconds(1))
        defer { b.stop() }
        let (roof, _, bench, benchLog) = await roofAndBench(a, b)
        // The node goes without telling Redis; its client has nowhere else to go.
        a.stop()
        #expect(await benchLog.wait(timeout: .seconds(8)) { $0 == .peerLeft("roof", reason: "timeout") } != nil)
        roof.stop()
        bench.stop()
    }

    /// A node killed mid-call: its client moves to the next node in its list and keeps its seat;
    /// the peer on another node sees no one leave, and messages flow again.
    @Test(.enabled(if: hasRedis)) func aClientMovesToAnotherNodeAndKeepsItsSeat() async throws {
        let redis = try #require(try RedisProcess())
        let a = try node(redis), b = try node(redis), c = try node(redis)
        defer { b.stop(); c.stop() }
        let (roof, roofLog) = client([a.port, b.port], identity: "roof")
        #expect(await roofLog.wait(isJoined) != nil)
        let (bench, benchLog) = client([c.port], identity: "bench")
        #expect(await benchLog.wait(isJoined) != nil)
        a.stop()
        let back = ContinuousClock.now
        #expect(await roofLog.wait { $0 == .joined(participant: "roof", peers: ["bench"], rejoined: true) } != nil)
        let took = ContinuousClock.now - back
        #expect(took < .seconds(2), "back on another node in \(took)")
        let offer = roof.send(RelayMessage(kind: .offer, id: "", to: "bench"))
        #expect(await received(benchLog, id: offer, from: "roof"))
        // The peer saw no churn, and a third participant still finds the room full.
        #expect(!benchLog.all.contains { if case .peerLeft = $0 { return true }; return false })
        let late = try RawConnection(port: b.port)
        let now = Int64(Date().timeIntervalSince1970)
        late.send(#"{"type":"join","room":"lab","token":"\#(TokenIssuer(secret: testSecret).mint(TokenClaims(identity: "late", room: "lab", issuedAt: now, expires: now + 600)))"}"# + "\n")
        #expect(errorCodeOf(late.receive()) == .roomFull)
        roof.stop()
        bench.stop()
    }

    /// Redis restarted empty: nobody is disconnected, the nodes put their seats back, and the
    /// room and the relay work as before.
    @Test(.enabled(if: hasRedis)) func clientsSurviveARedisRestart() async throws {
        let redis = try #require(try RedisProcess())
        let a = try node(redis), b = try node(redis)
        defer { a.stop(); b.stop() }
        let (roof, roofLog, bench, benchLog) = await roofAndBench(a, b)
        redis.kill()
        #expect(await eventually { !a.directory!.isHealthy && !b.directory!.isHealthy })
        try redis.start()
        #expect(await eventually(within: .seconds(10)) { a.directory!.isHealthy && b.directory!.isHealthy })
        // Both seats are back within a renewal (about two seconds), read in Redis itself; then the
        // room is full again for a third participant.
        let inRedis = RedisConnection(address: RedisAddress(host: "127.0.0.1", port: redis.port))
        #expect(await eventually(within: .seconds(5)) {
            (try? inRedis.command(["ZRANGE", "callend:room:lab:seats", "0", "-1"]))?.elements.compactMap(\.text).sorted() == ["bench", "roof"]
        })
        let now = Int64(Date().timeIntervalSince1970)
        let late = try RawConnection(port: a.port)
        late.send(#"{"type":"join","room":"lab","token":"\#(TokenIssuer(secret: testSecret).mint(TokenClaims(identity: "late", room: "lab", issuedAt: now, expires: now + 600)))"}"# + "\n")
        #expect(errorCodeOf(late.receive()) == .roomFull)
        let offer = roof.send(RelayMessage(kind: .offer, id: "", to: "bench"))
        #expect(await received(benchLog, id: offer, from: "roof"))
        let answer = bench.send(RelayMessage(kind: .answer, id: "", to: "roof"))
        #expect(await received(roofLog, id: answer, from: "bench"))
        for log in [roofLog, benchLog] {
            #expect(!log.all.contains { if case .reconnecting = $0 { return true }; return false }, "nobody was disconnected")
        }
        roof.stop()
        bench.stop()
    }

    /// A node that cannot reach Redis answers a join with `unavailable`, and the client moves on
    /// to its next server instead of waiting there.
    /// The client hears `unavailable` and nothing of Redis (its address stays in the log).
    @Test(.enabled(if: hasRedis)) func aJoinTheDirectoryCannotSeatGoesToTheNextServer() async throws {
        let gone = try #require(try RedisProcess()), working = try #require(try RedisProcess())
        let logged = Mutex<[String]>([])
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret)
        configuration.redis = RedisAddress(host: "127.0.0.1", port: gone.port)
        let a = try SignalingServer(configuration: configuration) { line in logged.withLock { $0.append(line.text) } }
        a.start()
        let b = try node(working)
        defer { a.stop(); b.stop() }
        gone.kill()
        let late = try RawConnection(port: a.port)
        let now = Int64(Date().timeIntervalSince1970)
        late.send(#"{"type":"join","room":"lab","token":"\#(TokenIssuer(secret: testSecret).mint(TokenClaims(identity: "x", room: "lab", issuedAt: now, expires: now + 600)))"}"# + "\n")
        let refusal = late.receive()
        #expect(errorCodeOf(refusal) == .unavailable)
        if case .error(_, let text, _)? = refusal {
            #expect(!text.contains("127.0.0.1") && !text.contains("\(gone.port)") && !text.contains("redis://"), "Redis's address reached a client: \(text)")
        }
        #expect(logged.withLock { $0.contains { $0.contains("redis://127.0.0.1:\(gone.port)") } }, "the log does not say which Redis: \(logged.withLock { $0 })")
        let (roof, roofLog) = client([a.port, b.port], identity: "roof")
        #expect(await roofLog.wait { if case .reconnecting(_, _, let reason) = $0 { return reason.hasPrefix("unavailable") }; return false } != nil)
        #expect(await roofLog.wait(isJoined) != nil)
        roof.stop()
    }

    @Test func redisAddressesParseOrSayWhatIsWrong() throws {
        #expect(try RedisAddress(url: "redis://10.0.0.5") == RedisAddress(host: "10.0.0.5"))
        #expect(try RedisAddress(url: "redis://:pw@cache:6380/2") == RedisAddress(host: "cache", port: 6380, password: "pw", database: 2))
        #expect(try RedisAddress(url: "redis://default:pw@[::1]:7000") == RedisAddress(host: "::1", port: 7000, username: "default", password: "pw"))
        #expect(try RedisAddress(url: "rediss://callend:s3cret@redis.example.org") == RedisAddress(host: "redis.example.org", username: "callend", password: "s3cret", tls: true))
        #expect(try RedisAddress(url: "redis://:pw@cache:6380/2").description == "redis://:***@cache:6380/2", "no password in logs")
        #expect(try RedisAddress(url: "rediss://callend:s3cret@cache").description == "rediss://callend:***@cache:6379", "no password in logs")
        for bad in ["http://x", "redis://", "rediss://", "redis://host:0", "redis://host:70000", "redis://host:x", "redis://[::1", "redis://h/db"] {
            #expect(throws: RedisError.self, "\(bad)") { try RedisAddress(url: bad) }
        }
    }

    @Test func aRedisThatCannotBeReachedStopsTheServiceFromStarting() throws {
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret)
        configuration.redis = RedisAddress(host: "127.0.0.1", port: RedisProcess.freePort())
        #expect(throws: RedisError.self) { try SignalingServer(configuration: configuration) }
    }

    @Test(.enabled(if: hasRedis)) func metricsSayRedisIsUpAndPassPromtool() async throws {
        let redis = try #require(try RedisProcess())
        var configuration = SignalingServerConfiguration(port: 0, secret: testSecret)
        configuration.redis = RedisAddress(host: "127.0.0.1", port: redis.port)
        configuration.metrics = ("127.0.0.1", 0)
        let server = try SignalingServer(configuration: configuration)
        server.start()
        defer { server.stop() }
        let text = try scrape(try #require(server.metricsPort))
        #expect(text.contains("callend_signaling_redis_up 1"))
        if let check = try promtoolCheck(text) { #expect(check.status == 0 && check.said.isEmpty, "\(check.said)") }
        redis.kill()
        #expect(await eventually { (try? scrape(server.metricsPort!))?.contains("callend_signaling_redis_up 0") == true })
    }
}

