internal import COpenSSL

/// The OpenSSL this build links; signaling uses it for TLS, HMAC and randomness.
public enum TLSLibrary {
    public static var version: String { String(cString: copenssl_version_text()) }
}
