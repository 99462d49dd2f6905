import Foundation
import Dispatch
import Platform
import Synchronization
import Testing

/// The gate ICEAgent frees libnice's agent behind: close waits for every use under way.
@Suite struct UseGateTests {
    @Test func closeWaitsForTheUseUnderWayAndRefusesLaterOnes() {
        let gate = UseGate()
        let inside = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let finished = Atomic<Bool>(false), closed = DispatchSemaphore(value: 0)
        let user = DispatchGroup()
        user.enter()
        Thread.detachNewThread {
            _ = gate.use {
                inside.signal()
                release.wait()
                finished.store(true, ordering: .relaxed)
            }
            user.leave()
        }
        inside.wait()
        Thread.detachNewThread {
            gate.close()
            // The body was still inside when close began: close returned only after it left.
            let bodyDone = finished.load(ordering: .relaxed)
            #expect(bodyDone)
            closed.signal()
        }
        // close has not returned while the body is held (it cannot: the body has not finished).
        #expect(closed.wait(timeout: .now() + 0.2) == .timedOut)
        release.signal()
        closed.wait()
        user.wait()
        #expect(gate.use { 1 } == nil && gate.isClosed)
        #expect(!gate.close(), "a second close is a no-op")
    }
}
