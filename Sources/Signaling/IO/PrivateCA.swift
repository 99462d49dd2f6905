internal import COpenSSL
import Glibc
import FoundationEssentials
import Platform

/// A private certificate authority and the server certificates it signs: the one step to a
/// working TLS service (`callend tls`). The CA's certificate is what endpoints trust
/// (`join --ca-file`); its key stays with whoever runs the command, to sign the next server
/// certificate (a renewal, another node) with the same CA. Keys are ECDSA P-256, signatures
/// SHA-256, as the TLS 1.2+ the service speaks expects.
public enum PrivateCA {
    /// What `issue` wrote, by path.
    public struct Files: Sendable, Equatable {
        public var caCertificate: String
        public var caKey: String
        public var certificate: String
        public var key: String
        /// The CA was made by this call (false: an existing one signed the certificate).
        public var madeCA: Bool
    }

    /// Writes DIR/server.pem and DIR/server-key.pem, a certificate for `hosts` (DNS names and IP
    /// addresses) valid `days` days, signed by the CA in DIR/ca.pem and DIR/ca-key.pem, which
    /// are made first when they do not exist. Keys are written mode 0600.
    public static func issue(hosts: [String], directory: String, days: Int = 825) throws(TLSError) -> Files {
        guard let first = hosts.first else { throw TLSError("make a server certificate", detail: "no host name or address to make it for") }
        for host in hosts where host.isEmpty || host.contains(",") || host.contains(" ") || host.contains("/") {
            throw TLSError("make a server certificate", detail: "'\(host)' is not a DNS name or an IP address")
        }
        let files = Files(caCertificate: directory + "/ca.pem", caKey: directory + "/ca-key.pem",
                          certificate: directory + "/server.pem", key: directory + "/server-key.pem", madeCA: false)
        do { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) } catch {
            throw TLSError("make the folder \(directory)", detail: "\(error)")
        }
        let fileManager = FileManager.default
        let haveCertificate = fileManager.fileExists(atPath: files.caCertificate), haveKey = fileManager.fileExists(atPath: files.caKey)
        guard haveCertificate == haveKey else {
            throw TLSError("use the CA in \(directory)", detail: "one of ca.pem and ca-key.pem is there without the other; remove it or put its pair back")
        }
        let ca: Pair
        var written = files
        if haveCertificate {
            ca = try Pair(certificateFile: files.caCertificate, keyFile: files.caKey)
        } else {
            ca = try Pair(authorityNamed: "callend private CA \(first)")
            try ca.write(certificateTo: files.caCertificate, keyTo: files.caKey)
            written.madeCA = true
        }
        let server = try Pair(server: hosts, days: days, signedBy: ca)
        try server.write(certificateTo: files.certificate, keyTo: files.key)
        return written
    }

    /// base64(SHA-256(SubjectPublicKeyInfo)) of the certificate in `path`: the pin browsers take
    /// (Chromium's --ignore-certificate-errors-spki-list) for a certificate of a private CA.
    public static func publicKeyPin(ofCertificate path: String) throws(TLSError) -> String {
        guard let bio = BIO_new_file(path, "r") else { throw TLSError("read the certificate \(path)") }
        defer { BIO_free(bio) }
        guard let certificate = copenssl_read_cert_pem(bio) else { throw TLSError("read the certificate \(path)") }
        defer { X509_free(certificate) }
        var der = [UInt8](repeating: 0, count: 1024)
        let length = copenssl_certificate_spki(certificate, &der, Int32(der.count))
        guard length > 0 else { throw TLSError("encode the key of \(path)") }
        return Data(Crypto.sha256(Array(der.prefix(Int(length))))).base64EncodedString()
    }

    /// A key and its certificate; one owner frees both.
    final class Pair {
        let key: OpaquePointer
        let certificate: OpaquePointer

        init(certificateFile: String, keyFile: String) throws(TLSError) {
            guard let certificate = Self.read(certificateFile, copenssl_read_cert_pem) else { throw TLSError("read the CA certificate \(certificateFile)") }
            guard let key = Self.read(keyFile, copenssl_read_key_pem) else {
                X509_free(certificate)
                throw TLSError("read the CA key \(keyFile)")
            }
            (self.key, self.certificate) = (key, certificate)
            guard X509_check_private_key(certificate, key) == 1 else { throw TLSError("check that \(keyFile) is the key of \(certificateFile)") }
        }

        /// A CA certificate of its own: it signs server certificates and nothing else.
        init(authorityNamed name: String) throws(TLSError) {
            (key, certificate) = try Self.blank(commonName: name, days: 3650)
            X509_set_issuer_name(certificate, X509_get_subject_name(certificate))
            try add(copenssl_nid_basic_constraints(), "critical,CA:TRUE,pathlen:0", issuer: certificate)
            try add(copenssl_nid_key_usage(), "critical,keyCertSign,cRLSign", issuer: certificate)
            try add(copenssl_nid_subject_key_identifier(), "hash", issuer: certificate)
            guard X509_sign(certificate, key, EVP_sha256()) > 0 else { throw TLSError("sign the CA certificate") }
        }

        /// A server certificate for `hosts`, signed by `ca`.
        init(server hosts: [String], days: Int, signedBy ca: Pair) throws(TLSError) {
            (key, certificate) = try Self.blank(commonName: hosts[0], days: days)
            X509_set_issuer_name(certificate, X509_get_subject_name(ca.certificate))
            let names = hosts.map { HostName.isIPAddress($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
            try add(copenssl_nid_basic_constraints(), "critical,CA:FALSE", issuer: ca.certificate)
            try add(copenssl_nid_key_usage(), "critical,digitalSignature", issuer: ca.certificate)
            try add(copenssl_nid_ext_key_usage(), "serverAuth", issuer: ca.certificate)
            try add(copenssl_nid_subject_alt_name(), names, issuer: ca.certificate)
            try add(copenssl_nid_subject_key_identifier(), "hash", issuer: ca.certificate)
            try add(copenssl_nid_authority_key_identifier(), "keyid:always", issuer: ca.certificate)
            guard X509_sign(certificate, ca.key, EVP_sha256()) > 0 else { throw TLSError("sign the server certificate") }
        }

        deinit {
            X509_free(certificate)
            EVP_PKEY_free(key)
        }

        private static func blank(commonName: String, days: Int) throws(TLSError) -> (OpaquePointer, OpaquePointer) {
            guard let key = copenssl_generate_p256_key() else { throw TLSError("generate an ECDSA P-256 key") }
            guard let certificate = X509_new() else {
                EVP_PKEY_free(key)
                throw TLSError("allocate a certificate")
            }
            X509_set_version(certificate, 2)
            // A random positive serial (RFC 5280 §4.1.2.2): no two certificates of the CA share one.
            ASN1_INTEGER_set_uint64(X509_get_serialNumber(certificate), UInt64.random(in: 1...(UInt64(1) << 62)))
            // Valid from an hour ago, so a host whose clock is a little behind accepts it.
            X509_gmtime_adj(X509_getm_notBefore(certificate), -3600)
            X509_gmtime_adj(X509_getm_notAfter(certificate), days * 86_400)
            X509_set_pubkey(certificate, key)
            _ = commonName.withCString { cn in
                X509_NAME_add_entry_by_txt(X509_get_subject_name(certificate), "CN", MBSTRING_UTF8,
                                           UnsafeRawPointer(cn).assumingMemoryBound(to: UInt8.self), -1, -1, 0)
            }
            return (key, certificate)
        }

        private func add(_ nid: Int32, _ value: String, issuer: OpaquePointer) throws(TLSError) {
            guard copenssl_add_extension(certificate, issuer, nid, value) == 1 else { throw TLSError("add the extension \(value)") }
        }

        private static func read(_ path: String, _ reader: (OpaquePointer?) -> OpaquePointer?) -> OpaquePointer? {
            guard let bio = BIO_new_file(path, "r") else { return nil }
            defer { BIO_free(bio) }
            return reader(bio)
        }

        func write(certificateTo certificatePath: String, keyTo keyPath: String) throws(TLSError) {
            let certificatePEM = try Self.pem { PEM_write_bio_X509($0, certificate) }
            let keyPEM = try Self.pem { copenssl_write_key_pem($0, key) }
            do {
                try writePrivateFile(atPath: keyPath, contents: keyPEM)
                // The certificate is public: readable by whoever runs the endpoint or the service.
                try writePrivateFile(atPath: certificatePath, contents: certificatePEM)
                chmod(certificatePath, 0o644)
            } catch {
                throw TLSError("write \(certificatePath) and \(keyPath)", detail: error.description)
            }
        }

        private static func pem(_ body: (OpaquePointer?) -> Int32) throws(TLSError) -> [UInt8] {
            guard let bio = BIO_new(BIO_s_mem()) else { throw TLSError("allocate a buffer") }
            defer { BIO_free(bio) }
            guard body(bio) == 1 else { throw TLSError("write PEM") }
            var data: UnsafeMutablePointer<CChar>?
            let count = copenssl_bio_mem_data(bio, &data)
            guard let data, count > 0 else { throw TLSError("write PEM") }
            return Array(UnsafeRawBufferPointer(start: data, count: count))
        }
    }
}
