import Foundation
import Synchronization
import Testing
import TestSupport

/// The tests' tasks run on a pool wider than the runtime's one thread per core
/// (Sources/CTestPool), so that blocking tests do not hold every other test up.
@Suite struct TestPoolTests {
    /// Three tasks that each block until all three are in: on the runtime's pool of two threads
    /// (this machine's cores) they never all are, and the wait ends at its limit. The limit is
    /// long because other tests may hold the pool's threads meanwhile; the queue is first come,
    /// first served, so the third task has the next one that comes free.
    @Test func threeBlockingTasksRunAtOnce() async {
        final class Count: Sendable { let value = Atomic<Int>(0) }
        let count = Count()
        let together = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    count.value.add(1, ordering: .relaxed)
                    return eventually(180) { count.value.load(ordering: .relaxed) == 3 }
                }
            }
            return await group.allSatisfy { $0 }
        }
        #expect(together, "only \(count.value.load(ordering: .relaxed)) of 3 blocking tasks ran at once")
        #expect(testPoolThreads >= 3)
    }
}
