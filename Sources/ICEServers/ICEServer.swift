/// A STUN or TURN server as WebRTC names them (RFC 7064 `stun:HOST[:PORT]`, RFC 7065
/// `turn:HOST[:PORT][?transport=udp|tcp]`), with TURN's username and credential.
/// A module of its own, which neither the transport nor signaling owns: the ICE agent connects
/// through these servers, and the signaling service checks the URLs it hands out with them
/// without linking the media path (`callend-serve` maps no media library).
public struct ICEServer: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case stun
        case turn(overTCP: Bool)
    }

    public var kind: Kind
    public var host: String
    public var port: Int
    public var username: String?
    public var credential: String?

    public init(kind: Kind, host: String, port: Int, username: String? = nil, credential: String? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.username = username
        self.credential = credential
    }

    /// Parses a `stun:` or `turn:` URL. `turns:` (TLS) is refused: libnice's TURN-TLS is not used here.
    public init(url: String, username: String? = nil, credential: String? = nil) throws(ICEError) {
        let bad = { (why: String) in ICEError("ICE server '\(url)': \(why); expected stun:HOST:PORT or turn:HOST:PORT?transport=udp|tcp") }
        guard let colon = url.firstIndex(of: ":") else { throw bad("no scheme") }
        let scheme = url[..<colon].lowercased()
        var rest = Substring(url[url.index(after: colon)...])
        var query = ""
        if let q = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: q)...]).lowercased()
            rest = rest[..<q]
        }
        // An IPv6 literal is bracketed: [::1]:3478.
        var host: Substring, portText: Substring?
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            portText = after.hasPrefix(":") ? after.dropFirst() : nil
        } else if let c = rest.lastIndex(of: ":") {
            host = rest[..<c]
            portText = rest[rest.index(after: c)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, !host.contains("/"), !host.contains("@") else { throw bad("no host") }
        let port: Int
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { throw bad("the port is not 1 ... 65535") }
            port = p
        } else {
            port = 3478
        }
        switch scheme {
        case "stun":
            guard query.isEmpty else { throw bad("a stun: URL takes no query") }
            self.init(kind: .stun, host: String(host), port: port)
        case "turn":
            let transport = query.isEmpty ? "transport=udp" : query
            guard transport == "transport=udp" || transport == "transport=tcp" else { throw bad("the transport is udp or tcp") }
            self.init(kind: .turn(overTCP: transport == "transport=tcp"), host: String(host), port: port, username: username, credential: credential)
        case "turns", "stuns":
            throw bad("TLS to the server (\(scheme):) is not supported")
        default:
            throw bad("unknown scheme '\(scheme)'")
        }
    }

    /// The URL form, as the service hands it out.
    public var url: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        switch kind {
        case .stun: return "stun:\(host):\(port)"
        case .turn(let tcp): return "turn:\(host):\(port)?transport=\(tcp ? "tcp" : "udp")"
        }
    }

    public var description: String { url }
}

public struct ICEError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
