import FoundationEssentials
import Platform
#if canImport(Glibc)
import Glibc
import Signaling
#endif

/// Which requests the web side answers. `Host` must name this service: an IP address, localhost,
/// a DNS name of its TLS certificate or one given with `--allowed-host`, so that a page on
/// another site cannot reach it under a name of its own that resolves here (DNS rebinding). A
/// WebSocket's `Origin`, which browsers always send, must be the page's own origin (the service's
/// page) or one given with `--allowed-origin`; a client that is no browser sends none and is let in.
public struct WebAccessPolicy: Sendable {
    /// The page is served over HTTPS (its origin is https://HOST).
    public var secure: Bool
    /// DNS names served besides IP addresses and localhost, lowercased.
    public var hostNames: Set<String>
    /// Origins allowed besides the page's own, as scheme://host[:port], lowercased.
    public var allowedOrigins: Set<String>

    public init(secure: Bool, hostNames: [String] = [], allowedOrigins: [String] = []) {
        self.secure = secure
        self.hostNames = Set(hostNames.map { $0.lowercased() })
        self.allowedOrigins = Set(allowedOrigins.compactMap(Self.normalizedOrigin))
    }

    /// The name in a Host field value ("name:port", "[v6]:port"), lowercased, without the port.
    static func hostName(_ field: String) -> String {
        let text = field.lowercased()
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") { return String(text[text.index(after: text.startIndex)..<close]) }
        if let colon = text.lastIndex(of: ":"), !text[text.index(after: colon)...].contains(":") { return String(text[..<colon]) }
        return text
    }

    public func serves(host field: String?) -> Bool {
        guard let field, !field.isEmpty else { return false }
        let name = Self.hostName(field)
        return name == "localhost" || HostName.isIPAddress(name) || hostNames.contains(name)
    }

    /// scheme://host[:port] lowercased, the default port dropped; nil for anything else.
    public static func normalizedOrigin(_ text: String) -> String? {
        let lower = text.lowercased().trimmed()
        for (scheme, port) in [("https://", ":443"), ("http://", ":80")] where lower.hasPrefix(scheme) {
            var authority = String(lower.dropFirst(scheme.count))
            guard !authority.isEmpty, !authority.contains("/") else { return nil }
            if authority.hasSuffix(port) { authority.removeLast(port.count) }
            return scheme + authority
        }
        return nil
    }

    public func allows(origin: String?, host: String) -> Bool {
        guard let origin else { return true }
        guard let given = Self.normalizedOrigin(origin) else { return false }
        if allowedOrigins.contains(given) { return true }
        return Self.normalizedOrigin((secure ? "https://" : "http://") + host) == given
    }
}
