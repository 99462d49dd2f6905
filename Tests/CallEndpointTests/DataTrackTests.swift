import Foundation
import Synchronization
import Testing
import TestSupport
@testable import CallEndpoint

@Suite struct DataTrackTests {
    /// A wait for a channel that never opens ends when its owner stops and wakes it, not at its
    /// timeout and not at the next look of a poll: the wait below is for a minute.
    @Test func aWaitForAChannelEndsWhenItsOwnerWakesIt() {
        let track = DataTrack()
        let stopping = Atomic<Bool>(false)
        let result = Mutex<Bool?>(nil)
        let thread = Thread {
            let opened = track.waitUntilOpen(label: "control", timeout: .seconds(60), stop: { stopping.load(ordering: .relaxed) })
            result.withLock { $0 = opened }
        }
        thread.start()
        #expect(eventually(10) { track.waiting == 1 }, "waiting")
        #expect(result.withLock { $0 } == nil, "still waiting: no channel, no stop")
        stopping.store(true, ordering: .relaxed)
        track.wakeWaiters()
        #expect(eventually(10) { result.withLock { $0 } == false }, "the wait ended, with no channel")
    }
}
