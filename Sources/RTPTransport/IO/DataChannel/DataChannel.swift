import Dispatch
import Synchronization

/// A message on a data channel: text (PPID 51) or bytes (PPID 53).
public enum DataChannelMessage: Sendable, Equatable {
    case text(String)
    case binary([UInt8])

    public var count: Int {
        switch self {
        case .text(let text): text.utf8.count
        case .binary(let bytes): bytes.count
        }
    }
}

/// How a channel delivers (RFC 8831 §6.6): every message, or each given up after some
/// retransmissions or some time (partial reliability, RFC 3758).
public enum DataChannelReliability: Sendable, Equatable {
    case reliable
    case maxRetransmits(Int)
    case maxLifetime(milliseconds: Int)
}

/// What a channel is: its label, subprotocol, order and reliability.
public struct DataChannelOptions: Sendable, Equatable {
    public var label: String
    public var `protocol`: String
    public var ordered: Bool
    public var reliability: DataChannelReliability
    public var priority: UInt16

    public init(label: String, protocol: String = "", ordered: Bool = true, reliability: DataChannelReliability = .reliable, priority: UInt16 = 256) {
        self.label = label
        self.protocol = `protocol`
        self.ordered = ordered
        self.reliability = reliability
        self.priority = priority
    }

    /// Ordered and reliable: commands, files.
    public static func reliable(_ label: String) -> DataChannelOptions { DataChannelOptions(label: label) }
    /// Unordered, never retransmitted: telemetry where only the latest value matters.
    public static func unreliable(_ label: String) -> DataChannelOptions {
        DataChannelOptions(label: label, ordered: false, reliability: .maxRetransmits(0))
    }
}

/// One data channel of a session: send on it, and get what the peer sends.
public final class DataChannel: @unchecked Sendable {  // options and stream are immutable; the rest is behind `state`
    public enum State: Sendable, Equatable { case connecting, open, closed }

    public let options: DataChannelOptions
    public let stream: UInt16
    public var label: String { options.label }
    private weak var session: DataChannelSession?
    private struct Mutable {
        var state: State
        /// Until the peer's ACK, messages go ordered (RFC 8832 §6), whatever the channel is.
        var acknowledged: Bool
        var onMessage: (@Sendable (DataChannelMessage) -> Void)?
        var onState: (@Sendable (State) -> Void)?
        /// What came before anyone listened (a peer sends right after its OPEN).
        var early: [DataChannelMessage] = []
    }
    private let mutable: Mutex<Mutable>

    init(options: DataChannelOptions, stream: UInt16, session: DataChannelSession, state: State, acknowledged: Bool) {
        self.options = options
        self.stream = stream
        self.session = session
        mutable = Mutex(Mutable(state: state, acknowledged: acknowledged))
    }

    public var state: State { mutable.withLock { $0.state } }

    /// Messages kept for a handler not set yet.
    static let maxEarlyMessages = 64

    /// Messages from the peer, in order (on an ordered channel), on the session's queue.
    /// Whatever came before the handler was set is handed to it first.
    public func onMessage(_ handler: @escaping @Sendable (DataChannelMessage) -> Void) {
        let early = mutable.withLock { m in
            m.onMessage = handler
            defer { m.early = [] }
            return m.early
        }
        for message in early { handler(message) }
    }
    /// Open and closed, on the session's queue (a channel the peer opened is open already).
    public func onStateChange(_ handler: @escaping @Sendable (State) -> Void) { mutable.withLock { $0.onState = handler } }

    /// Sends one message; waits while the association's send buffer is full. False when the
    /// channel is not open.
    @discardableResult
    public func send(_ message: DataChannelMessage) -> Bool {
        let (state, acknowledged) = mutable.withLock { ($0.state, $0.acknowledged) }
        guard state == .open, let session else { return false }
        return session.send(message, on: self, ordered: options.ordered || !acknowledged)
    }

    @discardableResult public func send(_ text: String) -> Bool { send(.text(text)) }
    @discardableResult public func send(_ bytes: [UInt8]) -> Bool { send(.binary(bytes)) }

    /// Closes the channel (resets its stream; the peer closes its side).
    public func close() {
        guard set(.closed) else { return }
        session?.closeStream(stream)
    }

    /// Returns whether the state changed.
    @discardableResult
    func set(_ new: State) -> Bool {
        let handler = mutable.withLock { m -> (@Sendable (State) -> Void)?? in
            guard m.state != new, m.state != .closed else { return nil }
            m.state = new
            return .some(m.onState)
        }
        guard let handler else { return false }
        handler?(new)
        return true
    }

    func acknowledge() { mutable.withLock { $0.acknowledged = true } }

    func deliver(_ message: DataChannelMessage) {
        let handler = mutable.withLock { m -> (@Sendable (DataChannelMessage) -> Void)? in
            // Before anyone listens, the first messages wait (a peer sends right after its
            // OPEN); a peer that floods a channel nobody reads loses what is past the bound.
            if m.onMessage == nil, m.early.count < Self.maxEarlyMessages { m.early.append(message) }
            return m.onMessage
        }
        handler?(message)
    }
}

/// Data channels over one SCTP association (RFC 8831), opened in band with DCEP (RFC 8832).
/// The DTLS client takes even stream numbers, the server odd ones. The association's packets
/// go to `output` and come in through `input`.
public final class DataChannelSession: @unchecked Sendable {  // the association is set once; the rest is behind `state`
    /// RFC 8831 §8, RFC 8832 §8.1: the PPIDs.
    enum PPID {
        static let control: UInt32 = 50
        static let string: UInt32 = 51
        static let binary: UInt32 = 53
        static let emptyString: UInt32 = 56
        static let emptyBinary: UInt32 = 57
    }

    public let isDTLSClient: Bool
    let association: SCTPAssociation
    private struct Mutable {
        /// Packets that came before `start()`: fed after our own INIT, so the peer's INIT meets
        /// an association that is opening (SCTP's simultaneous open) instead of an ABORT.
        var started = false
        var early: [[UInt8]] = []
        var up = false
        var ended = false
        var channels: [UInt16: DataChannel] = [:]
        /// Channels opened before the association was up: their OPEN goes then.
        var waiting: [DataChannel] = []
        var nextStream: UInt16
        var onChannel: (@Sendable (DataChannel) -> Void)?
        var onState: (@Sendable (Bool) -> Void)?
        var counters = Counters()
        var abortReason: String?
    }
    private let mutable: Mutex<Mutable>

    public struct Counters: Sendable, Equatable {
        public var messagesSent = 0
        public var messagesReceived = 0
        public var bytesSent = 0
        public var bytesReceived = 0
    }

    public init(isDTLSClient: Bool, localPort: UInt16 = SCTPAssociation.defaultPort, remotePort: UInt16 = SCTPAssociation.defaultPort,
                output: @escaping @Sendable ([UInt8]) -> Void) throws(SCTPAssociation.SendError) {
        self.isDTLSClient = isDTLSClient
        association = try SCTPAssociation(localPort: localPort, remotePort: remotePort, maxMessageSize: Self.maxMessageSize, output: output)
        mutable = Mutex(Mutable(nextStream: isDTLSClient ? 0 : 1))
        association.setHandlers(message: { [weak self] stream, ppid, data in self?.received(stream: stream, ppid: ppid, data) },
                                event: { [weak self] event in self?.happened(event) })
    }

    deinit { association.close() }

    /// Channels the peer opens, on the session's queue.
    public func onChannel(_ handler: @escaping @Sendable (DataChannel) -> Void) { mutable.withLock { $0.onChannel = handler } }
    /// The association up (true) and down (false).
    public func onStateChange(_ handler: @escaping @Sendable (Bool) -> Void) { mutable.withLock { $0.onState = handler } }

    public var isUp: Bool { mutable.withLock { $0.up && !$0.ended } }
    /// Why this side aborted the association, when it did (the peer broke a bound).
    public var abortReason: String? { mutable.withLock { $0.abortReason } }
    /// What this side takes from the peer in one message: its a=max-message-size (RFC 8841).
    public static let maxMessageSize = 262_144
    public var counters: Counters { mutable.withLock { $0.counters } }
    public var channels: [DataChannel] { mutable.withLock { $0.channels.values.sorted { $0.stream < $1.stream } } }

    /// Starts the association (once the DTLS under it is up). Both sides start: SCTP's
    /// simultaneous open (RFC 4960 §5.2.1) makes one association of the two INITs.
    public func start() {
        association.connect()
        let early = mutable.withLock { m -> [[UInt8]] in
            m.started = true
            defer { m.early = [] }
            return m.early
        }
        for packet in early { association.input(packet) }
    }

    /// One SCTP packet from DTLS.
    public func input(_ packet: [UInt8]) {
        let now = mutable.withLock { m -> Bool in
            if !m.started, m.early.count < 64 { m.early.append(packet) }
            return m.started
        }
        if now { association.input(packet) }
    }

    /// Opens a channel; it is open once the association is up and the OPEN sent (messages
    /// may follow at once: the peer's ACK is not waited for, RFC 8832 §6).
    public func open(_ options: DataChannelOptions) -> DataChannel? {
        let (channel, sendNow) = mutable.withLock { m -> (DataChannel?, Bool) in
            guard !m.ended else { return (nil, false) }
            var stream = m.nextStream
            while m.channels[stream] != nil { stream &+= 2 }
            m.nextStream = stream &+ 2
            let channel = DataChannel(options: options, stream: stream, session: self, state: .connecting, acknowledged: false)
            m.channels[stream] = channel
            if !m.up { m.waiting.append(channel) }
            return (channel, m.up)
        }
        if let channel, sendNow { announce(channel) }
        return channel
    }

    /// Ends the association (every channel closed).
    public func close() {
        let channels = mutable.withLock { m -> [DataChannel] in
            m.ended = true
            return Array(m.channels.values)
        }
        association.close()
        for channel in channels { channel.set(.closed) }
    }

    func send(_ message: DataChannelMessage, on channel: DataChannel, ordered: Bool) -> Bool {
        let (ppid, data): (UInt32, [UInt8]) = switch message {
        case .text(let text): text.isEmpty ? (PPID.emptyString, [0]) : (PPID.string, Array(text.utf8))
        case .binary(let bytes): bytes.isEmpty ? (PPID.emptyBinary, [0]) : (PPID.binary, bytes)
        }
        var retransmits: Int?, lifetime: Int?
        switch channel.options.reliability {
        case .reliable: break
        case .maxRetransmits(let n): retransmits = n
        case .maxLifetime(let ms): lifetime = ms
        }
        do {
            try association.send(stream: channel.stream, ppid: ppid, data, unordered: !ordered, maxRetransmits: retransmits, maxLifetimeMilliseconds: lifetime)
        } catch {
            return false
        }
        mutable.withLock { $0.counters.messagesSent += 1; $0.counters.bytesSent += message.count }
        return true
    }

    func closeStream(_ stream: UInt16) {
        association.resetStream(stream)
    }

    private func announce(_ channel: DataChannel) {
        let open = DCEPMessage.open(channel.options)
        do {
            try association.send(stream: channel.stream, ppid: PPID.control, open.serialized())
            channel.set(.open)
        } catch {
            channel.set(.closed)
        }
    }

    private func happened(_ event: SCTPAssociation.Event) {
        switch event {
        case .up:
            let (waiting, handler) = mutable.withLock { m -> ([DataChannel], (@Sendable (Bool) -> Void)?) in
                m.up = true
                defer { m.waiting = [] }
                return (m.waiting, m.onState)
            }
            handler?(true)
            for channel in waiting { announce(channel) }
        case .down, .aborted:
            let (channels, handler) = mutable.withLock { m -> ([DataChannel], (@Sendable (Bool) -> Void)?) in
                m.ended = true
                if case .aborted(let reason) = event { m.abortReason = reason }
                return (Array(m.channels.values), m.onState)
            }
            for channel in channels { channel.set(.closed) }
            handler?(false)
        case .incomingReset(let streams):
            // The peer closed these channels: reset ours too (if not already) and forget them.
            for stream in streams {
                guard let channel = mutable.withLock({ $0.channels.removeValue(forKey: stream) }) else { continue }
                if channel.set(.closed) { association.resetStream(stream) }
            }
        case .outgoingReset(let streams):
            mutable.withLock { m in for stream in streams where m.channels[stream]?.state == .closed { m.channels.removeValue(forKey: stream) } }
        }
    }

    private func received(stream: UInt16, ppid: UInt32, _ data: [UInt8]) {
        if ppid == PPID.control {
            control(stream: stream, data)
            return
        }
        guard let channel = mutable.withLock({ $0.channels[stream] }) else { return }
        // Data from the peer means it got our OPEN (RFC 8832 §6).
        channel.acknowledge()
        let message: DataChannelMessage
        switch ppid {
        case PPID.string: message = .text(String(decoding: data, as: UTF8.self))
        case PPID.binary: message = .binary(data)
        case PPID.emptyString: message = .text("")
        case PPID.emptyBinary: message = .binary([])
        default: return  // deprecated partial PPIDs (52, 54) and unknown ones
        }
        mutable.withLock { $0.counters.messagesReceived += 1; $0.counters.bytesReceived += message.count }
        channel.deliver(message)
    }

    private func control(stream: UInt16, _ data: [UInt8]) {
        guard let message = DCEPMessage(parsing: data) else { return }
        switch message {
        case .ack:
            mutable.withLock { $0.channels[stream] }?.acknowledge()
        case .open(let options):
            // The peer opens on a stream of its parity; a clash with one of ours is refused.
            let peerParity: UInt16 = isDTLSClient ? 1 : 0
            guard stream % 2 == peerParity else { return }
            let (channel, handler) = mutable.withLock { m -> (DataChannel?, (@Sendable (DataChannel) -> Void)?) in
                guard !m.ended, m.channels[stream] == nil else { return (nil, nil) }
                let channel = DataChannel(options: options, stream: stream, session: self, state: .open, acknowledged: true)
                m.channels[stream] = channel
                return (channel, m.onChannel)
            }
            guard let channel else { return }
            try? association.send(stream: stream, ppid: PPID.control, DCEPMessage.ack.serialized())
            handler?(channel)
        }
    }
}

/// The Data Channel Establishment Protocol's two messages (RFC 8832 §5).
public enum DCEPMessage: Equatable, Sendable {
    case open(DataChannelOptions)
    case ack

    static let openType: UInt8 = 0x03, ackType: UInt8 = 0x02

    public func serialized() -> [UInt8] {
        switch self {
        case .ack: return [Self.ackType]
        case .open(let o):
            var channelType: UInt8 = 0, parameter: UInt32 = 0
            switch o.reliability {
            case .reliable: channelType = 0x00
            case .maxRetransmits(let n): (channelType, parameter) = (0x01, UInt32(clamping: n))
            case .maxLifetime(let ms): (channelType, parameter) = (0x02, UInt32(clamping: ms))
            }
            if !o.ordered { channelType |= 0x80 }
            let label = Array(o.label.utf8.prefix(65535)), proto = Array(o.protocol.utf8.prefix(65535))
            var out: [UInt8] = [Self.openType, channelType, UInt8(o.priority >> 8), UInt8(o.priority & 0xff)]
            out += [UInt8(parameter >> 24), UInt8((parameter >> 16) & 0xff), UInt8((parameter >> 8) & 0xff), UInt8(parameter & 0xff)]
            out += [UInt8(label.count >> 8), UInt8(label.count & 0xff), UInt8(proto.count >> 8), UInt8(proto.count & 0xff)]
            return out + label + proto
        }
    }

    public init?(parsing data: [UInt8]) {
        guard let type = data.first else { return nil }
        if type == Self.ackType {
            self = .ack
            return
        }
        guard type == Self.openType, data.count >= 12 else { return nil }
        let channelType = data[1]
        let priority = UInt16(data[2]) << 8 | UInt16(data[3])
        let parameter = UInt32(data[4]) << 24 | UInt32(data[5]) << 16 | UInt32(data[6]) << 8 | UInt32(data[7])
        let labelLength = Int(data[8]) << 8 | Int(data[9]), protocolLength = Int(data[10]) << 8 | Int(data[11])
        guard data.count >= 12 + labelLength + protocolLength else { return nil }
        let reliability: DataChannelReliability
        switch channelType & 0x7f {
        case 0x00: reliability = .reliable
        case 0x01: reliability = .maxRetransmits(Int(parameter))
        case 0x02: reliability = .maxLifetime(milliseconds: Int(parameter))
        default: return nil
        }
        let label = String(decoding: data[12..<(12 + labelLength)], as: UTF8.self)
        let proto = String(decoding: data[(12 + labelLength)..<(12 + labelLength + protocolLength)], as: UTF8.self)
        self = .open(DataChannelOptions(label: label, protocol: proto, ordered: channelType & 0x80 == 0, reliability: reliability, priority: priority))
    }
}
