/// Reads YUV4MPEG2 files (as ffmpeg and x264 write them) frame by frame.
///
///     YUV4MPEG2 W640 H480 F30:1 Ip A1:1 C420jpeg XYSCSS=420JPEG\n
///     FRAME\n <width*height*3/2 bytes of I420>
///     FRAME\n ...
///
/// Parameters: W width, H height, F frame rate num:den, I interlacing, A aspect, C colour space,
/// X application-specific (ignored). Only 4:2:0 8-bit colour spaces are accepted.
public final class Y4MReader {
    public let width: Int
    public let height: Int
    public let frameRateNumerator: Int
    public let frameRateDenominator: Int
    public private(set) var framesRead = 0

    static let magic = "YUV4MPEG2"
    static let supportedColorSpaces = ["420jpeg", "420paldv", "420mpeg2", "420"]
    static let maxLineLength = 4096

    private let file: BinaryFile
    private let frameSize: Int

    public var frameRate: Double { Double(frameRateNumerator) / Double(frameRateDenominator) }

    public init(path: String) throws(MediaError) {
        file = try BinaryFile(path: path, mode: "rb")
        let operation = "read Y4M header of \(path)"
        guard let line = file.readLine(limit: Self.maxLineLength) else {
            throw MediaError(.invalidData, operation, "no header line (empty file or header over \(Self.maxLineLength) bytes)")
        }
        let fields = String(decoding: line, as: UTF8.self).split(separator: " ")
        guard fields.first == Substring(Self.magic) else {
            throw MediaError(.invalidData, operation, "does not start with \(Self.magic)")
        }
        var width = 0, height = 0, rate = (30, 1), colorSpace = "420jpeg"
        for field in fields.dropFirst() {
            let value = field.dropFirst()
            switch field.first {
            case "W": width = Int(value) ?? 0
            case "H": height = Int(value) ?? 0
            case "F":
                let parts = value.split(separator: ":")
                guard parts.count == 2, let n = Int(parts[0]), let d = Int(parts[1]), n >= 0, d > 0 else {
                    throw MediaError(.invalidData, operation, "frame rate '\(value)' is not N:D with N ≥ 0 and D > 0")
                }
                // GStreamer's y4menc writes F0:1 when the rate is unknown (live RTP): assume 30.
                rate = n == 0 ? (30, 1) : (n, d)
            case "C": colorSpace = String(value)
            default: break  // I, A, X and unknown parameters do not change how frames are read.
            }
        }
        guard width > 0, height > 0, width <= 16384, height <= 16384 else {
            throw MediaError(.invalidData, operation, "size \(width)x\(height) is missing or outside 1 ... 16384")
        }
        guard Self.supportedColorSpaces.contains(colorSpace) else {
            throw MediaError(.invalidData, operation,
                             "colour space C\(colorSpace) is not supported; supported: \(Self.supportedColorSpaces.map { "C" + $0 }.joined(separator: ", ")) (convert with ffmpeg -pix_fmt yuv420p)")
        }
        self.width = width
        self.height = height
        self.frameRateNumerator = rate.0
        self.frameRateDenominator = rate.1
        self.frameSize = VideoFrame.packedSize(width: width, height: height)
    }

    /// The next frame, with a timestamp from its index and the file's frame rate; nil at the end.
    public func readFrame() throws(MediaError) -> VideoFrame? {
        guard let line = file.readLine(limit: Self.maxLineLength) else { return nil }
        guard line.starts(with: Array("FRAME".utf8)) else {
            throw MediaError(.invalidData, "read Y4M frame \(framesRead) of \(file.path)", "frame does not start with FRAME")
        }
        guard let bytes = file.read(frameSize) else {
            throw MediaError(.invalidData, "read Y4M frame \(framesRead) of \(file.path)", "file ends inside the frame")
        }
        let timestamp = Duration.seconds(Double(framesRead) * Double(frameRateDenominator) / Double(frameRateNumerator))
        framesRead += 1
        return try VideoFrame(packed: bytes, width: width, height: height, timestamp: timestamp)
    }
}

/// Writes YUV4MPEG2 files that ffmpeg, mpv and our reader open.
public final class Y4MWriter {
    public let width: Int
    public let height: Int
    private let file: BinaryFile

    public init(path: String, width: Int, height: Int, frameRate: Int) throws(MediaError) {
        guard width > 0, height > 0, frameRate > 0 else {
            throw MediaError(.invalidArgument, "create Y4M file \(path)", "size \(width)x\(height) at \(frameRate) fps is not positive")
        }
        file = try BinaryFile(path: path, mode: "wb")
        self.width = width
        self.height = height
        try file.write(Array("YUV4MPEG2 W\(width) H\(height) F\(frameRate):1 Ip A1:1 C420jpeg\n".utf8))
    }

    public func write(_ frame: VideoFrame) throws(MediaError) {
        guard frame.width == width, frame.height == height else {
            throw MediaError(.invalidArgument, "write Y4M frame", "frame is \(frame.width)x\(frame.height), file is \(width)x\(height)")
        }
        try file.write(Array("FRAME\n".utf8))
        try file.write(frame.packedBytes())
    }

    public func close() throws(MediaError) { try file.close() }
}
