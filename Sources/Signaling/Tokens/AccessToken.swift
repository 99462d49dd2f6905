import FoundationEssentials
import Glibc

/// The claims of a callend access token: a standard JWT signed with HS256 (RFC 7519, RFC 7515).
///
///     header  {"alg":"HS256","typ":"JWT"}
///     payload {"sub": identity, "room": room name or "*", "iss": issuer,
///              "iat": issued at, "nbf": not before, "exp": expires}   (times in Unix seconds)
///     "can": what the token allows, of "join", "publish", "watch" (absent: "join" only)
///     and, in a credential the service renewed, "rnw": true and "seat": the seat it takes back
public struct TokenClaims: Sendable, Equatable {
    public var identity: String
    /// The room this token grants joining; "*" grants every room.
    public var room: String
    public var issuer: String
    /// nil when the token has no `iat`: nothing is inferred from a claim that is not there.
    public var issuedAt: Int64?
    public var notBefore: Int64
    public var expires: Int64
    /// Minted by the service to renew a seated participant's credential (claim `rnw`): it takes
    /// back that seat and is good for nothing else.
    public var renewal = false
    /// The seat a renewal belongs to (claim `seat`), named by the service when the seat was taken.
    public var seat: String?
    /// What the token allows (claim `can`).
    public var can: TokenScope = .join

    /// The largest time a claim may hold (9999-12-31T23:59:59Z): far beyond any real token, and
    /// small enough that no arithmetic on it can overflow.
    public static let latestTime: Int64 = 253_402_300_799

    public init(identity: String, room: String, issuer: String = TokenIssuer.defaultIssuer, issuedAt: Int64, notBefore: Int64? = nil, expires: Int64) {
        self.identity = identity
        self.room = room
        self.issuer = issuer
        self.issuedAt = issuedAt
        self.notBefore = notBefore ?? issuedAt
        self.expires = expires
    }
}

/// What a token allows: joining a room as a peer (signaling), publishing into it (WHIP at
/// /whip/ROOM), watching its endpoint (WHEP at /whep/ROOM). A token that names none (one minted
/// by other tools, or before scopes) allows joining only: nothing it does not say.
public struct TokenScope: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let join = TokenScope(rawValue: 1)
    public static let publish = TokenScope(rawValue: 2)
    public static let watch = TokenScope(rawValue: 4)

    static let names: [(String, TokenScope)] = [("join", .join), ("publish", .publish), ("watch", .watch)]

    /// "join,watch" (the claim's names, comma-separated); nil when a name is none of them.
    public init?(names text: String) {
        var scope: TokenScope = []
        for name in text.split(separator: ",").map({ $0.trimmed() }) where !name.isEmpty {
            guard let known = Self.names.first(where: { $0.0 == name })?.1 else { return nil }
            scope.insert(known)
        }
        guard !scope.isEmpty else { return nil }
        self = scope
    }

    public var claim: [String] { Self.names.filter { contains($0.1) }.map(\.0) }
    public var description: String { claim.joined(separator: ",") }
}

extension TokenClaims {
    /// The `exp` a token says it has, read without checking its signature: for a client
    /// choosing which of its tokens to present, never for deciding what a token may do.
    public static func unverifiedExpiry(of token: String) -> Int64? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = Base64URL.decode(parts[1]),
              let payload = try? JSONValue(parsing: bytes),
              let expires = payload["exp"]?.numberValue, expires.isFinite, expires >= 0, expires <= Double(latestTime) else { return nil }
        return Int64(expires)
    }
}

/// A shared HS256 secret. Fewer than 32 bytes is refused (RFC 7518 §3.2 asks for a key at least
/// as long as the hash output).
public struct TokenSecret: Sendable {
    package let bytes: [UInt8]
    public static let minimumLength = 32

    public init(_ bytes: [UInt8]) throws(SignalingProtocolError) {
        guard bytes.count >= Self.minimumLength else {
            throw SignalingProtocolError(.tokenMalformed, "the token secret has \(bytes.count) bytes; HS256 needs at least \(Self.minimumLength)")
        }
        self.bytes = bytes
    }

    /// Reads a secret file; one trailing newline (as `echo` and editors leave) is not part of it.
    public init(contentsOfFile path: String) throws(SignalingProtocolError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SignalingProtocolError(.tokenMalformed, "cannot read the secret file \(path)")
        }
        var bytes = [UInt8](data)
        if bytes.last == 0x0a { bytes.removeLast() }
        if bytes.last == 0x0d { bytes.removeLast() }
        try self.init(bytes)
    }

    /// The secret's bytes, for writing a new one to a file. Never log them.
    public var printable: [UInt8] { bytes }

    /// A new random secret, for tests and `callend token --new-secret`.
    public static func random() -> TokenSecret {
        // 32 random bytes written as 64 hex characters, so the secret is printable in a file.
        let hex = Crypto.hex(Crypto.randomBytes(32))
        return try! TokenSecret(Array(hex.utf8))  // 64 bytes: never below the minimum
    }
}

public struct TokenIssuer: Sendable {
    public static let defaultIssuer = "callend"
    let secret: TokenSecret

    public init(secret: TokenSecret) { self.secret = secret }

    public func mint(_ claims: TokenClaims) -> String {
        var fields: [String: JSONValue] = [
            "sub": .string(claims.identity), "room": .string(claims.room), "iss": .string(claims.issuer),
            "nbf": .number(Double(claims.notBefore)), "exp": .number(Double(claims.expires)),
        ]
        if let issuedAt = claims.issuedAt { fields["iat"] = .number(Double(issuedAt)) }
        fields["can"] = .array(claims.can.claim.map(JSONValue.string))
        if claims.renewal { fields["rnw"] = .bool(true) }
        if let seat = claims.seat { fields["seat"] = .string(seat) }
        let payload: JSONValue = .object(fields)
        return sign(payload: payload.serialized)
    }

    /// Any payload as an HS256 JWT under this issuer's secret, claims checked or not: for
    /// whoever mints tokens with claims of their own, and for the fuzz target that feeds the
    /// verifier's claim checks signed input.
    public func sign(payload: [UInt8]) -> String {
        let header = #"{"alg":"HS256","typ":"JWT"}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(payload)
        let signature = Crypto.hmacSHA256(key: secret.bytes, data: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }
}

/// Checks tokens at every join and rejoin. Each failure has its own error code.
public struct TokenVerifier: Sendable {
    package let secret: TokenSecret
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    public var leeway: Int64 = 10
    /// When set, `iss` must equal it.
    public var requiredIssuer: String?

    public init(secret: TokenSecret, requiredIssuer: String? = nil) {
        self.secret = secret
        self.requiredIssuer = requiredIssuer
    }

    public func verify(_ token: String, room: String, now: Int64) throws(SignalingProtocolError) -> TokenClaims {
        func malformed(_ why: String) -> SignalingProtocolError { SignalingProtocolError(.tokenMalformed, "token is malformed: \(why)") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw malformed("a JWT has three dot-separated parts, this has \(parts.count)") }
        guard let headerBytes = Base64URL.decode(parts[0]), let header = try? JSONValue(parsing: headerBytes) else {
            throw malformed("the header is not base64url JSON")
        }
        // The algorithm is checked before anything is trusted: "none" and RS256/HS512 are refused.
        // What the header says is not repeated: it is anyone's text, and it reaches logs.
        guard let algorithm = header["alg"]?.stringValue, algorithm == "HS256" else {
            throw SignalingProtocolError(.tokenAlgorithm, "the token's algorithm (alg) is \(header["alg"] == nil ? "missing" : "not HS256"); only HS256 is accepted")
        }
        // Extensions that must be understood (RFC 7515 §4.1.11): this verifier understands none.
        guard header["crit"] == nil else {
            throw malformed("the header names extensions (crit) this service does not understand")
        }
        guard let signature = Base64URL.decode(parts[2]) else { throw malformed("the signature is not base64url") }
        let expected = Crypto.hmacSHA256(key: secret.bytes, data: Array("\(parts[0]).\(parts[1])".utf8))
        guard Crypto.constantTimeEquals(signature, expected) else {
            throw SignalingProtocolError(.tokenSignature, "token signature does not match the server's secret")
        }
        guard let payloadBytes = Base64URL.decode(parts[1]), let payload = try? JSONValue(parsing: payloadBytes),
              case .object = payload else {
            throw malformed("the payload is not base64url JSON")
        }
        guard let written = payload["sub"]?.stringValue, !written.isEmpty, written.utf8.count <= 256 else {
            throw malformed("claim sub (identity) is missing")
        }
        guard !CanonicalName.hasControlCharacters(written) else { throw malformed("claim sub (identity) has control characters") }
        let identity = CanonicalName.of(written)
        /// A NumericDate (RFC 7519 §2) within 0 ... latestTime, in whole seconds (a fraction is dropped).
        func time(_ name: String) throws(SignalingProtocolError) -> Int64? {
            guard let value = payload[name] else { return nil }
            guard let number = value.numberValue else { throw malformed("claim \(name) is not a number") }
            guard number.isFinite, number >= 0, number <= Double(TokenClaims.latestTime) else {
                throw SignalingProtocolError(.tokenClaimRange, "token claim \(name) is \(number), outside 0 ... \(TokenClaims.latestTime) (Unix seconds)")
            }
            return Int64(number)
        }
        guard let expires = try time("exp") else { throw malformed("claim exp is missing") }
        guard let grant = payload["room"]?.stringValue else { throw malformed("claim room (the room grant) is missing") }
        let notBefore = try time("nbf") ?? 0
        let issuedAt = try time("iat")
        let issuer = payload["iss"]?.stringValue ?? ""
        guard expires + leeway >= now else {
            throw SignalingProtocolError(.tokenExpired, "token expired at \(expires) (now \(now)); mint a new one")
        }
        guard notBefore - leeway <= now else {
            throw SignalingProtocolError(.tokenNotYetValid, "token is not valid before \(notBefore) (now \(now))")
        }
        if let requiredIssuer, issuer != requiredIssuer {
            throw SignalingProtocolError(.tokenIssuer, "token issuer \"\(issuer)\" is not \"\(requiredIssuer)\"")
        }
        guard grant == room || grant == "*" else {
            throw SignalingProtocolError(.tokenRoom, "token grants room \"\(grant)\", not \"\(room)\"")
        }
        var claims = TokenClaims(identity: identity, room: grant, issuer: issuer, issuedAt: 0, notBefore: notBefore, expires: expires)
        claims.issuedAt = issuedAt
        claims.renewal = payload["rnw"]?.boolValue ?? false
        claims.seat = payload["seat"]?.stringValue
        if let can = payload["can"] {
            guard case .array(let names) = can, let list = Optional(names.compactMap(\.stringValue)), list.count == names.count else {
                throw malformed("claim can is a list of names (join, publish, watch)")
            }
            // Names this service does not know grant nothing; none known grants nothing at all.
            claims.can = TokenScope(TokenScope.names.filter { list.contains($0.0) }.map(\.1))
        }
        if claims.renewal, claims.seat?.isEmpty != false {
            throw SignalingProtocolError(.tokenRenewal, "a renewed credential names its seat; this one does not")
        }
        return claims
    }
}
