internal import COpenSSL
import Synchronization

/// SRTP master keys from a DTLS handshake (RFC 5764 §4.2): ours protects what we send, the
/// peer's unprotects what we receive.
public struct DTLSKeys: Sendable, Equatable {
    public var profile: SRTPProfile
    public var localKeyMaterial: [UInt8]
    public var remoteKeyMaterial: [UInt8]
}

/// One DTLS 1.2 association for DTLS-SRTP (RFC 5763, 5764), over memory BIOs: it sends and
/// receives nothing itself, but returns the datagrams to send and what happened, so the
/// transport drives it with ICE datagrams and tests drive it by hand. The peer's certificate is
/// accepted only if its fingerprint is the one its session description announced; the SRTP keys
/// come from the exporter ("EXTRACTOR-dtls_srtp"), so no key travels in signaling.
public final class DTLSSession: @unchecked Sendable {  // every use of the SSL object holds `lock`
    /// RFC 5763 §5: the `a=setup:active` side is the DTLS client.
    public enum Role: Sendable { case client, server }

    public enum Event: Sendable, Equatable {
        case connected(DTLSKeys)
        case failed(String)
        /// The peer's certificate is not the one its description announced (or it sent none):
        /// someone else answered on the path.
        case untrusted(String)
        /// The peer sent close_notify.
        case closed
    }

    /// What one step produced: datagrams for the peer, and at most one event.
    public struct Output: Sendable, Equatable {
        public var datagrams: [[UInt8]] = []
        public var event: Event?
        /// Application data the peer sent (SCTP packets of data channels, RFC 8261), once its
        /// certificate has been checked.
        public var applicationData: [[UInt8]] = []
    }

    /// Each datagram carries whole records and stays under a path MTU that survives TURN and VPNs.
    public static let maximumDatagram = 1200

    public let role: Role
    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let incoming: OpaquePointer
    private let outgoing: OpaquePointer

    struct State {
        var remoteFingerprint: DTLSFingerprint?
        /// Handshake done, keys exported, waiting for the fingerprint to check them against.
        var pendingKeys: DTLSKeys?
        var finished = false
        /// The peer's certificate matched its fingerprint: its application data counts.
        var trusted = false
    }
    private let lock = Mutex(State())

    public init(role: Role, certificate: DTLSCertificate, remoteFingerprint: DTLSFingerprint? = nil) throws(DTLSError) {
        guard let context = SSL_CTX_new(DTLS_method()) else { throw DTLSError("create a DTLS context", openSSL: true) }
        self.context = context
        self.role = role
        lock.withLock { $0.remoteFingerprint = remoteFingerprint }
        _ = copenssl_ctx_require_dtls12(context)
        guard SSL_CTX_use_certificate(context, certificate.certificate) == 1, SSL_CTX_use_PrivateKey(context, certificate.key) == 1 else {
            SSL_CTX_free(context)
            throw DTLSError("use the DTLS certificate", openSSL: true)
        }
        // RFC 7714 GCM first, then the profile every WebRTC stack has.
        guard SSL_CTX_set_tlsext_use_srtp(context, "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80") == 0 else {
            SSL_CTX_free(context)
            throw DTLSError("offer DTLS-SRTP profiles", openSSL: true)
        }
        // Any certificate passes OpenSSL's check (they are self-signed); the fingerprint decides.
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT) { _, _ in 1 }
        guard let ssl = SSL_new(context), let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            SSL_CTX_free(context)
            throw DTLSError("create a DTLS session", openSSL: true)
        }
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
        copenssl_bio_mem_eof_retry(incoming)
        SSL_set_bio(ssl, incoming, outgoing)
        copenssl_set_dtls_mtu(ssl, Self.maximumDatagram)
        copenssl_dtls_use_short_timer(ssl)
        if role == .client { SSL_set_connect_state(ssl) } else { SSL_set_accept_state(ssl) }
    }

    deinit {
        SSL_free(ssl)  // frees both BIOs
        SSL_CTX_free(context)
    }

    /// The fingerprint from the peer's session description, when it comes after the handshake began.
    public func setRemoteFingerprint(_ fingerprint: DTLSFingerprint) -> Output {
        lock.withLock { s in
            s.remoteFingerprint = fingerprint
            guard let keys = s.pendingKeys else { return Output() }
            s.pendingKeys = nil
            let event = verify(keys, state: &s)
            return Output(event: event, applicationData: readApplicationData(s))
        }
    }

    /// Begins the handshake: the client's ClientHello (a server sends nothing until it gets one).
    public func start() -> Output {
        lock.withLock { s in step(&s) }
    }

    /// One datagram from the peer (RFC 7983: first byte 20 ... 63).
    public func handle(_ datagram: [UInt8]) -> Output {
        lock.withLock { s in
            guard !s.finished else { return Output() }
            _ = datagram.withUnsafeBytes { BIO_write(incoming, $0.baseAddress, Int32($0.count)) }
            return step(&s)
        }
    }

    /// How long until a lost flight must be sent again; nil when no timer runs.
    public var retransmissionDelay: Duration? {
        lock.withLock { _ in
            let ms = copenssl_dtls_timeout_ms(ssl)
            return ms < 0 ? nil : .milliseconds(ms)
        }
    }

    /// Sends the last flight again once `retransmissionDelay` has passed (RFC 6347 §4.2.4).
    public func handleTimeout() -> Output {
        lock.withLock { s in
            guard !s.finished else { return Output() }
            if copenssl_dtls_handle_timeout(ssl) < 0 {
                s.finished = true
                return Output(datagrams: drain(), event: .failed("the DTLS handshake timed out"))
            }
            return Output(datagrams: drain())
        }
    }

    /// Application data for the peer (an SCTP packet): the datagrams that carry it. Nothing
    /// before the peer is trusted or after the session ended.
    public func write(_ data: [UInt8]) -> [[UInt8]] {
        lock.withLock { s in
            guard s.trusted, !s.finished, !data.isEmpty else { return [] }
            guard data.withUnsafeBytes({ SSL_write(ssl, $0.baseAddress, Int32($0.count)) }) > 0 else {
                ERR_clear_error()
                return []
            }
            return drain()
        }
    }

    /// Whatever application data OpenSSL holds, record by record.
    private func readApplicationData(_ s: State) -> [[UInt8]] {
        guard s.trusted else { return [] }
        var out: [[UInt8]] = []
        var scratch = [UInt8](repeating: 0, count: 16_384)
        while true {
            let read = SSL_read(ssl, &scratch, Int32(scratch.count))
            guard read > 0 else { break }
            out.append(Array(scratch.prefix(Int(read))))
        }
        return out
    }

    /// close_notify for the peer.
    public func close() -> Output {
        lock.withLock { s in
            guard !s.finished || SSL_is_init_finished(ssl) == 1 else { return Output() }
            s.finished = true
            _ = SSL_shutdown(ssl)
            return Output(datagrams: drain())
        }
    }

    private func step(_ s: inout State) -> Output {
        if SSL_is_init_finished(ssl) == 1 {
            // After the handshake: data channels' SCTP packets (dropped until the peer is
            // trusted), and alerts.
            let data = readApplicationData(s)
            if SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN != 0 {
                s.finished = true
                return Output(datagrams: drain(), event: .closed, applicationData: data)
            }
            ERR_clear_error()
            return Output(datagrams: drain(), applicationData: data)
        }
        let result = SSL_do_handshake(ssl)
        let datagrams = drain()
        if result == 1 {
            guard let keys = exportKeys() else {
                s.finished = true
                return Output(datagrams: datagrams, event: .failed(DTLSError("export SRTP keys (did the peer agree on an SRTP profile?)", openSSL: true).description))
            }
            guard s.remoteFingerprint != nil else {
                s.pendingKeys = keys
                return Output(datagrams: datagrams)
            }
            let event = verify(keys, state: &s)
            return Output(datagrams: datagrams, event: event, applicationData: readApplicationData(s))
        }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE {
            return Output(datagrams: datagrams)
        }
        s.finished = true
        return Output(datagrams: datagrams, event: .failed(DTLSError("the DTLS handshake failed", openSSL: true).description))
    }

    /// The certificate the peer presented must carry the fingerprint its description announced.
    private func verify(_ keys: DTLSKeys, state s: inout State) -> Event {
        guard let expected = s.remoteFingerprint else { return .failed("no fingerprint to check the peer's certificate against") }
        guard let certificate = SSL_get1_peer_certificate(ssl) else {
            s.finished = true
            return .untrusted("the peer presented no certificate")
        }
        defer { X509_free(certificate) }
        guard let actual = DTLSFingerprint(of: certificate, algorithm: expected.algorithm), actual == expected else {
            s.finished = true
            return .untrusted("the peer's DTLS certificate does not match the fingerprint in its session description (expected \(expected), got \(DTLSFingerprint(of: certificate, algorithm: expected.algorithm)?.description ?? "none"))")
        }
        s.trusted = true
        return .connected(keys)
    }

    /// RFC 5764 §4.2: client key, server key, client salt, server salt.
    private func exportKeys() -> DTLSKeys? {
        let profile: SRTPProfile
        switch copenssl_selected_srtp_profile(ssl) {
        case 0x0001: profile = .aes128CmSha1_80
        case 0x0007: profile = .aeadAes128Gcm
        default: return nil
        }
        let keyLength = 16, saltLength = profile.keyMaterialLength - 16
        var material = [UInt8](repeating: 0, count: 2 * profile.keyMaterialLength)
        let label = "EXTRACTOR-dtls_srtp"
        guard SSL_export_keying_material(ssl, &material, material.count, label, label.utf8.count, nil, 0, 0) == 1 else { return nil }
        let clientKey = material[0..<keyLength], serverKey = material[keyLength..<2 * keyLength]
        let clientSalt = material[2 * keyLength..<2 * keyLength + saltLength], serverSalt = material[(2 * keyLength + saltLength)...]
        let client = Array(clientKey + clientSalt), server = Array(serverKey + serverSalt)
        return role == .client ? DTLSKeys(profile: profile, localKeyMaterial: client, remoteKeyMaterial: server)
                               : DTLSKeys(profile: profile, localKeyMaterial: server, remoteKeyMaterial: client)
    }

    /// Whatever OpenSSL wrote, cut into datagrams of whole records (a memory BIO keeps no
    /// datagram boundaries; several records may share one datagram, RFC 6347 §4.1.1).
    private func drain() -> [[UInt8]] {
        let pending = Int(BIO_ctrl_pending(outgoing))
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        let read = Int(BIO_read(outgoing, &bytes, Int32(pending)))
        guard read > 0 else { return [] }
        return Self.pack(records: Array(bytes.prefix(read)), limit: Self.maximumDatagram)
    }

    /// Splits a run of DTLS records (13-byte header, length in bytes 11-12) into datagrams of at
    /// most `limit` bytes; a record longer than the limit goes alone.
    static func pack(records bytes: [UInt8], limit: Int) -> [[UInt8]] {
        var datagrams: [[UInt8]] = []
        var current: [UInt8] = []
        var offset = 0
        while offset + 13 <= bytes.count {
            let length = Int(bytes[offset + 11]) << 8 | Int(bytes[offset + 12])
            let end = min(bytes.count, offset + 13 + length)
            if !current.isEmpty && current.count + (end - offset) > limit {
                datagrams.append(current)
                current = []
            }
            current += bytes[offset..<end]
            offset = end
        }
        if offset < bytes.count { current += bytes[offset...] }
        if !current.isEmpty { datagrams.append(current) }
        return datagrams
    }
}
