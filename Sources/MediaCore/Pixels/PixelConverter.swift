internal import CYUV

/// Converts camera pictures to I420 through libyuv (MJPEG through libyuv's libjpeg-turbo decoder).
public enum PixelConverter {
    /// Converts one picture. `stride` is the bytes per row of the packed or luma plane for raw
    /// formats (0 means tightly packed); it is ignored for MJPEG.
    public static func toI420(_ source: UnsafeRawBufferPointer, format: PixelFormat, width: Int, height: Int,
                              stride: Int = 0, timestamp: Duration = .zero) throws(MediaError) -> VideoFrame {
        let operation = "convert \(format.rawValue) \(width)x\(height) to I420"
        guard width > 0, height > 0, width <= 16384, height <= 16384 else {
            throw MediaError(.invalidArgument, operation, "size is outside 1 ... 16384")
        }
        guard let base = source.baseAddress?.assumingMemoryBound(to: UInt8.self), !source.isEmpty else {
            throw MediaError(.invalidData, operation, "no input bytes")
        }
        var frame = VideoFrame(width: width, height: height, timestamp: timestamp)
        let (sy, su, sv) = (Int32(frame.strideY), Int32(frame.strideU), Int32(frame.strideV))
        let w = Int32(width), h = Int32(height)
        let result: Int32
        switch format {
        case .yuyv:
            let rowBytes = stride > 0 ? stride : ((width + 1) / 2) * 4
            try requireBytes(source.count, rowBytes * (height - 1) + ((width + 1) / 2) * 4, operation)
            result = frame.withMutablePlanes { y, u, v in
                YUY2ToI420(base, Int32(rowBytes), y, sy, u, su, v, sv, w, h)
            }
        case .nv12:
            let rowBytes = stride > 0 ? stride : width
            let lumaBytes = rowBytes * height
            let chromaRowBytes = rowBytes
            try requireBytes(source.count, lumaBytes + chromaRowBytes * (VideoFrame.chromaHeight(height) - 1) + VideoFrame.chromaWidth(width) * 2, operation)
            result = frame.withMutablePlanes { y, u, v in
                NV12ToI420(base, Int32(rowBytes), base + lumaBytes, Int32(chromaRowBytes), y, sy, u, su, v, sv, w, h)
            }
        case .i420:
            let rowBytes = stride > 0 ? stride : width
            let chromaStride = stride > 0 ? (stride + 1) / 2 : VideoFrame.chromaWidth(width)
            let lumaBytes = rowBytes * height
            let chromaBytes = chromaStride * VideoFrame.chromaHeight(height)
            try requireBytes(source.count, lumaBytes + 2 * chromaBytes, operation)
            result = frame.withMutablePlanes { y, u, v in
                I420Copy(base, Int32(rowBytes), base + lumaBytes, Int32(chromaStride), base + lumaBytes + chromaBytes,
                         Int32(chromaStride), y, sy, u, su, v, sv, w, h)
            }
        case .rgb24, .bgr24:
            let rowBytes = stride > 0 ? stride : width * 3
            try requireBytes(source.count, rowBytes * (height - 1) + width * 3, operation)
            // libyuv names byte orders by the little-endian word: its "RAW" is R,G,B in memory
            // (V4L2 RGB3) and its "RGB24" is B,G,R (V4L2 BGR3).
            result = frame.withMutablePlanes { y, u, v in
                format == .rgb24 ? RAWToI420(base, Int32(rowBytes), y, sy, u, su, v, sv, w, h)
                    : RGB24ToI420(base, Int32(rowBytes), y, sy, u, su, v, sv, w, h)
            }
        case .mjpeg:
            var jpegWidth: Int32 = 0, jpegHeight: Int32 = 0
            guard MJPGSize(base, source.count, &jpegWidth, &jpegHeight) == 0 else {
                throw MediaError(.invalidData, operation, "not a decodable JPEG picture (\(source.count) bytes)")
            }
            guard jpegWidth == w, jpegHeight == h else {
                throw MediaError(.invalidData, operation, "the JPEG picture is \(jpegWidth)x\(jpegHeight)")
            }
            result = frame.withMutablePlanes { y, u, v in
                MJPGToI420(base, source.count, y, sy, u, su, v, sv, w, h, w, h)
            }
        }
        guard result == 0 else {
            throw MediaError(.invalidData, operation, "libyuv returned \(result) (corrupt or unsupported picture)")
        }
        return frame
    }

    public static func toI420(_ bytes: [UInt8], format: PixelFormat, width: Int, height: Int,
                              stride: Int = 0, timestamp: Duration = .zero) throws(MediaError) -> VideoFrame {
        let result: Result<VideoFrame, MediaError> = bytes.withUnsafeBytes { raw in
            Result { () throws(MediaError) in
                try toI420(raw, format: format, width: width, height: height, stride: stride, timestamp: timestamp)
            }
        }
        return try result.get()
    }

    private static func requireBytes(_ have: Int, _ need: Int, _ operation: String) throws(MediaError) {
        guard have >= need else {
            throw MediaError(.invalidData, operation, "\(have) bytes, need at least \(need)")
        }
    }
}
