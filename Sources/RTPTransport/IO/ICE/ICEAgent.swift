internal import CNice
import Platform
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
import ICEServers
#endif

/// What ICE has found and how the connection stands, as libnice reports it.
public enum ICEConnectionState: String, Sendable, Equatable {
    case disconnected, gathering, connecting, connected, ready, failed
}

/// The candidate pair media flows over.
public struct ICECandidatePair: Sendable, Equatable, Codable, CustomStringConvertible {
    public struct End: Sendable, Equatable, Codable {
        /// host, srflx, prflx or relay.
        public var type: String
        /// udp or tcp.
        public var transport: String
        public var address: String
        public var port: Int
    }
    public var local: End
    public var remote: End

    /// Parses the shim's "ltype lproto laddr lport rtype rproto raddr rport".
    init?(text: String) {
        let f = text.split(separator: " ").map(String.init)
        guard f.count == 8, let lp = Int(f[3]), let rp = Int(f[7]) else { return nil }
        local = End(type: f[0], transport: f[1], address: f[2], port: lp)
        remote = End(type: f[4], transport: f[5], address: f[6], port: rp)
    }

    public var description: String {
        "\(local.type) \(local.transport) \(local.address):\(local.port) -> \(remote.type) \(remote.address):\(remote.port)"
    }
}

/// One ICE agent (RFC 8445, full ICE, regular nomination, trickle) with one stream of one
/// component: audio, video, RTX and RTCP share it (BUNDLE and rtcp-mux), so a call holds one NAT
/// binding and one TURN allocation. Keepalives are binding requests every 4-6 s; libnice fails
/// the pair after 50 s without an answer to any. Consent freshness (RFC 7675) is kept by the
/// transport above (`BundleTransport`), not by libnice; `recheck()` looks for a lost path again.
///
/// libnice runs on a GLib main loop on a thread of its own ("ice", see CNice); every libnice call
/// but `send` is marshalled onto that thread, and events and received data arrive on it. `send`
/// is called from the sending threads directly: libnice takes its agent lock for it, and
/// marshalling each packet would add a thread hop to every one.
public final class ICEAgent: @unchecked Sendable {  // `agent` is set in init and freed once in close(), after `gate` has closed
    public struct Configuration: Sendable {
        /// The controlling agent nominates the pair (RFC 8445 §6.1.1): the offerer, in a call.
        public var controlling: Bool
        public var servers: [ICEServer] = []
        /// Only relayed candidates (`--ice-transport relay`).
        public var relayOnly = false
        /// Host candidates on these addresses only; empty: every interface (loopback when there is no other).
        public var localAddresses: [String] = []
        public init(controlling: Bool) { self.controlling = controlling }
    }

    public enum Event: Sendable, Equatable {
        /// A local candidate, as an SDP attribute value without "a=" ("candidate:1 1 UDP ...").
        case localCandidate(String)
        case gatheringDone
        case state(ICEConnectionState)
        case selectedPair(ICECandidatePair)
    }

    public let configuration: Configuration
    private let agent: OpaquePointer
    /// Every call into libnice goes through the gate; `close` frees the agent only once no call
    /// is under way (sending threads call `send` while a restart closes the agent they used).
    private let gate = UseGate()
    private let handlers: Handlers
    /// The username fragment and password this agent checks with (RFC 8445 §5.3).
    public let localCredentials: (ufrag: String, password: String)

    final class Handlers: Sendable {
        let event: @Sendable (Event) -> Void
        let data: @Sendable ([UInt8]) -> Void
        init(event: @escaping @Sendable (Event) -> Void, data: @escaping @Sendable ([UInt8]) -> Void) {
            self.event = event
            self.data = data
        }
    }

    /// Creates the agent and its stream; `onEvent` and `onData` run on the agent's thread.
    public init(configuration: Configuration, onEvent: @escaping @Sendable (Event) -> Void, onData: @escaping @Sendable ([UInt8]) -> Void) throws(ICEError) {
        self.configuration = configuration
        handlers = Handlers(event: onEvent, data: onData)
        // STUN and TURN servers by address: libnice takes IP literals.
        var resolved: [(server: ICEServer, ip: String)] = []
        for server in configuration.servers {
            guard let ip = Self.resolve(server.host) else { throw ICEError("ICE server \(server.url): cannot resolve \(server.host)") }
            if case .turn = server.kind, server.username == nil || server.credential == nil {
                throw ICEError("TURN server \(server.url) needs a username and a credential")
            }
            resolved.append((server, ip))
        }
        let user = Unmanaged.passUnretained(handlers).toOpaque()
        guard let agent = cnice_agent_create(configuration.controlling ? 1 : 0, configuration.relayOnly ? 1 : 0, user, { user, kind, number, text in
            guard let user else { return }
            let handlers = Unmanaged<Handlers>.fromOpaque(user).takeUnretainedValue()
            let text = text.map { String(cString: $0) } ?? ""
            switch Int(kind) {
            case Int(CNICE_EVENT_CANDIDATE): handlers.event(.localCandidate(text))
            case Int(CNICE_EVENT_GATHERING_DONE): handlers.event(.gatheringDone)
            case Int(CNICE_EVENT_STATE):
                let states: [ICEConnectionState] = [.disconnected, .gathering, .connecting, .connected, .ready, .failed]
                handlers.event(.state(states[min(Int(number), states.count - 1)]))
            case Int(CNICE_EVENT_SELECTED_PAIR):
                if let pair = ICECandidatePair(text: text) { handlers.event(.selectedPair(pair)) }
            default: break
            }
        }, { user, data, length in
            guard let user, let data else { return }
            Unmanaged<Handlers>.fromOpaque(user).takeUnretainedValue().data(Array(UnsafeBufferPointer(start: data, count: Int(length))))
        }) else { throw ICEError("libnice could not create an ICE agent") }
        self.agent = agent
        for address in configuration.localAddresses where cnice_agent_add_local_address(agent, address) != 1 {
            cnice_agent_destroy(agent)
            throw ICEError("not a local address for ICE: \(address)")
        }
        if let stun = resolved.first(where: { $0.server.kind == .stun }) { _ = cnice_agent_set_stun(agent, stun.ip, UInt32(stun.server.port)) }
        for (server, ip) in resolved {
            guard case .turn(let tcp) = server.kind else { continue }
            _ = cnice_agent_add_turn(agent, ip, UInt32(server.port), server.username, server.credential, tcp ? 1 : 0)
        }
        var ufrag = [CChar](repeating: 0, count: 257), password = [CChar](repeating: 0, count: 257)
        cnice_agent_local_credentials(agent, &ufrag, 257, &password, 257)
        localCredentials = (String(decoding: ufrag.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                            String(decoding: password.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    deinit { close() }

    static func resolve(_ host: String) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(first.pointee.ai_addr, first.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else { return nil }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Gathers host, server-reflexive and relayed candidates; each arrives as `.localCandidate`.
    public func startGathering() throws(ICEError) {
        guard let started = gate.use({ cnice_agent_gather(agent) == 1 }) else { throw ICEError("the ICE agent is closed") }
        guard started else { throw ICEError("libnice could not start gathering candidates (no usable local address?)") }
    }

    /// The peer's username fragment and password (from its session description).
    public func setRemoteCredentials(ufrag: String, password: String) throws(ICEError) {
        guard !ufrag.isEmpty, !password.isEmpty else { throw ICEError("the peer's ICE credentials are empty") }
        guard gate.use({ cnice_agent_set_remote_credentials(agent, ufrag, password) == 1 }) == true else {
            throw ICEError("libnice refused the peer's ICE credentials")
        }
    }

    /// One remote candidate, as in SDP ("candidate:..." or "a=candidate:...").
    public func addRemoteCandidate(_ line: String) throws(ICEError) {
        if gate.use({ cnice_agent_add_remote_candidate(agent, line) < 0 }) == true { throw ICEError("not an ICE candidate libnice can use: \(line)") }
    }

    /// The peer has sent all its candidates (an end-of-candidates indication).
    public func remoteGatheringDone() {
        gate.use { cnice_agent_remote_gathering_done(agent) }
    }

    /// After consent was lost: every pair is checked again with the same credentials on both
    /// sides, so the path is found again when it returns, with no signaling.
    public func recheck() {
        gate.use { cnice_agent_recheck(agent) }
    }

    /// Sends one datagram over the selected pair; false when there is none yet (or it failed).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        gate.use { bytes.withUnsafeBufferPointer { cnice_agent_send(agent, $0.baseAddress, UInt32($0.count)) } == Int32(bytes.count) } ?? false
    }

    /// Releases TURN allocations, stops the agent's thread and frees it. Nothing is reported
    /// after, and nothing is sent: a `send` under way finishes first, later ones return false.
    public func close() {
        guard gate.close() else { return }
        cnice_agent_destroy(agent)
    }
}
