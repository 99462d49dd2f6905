import MediaCore
internal import CH264

/// Settings of a realtime H.264 encoder (OpenH264, constrained baseline: what every WebRTC peer
/// decodes, profile-level-id 42e01f).
public struct H264EncoderConfiguration: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var frameRate: Int
    /// Target bitrate in bits per second.
    public var targetBitrate: Int
    /// Largest distance between automatic IDR pictures, in frames.
    public var keyframeInterval: Int = 3000
    public var threads: Int = 1

    public init(width: Int, height: Int, frameRate: Int = 30, targetBitrate: Int = 1_000_000) {
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.targetBitrate = targetBitrate
    }

    public func validate() throws(MediaError) {
        // H.264 codes 16x16 macroblocks and crops; OpenH264 wants even sizes for 4:2:0.
        guard width >= 16, height >= 16, width <= 4096, height <= 2304, width % 2 == 0, height % 2 == 0 else {
            throw MediaError(.invalidArgument, "H.264 encoder", "size \(width)x\(height): even sizes from 16x16 to 4096x2304 are supported")
        }
        guard (1...60).contains(frameRate) else {
            throw MediaError(.invalidArgument, "H.264 encoder", "frame rate \(frameRate): 1 to 60 is supported")
        }
        guard (10_000...50_000_000).contains(targetBitrate) else {
            throw MediaError(.invalidArgument, "H.264 encoder", "bitrate \(targetBitrate) bit/s: 10 kbit/s to 50 Mbit/s is supported")
        }
        guard keyframeInterval >= 1, (1...16).contains(threads) else {
            throw MediaError(.invalidArgument, "H.264 encoder", "keyframe interval \(keyframeInterval), threads \(threads): both at least 1, threads at most 16")
        }
    }
}

/// Realtime H.264 encoder over OpenH264, loaded on first use. Its output is one Annex B access
/// unit per picture, parameter sets in front of every IDR; bitrate and frame rate change on a
/// running encoder, a size change restarts it with an IDR. One owner of one OpenH264 encoder;
/// use it from one thread at a time.
public final class H264Encoder {
    public private(set) var configuration: H264EncoderConfiguration
    private var encoder: OpaquePointer
    private var keyframeRequested = false

    /// Why H.264 cannot be encoded on this machine (OpenH264 missing), or nil when it can.
    public static var unavailableReason: String? {
        var reason = [CChar](repeating: 0, count: 256)
        return ch264_encoder_load(&reason, reason.count) == 0 ? nil : text(reason)
    }

    public init(configuration: H264EncoderConfiguration) throws(MediaError) {
        try configuration.validate()
        self.configuration = configuration
        encoder = try Self.open(configuration)
    }

    private static func open(_ c: H264EncoderConfiguration) throws(MediaError) -> OpaquePointer {
        var reason = [CChar](repeating: 0, count: 256)
        guard let encoder = ch264_encoder_open(Int32(c.width), Int32(c.height), Float(c.frameRate), Int32(c.targetBitrate),
                                               Int32(c.keyframeInterval), Int32(c.threads), &reason, reason.count) else {
            throw MediaError(.library, "open H.264 encoder", text(reason))
        }
        return encoder
    }

    deinit { ch264_encoder_close(encoder) }

    /// Changes the target bitrate; the next picture is encoded at the new rate.
    public func setTargetBitrate(_ bitsPerSecond: Int) throws(MediaError) {
        var next = configuration
        next.targetBitrate = bitsPerSecond
        try setRate(next)
    }

    /// Changes the frame rate the rate control budgets for (a camera mode with fewer pictures).
    public func setFrameRate(_ frameRate: Int) throws(MediaError) {
        var next = configuration
        next.frameRate = frameRate
        try setRate(next)
    }

    private func setRate(_ next: H264EncoderConfiguration) throws(MediaError) {
        try next.validate()
        let result = ch264_encoder_set_rate(encoder, Int32(next.targetBitrate), Float(next.frameRate))
        guard result == 0 else {
            throw MediaError(.library, "set H.264 rate \(next.targetBitrate) bit/s at \(next.frameRate) fps", "OpenH264 SetOption returned \(result)")
        }
        configuration = next
    }

    /// Changes the picture size: a new encoder at the rate in force; its first picture is an IDR.
    public func setResolution(width: Int, height: Int) throws(MediaError) {
        guard width != configuration.width || height != configuration.height else { return }
        var next = configuration
        next.width = width
        next.height = height
        try next.validate()
        let replacement = try Self.open(next)
        ch264_encoder_close(encoder)
        encoder = replacement
        configuration = next
    }

    /// Makes the next picture an IDR (after a PLI/FIR, or for a new receiver).
    public func requestKeyframe() { keyframeRequested = true }

    /// Encodes one picture: one access unit, or none when the rate control skips the picture.
    /// The frame's `quantizer` is OpenH264's average QP (0-51) put on libvpx's 0-63 scale, so
    /// the encoding controller reads both codecs alike. `time`, when given, is what OpenH264's
    /// rate control is told instead of the picture's own timestamp (as for VP8Encoder).
    public func encode(_ frame: VideoFrame, at time: Duration? = nil, forceKeyframe: Bool = false) throws(MediaError) -> [EncodedVideoFrame] {
        guard frame.width == configuration.width, frame.height == configuration.height else {
            throw MediaError(.invalidArgument, "H.264 encode",
                             "frame is \(frame.width)x\(frame.height) but the encoder is set to \(configuration.width)x\(configuration.height); call setResolution first")
        }
        if forceKeyframe || keyframeRequested {
            let result = ch264_encoder_force_idr(encoder)
            guard result == 0 else { throw MediaError(.library, "H.264 encode", "OpenH264 ForceIntraFrame returned \(result)") }
            keyframeRequested = false
        }
        var output: UnsafePointer<UInt8>?
        var size = 0
        var keyframe: Int32 = 0, qp: Int32 = -1
        let shown = time ?? frame.timestamp
        let milliseconds = shown.components.seconds * 1000 + shown.components.attoseconds / 1_000_000_000_000_000
        let result = frame.withPlanes { y, u, v in
            ch264_encoder_encode(encoder, y, Int32(frame.strideY), u, Int32(frame.strideU), v, Int32(frame.strideV),
                                 milliseconds, &output, &size, &keyframe, &qp)
        }
        guard result == 0 else { throw MediaError(.library, "H.264 encode", "OpenH264 EncodeFrame returned \(result)") }
        guard size > 0, let output else { return [] }
        return [EncodedVideoFrame(data: Array(UnsafeBufferPointer(start: output, count: size)), isKeyframe: keyframe != 0,
                                  quantizer: qp < 0 ? -1 : Int(qp) * 63 / 51, width: configuration.width,
                                  height: configuration.height, timestamp: frame.timestamp)]
    }
}

/// The text a C function wrote into a NUL-terminated buffer.
func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map(UInt8.init(bitPattern:)), as: UTF8.self)
}
