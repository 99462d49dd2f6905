import Platform
import MediaCore
import Dispatch
import FoundationEssentials
import RTPTransport
import Synchronization

/// A call's data channels (RFC 8831), across its rounds: the channels this side opens in every
/// round (`channels`), those the peer opens, and what arrives on any of them. Messages go on the
/// open channel of a label, this side's own first. Give it to `Call.Media(dataTrack:)`; both
/// sides must have one for the call to carry data channels.
///
///     let data = DataTrack(channels: [.reliable("control"), .unreliable("telemetry")])
///     data.onMessage { channel, message in print(channel.label, message) }
///     _ = data.waitUntilOpen(label: "control", timeout: .seconds(10))
///     data.send(.text("start"), label: "control")
public final class DataTrack: Sendable {
    public let channels: [DataChannelOptions]
    private struct State {
        var session: DataChannelSession?
        var open: [DataChannel] = []
        var onMessage: (@Sendable (DataChannel, DataChannelMessage) -> Void)?
        var onChannel: (@Sendable (DataChannel) -> Void)?
    }
    private let state = Mutex(State())
    /// Each `waitUntilOpen` waiting now: signalled whenever a channel opens or closes, and by
    /// `wakeWaiters`.
    private let waiters = Mutex<[ObjectIdentifier: DispatchSemaphore]>([:])

    public init(channels: [DataChannelOptions] = [.reliable("callend")]) {
        self.channels = channels
    }

    /// What arrives on every channel, ours and the peer's (on the channel's session queue).
    public func onMessage(_ handler: @escaping @Sendable (DataChannel, DataChannelMessage) -> Void) { state.withLock { $0.onMessage = handler } }
    /// Each channel as it opens, in every round.
    public func onChannel(_ handler: @escaping @Sendable (DataChannel) -> Void) { state.withLock { $0.onChannel = handler } }

    /// The channels open now.
    public var openChannels: [DataChannel] { state.withLock { $0.open } }
    /// What the current round's channels carried.
    public var counters: DataChannelSession.Counters? { state.withLock { $0.session?.counters } }

    /// The open channel `label` names (this side's own first), if any.
    public func channel(label: String) -> DataChannel? {
        let open = state.withLock { $0.open }.filter { $0.label == label && $0.state == .open }
        let mine = state.withLock { $0.session?.isDTLSClient }.map { client in open.first { ($0.stream % 2 == 0) == client } } ?? nil
        return mine ?? open.first
    }

    /// Sends on the open channel of `label` (the first of `channels` when nil); false when none
    /// is open. Waits while the association's send buffer is full.
    @discardableResult
    public func send(_ message: DataChannelMessage, label: String? = nil) -> Bool {
        guard let name = label ?? channels.first?.label, let channel = channel(label: name) else { return false }
        return channel.send(message)
    }

    /// Waits until a channel of `label` is open; false after `timeout` or when `stop` says so.
    public func waitUntilOpen(label: String, timeout: Duration, stop: @Sendable () -> Bool = { false }) -> Bool {
        let deadline = MediaTime.now + timeout
        let woken = DispatchSemaphore(value: 0)
        let id = ObjectIdentifier(woken)
        defer { _ = waiters.withLock { $0.removeValue(forKey: id) } }
        while true {
            // Listed before the look: a change after it signals this wait, so none is missed.
            waiters.withLock { $0[id] = woken }
            if channel(label: label) != nil { return true }
            let left = deadline - MediaTime.now
            if left <= .zero || stop() { return false }
            woken.wait(for: left)
        }
    }

    /// How many `waitUntilOpen` are waiting.
    var waiting: Int { waiters.withLock { $0.count } }

    /// Wakes every `waitUntilOpen` to look at its `stop` again (its owner is stopping).
    public func wakeWaiters() {
        for waiter in waiters.withLock({ Array($0.values) }) { waiter.signal() }
    }

    /// A round's session: its channels open (ours) or are opened (the peer's).
    func attach(_ session: DataChannelSession) {
        state.withLock { $0.session = session; $0.open = [] }
        session.onChannel { [weak self] channel in self?.adopt(channel) }
        for channel in session.channels { adopt(channel) }
        for options in channels {
            if let channel = session.open(options) { adopt(channel) }
        }
    }

    /// The round is over: its channels close with it.
    func detach(_ session: DataChannelSession) {
        state.withLock { s in
            guard s.session === session else { return }
            s.session = nil
            s.open = []
        }
        wakeWaiters()
    }

    private func adopt(_ channel: DataChannel) {
        guard state.withLock({ s in !s.open.contains { $0 === channel } }) else { return }
        channel.onMessage { [weak self, weak channel] message in
            guard let self, let channel, let handler = self.state.withLock({ $0.onMessage }) else { return }
            handler(channel, message)
        }
        channel.onStateChange { [weak self, weak channel] new in
            guard let self, let channel else { return }
            if new == .closed { self.state.withLock { $0.open.removeAll { $0 === channel } } }
            self.wakeWaiters()
        }
        let handler = state.withLock { s -> (@Sendable (DataChannel) -> Void)? in
            if !s.open.contains(where: { $0 === channel }) { s.open.append(channel) }
            return s.onChannel
        }
        wakeWaiters()
        handler?(channel)
    }

}
