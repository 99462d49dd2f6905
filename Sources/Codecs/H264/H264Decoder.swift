import MediaCore
internal import CH264

/// H.264 decoder over libavcodec's (FFmpeg), loaded on first use: it decodes what cameras and
/// browsers send (constrained baseline, main and high profile, CABAC, several slices), where
/// OpenH264's decoder covers baseline alone. Takes Annex B access units; a damaged or
/// unsupported stream is an error, never a crash. One owner of one libavcodec context.
public final class H264Decoder {
    private let decoder: OpaquePointer

    /// Why H.264 cannot be decoded on this machine (libavcodec missing), or nil when it can.
    public static var unavailableReason: String? {
        var reason = [CChar](repeating: 0, count: 256)
        return ch264_decoder_load(&reason, reason.count) == 0 ? nil : text(reason)
    }

    public init() throws(MediaError) {
        var reason = [CChar](repeating: 0, count: 256)
        guard let decoder = ch264_decoder_open(&reason, reason.count) else {
            throw MediaError(.library, "open H.264 decoder", text(reason))
        }
        self.decoder = decoder
    }

    deinit { ch264_decoder_close(decoder) }

    /// Decodes one access unit; nil when it gave no picture (parameter sets alone).
    public func decode(_ accessUnit: [UInt8], timestamp: Duration = .zero) throws(MediaError) -> VideoFrame? {
        var y: UnsafePointer<UInt8>?, u: UnsafePointer<UInt8>?, v: UnsafePointer<UInt8>?
        var strideY: Int32 = 0, strideU: Int32 = 0, strideV: Int32 = 0, width: Int32 = 0, height: Int32 = 0
        let result = accessUnit.withUnsafeBufferPointer { bytes in
            ch264_decoder_decode(decoder, bytes.baseAddress, bytes.count, &y, &strideY, &u, &strideU, &v, &strideV, &width, &height)
        }
        guard result >= 0 else {
            var reason = [CChar](repeating: 0, count: 256)
            ch264_decoder_error(result, &reason, reason.count)
            throw MediaError(.invalidData, "H.264 decode",
                             "\(text(reason)); request a keyframe (PLI)")
        }
        guard result == 1, let y, let u, let v, width > 0, height > 0 else { return nil }
        var frame = VideoFrame(width: Int(width), height: Int(height), timestamp: timestamp)
        let planes = [(y, Int(strideY), frame.width, frame.height), (u, Int(strideU), frame.chromaWidth, frame.chromaHeight),
                      (v, Int(strideV), frame.chromaWidth, frame.chromaHeight)]
        frame.withMutablePlanes { yp, up, vp in
            for ((source, stride, w, h), destination) in zip(planes, [yp, up, vp]) {
                for row in 0..<h { (destination + row * w).update(from: source + row * stride, count: w) }
            }
        }
        return frame
    }
}
