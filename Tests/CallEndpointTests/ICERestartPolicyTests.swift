import Platform
import Testing
@testable import CallEndpoint
import MediaCore

struct ICERestartPolicyTests {
    let t0 = MediaTime(microseconds: 5_000_000_000)

    @Test func aLostPathIsRestartedAfterTwoSecondsOfRechecksThenEveryThirty() {
        var policy = ICERestartPolicy(offerer: true)
        #expect(!policy.shouldRestart(at: t0, addressesChanged: false), "nothing lost, nothing changed")
        policy.pathLost(at: t0)  // consent expired: 30 s into the outage
        #expect(!policy.shouldRestart(at: t0 + .milliseconds(1_999), addressesChanged: false), "rechecks first")
        #expect(policy.shouldRestart(at: t0 + .seconds(2), addressesChanged: false))
        #expect(policy.reason(at: t0 + .seconds(2)) == "no path for 32 s")
        policy.restarted(at: t0 + .seconds(2))
        #expect(!policy.shouldRestart(at: t0 + .seconds(31), addressesChanged: false), "one restart at a time")
        #expect(policy.shouldRestart(at: t0 + .seconds(32), addressesChanged: false), "tried again while still lost")
        policy.pathRestored()
        #expect(!policy.shouldRestart(at: t0 + .seconds(500), addressesChanged: false))
    }

    @Test func theAnswererWaitsLongerSoThatBothRarelyOfferAtOnce() {
        var offerer = ICERestartPolicy(offerer: true), answerer = ICERestartPolicy(offerer: false)
        offerer.pathLost(at: t0)
        answerer.pathLost(at: t0)
        #expect(offerer.shouldRestart(at: t0 + .seconds(2), addressesChanged: false))
        #expect(!answerer.shouldRestart(at: t0 + .milliseconds(4_999), addressesChanged: false))
        #expect(answerer.shouldRestart(at: t0 + .seconds(5), addressesChanged: false))
    }

    @Test func aNewLocalAddressRestartsAtOnceButNotTwiceInASecond() {
        var policy = ICERestartPolicy(offerer: false)
        #expect(policy.shouldRestart(at: t0, addressesChanged: true))
        policy.restarted(at: t0)
        #expect(!policy.shouldRestart(at: t0 + .milliseconds(500), addressesChanged: true))
        #expect(policy.shouldRestart(at: t0 + .seconds(1), addressesChanged: true))
        // A path lost after that restart gets its own, once the outage is long enough.
        policy.pathLost(at: t0 + .seconds(2))
        #expect(!policy.shouldRestart(at: t0 + .seconds(6), addressesChanged: false))
        #expect(policy.shouldRestart(at: t0 + .seconds(7), addressesChanged: false))
    }

    @Test func aPathLostWhileThePeersMediaArrivesRestartsAQuarterOfASecondLater() {
        var policy = ICERestartPolicy(offerer: false)
        policy.heard(at: t0)
        policy.pathLost(at: t0)
        policy.heard(at: t0 + .milliseconds(200))
        #expect(!policy.shouldRestart(at: t0 + .milliseconds(200), addressesChanged: false), "the recheck goes first")
        policy.heard(at: t0 + .seconds(1))
        #expect(policy.shouldRestart(at: t0 + .seconds(1), addressesChanged: false))
        #expect(policy.reason(at: t0 + .seconds(1)) == "the path lost while the peer's media arrives")
        policy.restarted(at: t0 + .seconds(1))
        policy.heard(at: t0 + .seconds(3))
        #expect(!policy.shouldRestart(at: t0 + .seconds(3), addressesChanged: false), "one restart at a time")
        #expect(policy.shouldRestart(at: t0 + .seconds(6), addressesChanged: false), "tried again while still lost")
        // Silence in both directions is an outage: no early restart for that.
        var quiet = ICERestartPolicy(offerer: false)
        quiet.heard(at: t0)
        quiet.pathLost(at: t0)
        #expect(!quiet.shouldRestart(at: t0 + .seconds(4), addressesChanged: false))
        #expect(quiet.reason(at: t0 + .seconds(4)) == "no path for 34 s")
    }

    /// `nextRestart` is the first moment `shouldRestart` says yes, in every state a call goes
    /// through: lost, restarted, heard within and after the grace, restarted again, restored.
    @Test func theNextRestartIsTheFirstMomentShouldRestartSaysYes() {
        func check(_ policy: ICERestartPolicy, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
            let first = stride(from: 0, through: 70_000, by: 10).map { t0 + .milliseconds($0) }.first { policy.shouldRestart(at: $0, addressesChanged: false) }
            if let next = policy.nextRestart, next < t0 {
                #expect(first == t0, "\(what): due before the sweep began, so at once", sourceLocation: sourceLocation)
            } else {
                #expect(first == policy.nextRestart, "\(what): swept \(String(describing: first)), said \(String(describing: policy.nextRestart))", sourceLocation: sourceLocation)
            }
        }
        for offerer in [true, false] {
            var policy = ICERestartPolicy(offerer: offerer)
            check(policy, "nothing lost")
            policy.pathLost(at: t0 + .seconds(1))
            check(policy, "lost")
            policy.restarted(at: t0 + .seconds(7))
            check(policy, "restarted")
            policy.heard(at: t0 + .milliseconds(1_100))
            check(policy, "heard within the grace")
            policy.heard(at: t0 + .seconds(8))
            check(policy, "heard after the grace")
            policy.restarted(at: t0 + .seconds(8))
            check(policy, "restarted while heard")
            policy.pathRestored()
            check(policy, "restored")
            var early = ICERestartPolicy(offerer: offerer)
            early.restarted(at: t0)
            early.pathLost(at: t0 + .seconds(3))
            check(early, "a restart before the loss")
        }
    }
}
