#if canImport(Glibc)
import Glibc
#endif

/// A buffered file, the one owner of its `FILE*`, closed in deinit. Short reads return nil.
final class BinaryFile {
    let path: String
    private var handle: UnsafeMutablePointer<FILE>?

    init(path: String, mode: String) throws(MediaError) {
        guard let handle = fopen(path, mode) else {
            let code = errno
            throw MediaError(.io, "open \(path)", "\(String(cString: strerror(code))) (errno \(code))")
        }
        self.path = path
        self.handle = handle
    }

    deinit { if let handle { fclose(handle) } }

    /// Exactly `count` bytes, or nil at end of file.
    func read(_ count: Int) -> [UInt8]? {
        guard let handle, count >= 0 else { return nil }
        if count == 0 { return [] }
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = fread(buffer.baseAddress, 1, count, handle)
        }
        return bytes.count == count ? bytes : nil
    }

    /// One line without its newline, at most `limit` bytes, or nil at end of file or when too long.
    func readLine(limit: Int) -> [UInt8]? {
        guard let handle else { return nil }
        var line: [UInt8] = []
        while line.count <= limit {
            let c = fgetc(handle)
            if c == EOF { return nil }
            if c == 0x0a { return line }
            line.append(UInt8(c))
        }
        return nil
    }

    func write(_ bytes: [UInt8]) throws(MediaError) {
        guard let handle else { throw MediaError(.io, "write \(path)", "file is closed") }
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, bytes.count, handle) }
        guard written == bytes.count else {
            let code = errno
            throw MediaError(.io, "write \(path)", "\(String(cString: strerror(code))) (errno \(code))")
        }
    }

    func seek(to offset: Int) throws(MediaError) {
        guard let handle, fseek(handle, offset, SEEK_SET) == 0 else {
            throw MediaError(.io, "seek \(path)", "cannot seek to \(offset)")
        }
    }

    func close() throws(MediaError) {
        guard let handle else { return }
        self.handle = nil
        guard fclose(handle) == 0 else {
            let code = errno
            throw MediaError(.io, "close \(path)", "\(String(cString: strerror(code))) (errno \(code))")
        }
    }
}

/// Little-endian field access for file headers (RIFF/WAV and IVF are little-endian).
extension Array where Element == UInt8 {
    func readLE16(at offset: Int) -> UInt16? {
        guard offset >= 0, offset + 2 <= count else { return nil }
        return UInt16(self[offset]) | UInt16(self[offset + 1]) << 8
    }

    func readLE32(at offset: Int) -> UInt32? {
        guard offset >= 0, offset + 4 <= count else { return nil }
        return (0..<4).reduce(UInt32(0)) { $0 | UInt32(self[offset + $1]) << (8 * UInt32($1)) }
    }

    func readLE64(at offset: Int) -> UInt64? {
        guard offset >= 0, offset + 8 <= count else { return nil }
        return (0..<8).reduce(UInt64(0)) { $0 | UInt64(self[offset + $1]) << (8 * UInt64($1)) }
    }

    mutating func writeLE16(_ value: UInt16) { append(contentsOf: [UInt8(value & 0xff), UInt8(value >> 8)]) }
    mutating func writeLE32(_ value: UInt32) { for i in 0..<4 { append(UInt8((value >> (8 * UInt32(i))) & 0xff)) } }
    mutating func writeLE64(_ value: UInt64) { for i in 0..<8 { append(UInt8((value >> (8 * UInt64(i))) & 0xff)) } }
}
