/// RIFF/WAVE files with 16-bit PCM (format 1, or WAVE_FORMAT_EXTENSIBLE with a PCM sub-format),
/// as ffmpeg and sox write them. Chunks other than `fmt ` and `data` (LIST, fact, ...) are skipped.
public final class WAVReader {
    public let channels: Int
    public let sampleRate: Int
    /// Samples per channel in the data chunk.
    public let frameCount: Int
    private let file: BinaryFile
    private var framesLeft: Int

    static let formatPCM: UInt16 = 1
    static let formatExtensible: UInt16 = 0xfffe

    public init(path: String) throws(MediaError) {
        file = try BinaryFile(path: path, mode: "rb")
        let operation = "read WAV header of \(path)"
        guard let riff = file.read(12), Array(riff[0..<4]) == Array("RIFF".utf8), Array(riff[8..<12]) == Array("WAVE".utf8) else {
            throw MediaError(.invalidData, operation, "not a RIFF/WAVE file")
        }
        var format: (channels: Int, rate: Int, bits: Int)?
        while true {
            guard let chunk = file.read(8) else { throw MediaError(.invalidData, operation, "no data chunk") }
            let id = String(decoding: chunk[0..<4], as: UTF8.self)
            let size = Int(chunk.readLE32(at: 4)!)
            if id == "data" {
                guard let format else { throw MediaError(.invalidData, operation, "data chunk before fmt chunk") }
                channels = format.channels
                sampleRate = format.rate
                // ffmpeg writes 0 or 0xffffffff sizes when streaming; then read to the end.
                let blockAlign = format.channels * 2
                frameCount = size == 0 || size == 0xffff_ffff ? Int.max : size / blockAlign
                framesLeft = frameCount
                return
            }
            guard size <= 1 << 20, let body = file.read(size + (size & 1)) else {
                throw MediaError(.invalidData, operation, "chunk '\(id)' of \(size) bytes is truncated")
            }
            if id == "fmt " {
                guard let tag = body.readLE16(at: 0), let ch = body.readLE16(at: 2), let rate = body.readLE32(at: 4),
                      let bits = body.readLE16(at: 14) else {
                    throw MediaError(.invalidData, operation, "fmt chunk of \(size) bytes is too short")
                }
                let isPCM = tag == Self.formatPCM || (tag == Self.formatExtensible && body.readLE16(at: 24) == Self.formatPCM)
                guard isPCM, bits == 16 else {
                    throw MediaError(.invalidData, operation, "format tag \(tag) with \(bits)-bit samples; supported: 16-bit PCM (ffmpeg -c:a pcm_s16le)")
                }
                guard ch == 1 || ch == 2 else {
                    throw MediaError(.invalidData, operation, "\(ch) channels; supported: 1 or 2")
                }
                format = (Int(ch), Int(rate), Int(bits))
            }
        }
    }

    /// Up to `samplesPerChannel` interleaved frames; fewer at the end of the file, nil after it.
    public func read(samplesPerChannel: Int) -> [Int16]? {
        let wanted = min(samplesPerChannel, framesLeft)
        guard wanted > 0 else { return nil }
        var bytes: [UInt8] = []
        var got = wanted
        while got > 0 {
            if let b = file.read(got * channels * 2) { bytes = b; break }
            got /= 2  // the file ended early: take what is there, in halving steps
        }
        guard got > 0 else { framesLeft = 0; return nil }
        framesLeft -= got
        return stride(from: 0, to: bytes.count, by: 2).map { Int16(bitPattern: bytes.readLE16(at: $0)!) }
    }
}

public final class WAVWriter {
    public let channels: Int
    public let sampleRate: Int
    private let file: BinaryFile
    private var dataBytes = 0

    public init(path: String, channels: Int, sampleRate: Int = AudioFrame.sampleRate) throws(MediaError) {
        guard channels == 1 || channels == 2, sampleRate > 0 else {
            throw MediaError(.invalidArgument, "create WAV file \(path)", "\(channels) channels at \(sampleRate) Hz; supported: 1 or 2 channels")
        }
        file = try BinaryFile(path: path, mode: "wb")
        self.channels = channels
        self.sampleRate = sampleRate
        try file.write(header())
    }

    public func write(_ samples: [Int16]) throws(MediaError) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(samples.count * 2)
        for s in samples { bytes.writeLE16(UInt16(bitPattern: s)) }
        try file.write(bytes)
        dataBytes += bytes.count
    }

    /// Writes the final sizes into the header and closes the file.
    public func close() throws(MediaError) {
        try file.seek(to: 0)
        try file.write(header())
        try file.close()
    }

    private func header() -> [UInt8] {
        var h = Array("RIFF".utf8)
        h.writeLE32(UInt32(36 + dataBytes))
        h += Array("WAVEfmt ".utf8)
        h.writeLE32(16)
        h.writeLE16(WAVReader.formatPCM)
        h.writeLE16(UInt16(channels))
        h.writeLE32(UInt32(sampleRate))
        h.writeLE32(UInt32(sampleRate * channels * 2))
        h.writeLE16(UInt16(channels * 2))
        h.writeLE16(16)
        h += Array("data".utf8)
        h.writeLE32(UInt32(dataBytes))
        return h
    }
}
