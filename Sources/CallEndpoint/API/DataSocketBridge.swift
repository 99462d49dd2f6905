import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import Synchronization

/// A data channel as a local Unix socket (`join --data-socket PATH`), so any program on the box
/// can use it: what a client writes goes to the peer on the channel `label`, and what the peer
/// sends on a channel of that label goes to every connected client. In `lines` mode each line is
/// one text message (and each message a line); in `bytes` mode the stream is cut into binary
/// messages of at most 16 KiB, and what arrives is written as it came. Nothing is dropped: a
/// client's writes wait while no channel is open (between rounds of the call) or the
/// association's send buffer is full, the peer's messages wait for slow clients, and what comes
/// while no client is connected is kept (up to `backlogLimit` bytes, the oldest going first
/// beyond it, which the log says) for the first one that connects.
public final class DataSocketBridge: Sendable {
    public enum Mode: String, Sendable { case lines, bytes }

    public static let chunk = 16_384
    /// The longest line taken in `lines` mode (the peer's max-message-size is 256 KiB for callend
    /// and Chromium).
    public static let longestLine = 65_536

    public let label: String
    public let mode: Mode
    private let track: DataTrack
    private let listener = Mutex<UnixSocketListener?>(nil)
    /// The connected clients, and what came while there were none.
    private let clients = Mutex<(fds: [Int32], backlog: [[UInt8]], backlogBytes: Int, dropped: Int)>(([], [], 0, 0))
    public static let backlogLimit = 4 << 20
    /// Messages dropped from the backlog (it was full).
    public var dropped: Int { clients.withLock { $0.dropped } }

    public var path: String? { listener.withLock { $0?.path } }

    private let log: @Sendable (String) -> Void

    /// `log` hears of messages dropped from a full backlog.
    public init(path: String, track: DataTrack, label: String, mode: Mode, log: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.log = log
        self.track = track
        self.label = label
        self.mode = mode
        let made = try UnixSocketListener(path: path, what: "data socket") { [weak self] client, listener in
            self?.serve(client, listener)
        }
        listener.withLock { $0 = made }
        track.onMessage { [weak self] channel, message in
            guard let self, channel.label == self.label else { return }
            self.deliver(message)
        }
    }

    private func deliver(_ message: DataChannelMessage) {
        var bytes: [UInt8]
        switch message {
        case .text(let text): bytes = Array(text.utf8)
        case .binary(let data): bytes = data
        }
        if mode == .lines { bytes.append(10) }
        let (fds, droppedNow) = clients.withLock { c -> ([Int32], Int) in
            var dropped = 0
            if c.fds.isEmpty {
                c.backlog.append(bytes)
                c.backlogBytes += bytes.count
                while c.backlogBytes > Self.backlogLimit, !c.backlog.isEmpty {
                    c.backlogBytes -= c.backlog.removeFirst().count
                    dropped += 1
                }
                c.dropped += dropped
            }
            return (c.fds, dropped)
        }
        if droppedNow > 0 { log("data: no program on the data socket and \(Self.backlogLimit >> 20) MiB kept: the oldest message dropped (\(dropped) so far)") }
        for client in fds { _ = UnixSocketListener.write(client, bytes) }
    }

    private func serve(_ client: Int32, _ listener: UnixSocketListener) {
        // What came while nobody listened goes first (under the lock: a message that comes
        // meanwhile waits behind it).
        clients.withLock { c in
            for bytes in c.backlog { _ = UnixSocketListener.write(client, bytes) }
            (c.backlog, c.backlogBytes) = ([], 0)
            c.fds.append(client)
        }
        defer { clients.withLock { $0.fds.removeAll { $0 == client } } }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: Self.chunk)
        while !listener.isStopping {
            guard listener.readable(client) else { continue }
            let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            switch mode {
            case .bytes:
                guard send(.binary(Array(buffer[0..<count])), listener) else { return }
            case .lines:
                pending += buffer[0..<count]
                while let newline = pending.firstIndex(of: 10) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeSubrange(...newline)
                    guard send(.text(line), listener) else { return }
                }
                if pending.count > Self.longestLine {
                    _ = UnixSocketListener.write(client, Array("callend: a line longer than \(Self.longestLine) bytes: the connection is closed\n".utf8))
                    return
                }
            }
        }
    }

    /// Sends once a channel of the label is open (waiting for it, between rounds too).
    private func send(_ message: DataChannelMessage, _ listener: UnixSocketListener) -> Bool {
        while !listener.isStopping {
            if track.waitUntilOpen(label: label, timeout: .seconds(60), stop: { listener.isStopping }), track.send(message, label: label) { return true }
        }
        return false
    }

    /// Stops listening, ends the connections and removes the socket file.
    public func stop() {
        listener.withLock { $0 }?.stop()
        track.wakeWaiters()  // a client's write waiting for a channel stops waiting
    }

    deinit { stop() }
}
