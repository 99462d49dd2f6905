import Foundation
import Testing
@testable import Signaling

/// Debian's python3-jwt is PyJWT; scripts/install-deps.sh installs it for /usr/bin/python3.
func python(_ script: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", script] + arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    let errors = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw ToolError(description: "python3 failed: \(String(decoding: errors, as: UTF8.self))")
    }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

struct ToolError: Error, CustomStringConvertible { let description: String }

@Suite struct PyJWTInteropTests {
    let secret = "0123456789abcdef0123456789abcdef-test"

    @Test func tokenMintedByPyJWTIsAccepted() throws {
        let now = Int64(Date().timeIntervalSince1970)
        let token = try python("""
            import jwt, sys, time
            now = int(time.time())
            print(jwt.encode({"sub": "pi-4", "room": "rooftop", "iss": "callend", "iat": now, "nbf": now, "exp": now + 600},
                             sys.argv[1], algorithm="HS256"))
            """, [secret])
        let claims = try TokenVerifier(secret: TokenSecret(Array(secret.utf8)), requiredIssuer: "callend")
            .verify(token, room: "rooftop", now: now)
        #expect(claims.identity == "pi-4")
        // PyJWT's own "none" token is refused.
        let unsigned = try python("import jwt; print(jwt.encode({'sub':'x','room':'rooftop','exp':9999999999}, None, algorithm='none'))", [])
        expectRejection(unsigned, room: "rooftop", now: now, .tokenAlgorithm)
    }

    @Test func ourTokenVerifiesWithPyJWT() throws {
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenIssuer(secret: try TokenSecret(Array(secret.utf8)))
            .mint(TokenClaims(identity: "lab-bench", room: "r1", issuedAt: now, expires: now + 300))
        let decoded = try python("""
            import jwt, sys
            c = jwt.decode(sys.argv[1], sys.argv[2], algorithms=["HS256"], issuer="callend",
                           options={"require": ["exp", "nbf", "iat", "iss", "sub"]})
            print(c["sub"], c["room"], c["exp"] - c["iat"])
            """, [token, secret])
        #expect(decoded == "lab-bench r1 300")
        // And PyJWT refuses it under a different secret, so the check above means something.
        #expect(throws: ToolError.self) {
            try python("import jwt, sys; jwt.decode(sys.argv[1], 'x' * 40, algorithms=['HS256'])", [token])
        }
    }
}
