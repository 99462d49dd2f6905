import Platform
import Testing
@testable import RTPTransport
import MediaCore

struct PathConsentTests {
    let t0 = MediaTime(microseconds: 9_000_000_000)

    @Test func consentExpiresThirtySecondsAfterTheLastSignAndNotBefore() {
        var consent = PathConsent()
        #expect(!consent.expired(at: t0 + .seconds(3600)), "nothing to expire before the first sign")
        consent.signOfLife(at: t0)
        #expect(!consent.expired(at: t0 + .seconds(30)), "RFC 7675: 30 s")
        #expect(consent.expired(at: t0 + .milliseconds(30_001)))
        consent.signOfLife(at: t0 + .seconds(29))
        #expect(!consent.expired(at: t0 + .seconds(58)))
        #expect(consent.expired(at: t0 + .milliseconds(59_001)))
    }

    @Test func aLateSignDoesNotMoveConsentBack() {
        var consent = PathConsent(expiry: .seconds(1))
        consent.signOfLife(at: t0 + .seconds(10))
        consent.signOfLife(at: t0 + .seconds(5))  // a thread that took its time out of order
        #expect(consent.lastSign == t0 + .seconds(10))
        #expect(!consent.expired(at: t0 + .seconds(11)))
    }
}
