import Platform
import Codecs
import MediaCore
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// A sink for the peer's video: gets every decoded picture and, for renderers that store the
/// bitstream, every complete encoded frame. Called on the receiver's thread; keep it short.
public protocol VideoRenderer: AnyObject, Sendable {
    func render(_ frame: VideoFrame)
    /// A complete frame as received (VP8, or an H.264 access unit in Annex B), before decoding.
    func renderEncoded(_ data: [UInt8], rtpTimestamp: UInt32, isKeyframe: Bool)
    /// The call ended: flush and close.
    func finish()
}

extension VideoRenderer {
    public func renderEncoded(_ data: [UInt8], rtpTimestamp: UInt32, isKeyframe: Bool) {}
    public func finish() {}
}

/// Counts pictures and remembers the last size; draws nothing.
public final class NullVideoRenderer: VideoRenderer, Sendable {
    private let counts = Mutex<(frames: Int, width: Int, height: Int)>((0, 0, 0))
    public init() {}
    public func render(_ frame: VideoFrame) { counts.withLock { $0 = ($0.frames + 1, frame.width, frame.height) } }
    public var framesRendered: Int { counts.withLock { $0.frames } }
    public var lastSize: (width: Int, height: Int) { counts.withLock { ($0.width, $0.height) } }
}

/// Writes decoded pictures to a Y4M file. A Y4M file has one size: when the peer changes size
/// (its encoding mode stepped down), pictures are scaled back to the size the file started with.
public final class Y4MFileRenderer: VideoRenderer, @unchecked Sendable {  // the writer is used under `writer`
    public let path: String
    private let writer = Mutex<Y4MWriter?>(nil)
    private let frameRate: Int

    public init(path: String, frameRate: Int = 30) {
        self.path = path
        self.frameRate = frameRate
    }

    public func render(_ frame: VideoFrame) {
        writer.withLock { w in
            if w == nil { w = try? Y4MWriter(path: path, width: frame.width, height: frame.height, frameRate: frameRate) }
            guard let out = w else { return }
            let picture = (frame.width, frame.height) == (out.width, out.height) ? frame : (try? frame.scaled(width: out.width, height: out.height)) ?? frame
            try? out.write(picture)
        }
    }

    public func finish() { writer.withLock { $0 = nil } }
}

/// Writes the received VP8 bitstream to an IVF file (starting at the first keyframe), playable by
/// ffmpeg, vpxdec and GStreamer without re-encoding.
public final class IVFFileRenderer: VideoRenderer, @unchecked Sendable {  // the writer is used under `writer`
    public let path: String
    private let writer = Mutex<IVFWriter?>(nil)

    public init(path: String) { self.path = path }

    public func render(_ frame: VideoFrame) {}

    public func renderEncoded(_ data: [UInt8], rtpTimestamp: UInt32, isKeyframe: Bool) {
        writer.withLock { w in
            if w == nil, isKeyframe, let header = try? VP8FrameHeader(parsing: data) {
                w = try? IVFWriter(path: path, width: header.width ?? 0, height: header.height ?? 0)
            }
            try? w?.write(data, pts: UInt64(rtpTimestamp))
        }
    }

    public func finish() { writer.withLock { w in try? w?.close(); w = nil } }
}

/// Writes the latest picture as a PPM image every `interval` (replacing the file atomically),
/// for a headless box whose operator wants to see what the camera at the other end shows.
public final class SnapshotRenderer: VideoRenderer, Sendable {
    public let path: String
    public let interval: Duration
    private let lastWrite = Mutex<MediaTime?>(nil)

    public init(path: String, interval: Duration = .seconds(1)) {
        self.path = path
        self.interval = interval
    }

    public func render(_ frame: VideoFrame) {
        let now = MediaTime.now
        let due = lastWrite.withLock { last in
            guard last.map({ now - $0 >= interval }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        var image = Data("P6\n\(frame.width) \(frame.height)\n255\n".utf8)
        image.append(contentsOf: frame.rgb())
        try? image.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}

extension VideoRenderers {
    /// The renderer for an output path: `.ivf` keeps the bitstream, `.ppm` takes snapshots, else Y4M.
    public static func forPath(_ path: String) -> any VideoRenderer {
        if path.hasSuffix(".ivf") { return IVFFileRenderer(path: path) }
        if path.hasSuffix(".ppm") { return SnapshotRenderer(path: path) }
        return Y4MFileRenderer(path: path)
    }
}

public enum VideoRenderers {}
