internal import CYUV

extension VideoFrame {
    public enum ScalingFilter: Sendable {
        /// Point sampling: fastest, aliases.
        case none
        /// Bilinear: fast, good for moderate steps.
        case bilinear
        /// Box filter: best for large downscales.
        case box
    }

    /// The picture scaled to a new size with libyuv; the timestamp is kept.
    public func scaled(width newWidth: Int, height newHeight: Int, filter: ScalingFilter = .box) throws(MediaError) -> VideoFrame {
        guard newWidth > 0, newHeight > 0, newWidth <= 16384, newHeight <= 16384 else {
            throw MediaError(.invalidArgument, "scale \(width)x\(height) frame", "target size \(newWidth)x\(newHeight) is outside 1 ... 16384")
        }
        if newWidth == width && newHeight == height { return self }
        var out = VideoFrame(width: newWidth, height: newHeight, timestamp: timestamp)
        let mode: FilterMode = switch filter {
        case .none: kFilterNone
        case .bilinear: kFilterBilinear
        case .box: kFilterBox
        }
        let result: Int32 = withPlanes { sy, su, sv in
            let (dsy, dsu, dsv) = (Int32(out.strideY), Int32(out.strideU), Int32(out.strideV))
            return out.withMutablePlanes { dy, du, dv in
                I420Scale(sy, Int32(strideY), su, Int32(strideU), sv, Int32(strideV), Int32(width), Int32(height),
                          dy, dsy, du, dsu, dv, dsv, Int32(newWidth), Int32(newHeight), mode)
            }
        }
        guard result == 0 else {
            throw MediaError(.library, "scale \(width)x\(height) to \(newWidth)x\(newHeight)", "libyuv returned \(result)")
        }
        return out
    }

    /// Peak signal-to-noise ratio of this picture against a reference of the same size, over all
    /// three planes (libyuv I420Psnr); identical pictures give 128 dB.
    public func psnr(against reference: VideoFrame) throws(MediaError) -> Double {
        guard reference.width == width, reference.height == height else {
            throw MediaError(.invalidArgument, "compute PSNR", "sizes differ: \(width)x\(height) and \(reference.width)x\(reference.height)")
        }
        return withPlanes { ay, au, av in
            reference.withPlanes { by, bu, bv in
                I420Psnr(ay, Int32(strideY), au, Int32(strideU), av, Int32(strideV),
                         by, Int32(reference.strideY), bu, Int32(reference.strideU), bv, Int32(reference.strideV),
                         Int32(width), Int32(height))
            }
        }
    }

    /// The picture as packed 8-bit R, G, B (BT.601, libyuv I420ToRAW), for snapshots.
    public func rgb() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: width * height * 3)
        withPlanes { y, u, v in
            out.withUnsafeMutableBufferPointer { o in
                _ = I420ToRAW(y, Int32(strideY), u, Int32(strideU), v, Int32(strideV), o.baseAddress, Int32(width * 3), Int32(width), Int32(height))
            }
        }
        return out
    }
}
