import Foundation
import Testing
import TestSupport
@testable import CallEndpoint

/// The quota and retention over a recording directory, on files made by the test.
@Suite struct RecordingStoreTests {
    private func make(_ folder: ScratchFolder, _ name: String, bytes: Int, age: TimeInterval = 0) -> String {
        let path = folder.path + "/" + name
        #expect(FileManager.default.createFile(atPath: path, contents: Data(count: bytes)))
        if age > 0 { try? FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-age)], ofItemAtPath: path) }
        return path
    }

    @Test func theOldestSegmentsGoToMakeRoomAndNothingGoesPastTheQuota() throws {
        let folder = try ScratchFolder()
        let old = make(folder, "callend-20260101T000000.000Z-sent.webm", bytes: 400)
        let middle = make(folder, "callend-20260101T000100.000Z-sent.webm", bytes: 400)
        let other = make(folder, "notes.webm", bytes: 5000)  // not a recording: neither counted nor deleted
        var options = RecordingOptions(directory: folder.path)
        options.quotaBytes = 1000
        let store = try RecordingStore(options)
        let current = store.newPath(direction: "received")
        #expect(current > middle, "names sort by age: \(current)")
        #expect(store.reserve(150, for: current))  // 400 + 400 + 150 fit
        #expect(FileManager.default.fileExists(atPath: old))
        #expect(store.reserve(100, for: current))  // 1050: the oldest goes
        #expect(!FileManager.default.fileExists(atPath: old) && FileManager.default.fileExists(atPath: middle))
        #expect(store.reserve(700, for: current))  // 950 alone with nothing else: the next goes too
        #expect(!FileManager.default.fileExists(atPath: middle))
        #expect(!store.reserve(100, for: current))  // 1050 in the one being written: refused
        #expect(store.deletedCount == 2)
        #expect(FileManager.default.fileExists(atPath: other))
        // Closed, its real size counts from then on, and it is the oldest now.
        store.closed(current, bytes: 300)
        let next = store.newPath(direction: "sent")
        #expect(store.reserve(700, for: next) && store.deletedCount == 2)  // 300 + 700
        #expect(store.reserve(1, for: next) && store.deletedCount == 3)
    }

    @Test func segmentsOlderThanTheAgeGoAtStartAndAsSegmentsClose() throws {
        let folder = try ScratchFolder()
        let stale = make(folder, "callend-20260101T000000.000Z-sent.webm", bytes: 10, age: 7200)
        let fresh = make(folder, "callend-20260101T000100.000Z-sent.webm", bytes: 10, age: 60)
        var options = RecordingOptions(directory: folder.path)
        options.keep = .seconds(3600)
        let store = try RecordingStore(options)
        #expect(!FileManager.default.fileExists(atPath: stale) && FileManager.default.fileExists(atPath: fresh))
        #expect(store.deletedCount == 1)
        // Without a quota, anything fits.
        #expect(store.reserve(1 << 40, for: store.newPath(direction: "sent")))
    }

    @Test func aDirectoryThatCannotHoldRecordingsIsRefused() throws {
        let folder = try ScratchFolder()
        let file = make(folder, "plain", bytes: 1)
        #expect(throws: RecordingError.self) { try RecordingStore(RecordingOptions(directory: file)) }
        #expect(throws: RecordingError.self) { try RecordingStore(RecordingOptions(directory: folder.path + "/a/b")) }
        // Made when missing (one level), as the operator would expect.
        _ = try RecordingStore(RecordingOptions(directory: folder.path + "/new"))
        #expect(FileManager.default.fileExists(atPath: folder.path + "/new"))
    }
}
