import Platform
import CWebMWriter
import Glibc
import MediaCore

/// One WebM file being written live: a VP8 track and an Opus track, frames as they were encoded
/// (libavformat's Matroska muxer, loaded when the first file opens). What is written reaches the
/// file a cluster (at most `clusterMilliseconds`) at a time and is synced to the disk at most a
/// second later, so a kill or a power cut loses about the last second.
final class WebMFile {
    enum Track: Int32 { case video = 0, audio = 1 }

    let path: String
    let width: Int
    let height: Int
    private let fd: Int32
    private var writer: OpaquePointer?
    private var lastSync = MonotonicClock.now

    /// Opus at 48 kHz with the encoder's usual pre-skip (RFC 7845 §5.1).
    static func opusHead(channels: Int) -> [UInt8] {
        var head = Array("OpusHead".utf8) + [1, UInt8(channels)]
        head += [0x38, 0x01]  // pre-skip 312
        head += [0x80, 0xBB, 0x00, 0x00]  // 48000 Hz
        head += [0, 0, 0]  // output gain 0, channel mapping family 0
        return head
    }

    init(path: String, width: Int, height: Int, audioChannels: Int?, clusterMilliseconds: Int = 800) throws(MediaError) {
        self.path = path
        self.width = width
        self.height = height
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw MediaError(.io, "create recording \(path)", String(cString: strerror(errno))) }
        var reason = [CChar](repeating: 0, count: 256)
        let head = audioChannels.map(Self.opusHead)
        writer = head.map { h in h.withUnsafeBufferPointer { cwebm_open(fd, Int32(width), Int32(height), $0.baseAddress, $0.count, Int32(clusterMilliseconds), &reason, reason.count) } }
            ?? cwebm_open(fd, Int32(width), Int32(height), nil, 0, Int32(clusterMilliseconds), &reason, reason.count)
        guard writer != nil else {
            Glibc.close(fd)
            unlink(path)
            throw MediaError(.library, "start recording \(path)", String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }

    deinit { try? close() }

    /// Whether WebM recording can work here (libavformat loads); nil when it can, else why not.
    static func unavailableReason() -> String? {
        var reason = [CChar](repeating: 0, count: 256)
        guard cwebm_load(&reason, reason.count) != 0 else { return nil }
        return String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func write(_ track: Track, _ data: [UInt8], milliseconds: Int64, keyframe: Bool) throws(MediaError) {
        guard let writer else { throw MediaError(.io, "write recording \(path)", "the file is closed") }
        let status = data.withUnsafeBufferPointer { cwebm_write(writer, track.rawValue, $0.baseAddress, $0.count, milliseconds, keyframe ? 1 : 0) }
        guard status >= 0 else { throw MediaError(.library, "write recording \(path)", "libavformat error \(status)") }
        let now = MonotonicClock.now
        if now - lastSync >= .seconds(1) {
            lastSync = now
            _ = fdatasync(fd)
        }
    }

    /// Bytes in the file so far (all of them, once closed).
    var size: Int64 {
        if writer == nil { return closedSize }
        var info = stat()
        return fstat(fd, &info) == 0 ? Int64(info.st_size) : 0
    }
    private var closedSize: Int64 = 0

    func close() throws(MediaError) {
        guard let w = writer else { return }
        writer = nil
        let status = cwebm_close(w)
        _ = fdatasync(fd)
        var info = stat()
        closedSize = fstat(fd, &info) == 0 ? Int64(info.st_size) : 0
        Glibc.close(fd)
        guard status >= 0 else { throw MediaError(.library, "finish recording \(path)", "libavformat error \(status)") }
    }
}
