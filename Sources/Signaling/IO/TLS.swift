internal import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// A TLS failure with OpenSSL's own words.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let detail: String

    init(_ operation: String) {
        self.operation = operation
        var lines: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            lines.append(String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        detail = lines.isEmpty ? "no detail from OpenSSL" : lines.joined(separator: "; ")
    }

    init(_ operation: String, detail: String) {
        self.operation = operation
        self.detail = detail
        ERR_clear_error()
    }

    public var description: String { "\(operation): \(detail)" }
}

/// An SSL_CTX for one side (server with certificate and key, or client with trusted CAs); freed in deinit.
public final class TLSContext: @unchecked Sendable {  // SSL_CTX is safe to share once configured (OpenSSL docs).
    let context: OpaquePointer
    let isServer: Bool

    /// A server context from PEM files: the certificate chain and its private key.
    public init(certificateFile: String, privateKeyFile: String) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSError("create TLS server context") }
        self.context = context
        self.isServer = true
        copenssl_ctx_require_tls12(context)
        copenssl_ctx_enable_partial_writes(context)
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            throw TLSError("load TLS certificate \(certificateFile)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            throw TLSError("load TLS private key \(privateKeyFile)")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw TLSError("check that \(privateKeyFile) matches \(certificateFile)")
        }
    }

    /// A client context that trusts the CAs in `caFile` (or the system's when nil) and checks the
    /// server's name.
    public init(trustedCAFile caFile: String?) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw TLSError("create TLS client context") }
        self.context = context
        self.isServer = false
        copenssl_ctx_require_tls12(context)
        copenssl_ctx_enable_partial_writes(context)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        let loaded = caFile.map { SSL_CTX_load_verify_locations(context, $0, nil) } ?? SSL_CTX_set_default_verify_paths(context)
        guard loaded == 1 else { throw TLSError("load trusted certificates \(caFile ?? "(system)")") }
    }

    deinit { SSL_CTX_free(context) }

    /// When the certificate stops being valid (seconds since 1970 UTC), nil without one.
    public var certificateNotAfter: Int64? {
        let seconds = copenssl_ctx_not_after(context)
        return seconds > 0 ? seconds : nil
    }

    /// The DNS names the server certificate is for (its subjectAltName), lowercased.
    public var dnsNames: [String] {
        let needed = copenssl_ctx_dns_names(context, nil, 0)
        guard needed > 0 else { return [] }
        var buffer = [CChar](repeating: 0, count: needed)
        _ = copenssl_ctx_dns_names(context, &buffer, needed)
        return buffer.split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased() }
    }
}

/// One TLS session over a socket the caller owns; frees the SSL object in deinit.
package final class TLSSession {
    private let ssl: OpaquePointer

    /// OpenSSL writes with write(2), which raises SIGPIPE on a socket the peer closed; a network
    /// service wants EPIPE instead, so the signal is ignored once for the process.
    static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    package init(context: TLSContext, fd: Int32, serverName: String? = nil) throws(TLSError) {
        Self.ignoreSIGPIPE
        guard let ssl = SSL_new(context.context) else { throw TLSError("create TLS session") }
        self.ssl = ssl
        SSL_set_fd(ssl, fd)
        if context.isServer {
            SSL_set_accept_state(ssl)
        } else {
            if let serverName {
                copenssl_set_server_name(ssl, serverName)
                SSL_set1_host(ssl, serverName)
            }
            SSL_set_connect_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    /// Drives the handshake on a blocking socket (the client).
    package func handshake() throws(TLSError) {
        guard SSL_do_handshake(ssl) == 1 else { throw handshakeFailure() }
    }

    package enum HandshakeProgress { case done, wantsRead, wantsWrite }

    /// One step of the handshake on a non-blocking socket: done, or what it waits for.
    package func handshakeStep() throws(TLSError) -> HandshakeProgress {
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantsRead
        case SSL_ERROR_WANT_WRITE: return .wantsWrite
        default: throw handshakeFailure()
        }
    }

    private func handshakeFailure() -> TLSError {
        let verify = SSL_get_verify_result(ssl)
        guard verify == Int(X509_V_OK) else {
            return TLSError("TLS handshake", detail: "the server's certificate is refused: \(String(cString: X509_verify_cert_error_string(verify)))")
        }
        return TLSError("TLS handshake")
    }

    /// Non-blocking read: `.needsRead` while the peer has sent nothing more, `.wouldBlock` when
    /// OpenSSL must write first (a handshake step).
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> IOResult {
        let n = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
        if n > 0 { return .bytes(Int(n)) }
        return try outcome(n, "TLS read")
    }

    package func write(_ buffer: UnsafeRawBufferPointer) throws(TLSError) -> IOResult {
        let n = SSL_write(ssl, buffer.baseAddress, Int32(buffer.count))
        if n > 0 { return .bytes(Int(n)) }
        return try outcome(n, "TLS write")
    }

    package func shutdown() { SSL_shutdown(ssl) }

    /// The handshake has finished.
    package var isEstablished: Bool { copenssl_handshake_done(ssl) == 1 }

    private func outcome(_ result: Int32, _ operation: String) throws(TLSError) -> IOResult {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .needsRead
        case SSL_ERROR_WANT_WRITE: return .wouldBlock
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            if ERR_peek_error() == 0 { return .closed }  // the peer closed without close_notify
            throw TLSError(operation)
        default: throw TLSError(operation)
        }
    }
}
