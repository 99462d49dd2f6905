import FoundationEssentials
import Glibc
import Signaling

/// The STUN and TURN servers the service hands each participant in `joined` and with each
/// renewal. TURN servers get a credential of their own per participant, in the scheme of TURN's
/// REST API that coturn checks with `use-auth-secret` / `static-auth-secret`: the username is
/// "EXPIRY:ROOM:IDENTITY" (Unix seconds; coturn reads the expiry before the first colon, and the
/// rest names whom the credential was for) and the password base64(HMAC-SHA1(secret, username)).
/// The TURN server needs no list of users, and a leaked credential dies on its own: at the end
/// of `credentialLifetime`, and never after the participant's own credential.
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

    /// What `identity` in `room` gets at `now` (Unix seconds) while its credential is good
    /// until `notAfter`.
    public func servers(for identity: String, room: String, now: Int64, notAfter: Int64) -> [ICEServerInfo] {
        var servers: [ICEServerInfo] = []
        if !stunURLs.isEmpty { servers.append(ICEServerInfo(urls: stunURLs)) }
        if !turnURLs.isEmpty, let turnSecret {
            let expires = min(now + credentialLifetime, notAfter)
            let (username, credential) = Self.turnCredential(secret: turnSecret, room: room, identity: identity, expires: expires)
            servers.append(ICEServerInfo(urls: turnURLs, username: username, credential: credential))
        }
        return servers
    }

    public static func turnCredential(secret: [UInt8], room: String, identity: String, expires: Int64) -> (username: String, credential: String) {
        let username = "\(expires):\(room):\(identity)"
        return (username, Data(Crypto.hmacSHA1(key: secret, data: Array(username.utf8))).base64EncodedString())
    }
}
