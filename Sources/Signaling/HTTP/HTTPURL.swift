/// An http or https URL as a WHIP/WHEP client uses it (RFC 9110 §4.2): scheme, host, port, and the
/// request target (path and query). Userinfo and fragments are refused: a token belongs in a
/// header, never in a URL that ends up in logs.
public struct HTTPURL: Sendable, Equatable, CustomStringConvertible {
    public var isSecure: Bool
    /// The host as written, without brackets for IPv6 literals.
    public var host: String
    public var port: Int
    /// The path and query, starting with "/".
    public var target: String

    public struct Invalid: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    public init(parsing text: String) throws(Invalid) {
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("https://") {
            isSecure = true
            rest = text.dropFirst(8)
        } else if lower.hasPrefix("http://") {
            isSecure = false
            rest = text.dropFirst(7)
        } else {
            throw Invalid(description: "'\(text)' is not an http:// or https:// URL")
        }
        guard !text.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" || $0 == "\t" }) else {
            throw Invalid(description: "'\(text.prefix(200))' has white space in it")
        }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.contains("@") else { throw Invalid(description: "'\(text)': credentials in a URL are refused; give a bearer token file") }
        var target = String(rest[authorityEnd...])
        if target.contains("#") { target = String(target[..<target.firstIndex(of: "#")!]) }
        if target.isEmpty || target.hasPrefix("?") { target = "/" + target }
        self.target = target
        var hostPart = authority
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw Invalid(description: "'\(text)': an IPv6 address without its closing ]") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty { throw Invalid(description: "'\(text)': junk after the IPv6 address") }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw Invalid(description: "'\(text)' names no host") }
        host = String(hostPart)
        if let portText {
            guard let port = Int(portText), (1...65535).contains(port) else { throw Invalid(description: "'\(text)': the port must be 1 ... 65535") }
            self.port = port
        } else {
            port = isSecure ? 443 : 80
        }
    }

    /// The Host field's value (RFC 9110 §7.2): the port only when it is not the scheme's default.
    public var authority: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? h : "\(h):\(port)"
    }

    public var description: String { (isSecure ? "https://" : "http://") + authority + target }

    /// A reference from a Location field resolved against this URL (RFC 3986 §5.2): absolute,
    /// network-path ("//host/..."), absolute-path ("/..."), or relative to this URL's directory.
    public func resolving(_ reference: String) throws(Invalid) -> HTTPURL {
        let lower = reference.lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") { return try HTTPURL(parsing: reference) }
        if reference.hasPrefix("//") { return try HTTPURL(parsing: (isSecure ? "https:" : "http:") + reference) }
        guard !reference.isEmpty, !reference.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" }) else {
            throw Invalid(description: "'\(reference.prefix(200))' is not a usable reference")
        }
        var resolved = self
        if reference.hasPrefix("/") {
            resolved.target = reference
        } else {
            let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let directory = path.lastIndex(of: "/").map { path[...$0] } ?? "/"
            resolved.target = String(directory) + reference
        }
        if let hash = resolved.target.firstIndex(of: "#") { resolved.target = String(resolved.target[..<hash]) }
        return resolved
    }
}
