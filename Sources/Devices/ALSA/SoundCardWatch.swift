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
/// (/proc/asound/cards, readable by every user, opens no device); it also reads it every 200 ms
/// in case a notification is missed (a /dev without inotify, a card whose nodes come late).
/// `onChange` runs on that thread with the cards added, removed, and all present.
public final class SoundCardWatch: Sendable {
    public typealias Change = @Sendable (_ added: [SoundCard], _ removed: [SoundCard], _ present: [SoundCard]) -> Void

    /// Shared with the thread, which must not keep the watch itself alive (deinit stops it).
    private final class State: Sendable {
        let stopping = Atomic<Bool>(false)
        let finished = DispatchSemaphore(value: 0)
    }
    private let state = State()

    /// The cards now.
    public static func cards(listing path: String = "/proc/asound/cards") -> [SoundCard] {
        ALSADeviceList.kernelCards(path: path).map { SoundCard(index: $0.0, id: $0.1) }
    }

    /// Starts watching; `onChange` gets the cards present at the start as added.
    public init(directory: String = "/dev/snd", list: @escaping @Sendable () -> [SoundCard] = { SoundCardWatch.cards() },
                onChange: @escaping Change) {
        let fd = clinux_inotify_init()
        if fd >= 0 { _ = clinux_inotify_watch_nodes(fd, directory) }
        startThread(named: "sound-cards") { [state] in
            var known: Set<SoundCard> = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !state.stopping.load(ordering: .relaxed) {
                let now = Set(list())
                if now != known {
                    let added = now.subtracting(known).sorted(), removed = known.subtracting(now).sorted()
                    known = now
                    onChange(added, removed, now.sorted())
                }
                guard fd >= 0 else { usleep(200_000); continue }
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&p, 1, 200) > 0 {
                    // Drain the notifications: which node changed does not matter, the list does.
                    while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
                    // The card's files in /proc follow its nodes within moments.
                    usleep(20_000)
                }
            }
            if fd >= 0 { close(fd) }
            state.finished.signal()
        }
    }

    /// Stops the watch; `onChange` is not called after this returns.
    public func stop() {
        guard !state.stopping.exchange(true, ordering: .relaxed) else { return }
        state.finished.wait()
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
