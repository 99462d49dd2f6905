internal import CDataChannel
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One SCTP association (usrsctp) whose packets ride on something else: DTLS, for data channels
/// (RFC 8261, 8831), or a test's memory link. usrsctp runs the protocol on its own threads; what
/// it delivers (messages, whole, and its events) reaches `onMessage` and `onEvent` in order on
/// one queue of this association, so handlers may send and close.
public final class SCTPAssociation: @unchecked Sendable {  // the handle is set once; the rest is behind `state`
    public enum Event: Sendable, Equatable {
        case up
        case down
        /// This side aborted the association: the peer broke a bound (the reason says which).
        case aborted(String)
        /// The peer reset these streams of its own (it closed those data channels).
        case incomingReset([UInt16])
        case outgoingReset([UInt16])
    }

    public struct SendError: Error, CustomStringConvertible {
        public var errno: Int32
        public var description: String { "SCTP send failed (errno \(errno))" }
    }

    /// The SCTP port both sides use unless their descriptions say otherwise (a=sctp-port).
    public static let defaultPort: UInt16 = 5000
    /// SCTP packets this size or smaller fit one DTLS record in one datagram under the 1200
    /// bytes a path through TURN and VPNs carries.
    public static let mtu: UInt32 = 1140

    private let handle: OpaquePointer
    private let id: Int
    private let delivery = DispatchQueue(label: "sctp")
    private struct State {
        var onMessage: (@Sendable (UInt16, UInt32, [UInt8]) -> Void)?
        var onEvent: (@Sendable (Event) -> Void)?
        /// Parts of messages larger than usrsctp hands over at once, per stream, and their sum.
        var partial: [UInt16: [UInt8]] = [:]
        var partialBytes = 0
        /// The most `partialBytes` ever held: what a peer's unfinished messages cost at their worst.
        var mostPartialBytes = 0
        /// Whole messages handed to the delivery queue and not yet to their handler.
        var queuedBytes = 0
        var closed = false
    }
    private let state = Mutex(State())
    /// The most bytes the peer's unfinished messages held here at once.
    var mostHeldInParts: Int { state.withLock { $0.mostPartialBytes } }

    /// The largest message taken from the peer: what this side says in a=max-message-size
    /// (RFC 8841). A message over it, or parts of one that would be, abort the association.
    public let maxMessageSize: Int
    /// The most the peer's messages may hold here at once, in parts being put together (every
    /// stream together) and in whole ones waiting for their handler: a peer that sends the
    /// parts of a message that never ends, or more than the application reads, costs this
    /// much and no more before the association is aborted (the call goes on without it).
    public let maxReassemblyBytes: Int
    public let maxQueuedBytes: Int

    /// `output` gets every packet for the peer, on usrsctp's threads: it must not call back
    /// into this association.
    public init(localPort: UInt16 = defaultPort, remotePort: UInt16 = defaultPort, maxMessageSize: Int = 262_144,
                maxQueuedBytes: Int = 8 << 20, output: @escaping @Sendable ([UInt8]) -> Void) throws(SendError) {
        self.maxMessageSize = maxMessageSize
        maxReassemblyBytes = 2 * maxMessageSize
        self.maxQueuedBytes = maxQueuedBytes
        Registry.setUp()
        id = Registry.add(output: output)
        guard let handle = csctp_open(UnsafeMutableRawPointer(bitPattern: id), localPort, remotePort, Self.mtu) else {
            let code = errno
            Registry.remove(id)
            throw SendError(errno: code)
        }
        self.handle = handle
        Registry.attach(self, id: id)
    }

    deinit { close() }

    /// Where messages and events go (on this association's queue).
    public func setHandlers(message: @escaping @Sendable (_ stream: UInt16, _ ppid: UInt32, _ data: [UInt8]) -> Void,
                            event: @escaping @Sendable (Event) -> Void) {
        state.withLock { ($0.onMessage, $0.onEvent) = (message, event) }
    }

    /// Starts the association (both sides may: SCTP's simultaneous open).
    public func connect() { _ = csctp_connect(handle) }

    /// One packet from the peer.
    public func input(_ packet: [UInt8]) {
        packet.withUnsafeBytes { csctp_input(handle, $0.baseAddress, $0.count) }
    }

    /// One message; waits while the send buffer is full. `maxRetransmits` or
    /// `maxLifetimeMilliseconds` make it partially reliable (RFC 3758).
    public func send(stream: UInt16, ppid: UInt32, _ data: [UInt8], unordered: Bool = false,
                     maxRetransmits: Int? = nil, maxLifetimeMilliseconds: Int? = nil) throws(SendError) {
        let result = data.withUnsafeBytes {
            csctp_send(handle, stream, ppid, $0.baseAddress, $0.count, unordered ? 1 : 0,
                       Int32(clamping: maxRetransmits ?? -1), Int32(clamping: maxLifetimeMilliseconds ?? -1))
        }
        if result != 0 { throw SendError(errno: errno) }
    }

    /// Sends `data` as one more part of a message on `stream` that it does not end: what a
    /// peer that breaks the bounds does (tests). False when usrsctp would not take it now.
    func sendPart(stream: UInt16, ppid: UInt32, _ data: [UInt8]) -> Bool {
        data.withUnsafeBytes { csctp_send_part(handle, stream, ppid, $0.baseAddress, $0.count) } == 0
    }

    /// Resets our outgoing stream: how a data channel closes (RFC 8831 §6.7).
    public func resetStream(_ stream: UInt16) { _ = csctp_reset_stream(handle, stream) }

    /// Aborts the association; no handler runs after this returns... except one already running.
    public func close() {
        guard !state.withLock({ s in defer { s.closed = true }; return s.closed }) else { return }
        csctp_close(handle)
        Registry.remove(id)
    }

    fileprivate func received(_ data: UnsafeRawBufferPointer, stream: UInt16, ppid: UInt32, complete: Bool) {
        enum Outcome { case more, whole([UInt8]), over(String) }
        let outcome = state.withLock { s -> Outcome in
            guard !s.closed else { return .more }
            let sofar = s.partial[stream]?.count ?? 0
            guard sofar + data.count <= maxMessageSize else {
                return .over("a message on stream \(stream) over \(maxMessageSize) bytes (a=max-message-size)")
            }
            guard complete else {
                guard s.partialBytes + data.count <= maxReassemblyBytes else {
                    return .over("parts of messages over \(maxReassemblyBytes) bytes waiting to be completed")
                }
                s.partial[stream, default: []].append(contentsOf: data)
                s.partialBytes += data.count
                s.mostPartialBytes = max(s.mostPartialBytes, s.partialBytes)
                return .more
            }
            let whole: [UInt8]
            if let head = s.partial.removeValue(forKey: stream) {
                s.partialBytes -= head.count
                whole = head + data
            } else {
                whole = Array(data)
            }
            guard s.queuedBytes + whole.count <= maxQueuedBytes else {
                return .over("over \(maxQueuedBytes) bytes of messages the application has not taken yet")
            }
            s.queuedBytes += whole.count
            return .whole(whole)
        }
        switch outcome {
        case .more: return
        case .over(let reason): abort(reason)
        case .whole(let whole):
            delivery.async { [weak self] in
                guard let self, let handler = self.state.withLock({ s -> (@Sendable (UInt16, UInt32, [UInt8]) -> Void)? in
                    s.queuedBytes -= whole.count
                    return s.closed ? nil : s.onMessage
                }) else { return }
                handler(stream, ppid, whole)
            }
        }
    }

    /// The peer broke a bound: its handler hears why, then the association is aborted (an
    /// SCTP ABORT) and what it held is freed.
    private func abort(_ reason: String) {
        let handler = state.withLock { s -> (@Sendable (Event) -> Void)? in
            s.partial = [:]
            s.partialBytes = 0
            return s.closed ? nil : s.onEvent
        }
        delivery.async { handler?(.aborted(reason)) }
        // Not on usrsctp's own thread, which is the one calling here: close takes its lock.
        DispatchQueue.global().async { [self] in close() }
    }

    fileprivate func happened(_ event: Event) {
        delivery.async { [weak self] in
            guard let self, let handler = self.state.withLock({ $0.closed ? nil : $0.onEvent }) else { return }
            handler(event)
        }
    }

    /// usrsctp calls plain C functions with the number each association was given: the table
    /// finds the association, or nothing once it is gone.
    private enum Registry {
        struct Entry {
            var output: @Sendable ([UInt8]) -> Void
            weak var association: SCTPAssociation?
        }
        static let entries = Mutex<(next: Int, table: [Int: Entry])>((1, [:]))

        static func setUp() {
            csctp_setup({ context, packet, length in
                guard let packet, let output = Registry.entries.withLock({ $0.table[Int(bitPattern: context)]?.output }) else { return }
                output(Array(UnsafeRawBufferPointer(start: packet, count: length)))
            }, { context, data, length, stream, ppid, complete in
                guard let association = Registry.entries.withLock({ $0.table[Int(bitPattern: context)]?.association }) else { return }
                association.received(UnsafeRawBufferPointer(start: data, count: length), stream: stream, ppid: ppid, complete: complete != 0)
            }, { context, kind, streams, count in
                guard let association = Registry.entries.withLock({ $0.table[Int(bitPattern: context)]?.association }) else { return }
                let list = streams.map { Array(UnsafeBufferPointer(start: $0, count: Int(count))) } ?? []
                switch Int(kind) {
                case Int(CSCTP_UP.rawValue): association.happened(.up)
                case Int(CSCTP_DOWN.rawValue): association.happened(.down)
                case Int(CSCTP_INCOMING_RESET.rawValue): association.happened(.incomingReset(list))
                case Int(CSCTP_OUTGOING_RESET.rawValue): association.happened(.outgoingReset(list))
                default: break
                }
            })
        }

        static func add(output: @escaping @Sendable ([UInt8]) -> Void) -> Int {
            entries.withLock { e in
                defer { e.next += 1 }
                e.table[e.next] = Entry(output: output, association: nil)
                return e.next
            }
        }

        static func attach(_ association: SCTPAssociation, id: Int) { entries.withLock { $0.table[id]?.association = association } }
        static func remove(_ id: Int) { entries.withLock { _ = $0.table.removeValue(forKey: id) } }
    }
}
