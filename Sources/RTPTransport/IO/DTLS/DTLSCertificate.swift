internal import COpenSSL
import Platform

/// A self-signed certificate on an ECDSA P-256 key, as WebRTC endpoints make one for DTLS
/// (RFC 8827 §6.5): nothing vouches for it but the fingerprint the session description carries
/// (RFC 8122), which the peer checks against the certificate it gets in the handshake. One owner
/// of the OpenSSL key and certificate, freed in deinit.
public final class DTLSCertificate: @unchecked Sendable {  // immutable after init; OpenSSL only reads the key and certificate
    let key: OpaquePointer
    let certificate: OpaquePointer
    /// "sha-256" and the colon-separated upper-case hex digest, as in `a=fingerprint:sha-256 AB:CD:...`.
    public let fingerprint: DTLSFingerprint

    public init(commonName: String = "callend", validDays: Int = 30) throws(DTLSError) {
        guard let key = copenssl_generate_p256_key() else { throw DTLSError("generate an ECDSA P-256 key", openSSL: true) }
        guard let certificate = X509_new() else {
            EVP_PKEY_free(key)
            throw DTLSError("allocate a certificate", openSSL: true)
        }
        self.key = key
        self.certificate = certificate
        X509_set_version(certificate, 2)
        // A random positive serial (RFC 5280 §4.1.2.2): browsers refuse repeated serials from one issuer.
        ASN1_INTEGER_set_uint64(X509_get_serialNumber(certificate), UInt64.random(in: 1...(UInt64(1) << 62)))
        // Valid from a day ago, so a peer whose clock is a little behind accepts it.
        X509_gmtime_adj(X509_getm_notBefore(certificate), -86_400)
        X509_gmtime_adj(X509_getm_notAfter(certificate), validDays * 86_400)
        X509_set_pubkey(certificate, key)
        let name = X509_get_subject_name(certificate)
        _ = commonName.withCString { cn in
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, UnsafeRawPointer(cn).assumingMemoryBound(to: UInt8.self), -1, -1, 0)
        }
        X509_set_issuer_name(certificate, name)
        guard X509_sign(certificate, key, EVP_sha256()) > 0 else { throw DTLSError("sign the DTLS certificate", openSSL: true) }
        guard let fingerprint = DTLSFingerprint(of: certificate, algorithm: "sha-256") else { throw DTLSError("digest the DTLS certificate", openSSL: true) }
        self.fingerprint = fingerprint
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }
}

/// A certificate fingerprint (RFC 8122 §5): hash function name and upper-case hex bytes.
public struct DTLSFingerprint: Sendable, Equatable, CustomStringConvertible {
    public var algorithm: String
    public var bytes: [UInt8]

    public init(algorithm: String, bytes: [UInt8]) {
        self.algorithm = algorithm.lowercased()
        self.bytes = bytes
    }

    /// Parses the value of an `a=fingerprint:` attribute ("sha-256 AB:CD:...").
    public init?(attribute: String) {
        let parts = attribute.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2 else { return nil }
        var bytes: [UInt8] = []
        for hex in parts[1].split(separator: ":", omittingEmptySubsequences: false) {
            guard hex.count == 2, let byte = UInt8(hex, radix: 16) else { return nil }
            bytes.append(byte)
        }
        guard ["sha-1", "sha-224", "sha-256", "sha-384", "sha-512"].contains(parts[0].lowercased()), bytes.count >= 20 else { return nil }
        self.init(algorithm: String(parts[0]), bytes: bytes)
    }

    init?(of certificate: OpaquePointer, algorithm: String) {
        let name = String(algorithm.lowercased().filter { $0 != "-" })
        guard let digest = EVP_get_digestbyname(name) else { return nil }
        var buffer = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(certificate, digest, &buffer, &length) == 1 else { return nil }
        self.init(algorithm: algorithm, bytes: Array(buffer.prefix(Int(length))))
    }

    /// "sha-256 AB:CD:...", the attribute value.
    public var description: String {
        algorithm + " " + bytes.map { String($0, radix: 16, uppercase: true).leftPadded(to: 2, with: "0") }.joined(separator: ":")
    }
}

public struct DTLSError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }

    /// With `openSSL`, the reason OpenSSL's error queue gives (which is then cleared).
    init(_ operation: String, openSSL: Bool) {
        var text = operation
        if openSSL {
            let code = ERR_get_error()
            if code != 0 {
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                text += ": " + String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            ERR_clear_error()
        }
        description = text
    }
}
