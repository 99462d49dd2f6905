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
}
