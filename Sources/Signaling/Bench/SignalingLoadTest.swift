import Platform
import FoundationEssentials
internal import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// Thousands of signaling clients on one epoll thread, joining rooms in pairs and relaying an
/// offer and an answer, against a server at HOST:PORT. It measures what `callend bench signaling`
/// prints: connect time, joins per second, join → peer-joined latency, offer → answer round trip.
public struct SignalingLoadTest {
    public struct Result: Sendable {
        public var clients: Int
        public var connectSeconds: Double
        public var joins: Int
        public var joinSeconds: Double
        public var joinsPerSecond: Double { Double(joins) / joinSeconds }
        /// From the second participant's join being sent to the first one's peer-joined arriving.
        public var peerJoinedLatencies: [Double]
        /// From an offer being sent to its answer arriving.
        public var offerAnswerLatencies: [Double]
        public var completedPairs: Int
        public var errors: [String: Int]
        /// Connections open at the same time at the peak.
        public var concurrent: Int
    }

    public let host: String
    /// The services' ports: one, or several nodes sharing rooms, in which case each room's two
    /// participants join on two different nodes.
    public let ports: [Int]
    public let clients: Int
    public let secret: TokenSecret
    public var timeout: Duration = .seconds(120)
    /// Rooms started per second; 0 starts every room at once (a burst, which measures throughput;
    /// a steady rate measures latency without the queue a burst builds).
    public var roomsPerSecond: Double = 0

    public init(host: String, port: Int, clients: Int, secret: TokenSecret) {
        self.init(host: host, ports: [port], clients: clients, secret: secret)
    }

    public init(host: String, ports: [Int], clients: Int, secret: TokenSecret) {
        precondition(!ports.isEmpty)
        self.host = host
        self.ports = ports
        self.clients = clients - clients % 2
        self.secret = secret
    }

    final class Client {
        let fd: Int32
        let token: UInt64
        let pair: Int
        let isFirst: Bool
        var framer = LineFramer()
        var output: [UInt8] = []
        var wantsWrite = false
        init(fd: Int32, token: UInt64, pair: Int, isFirst: Bool) {
            self.fd = fd
            self.token = token
            self.pair = pair
            self.isFirst = isFirst
        }
    }

    /// Connects every client, then runs the joins and relays; `afterJoins` runs while all
    /// connections are still open (to read the server's memory, say).
    public func run(afterJoins: () -> Void = {}) throws -> Result {
        let clock = MonotonicClock()
        let epoll = try Epoll()
        let now = { clock.now }
        let pairs = clients / 2
        let issuer = TokenIssuer(secret: secret)
        let wall = Int64(WallClock.unixSeconds)
        var tokens: [String] = []
        tokens.reserveCapacity(clients)
        for i in 0..<clients {
            tokens.append(issuer.mint(TokenClaims(identity: "p\(i)", room: "bench-\(i / 2)", issuedAt: wall, expires: wall + 3600)))
        }

        var all: [Client] = []
        all.reserveCapacity(clients)
        defer { for c in all { close(c.fd) } }
        let connectStart = now()
        for i in 0..<clients {
            let node = (i / 2 + i % 2) % ports.count
            let fd = try TCPSocket.connect(host: host, port: ports[node], timeout: .seconds(10))
            let client = Client(fd: fd, token: UInt64(i), pair: i / 2, isFirst: i % 2 == 0)
            all.append(client)
            try epoll.add(fd, token: UInt64(i), writable: false)
        }
        let connectSeconds = (now() - connectStart).inSeconds

        func send(_ client: Client, _ message: SignalingMessage) {
            client.output += message.serialized()
            flush(client)
        }
        func flush(_ client: Client) {
            while !client.output.isEmpty {
                let n = client.output.withUnsafeBytes { Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n > 0 { client.output.removeFirst(n); continue }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    if !client.wantsWrite {
                        client.wantsWrite = true
                        try? epoll.modify(client.fd, token: client.token, writable: true)
                    }
                }
                return
            }
        }

        var secondJoinSent = [MediaTime?](repeating: nil, count: pairs)
        var offerSent = [MediaTime?](repeating: nil, count: pairs)
        var peerJoined: [Double] = [], offerAnswer: [Double] = []
        var joins = 0, completed = 0
        var errors: [String: Int] = [:]
        var lastJoin = now()

        let joinStart = now()
        var started = 0
        func startRooms() {
            let due = roomsPerSecond > 0 ? min(pairs, Int((now() - joinStart).inSeconds * roomsPerSecond) + 1) : pairs
            while started < due {
                send(all[2 * started], .join(room: "bench-\(started)", token: tokens[2 * started], rejoin: false))
                started += 1
            }
        }
        startRooms()
        var events = [epoll_event](repeating: epoll_event(), count: 1024)
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = now() + timeout
        while completed < pairs && now() < deadline {
            startRooms()
            for event in epoll.wait(into: &events, timeoutMs: roomsPerSecond > 0 ? 1 : 100) {
                guard event.token < UInt64(all.count) else { continue }
                let client = all[Int(event.token)]
                if event.writable {
                    flush(client)
                    if client.output.isEmpty && client.wantsWrite {
                        client.wantsWrite = false
                        try? epoll.modify(client.fd, token: event.token, writable: false)
                    }
                }
                guard event.readable else { continue }
                let n = buffer.withUnsafeMutableBytes { Glibc.read(client.fd, $0.baseAddress, $0.count) }
                guard n > 0 else {
                    if n == 0 { errors["closed by server", default: 0] += 1; epoll.remove(client.fd) }
                    continue
                }
                guard let lines = try? client.framer.append(buffer[0..<n]) else { continue }
                for line in lines {
                    guard let message = try? SignalingMessage(parsing: line) else { errors["unparsable", default: 0] += 1; continue }
                    let pair = client.pair
                    switch message {
                    case .joined:
                        joins += 1
                        lastJoin = now()
                        if client.isFirst {
                            secondJoinSent[pair] = now()
                            send(all[2 * pair + 1], .join(room: "bench-\(pair)", token: tokens[2 * pair + 1], rejoin: false))
                        }
                    case .peerJoined:
                        if let sent = secondJoinSent[pair] { peerJoined.append((now() - sent).inSeconds) }
                        offerSent[pair] = now()
                        send(client, .relay(RelayMessage(kind: .offer, id: "o\(pair)", payload: .object(["sdp": .string("v=0")]))))
                    case .relay(let relay) where relay.kind == .offer:
                        send(client, .relay(RelayMessage(kind: .answer, id: "a\(pair)", payload: .object(["sdp": .string("v=0")]))))
                    case .relay(let relay) where relay.kind == .answer:
                        if let sent = offerSent[pair] { offerAnswer.append((now() - sent).inSeconds) }
                        completed += 1
                    case .error(let code, _, _):
                        errors[code.rawValue, default: 0] += 1
                    default:
                        break
                    }
                }
            }
        }
        let joinSeconds = (lastJoin - joinStart).inSeconds
        afterJoins()
        return Result(clients: clients, connectSeconds: connectSeconds, joins: joins, joinSeconds: max(joinSeconds, 1e-6),
                      peerJoinedLatencies: peerJoined, offerAnswerLatencies: offerAnswer, completedPairs: completed,
                      errors: errors, concurrent: all.count)
    }
}
