import Foundation
import Synchronization
import Testing
@testable import Devices
import MediaCore
import Platform
import TestSupport

@Suite struct SoundCardWatchTests {
    @Test func preferencesNameCardsOrPCMs() {
        #expect(AudioRoutePreference.resolve("USB") == ("plughw:CARD=USB,DEV=0", "USB"))
        #expect(AudioRoutePreference.resolve("plughw:CARD=Loopback,DEV=1,SUBDEV=0") == ("plughw:CARD=Loopback,DEV=1,SUBDEV=0", "Loopback"))
        #expect(AudioRoutePreference.resolve("hw:CARD=Dummy,DEV=0") == ("hw:CARD=Dummy,DEV=0", "Dummy"))
        #expect(AudioRoutePreference.resolve("default") == ("default", nil))
        #expect(AudioRoutePreference.resolve("callend_test_out:FILE=/tmp/x") == ("callend_test_out:FILE=/tmp/x", nil))
        let ranked = ["USB", "plughw:CARD=Loopback,DEV=1", "default"]
        #expect(AudioRoutePreference.available(ranked, cards: ["Loopback"]) == ["plughw:CARD=Loopback,DEV=1", "default"])
        #expect(AudioRoutePreference.available(ranked, cards: ["USB", "Loopback"]).first == "plughw:CARD=USB,DEV=0")
        #expect(AudioRoutePreference.available(["USB"], cards: []) == [])
    }

    @Test func theKernelsCardListIsRead() throws {
        let dir = try ScratchFolder()
        let path = dir.path + "/cards"
        try """
         0 [Loopback       ]: Loopback - Loopback
                              Loopback 1
         1 [Dummy          ]: Dummy - Dummy
                              Dummy 1

        """.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(SoundCardWatch.cards(listing: path) == [SoundCard(index: 0, id: "Loopback"), SoundCard(index: 1, id: "Dummy")])
        #expect(SoundCardWatch.cards(listing: dir.path + "/missing").isEmpty)
    }

    /// A card whose node appears in the watched folder is reported, and one that goes.
    @Test func cardsThatComeAndGoAreReported() throws {
        let dir = try ScratchFolder()
        let cards = Mutex<[SoundCard]>([SoundCard(index: 0, id: "Loopback")])
        let seen = Mutex<[(added: [String], removed: [String])]>([])
        let watch = SoundCardWatch(directory: dir.path, list: { cards.withLock { $0 } }) { added, removed, _ in
            seen.withLock { $0.append((added.map(\.id), removed.map(\.id))) }
        }
        defer { watch.stop() }
        #expect(eventually(2) { seen.withLock { $0.count } == 1 })
        #expect(seen.withLock { $0.first?.added } == ["Loopback"], "the cards present at the start")
        cards.withLock { $0.append(SoundCard(index: 1, id: "Dummy")) }
        #expect(FileManager.default.createFile(atPath: dir.path + "/controlC1", contents: nil))
        #expect(eventually(2) { seen.withLock { $0.count } == 2 })
        #expect(seen.withLock { $0.last?.added } == ["Dummy"])
        cards.withLock { $0.removeAll { $0.id == "Dummy" } }
        try FileManager.default.removeItem(atPath: dir.path + "/controlC1")
        #expect(eventually(2) { seen.withLock { $0.count } == 3 })
        #expect(seen.withLock { $0.last?.removed } == ["Dummy"])
        // stop() returns once the thread has ended: a change after it reaches nobody, and the
        // folder's notifications go with the thread.
        watch.stop()
        let count = seen.withLock { $0.count }
        cards.withLock { $0 = [] }
        #expect(FileManager.default.createFile(atPath: dir.path + "/controlC2", contents: nil))
        #expect(seen.withLock { $0.count } == count, "nothing is reported after stop")
    }

    /// The watch reads the list when a notification comes and at its reads again after one (one,
    /// 300 ms later, here), and at no other time: between them its thread sleeps in poll(2).
    @Test func theListIsReadOnNotificationsAndTheirRereadsOnly() throws {
        let dir = try ScratchFolder()
        let reads = Mutex<[MediaTime]>([])
        let watch = SoundCardWatch(directory: dir.path, rereads: [.milliseconds(300)], list: { reads.withLock { $0.append(.now) }; return [] }) { _, _, _ in }
        defer { watch.stop() }
        #expect(eventually(2) { reads.withLock { $0.count } == 1 }, "the first look")
        let created = MediaTime.now
        let fd = open(dir.path + "/controlC1", O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0)
        close(fd)
        #expect(eventually(3) { reads.withLock { $0.count } >= 3 }, "a look at once and one again")
        watch.stop()
        let times = reads.withLock { $0 }
        #expect(times.count == 3, "no look between: \(times.map { ($0 - created).inMilliseconds })")
        if times.count == 3 {
            #expect(times[2] - created >= .milliseconds(300), "the third look is the read again, not a poll: \((times[2] - created).inMilliseconds) ms")
        }
    }

    /// With no /dev/snd yet (a box with no card), the folder's parent is watched until it comes.
    @Test func aFolderThatAppearsLaterIsWatchedFromThen() throws {
        let parent = try ScratchFolder()
        let folder = parent.path + "/snd"
        let cards = Mutex<[SoundCard]>([])
        let seen = Mutex<[[String]]>([])
        let watch = SoundCardWatch(directory: folder, list: { cards.withLock { $0 } }) { added, _, _ in
            seen.withLock { $0.append(added.map(\.id)) }
        }
        defer { watch.stop() }
        cards.withLock { $0 = [SoundCard(index: 0, id: "USB")] }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        #expect(eventually(3) { seen.withLock { $0.contains(["USB"]) } }, "the card that came with the folder")
        cards.withLock { $0.append(SoundCard(index: 1, id: "Loopback")) }
        let fd = open(folder + "/controlC1", O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0)
        close(fd)
        #expect(eventually(3) { seen.withLock { $0.contains(["Loopback"]) } }, "a node in the folder, now watched")
    }
}

