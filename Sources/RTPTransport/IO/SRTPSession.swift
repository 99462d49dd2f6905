internal import CSRTP
import Synchronization

/// SRTP protection profiles callend offers (RFC 3711, RFC 7714), with their master key lengths.
public enum SRTPProfile: String, Sendable, CaseIterable {
    /// AES-128 counter mode with HMAC-SHA1, 80-bit tag: 16-byte key + 14-byte salt.
    case aes128CmSha1_80 = "AES_CM_128_HMAC_SHA1_80"
    /// AES-128-GCM AEAD: 16-byte key + 12-byte salt.
    case aeadAes128Gcm = "AEAD_AES_128_GCM"

    /// Master key plus master salt, in bytes.
    public var keyMaterialLength: Int {
        switch self {
        case .aes128CmSha1_80: 30
        case .aeadAes128Gcm: 28
        }
    }
}

public struct SRTPError: Error, CustomStringConvertible, Sendable, Equatable {
    public let operation: String
    public let status: Int32

    public var description: String {
        let meaning: String = switch status {
        case 2: "bad parameter"
        case 3: "memory allocation failed"
        case 7: "authentication failed (wrong key, or the packet was altered)"
        case 9: "replayed packet"
        case 10: "packet too old for the replay window"
        case 15: "no context for this SSRC"
        case 11: "algorithm failure"
        default: "libsrtp2 status \(status)"
        }
        return "\(operation): \(meaning)"
    }
}

/// One direction of SRTP/SRTCP with one master key: `.outbound` protects what we send,
/// `.inbound` unprotects what we receive, for any SSRC (libsrtp2's wildcard policy). Replay
/// protection is on for inbound (a 1024-packet window). Owns its libsrtp2 session and frees it.
public final class SRTPSession: @unchecked Sendable {  // libsrtp2 sessions are not thread-safe; every use holds `lock`
    public enum Direction: Sendable { case outbound, inbound }

    private let session: srtp_t
    private let lock = Mutex<Void>(())
    public let profile: SRTPProfile
    public let direction: Direction

    private static let initialised: Int32 = Int32(srtp_init().rawValue)
    /// SRTP adds at most the authentication tag (plus an MKI we do not use) per packet.
    static let maxTrailer = 16 + 4 + 128

    public init(profile: SRTPProfile, keyMaterial: [UInt8], direction: Direction) throws(SRTPError) {
        guard Self.initialised == 0 else { throw SRTPError(operation: "initialise libsrtp2", status: Self.initialised) }
        guard keyMaterial.count == profile.keyMaterialLength else {
            throw SRTPError(operation: "create SRTP session: \(profile.rawValue) needs \(profile.keyMaterialLength) bytes of key and salt, got \(keyMaterial.count)", status: 2)
        }
        self.profile = profile
        self.direction = direction
        var policy = srtp_policy_t()
        switch profile {
        case .aes128CmSha1_80:
            // libsrtp2's defaults are AES_CM_128_HMAC_SHA1_80 (RFC 3711 §5).
            srtp_crypto_policy_set_rtp_default(&policy.rtp)
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        case .aeadAes128Gcm:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = direction == .outbound ? ssrc_any_outbound : ssrc_any_inbound
        policy.window_size = 1024
        policy.allow_repeat_tx = 0
        var key = keyMaterial
        var created: srtp_t?
        let status = key.withUnsafeMutableBufferPointer { buffer in
            policy.key = buffer.baseAddress
            return srtp_create(&created, &policy)
        }
        guard status == srtp_err_status_ok, let created else {
            throw SRTPError(operation: "create SRTP session (\(profile.rawValue))", status: Int32(status.rawValue))
        }
        session = created
    }

    deinit { srtp_dealloc(session) }

    public func protectRTP(_ packet: [UInt8]) throws(SRTPError) -> [UInt8] {
        try run(packet, "protect RTP") { srtp_protect($0, $1, $2) }
    }

    public func protectRTCP(_ packet: [UInt8]) throws(SRTPError) -> [UInt8] {
        try run(packet, "protect RTCP") { srtp_protect_rtcp($0, $1, $2) }
    }

    public func unprotectRTP(_ packet: [UInt8]) throws(SRTPError) -> [UInt8] {
        try run(packet, "unprotect SRTP") { srtp_unprotect($0, $1, $2) }
    }

    public func unprotectRTCP(_ packet: [UInt8]) throws(SRTPError) -> [UInt8] {
        try run(packet, "unprotect SRTCP") { srtp_unprotect_rtcp($0, $1, $2) }
    }

    private func run(_ packet: [UInt8], _ operation: String,
                     _ call: (srtp_t, UnsafeMutableRawPointer, UnsafeMutablePointer<Int32>) -> srtp_err_status_t) throws(SRTPError) -> [UInt8] {
        // The RTP/RTCP header is needed for libsrtp2 to find the SSRC; shorter input is refused here.
        guard packet.count >= 12 || (operation.contains("RTCP") && packet.count >= 8) else {
            throw SRTPError(operation: "\(operation) (\(packet.count) bytes)", status: 2)
        }
        var buffer = packet + [UInt8](repeating: 0, count: Self.maxTrailer)
        var length = Int32(packet.count)
        let status = lock.withLock { _ in
            buffer.withUnsafeMutableBytes { call(session, $0.baseAddress!, &length) }
        }
        guard status == srtp_err_status_ok else { throw SRTPError(operation: operation, status: Int32(status.rawValue)) }
        return Array(buffer[0..<Int(length)])
    }
}
