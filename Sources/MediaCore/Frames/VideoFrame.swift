/// An uncompressed picture in I420 (YUV 4:2:0, 8 bit): a full-size luma plane and two chroma planes
/// of half width and half height (rounded up), each with its own stride.
public struct VideoFrame: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var y: [UInt8]
    public var u: [UInt8]
    public var v: [UInt8]
    public var strideY: Int
    public var strideU: Int
    public var strideV: Int
    /// When the picture was captured, on the source's monotonic clock.
    public var timestamp: Duration

    public static func chromaWidth(_ width: Int) -> Int { (width + 1) / 2 }
    public static func chromaHeight(_ height: Int) -> Int { (height + 1) / 2 }

    public var chromaWidth: Int { Self.chromaWidth(width) }
    public var chromaHeight: Int { Self.chromaHeight(height) }

    /// A tightly packed frame (strides equal to widths) filled with the given values.
    public init(width: Int, height: Int, timestamp: Duration = .zero, luma: UInt8 = 0, chroma: UInt8 = 128) {
        precondition(width > 0 && height > 0, "a frame has a positive size")
        let cw = Self.chromaWidth(width), ch = Self.chromaHeight(height)
        self.width = width
        self.height = height
        self.y = [UInt8](repeating: luma, count: width * height)
        self.u = [UInt8](repeating: chroma, count: cw * ch)
        self.v = [UInt8](repeating: chroma, count: cw * ch)
        self.strideY = width
        self.strideU = cw
        self.strideV = cw
        self.timestamp = timestamp
    }

    /// Wraps planes the caller already has; throws if a plane is too small for its stride and size.
    public init(width: Int, height: Int, y: [UInt8], strideY: Int, u: [UInt8], strideU: Int,
                v: [UInt8], strideV: Int, timestamp: Duration = .zero) throws(MediaError) {
        let cw = Self.chromaWidth(width), ch = Self.chromaHeight(height)
        guard width > 0, height > 0 else {
            throw MediaError(.invalidArgument, "make I420 frame", "size \(width)x\(height) is not positive")
        }
        guard strideY >= width, strideU >= cw, strideV >= cw,
              y.count >= strideY * (height - 1) + width,
              u.count >= strideU * (ch - 1) + cw,
              v.count >= strideV * (ch - 1) + cw
        else {
            throw MediaError(.invalidArgument, "make I420 frame \(width)x\(height)",
                             "planes of \(y.count)/\(u.count)/\(v.count) bytes with strides \(strideY)/\(strideU)/\(strideV) are too small")
        }
        self.width = width
        self.height = height
        self.y = y
        self.u = u
        self.v = v
        self.strideY = strideY
        self.strideU = strideU
        self.strideV = strideV
        self.timestamp = timestamp
    }

    /// Size in bytes of a tightly packed I420 picture of this size.
    public static func packedSize(width: Int, height: Int) -> Int {
        width * height + 2 * chromaWidth(width) * chromaHeight(height)
    }

    /// Gives read access to the three planes at once, for handing them to a C library.
    public func withPlanes<R>(_ body: (UnsafePointer<UInt8>, UnsafePointer<UInt8>, UnsafePointer<UInt8>) throws -> R) rethrows -> R {
        try y.withUnsafeBufferPointer { yp in
            try u.withUnsafeBufferPointer { up in
                try v.withUnsafeBufferPointer { vp in
                    try body(yp.baseAddress!, up.baseAddress!, vp.baseAddress!)
                }
            }
        }
    }

    /// Gives write access to the three planes at once.
    public mutating func withMutablePlanes<R>(_ body: (UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt8>, UnsafeMutablePointer<UInt8>) throws -> R) rethrows -> R {
        try y.withUnsafeMutableBufferPointer { yp in
            try u.withUnsafeMutableBufferPointer { up in
                try v.withUnsafeMutableBufferPointer { vp in
                    try body(yp.baseAddress!, up.baseAddress!, vp.baseAddress!)
                }
            }
        }
    }

    /// The picture as tightly packed I420 bytes (Y, then U, then V), as Y4M and raw files store it.
    public func packedBytes() -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(Self.packedSize(width: width, height: height))
        func append(_ plane: [UInt8], stride: Int, width w: Int, rows: Int) {
            if stride == w {
                out.append(contentsOf: plane[0..<(w * rows)])
            } else {
                for row in 0..<rows { out.append(contentsOf: plane[(row * stride)..<(row * stride + w)]) }
            }
        }
        append(y, stride: strideY, width: width, rows: height)
        append(u, stride: strideU, width: chromaWidth, rows: chromaHeight)
        append(v, stride: strideV, width: chromaWidth, rows: chromaHeight)
        return out
    }

    /// Reads a tightly packed I420 picture.
    public init(packed bytes: some Collection<UInt8>, width: Int, height: Int, timestamp: Duration = .zero) throws(MediaError) {
        let expected = Self.packedSize(width: width, height: height)
        guard width > 0, height > 0, bytes.count == expected else {
            throw MediaError(.invalidData, "read packed I420 \(width)x\(height)",
                             "got \(bytes.count) bytes, expected \(expected)")
        }
        let lumaCount = width * height
        let chromaCount = Self.chromaWidth(width) * Self.chromaHeight(height)
        let all = Array(bytes)
        self.width = width
        self.height = height
        self.y = Array(all[0..<lumaCount])
        self.u = Array(all[lumaCount..<(lumaCount + chromaCount)])
        self.v = Array(all[(lumaCount + chromaCount)..<expected])
        self.strideY = width
        self.strideU = Self.chromaWidth(width)
        self.strideV = Self.chromaWidth(width)
        self.timestamp = timestamp
    }
}
