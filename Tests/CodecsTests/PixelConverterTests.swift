import Foundation
import Testing
@testable import Codecs
@testable import MediaCore

@Suite struct PixelConverterTests {
    // Wide enough that libyuv takes its SIMD paths plus a remainder.
    let width = 72, height = 6

    @Test func yuyvPatternGivesExpectedI420() throws {
        // Row r, pixel pair p: Y0 = 2p + r, Y1 = 2p + r + 100, U = p + 10 r, V = 200 - p - 10 r.
        var yuyv: [UInt8] = []
        for r in 0..<height {
            for p in 0..<(width / 2) {
                yuyv += [UInt8(2 * p + r), UInt8(p + 10 * r), UInt8(2 * p + r + 100), UInt8(200 - p - 10 * r)]
            }
        }
        let frame = try PixelConverter.toI420(yuyv, format: .yuyv, width: width, height: height)
        for r in 0..<height {
            for p in 0..<(width / 2) {
                #expect(frame.y[r * width + 2 * p] == UInt8(2 * p + r))
                #expect(frame.y[r * width + 2 * p + 1] == UInt8(2 * p + r + 100))
            }
        }
        // 4:2:2 to 4:2:0: each chroma sample is the rounded-up mean of the two rows it covers.
        for cr in 0..<(height / 2) {
            for p in 0..<(width / 2) {
                let u0 = p + 10 * (2 * cr), u1 = p + 10 * (2 * cr + 1)
                #expect(frame.u[cr * frame.strideU + p] == UInt8((u0 + u1 + 1) / 2))
                #expect(frame.v[cr * frame.strideV + p] == UInt8((400 - u0 - u1 + 1) / 2))
            }
        }
    }

    @Test func nv12PatternGivesExpectedI420() throws {
        var nv12 = (0..<(width * height)).map { UInt8($0 & 0xff) }
        let cw = width / 2, ch = height / 2
        for i in 0..<(cw * ch) { nv12 += [UInt8(i), UInt8(255 - i)] }
        let frame = try PixelConverter.toI420(nv12, format: .nv12, width: width, height: height)
        #expect(frame.y == Array(nv12.prefix(width * height)))
        #expect(frame.u == (0..<(cw * ch)).map { UInt8($0) })
        #expect(frame.v == (0..<(cw * ch)).map { UInt8(255 - $0) })
    }

    @Test func rgbByteOrdersConvertToTheSameColours() throws {
        // Pure red, BT.601 limited range: Y 82, U 90, V 240 (±1 for rounding).
        let red = try PixelConverter.toI420((0..<(64 * 4)).flatMap { _ in [255, 0, 0] as [UInt8] },
                                            format: .rgb24, width: 64, height: 4)
        let alsoRed = try PixelConverter.toI420((0..<(64 * 4)).flatMap { _ in [0, 0, 255] as [UInt8] }, format: .bgr24, width: 64, height: 4)
        #expect(red == alsoRed)
        #expect(abs(Int(red.y[0]) - 82) <= 1 && abs(Int(red.u[0]) - 90) <= 1 && abs(Int(red.v[0]) - 240) <= 1, "\(red.y[0]) \(red.u[0]) \(red.v[0])")
    }

    @Test func shortInputIsAnError() throws {
        #expect(throws: MediaError.self) { try PixelConverter.toI420([UInt8](repeating: 0, count: 10), format: .yuyv, width: 64, height: 48) }
        #expect(throws: MediaError.self) { try PixelConverter.toI420([UInt8](repeating: 0, count: 10), format: .nv12, width: 64, height: 48) }
        #expect(throws: MediaError.self) { try PixelConverter.toI420([], format: .mjpeg, width: 64, height: 48) }
        #expect(throws: MediaError.self) { try PixelConverter.toI420([1, 2, 3], format: .i420, width: 0, height: 48) }
    }

    /// ffmpeg makes a JPEG and decodes it itself; our I420 from the same JPEG must match its picture.
    /// 4:2:2 is written by libjpeg's cjpeg with the h2v1 sampling USB cameras use: ffmpeg's own
    /// 4:2:2 JPEGs declare h2v2/h1v2, a layout libyuv refuses (see the next test).
    @Test(arguments: ["4:2:0", "4:2:2"])
    func mjpegMadeByFFmpegDecodes(chroma: String) throws {
        let dir = try TemporaryDirectory()
        let jpeg = dir.file("frame.jpg"), reference = dir.file("frame.yuv"), ppm = dir.file("frame.ppm")
        let source = ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-frames:v", "1"]
        if chroma == "4:2:0" {
            try runTool("ffmpeg", source + ["-pix_fmt", "yuvj420p", "-q:v", "2", "-f", "mjpeg", jpeg])
        } else {
            try runTool("ffmpeg", source + [ppm])
            try runTool("cjpeg", ["-quality", "95", "-sample", "2x1", "-outfile", jpeg, ppm])
        }
        try runTool("ffmpeg", ["-v", "error", "-y", "-i", jpeg, "-f", "rawvideo", "-pix_fmt", "yuvj420p", reference])
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: jpeg)))
        let expected = try VideoFrame(packed: [UInt8](try Data(contentsOf: URL(fileURLWithPath: reference))), width: 320, height: 240)
        let frame = try PixelConverter.toI420(bytes, format: .mjpeg, width: 320, height: 240)
        let psnr = try frame.psnr(against: expected)
        // Same picture up to IDCT rounding (4:2:0) or chroma downsampling filters (4:2:2).
        #expect(psnr > (chroma == "4:2:0" ? 45 : 38), "PSNR against ffmpeg's own decode: \(psnr) dB")

        #expect(throws: MediaError.self) { try PixelConverter.toI420(bytes, format: .mjpeg, width: 640, height: 480) }
        var rng = SeededGenerator(seed: 3)
        let garbage = (0..<bytes.count).map { _ in UInt8.random(in: 0...255, using: &rng) }
        #expect(throws: MediaError.self) { try PixelConverter.toI420(garbage, format: .mjpeg, width: 320, height: 240) }
        // A JPEG cut short decodes to an error or a picture, never a crash.
        for length in stride(from: 2, to: bytes.count, by: bytes.count / 40) {
            _ = try? PixelConverter.toI420(Array(bytes.prefix(length)), format: .mjpeg, width: 320, height: 240)
        }
    }

    @Test func unsupportedJPEGLayoutIsAnErrorNotACrash() throws {
        let dir = try TemporaryDirectory()
        let jpeg = dir.file("h2v2.jpg")
        try runTool("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-frames:v", "1",
                               "-pix_fmt", "yuvj422p", "-f", "mjpeg", jpeg])
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: jpeg)))
        #expect(throws: MediaError.self) { try PixelConverter.toI420(bytes, format: .mjpeg, width: 320, height: 240) }
    }

    @Test func fourCCsMatchV4L2() {
        // V4L2_PIX_FMT_YUYV = v4l2_fourcc('Y','U','Y','V') = 0x56595559.
        #expect(PixelFormat.yuyv.fourCC == 0x5659_5559)
        #expect(PixelFormat.mjpeg.fourCC == 0x4750_4a4d)
        #expect(PixelFormat(fourCC: 0x3231_564e) == .nv12)
        #expect(PixelFormat(fourCC: 0) == nil)
    }
}

@Suite struct ScalingTests {
    @Test func flatPictureStaysFlatAtEverySize() throws {
        let frame = VideoFrame(width: 640, height: 480, luma: 77, chroma: 140)
        for (w, h) in [(320, 240), (960, 540), (160, 90)] {
            let scaled = try frame.scaled(width: w, height: h)
            #expect(scaled.width == w && scaled.height == h)
            // libyuv's box filter divides by a fixed-point reciprocal at non-integer ratios: ±1.
            #expect(Set(scaled.y).isSubset(of: [76, 77]), "\(w)x\(h) luma \(Set(scaled.y))")
            #expect(Set(scaled.u + scaled.v).isSubset(of: [139, 140]), "\(w)x\(h) chroma \(Set(scaled.u + scaled.v))")
        }
    }

    @Test func halvingAveragesPairs() throws {
        var frame = VideoFrame(width: 64, height: 32)
        for r in 0..<32 { for c in 0..<64 { frame.y[r * 64 + c] = UInt8(c * 4) } }
        let half = try frame.scaled(width: 32, height: 16, filter: .box)
        for c in 0..<32 { #expect(abs(Int(half.y[5 * 32 + c]) - (8 * c + 2)) <= 1) }
        #expect(try half.scaled(width: 64, height: 32, filter: .bilinear).psnr(against: frame) > 30)
        #expect(throws: MediaError.self) { try frame.scaled(width: 0, height: 10) }
    }

    @Test func psnrOfIdenticalAndDifferentPictures() throws {
        let a = VideoFrame(width: 32, height: 32, luma: 100)
        var b = a
        #expect(try a.psnr(against: b) >= 100)
        b.y[0] = 0
        #expect(try a.psnr(against: b) < 60)
        #expect(throws: MediaError.self) { try a.psnr(against: VideoFrame(width: 16, height: 16)) }
    }
}
