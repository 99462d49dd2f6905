import MediaCore
internal import CVPX

/// VP8 decoder (libvpx). Malformed, truncated or corrupt input is an error, never a crash, and
/// inter frames before the first keyframe are refused. One owner of one libvpx context.
public final class VP8Decoder {
    private let context: UnsafeMutablePointer<vpx_codec_ctx_t>
    private var hasKeyframe = false

    public init(threads: Int = 1) throws(MediaError) {
        context = .allocate(capacity: 1)
        context.initialize(to: vpx_codec_ctx_t())
        do {
            try VP8Encoder.check(cvpx_vp8_dec_init(context, UInt32(max(1, threads))), context, "initialise VP8 decoder")
        } catch {
            context.deallocate()
            throw error
        }
    }

    deinit {
        vpx_codec_destroy(context)
        context.deallocate()
    }

    /// Decodes one compressed frame. Returns nil for a frame that is decoded but not shown
    /// (show_frame = 0, RFC 6386 §9.1).
    public func decode(_ data: [UInt8], timestamp: Duration = .zero) throws(MediaError) -> VideoFrame? {
        let header = try VP8FrameHeader(parsing: data)
        guard header.isKeyframe || hasKeyframe else {
            throw MediaError(.invalidData, "VP8 decode", "inter frame before any keyframe; request a keyframe (PLI)")
        }
        let result = data.withUnsafeBufferPointer { bytes in
            vpx_codec_decode(context, bytes.baseAddress, UInt32(bytes.count), nil, 0)
        }
        try VP8Encoder.check(result, context, "VP8 decode")
        var corrupted: Int32 = 0
        _ = cvpx_get_frame_corrupted(context, &corrupted)
        var iterator: vpx_codec_iter_t? = nil
        let image = vpx_codec_get_frame(context, &iterator)
        guard corrupted == 0 else {
            // The reference is damaged: later inter frames would build on garbage until a keyframe.
            hasKeyframe = false
            throw MediaError(.invalidData, "VP8 decode", "frame is corrupt or truncated; request a keyframe (PLI)")
        }
        if header.isKeyframe { hasKeyframe = true }
        guard let image else { return nil }
        return Self.copy(image, timestamp: timestamp)
    }

    private static func copy(_ image: UnsafeMutablePointer<vpx_image_t>, timestamp: Duration) -> VideoFrame {
        let width = Int(image.pointee.d_w), height = Int(image.pointee.d_h)
        var frame = VideoFrame(width: width, height: height, timestamp: timestamp)
        let planes = [(0, width, height), (1, frame.chromaWidth, frame.chromaHeight), (2, frame.chromaWidth, frame.chromaHeight)]
        frame.withMutablePlanes { yp, up, vp in
            let destinations = [yp, up, vp]
            for (plane, w, h) in planes {
                guard let source = cvpx_image_plane(image, Int32(plane)) else { continue }
                let stride = Int(cvpx_image_stride(image, Int32(plane)))
                for row in 0..<h {
                    (destinations[plane] + row * w).update(from: source + row * stride, count: w)
                }
            }
        }
        return frame
    }
}
