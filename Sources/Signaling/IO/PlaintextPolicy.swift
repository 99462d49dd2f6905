#if canImport(Glibc)
import Glibc
#endif

/// Where plain TCP is acceptable for signaling. The DTLS fingerprint, tokens and TURN passwords
/// ride signaling, so a path an attacker can read or rewrite is a man in the middle of the
/// media: plaintext is for loopback, and anywhere else only when the user says so explicitly.
public enum PlaintextPolicy {
    /// `localhost`, 127.0.0.0/8, ::1 and IPv4-mapped 127.0.0.0/8. A wildcard ("", 0.0.0.0, ::)
    /// is every interface, not loopback.
    public static func isLoopback(host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name == "localhost" { return true }
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, name, &v4) == 1 { return withUnsafeBytes(of: v4) { $0[0] } == 127 }
        guard inet_pton(AF_INET6, name, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        return bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
    }

    /// The error a command or an SDK call gives for plaintext signaling off loopback.
    public static func refusal(_ what: String) -> String {
        "\(what) in plain TCP would send tokens, TURN passwords and the DTLS fingerprint in the clear: whoever is on the path could "
            + "take the call over. Use TLS (serve --tls-cert C --tls-key K, made by 'callend tls --host NAME --out DIR'; join --server tls://HOST:PORT "
            + "--ca-file DIR/ca.pem), or say --insecure-plaintext to accept that risk (a lab network you trust)"
    }
}

/// A configuration the service or an endpoint refuses to run with; the description says what to do.
public struct InsecureConfigurationError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
