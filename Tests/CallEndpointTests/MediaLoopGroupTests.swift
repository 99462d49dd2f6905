import Foundation
import Glibc
import MediaCore
import RTPTransport
import Synchronization
import Testing
@testable import CallEndpoint

@Suite struct MediaLoopGroupTests {
    /// What one session's step saw.
    struct Seen: Sendable {
        var threads: Set<UInt> = []
        var notes: [String] = []
        var steps = 0
        /// The shortest time between a step and the next one that came with no input (a step
        /// for its deadline).
        var shortestDeadlineGap: Duration?
        var last: ContinuousClock.Instant?
    }

    /// Two sessions in one group: their steps run on the group's one thread, not on the threads
    /// that called `run`; each takes its own inputs, in the order they came; a step that asked to
    /// wait 30 ms is not called again with nothing sooner; `run` returns when the step returns nil.
    /// The thread ends with the last session, and the next session starts it again.
    @Test func theStepsOfManySessionsRunOnOneThread() throws {
        let group = MediaLoopGroup(threadName: "test-group")
        let loops = [MediaLoop(group: group), MediaLoop(group: group)]
        let seen = Mutex([Seen(), Seen()])
        let callers = Mutex<Set<UInt>>([])
        let started = DispatchGroup(), finished = DispatchGroup(), timed = DispatchGroup()
        for index in 0..<2 {
            started.enter()
            finished.enter()
            timed.enter()
            Thread {
                defer { finished.leave() }
                callers.withLock { _ = $0.insert(UInt(pthread_self())) }
                var first = true, timedOnce = false
                group.run(loops[index]) { inputs in
                    let now = ContinuousClock.now
                    let (ended, gaps) = seen.withLock { all -> (Bool, Int) in
                        var s = all[index]
                        defer { all[index] = s }
                        s.threads.insert(UInt(pthread_self()))
                        s.steps += 1
                        if inputs.isEmpty, let last = s.last, s.steps > 1 {
                            s.shortestDeadlineGap = min(s.shortestDeadlineGap ?? .seconds(60), now - last)
                        }
                        s.last = now
                        for case .event(.videoNote(let note?)) in inputs { s.notes.append(note) }
                        return (s.notes.last == "end", s.shortestDeadlineGap == nil ? 0 : 1)
                    }
                    if gaps > 0 && !timedOnce {
                        timedOnce = true
                        timed.leave()
                    }
                    if first {
                        first = false
                        started.leave()
                    }
                    return ended ? nil : .milliseconds(30)
                }
            }.start()
        }
        #expect(started.wait(timeout: .now() + 10) == .success)
        for note in ["a1", "a2", "a3"] { loops[0].post(.videoNote(note)) }
        loops[1].post(.videoNote("b1"))
        // Each had a step for its deadline since.
        #expect(timed.wait(timeout: .now() + 10) == .success)
        loops[1].post(.videoNote("b2"))
        loops[0].post(.videoNote("end"))
        loops[1].post(.videoNote("end"))
        #expect(finished.wait(timeout: .now() + 10) == .success)
        let (a, b) = seen.withLock { ($0[0], $0[1]) }
        #expect(a.notes == ["a1", "a2", "a3", "end"])
        #expect(b.notes == ["b1", "b2", "end"])
        #expect(a.threads.count == 1 && a.threads == b.threads, "steps ran on \(a.threads) and \(b.threads)")
        #expect(a.threads.isDisjoint(with: callers.withLock { $0 }))
        // Steps for their deadlines, none early.
        for s in [a, b] {
            let gap = try #require(s.shortestDeadlineGap, "no step for a deadline in \(s.steps) steps")
            #expect(gap >= .milliseconds(30), "a step for its deadline came \(gap) after the one before")
        }
        // The thread ended with them; a new session starts it again.
        let again = DispatchSemaphore(value: 0)
        Thread {
            group.run(MediaLoop(group: group)) { _ in nil }
            again.signal()
        }.start()
        #expect(again.wait(timeout: .now() + 10) == .success)
    }
}
