internal import CLinux
import Dispatch
import FoundationEssentials
import Platform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A sound card as the kernel lists it: its index and its stable id (`Loopback`, `USB`, `Dummy`),
/// the `CARD=` of its PCM names.
public struct SoundCard: Sendable, Hashable, Comparable {
    public let index: Int
    public let id: String
    public init(index: Int, id: String) { self.index = index; self.id = id }
    public static func < (a: SoundCard, b: SoundCard) -> Bool { a.index < b.index }
}

/// Sound cards as they come and go, with no udev daemon: inotify on /dev/snd (the kernel makes
/// and removes a card's nodes there) wakes a thread that reads the card list again
/// (/proc/asound/cards, readable by every user, opens no device), and again at `rereads` after
/// the notification, as a card's entry there can follow its nodes by a moment. Where /dev/snd does
/// not exist yet (a box with no card), its parent is watched until it does. The thread sleeps
/// in poll(2) until a notification or stop(): nothing is read between notifications.
/// `onChange` runs on that thread with the cards added, removed, and all present.
public final class SoundCardWatch: Sendable {
    public typealias Change = @Sendable (_ added: [SoundCard], _ removed: [SoundCard], _ present: [SoundCard]) -> Void
    /// After a notification, the list is read at once and again this long after it.
    public static let rereads: [Duration] = [.milliseconds(20), .milliseconds(100), .milliseconds(500)]

    /// Shared with the thread, which must not keep the watch itself alive (deinit stops it).
    private final class State: Sendable {
        let stopping = Atomic<Bool>(false)
        let finished = DispatchSemaphore(value: 0)
        /// stop() writes to the second, the thread polls the first.
        let wake: (read: Int32, write: Int32)
        init() {
            var fds: [Int32] = [-1, -1]
            wake = pipe(&fds) == 0 ? (fds[0], fds[1]) : (-1, -1)
        }
    }
    private let state = State()

    /// The cards now.
    public static func cards(listing path: String = "/proc/asound/cards") -> [SoundCard] {
        ALSADeviceList.kernelCards(path: path).map { SoundCard(index: $0.0, id: $0.1) }
    }

    /// Starts watching; `onChange` gets the cards present at the start as added.
    public init(directory: String = "/dev/snd", rereads: [Duration] = SoundCardWatch.rereads,
                list: @escaping @Sendable () -> [SoundCard] = { SoundCardWatch.cards() }, onChange: @escaping Change) {
        let fd = clinux_inotify_init()
        // Without the folder (no card yet), its parent says when it comes.
        @Sendable func watchFolder() -> Bool { fd >= 0 && clinux_inotify_watch_nodes(fd, directory) >= 0 }
        if fd >= 0 && !watchFolder() {
            let parent = directory.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            _ = clinux_inotify_watch_nodes(fd, parent.isEmpty ? "/" : parent)
        }
        startThread(named: "sound-cards") { [state] in
            var known: Set<SoundCard> = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            let clock = MonotonicClock()
            var due: [MediaTime] = []
            func look() {
                let now = Set(list())
                guard now != known else { return }
                let added = now.subtracting(known).sorted(), removed = known.subtracting(now).sorted()
                known = now
                onChange(added, removed, now.sorted())
            }
            look()
            while !state.stopping.load(ordering: .relaxed) {
                // Until a notification, stop(), or the next read again after one; with no inotify
                // at all (a kernel without it), once a second.
                let timeout: Int32
                if fd < 0 || state.wake.read < 0 {
                    timeout = 1000
                } else if let next = due.first {
                    timeout = Int32(clamping: max(0, (next - clock.now).inMilliseconds))
                } else {
                    timeout = -1
                }
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: state.wake.read, events: Int16(POLLIN), revents: 0)]
                _ = poll(&fds, 2, timeout)
                if state.stopping.load(ordering: .relaxed) { break }
                if fds[0].revents & Int16(POLLIN) != 0 {
                    // Drain the notifications: which node changed does not matter, the list does.
                    while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
                    _ = watchFolder()  // the folder may just have come
                    let now = clock.now
                    due = rereads.map { now + $0 }
                    look()
                } else if fd < 0 {
                    look()
                } else if let next = due.first, clock.now >= next {
                    due.removeAll { $0 <= clock.now }
                    look()
                }
            }
            if fd >= 0 { close(fd) }
            state.finished.signal()
        }
    }

    /// Stops the watch; `onChange` is not called after this returns.
    public func stop() {
        guard !state.stopping.exchange(true, ordering: .relaxed) else { return }
        var byte: UInt8 = 1
        _ = write(state.wake.write, &byte, 1)
        state.finished.wait()
        if state.wake.read >= 0 { close(state.wake.read); close(state.wake.write) }
    }

    deinit { stop() }
}

/// A ranked list of where audio should go: the first entry whose card is present wins. An entry
/// is a card id (`USB`: its first device, `plughw:CARD=USB,DEV=0`) or a PCM name; a PCM name
/// with a `CARD=` is present when that card is, one without (`default`, a PCM of an ALSA
/// configuration) always is.
public enum AudioRoutePreference {
    /// The PCM an entry names and the card it needs (nil: none).
    public static func resolve(_ entry: String) -> (pcm: String, card: String?) {
        if !entry.contains(":") && entry != "default" && !entry.isEmpty && entry.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) {
            return ("plughw:CARD=\(entry),DEV=0", entry)
        }
        guard let start = entry.firstRange(of: "CARD=") else { return (entry, nil) }
        let card = entry[start.upperBound...].prefix { $0 != "," && $0 != "'" && $0 != "\"" }
        return (entry, String(card))
    }

    /// The entries whose cards are present, best first.
    public static func available(_ ranked: [String], cards: Set<String>) -> [String] {
        ranked.map(resolve).filter { $0.card.map(cards.contains) ?? true }.map(\.pcm)
    }
}
