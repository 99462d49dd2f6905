internal import COpenSSL

/// The few primitives tokens need, all from OpenSSL.
package enum Crypto {
    package static func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] { hmac(EVP_sha256(), key: key, data: data) }

    /// For TURN REST credentials (coturn's use-auth-secret), which are defined with SHA-1.
    package static func hmacSHA1(key: [UInt8], data: [UInt8]) -> [UInt8] { hmac(EVP_sha1(), key: key, data: data) }

    private static func hmac(_ digest: OpaquePointer?, key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                _ = HMAC(digest, k.baseAddress, Int32(k.count), d.baseAddress, d.count, &out, &length)
            }
        }
        return Array(out.prefix(Int(length)))
    }

    /// For Redis's script cache, which names a script by its SHA-1 (EVALSHA).
    package static func sha1(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        data.withUnsafeBufferPointer { _ = SHA1($0.baseAddress, $0.count, &out) }
        return out
    }

    package static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (i, byte) in bytes.enumerated() {
                out[2 * i] = digits[Int(byte >> 4)]
                out[2 * i + 1] = digits[Int(byte & 0x0f)]
            }
            return bytes.count * 2
        }
    }

    package static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        data.withUnsafeBufferPointer { _ = SHA256($0.baseAddress, $0.count, &out) }
        return out
    }

    /// Compares in time that depends only on the length, so a forger learns nothing from timing.
    package static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }

    package static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = RAND_bytes(&bytes, Int32(count))
        precondition(ok == 1, "OpenSSL's RAND_bytes failed: no entropy source")
        return bytes
    }
}

/// Base64url without padding (RFC 4648 §5), as JWTs use (RFC 7515 §2).
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = Int8(i) }
        return table
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        if bytes.count - i == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)]]
        } else if bytes.count - i == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil for characters outside the alphabet, padding, or an impossible length.
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count * 3 / 4)
        var accumulator: UInt32 = 0, bits = 0
        for c in chars {
            let v = reverse[Int(c)]
            guard v >= 0 else { return nil }
            accumulator = accumulator << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((accumulator >> UInt32(bits)) & 0xff))
            }
        }
        // Leftover bits must be zero in a canonical encoding.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}
