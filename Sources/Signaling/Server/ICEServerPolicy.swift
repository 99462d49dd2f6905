import Foundation

/// The STUN and TURN servers the service hands each participant in `joined`. TURN servers get a
/// credential of their own per participant, valid for `credentialLifetime`, in the scheme of
/// TURN's REST API that coturn checks with `use-auth-secret` / `static-auth-secret`: the username
/// is "EXPIRY:IDENTITY" (Unix seconds) and the password base64(HMAC-SHA1(secret, username)). The
/// TURN server needs no list of users, and a leaked credential dies on its own.
public struct ICEServerPolicy: Sendable {
    public var stunURLs: [String]
    public var turnURLs: [String]
    public var turnSecret: [UInt8]?
    public var credentialLifetime: Int64

    public init(stunURLs: [String] = [], turnURLs: [String] = [], turnSecret: [UInt8]? = nil, credentialLifetime: Int64 = 86_400) {
        self.stunURLs = stunURLs
        self.turnURLs = turnURLs
        self.turnSecret = turnSecret
        self.credentialLifetime = credentialLifetime
    }

    /// What `identity` gets at `now` (Unix seconds).
    public func servers(for identity: String, now: Int64) -> [ICEServerInfo] {
        var servers: [ICEServerInfo] = []
        if !stunURLs.isEmpty { servers.append(ICEServerInfo(urls: stunURLs)) }
        if !turnURLs.isEmpty, let turnSecret {
            let (username, credential) = Self.turnCredential(secret: turnSecret, identity: identity, expires: now + credentialLifetime)
            servers.append(ICEServerInfo(urls: turnURLs, username: username, credential: credential))
        }
        return servers
    }

    public static func turnCredential(secret: [UInt8], identity: String, expires: Int64) -> (username: String, credential: String) {
        let username = "\(expires):\(identity)"
        return (username, Data(Crypto.hmacSHA1(key: secret, data: Array(username.utf8))).base64EncodedString())
    }
}
