@testable import EndpointSignaling
import Foundation
import Testing
@testable import Signaling

let testSecret = try! TokenSecret(Array("0123456789abcdef0123456789abcdef-test".utf8))

func mint(identity: String = "roof", room: String = "lab", issuedAt: Int64 = 1_000_000, ttl: Int64 = 3600, notBefore: Int64? = nil, can: TokenScope = .join) -> String {
    var claims = TokenClaims(identity: identity, room: room, issuedAt: issuedAt, notBefore: notBefore, expires: issuedAt + ttl)
    claims.can = can
    return TokenIssuer(secret: testSecret).mint(claims)
}

func expectRejection(_ token: String, room: String = "lab", now: Int64 = 1_000_100, verifier: TokenVerifier = TokenVerifier(secret: testSecret),
                     _ code: SignalingErrorCode, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        _ = try verifier.verify(token, room: room, now: now)
        Issue.record("token accepted; expected \(code)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    }
}

func b64(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

@Suite struct TokenTests {
    @Test func mintedTokenVerifies() throws {
        let claims = try TokenVerifier(secret: testSecret, requiredIssuer: "callend").verify(mint(), room: "lab", now: 1_000_100)
        #expect(claims.identity == "roof" && claims.room == "lab" && claims.expires == 1_003_600 && claims.issuer == "callend")
    }

    @Test func base64urlMatchesRFC4648Vectors() {
        // RFC 4648 §10 test vectors, without padding.
        for (plain, encoded) in [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy")] {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64URL.decode("Zm9v=") == nil)
        #expect(Base64URL.decode("Z") == nil)
        #expect(Base64URL.decode("Zh") == nil, "non-zero trailing bits")
    }

    @Test func hmacMatchesRFC4231TestCase2() {
        let mac = Crypto.hmacSHA256(key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8))
        #expect(mac.map { String(format: "%02x", $0) }.joined() == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func everyRejectionHasItsOwnCode() {
        let good = mint()
        let parts = good.split(separator: ".").map(String.init)
        expectRejection("not-a-token", .tokenMalformed)
        expectRejection("a.b", .tokenMalformed)
        expectRejection("!!!.\(parts[1]).\(parts[2])", .tokenMalformed)
        expectRejection(b64(#"{"alg":"none","typ":"JWT"}"#) + ".\(parts[1]).", .tokenAlgorithm)
        expectRejection(b64(#"{"alg":"HS512","typ":"JWT"}"#) + ".\(parts[1]).\(parts[2])", .tokenAlgorithm)
        expectRejection(b64(#"{"alg":"RS256"}"#) + ".\(parts[1]).\(parts[2])", .tokenAlgorithm)
        expectRejection(b64(#"{"typ":"JWT"}"#) + ".\(parts[1]).\(parts[2])", .tokenAlgorithm)
        let flipped = (parts[2].first == "A" ? "B" : "A") + parts[2].dropFirst()
        expectRejection(parts[0] + "." + parts[1] + "." + flipped, .tokenSignature)
        let otherSecret = try! TokenSecret(Array("another-secret-of-at-least-32-bytes!!".utf8))
        expectRejection(TokenIssuer(secret: otherSecret).mint(TokenClaims(identity: "x", room: "lab", issuedAt: 1_000_000, expires: 1_003_600)), .tokenSignature)
        // A payload edited after signing (room widened to "*").
        expectRejection(parts[0] + "." + b64(#"{"exp":2000000,"room":"*","sub":"roof"}"#) + "." + parts[2], .tokenSignature)
        expectRejection(good, now: 1_003_600 + 11, .tokenExpired)
        expectRejection(mint(notBefore: 1_000_500), now: 1_000_100, .tokenNotYetValid)
        expectRejection(good, room: "other", .tokenRoom)
        expectRejection(good, verifier: TokenVerifier(secret: testSecret, requiredIssuer: "someone-else"), .tokenIssuer)
        // Signed correctly but missing claims.
        let issuer = testSecret
        func signed(_ payload: String) -> String {
            let input = b64(#"{"alg":"HS256","typ":"JWT"}"#) + "." + b64(payload)
            return input + "." + Base64URL.encode(Crypto.hmacSHA256(key: issuer.bytes, data: Array(input.utf8)))
        }
        expectRejection(signed(#"{"room":"lab","exp":2000000}"#), .tokenMalformed)
        expectRejection(signed(#"{"sub":"a","room":"lab"}"#), .tokenMalformed)
        expectRejection(signed(#"{"sub":"a","exp":2000000}"#), .tokenMalformed)
        expectRejection(signed(#"[1]"#), .tokenMalformed)
    }

    /// Times outside 1970-9999 are refused with a code of their own, never a trap converting
    /// them; a missing iat stays missing.
    @Test func claimsOutOfRangeAreRefused() throws {
        for payload in [#"{"sub":"a","room":"lab","exp":9.3e18}"#, #"{"sub":"a","room":"lab","exp":1e300}"#,
                        #"{"sub":"a","room":"lab","exp":-1}"#, #"{"sub":"a","room":"lab","exp":2000000,"nbf":-9.3e18}"#,
                        #"{"sub":"a","room":"lab","exp":2000000,"iat":1e19}"#, #"{"sub":"a","room":"lab","exp":253402300800}"#] {
            expectRejection(signedPayload(payload), .tokenClaimRange)
        }
        expectRejection(signedPayload(#"{"sub":"a","room":"lab","exp":"soon"}"#), .tokenMalformed)
        expectRejection(signedPayload(#"{"sub":"a","room":"lab","exp":2000000,"rnw":true}"#), .tokenRenewal)
        let claims = try TokenVerifier(secret: testSecret).verify(signedPayload(#"{"sub":"a","room":"lab","exp":2000000.75}"#), room: "lab", now: 1_000_100)
        #expect(claims.issuedAt == nil && claims.notBefore == 0 && claims.expires == 2_000_000)
    }

    @Test func leewayAllowsSmallSkewOnly() throws {
        let verifier = TokenVerifier(secret: testSecret)
        _ = try verifier.verify(mint(), room: "lab", now: 1_003_600 + 10)
        _ = try verifier.verify(mint(notBefore: 1_000_110), room: "lab", now: 1_000_100)
        _ = try verifier.verify(mint(room: "*"), room: "any-room", now: 1_000_100)
    }

    @Test func shortSecretsAreRefused() {
        #expect(throws: SignalingProtocolError.self) { try TokenSecret(Array("short".utf8)) }
        #expect(TokenSecret.random().bytes.count == 64)
    }
}

@Suite struct BackoffTests {
    @Test func delaysDoubleUpToTheCapWithJitter() {
        var configuration = SignalingClientConfiguration(host: "127.0.0.1", port: 1, room: "r", token: { "" })
        configuration.backoffInitial = .milliseconds(250)
        configuration.backoffMax = .seconds(10)
        let client = SignalingClient(configuration: configuration)
        for attempt in 1...10 {
            let nominal = min(10.0, 0.25 * pow(2, Double(attempt - 1)))
            let delays = (0..<50).map { _ in client.backoffDelay(attempt: attempt).inSeconds }
            #expect(delays.allSatisfy { $0 >= nominal * 0.5 - 1e-9 && $0 <= nominal + 1e-9 }, "attempt \(attempt): \(delays.min()!)...\(delays.max()!)")
            #expect(Set(delays).count > 10, "jittered, not in step")
        }
    }
}
