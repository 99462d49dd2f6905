import Foundation
import Testing
@testable import Codecs
@testable import MediaCore

private func units(_ accessUnit: [UInt8]) -> [UInt8] {
    H264NALUnit.units(inAnnexB: accessUnit).map { H264NALUnit.type(of: $0.first!) }
}

/// OpenH264 encoding and libavcodec decoding, each checked against the other and against FFmpeg's
/// command-line tools: pictures, rate, IDRs on request, size changes, and input that is not H.264.
@Suite struct H264Tests {
    @Test func roundTripAt1MbitHasPSNRAbove35dBAndFFmpegDecodesIt() throws {
        let dir = try TemporaryDirectory()
        let frames = try readAllFrames(try makeTestClip(in: dir, width: 640, height: 480, frames: 60, source: "testsrc2"))
        let encoder = try H264Encoder(configuration: H264EncoderConfiguration(width: 640, height: 480, frameRate: 30, targetBitrate: 1_000_000))
        let decoder = try H264Decoder()
        var psnrs: [Double] = [], stream: [UInt8] = []
        for (index, frame) in frames.enumerated() {
            for encoded in try encoder.encode(frame) {
                #expect(encoded.isKeyframe == (index == 0))
                #expect((0...63).contains(encoded.quantizer))
                if index == 0 { #expect(units(encoded.data) == [7, 8, 5], "SPS, PPS, then the IDR slice") }
                stream += encoded.data
                let decoded = try #require(try decoder.decode(encoded.data))
                psnrs.append(try decoded.psnr(against: frame))
            }
        }
        let mean = psnrs.reduce(0, +) / Double(psnrs.count)
        let bitrate = Double(stream.count * 8) / 2.0
        #expect(psnrs.count >= 57, "a skipped picture or three at most: \(psnrs.count)")
        #expect(mean >= 35, "mean PSNR \(mean) dB")
        #expect(bitrate > 700_000 && bitrate < 1_200_000, "bitrate \(bitrate)")

        // FFmpeg reads it as constrained baseline (profile-level-id 42e0xx) and decodes every picture.
        let file = dir.file("out.h264")
        try Data(stream).write(to: URL(fileURLWithPath: file))
        let probe = try runTool("ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=profile,nb_read_frames,width,height",
                                            "-of", "csv=p=0", file])
        #expect(probe.trimmingCharacters(in: .whitespacesAndNewlines) == "Constrained Baseline,640,480,\(psnrs.count)")
    }

    @Test func bitrateAndKeyframeRequestsAndSizeChanges() throws {
        let dir = try TemporaryDirectory()
        let frames = try readAllFrames(try makeTestClip(in: dir, width: 320, height: 240, frames: 120, source: "testsrc2"))
        let encoder = try H264Encoder(configuration: H264EncoderConfiguration(width: 320, height: 240, frameRate: 30, targetBitrate: 800_000))
        let decoder = try H264Decoder()
        var sizes: [Int] = [], keyframes: [Int] = []
        for (index, frame) in frames.enumerated() {
            if index == 60 { try encoder.setTargetBitrate(150_000) }
            if index == 45 { encoder.requestKeyframe() }
            for encoded in try encoder.encode(frame) {
                sizes.append(encoded.data.count)
                if encoded.isKeyframe {
                    keyframes.append(index)
                    #expect(units(encoded.data) == [7, 8, 5])
                }
                _ = try decoder.decode(encoded.data)
            }
        }
        #expect(keyframes == [0, 45], "the first picture and the one asked for")
        let before = Double(sizes[15..<45].reduce(0, +)) * 8, after = Double(sizes.suffix(30).reduce(0, +)) * 8
        #expect(before > 500_000 && after < 250_000, "bits a second: \(before) at 800k, \(after) at 150k")

        // A smaller size: a new encoder whose first picture is an IDR, decoded at the new size.
        try encoder.setResolution(width: 160, height: 120)
        #expect(throws: MediaError.self) { try encoder.encode(frames[0]) }
        let small = try frames[0].scaled(width: 160, height: 120)
        let encoded = try #require(try encoder.encode(small).first)
        #expect(encoded.isKeyframe && encoded.width == 160)
        let decoded = try #require(try decoder.decode(encoded.data))
        #expect(decoded.width == 160 && decoded.height == 120)
        #expect(try decoded.psnr(against: small) > 30)
    }

    /// The decoder takes what browsers and cameras send beyond constrained baseline: x264's high
    /// profile (CABAC, B-frames off as in realtime) and main profile.
    @Test(arguments: ["high", "main"])
    func decodesX264Profiles(profile: String) throws {
        let dir = try TemporaryDirectory()
        let file = dir.file("x264.h264")
        try runTool("ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-frames:v", "30",
                               "-c:v", "libx264", "-profile:v", profile, "-tune", "zerolatency", "-pix_fmt", "yuv420p", "-bsf:v", "h264_metadata=aud=insert",
                               "-f", "h264", file])
        let stream = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        // Access unit delimiters (inserted by h264_metadata) mark where each picture starts.
        var accessUnits: [[ArraySlice<UInt8>]] = []
        for unit in H264NALUnit.units(inAnnexB: stream) {
            if H264NALUnit.type(of: unit.first!) == H264NALUnit.accessUnitDelimiter || accessUnits.isEmpty { accessUnits.append([]) }
            accessUnits[accessUnits.count - 1].append(unit)
        }
        #expect(accessUnits.count == 30)
        let decoder = try H264Decoder()
        let pictures = try accessUnits.compactMap { try decoder.decode(H264NALUnit.annexB($0)) }
        #expect(pictures.count == 30 && pictures.allSatisfy { $0.width == 320 && $0.height == 240 })
    }

    /// What `H264Syntax` reads (the frame_num width from the SPS; each slice's first macroblock,
    /// frame_num and whether it is a reference) is what FFmpeg's trace_headers reads, on x264's
    /// high profile with two slices a picture and B-frames (not references).
    @Test func syntaxFieldsAreWhatFFmpegReads() throws {
        let dir = try TemporaryDirectory()
        let file = dir.file("x264.h264")
        let trace = try runTool("ffmpeg", ["-v", "trace", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-frames:v", "24",
                                           "-c:v", "libx264", "-profile:v", "high", "-x264-params", "slices=2:bframes=2:keyint=10",
                                           "-pix_fmt", "yuv420p", "-bsf:v", "trace_headers", "-f", "h264", "-y", file])
        var traced: [(field: String, value: Int)] = []
        for line in trace.split(separator: "\n") where line.contains("trace_headers") {
            let words = line.split(separator: " ")
            guard let field = words.first(where: { ["first_mb_in_slice", "frame_num", "log2_max_frame_num_minus4", "nal_ref_idc"].contains($0) }),
                  words.count >= 2, words[words.count - 2] == "=", let value = Int(words[words.count - 1]) else { continue }
            traced.append((String(field), value))
        }
        let bits = try #require(traced.first { $0.field == "log2_max_frame_num_minus4" }).value + 4
        let refs = traced.filter { $0.field == "nal_ref_idc" }.map { $0.value != 0 }
        let firstMacroblocks = traced.filter { $0.field == "first_mb_in_slice" }.map(\.value)
        let frameNumbers = traced.filter { $0.field == "frame_num" }.map(\.value)
        let units = H264NALUnit.units(inAnnexB: [UInt8](try Data(contentsOf: URL(fileURLWithPath: file))))
        #expect(units.count == refs.count)
        #expect(H264Syntax.frameNumberBits(sequenceParameterSet: try #require(units.first { H264NALUnit.type(of: $0.first!) == 7 })) == bits)
        let slices = units.compactMap { H264Syntax.sliceStart($0, frameNumberBits: bits) }
        #expect(slices.count == 48 && slices.map(\.firstMacroblock) == firstMacroblocks && slices.map(\.frameNumber) == frameNumbers)
        #expect(Set(firstMacroblocks).count == 2 && Set(frameNumbers).count > 4)
        #expect(zip(units, refs).allSatisfy { H264Syntax.isReference($0.first!) == $1 } && refs.contains(false))
        // Cut short, a slice or SPS is nil, not a crash.
        for unit in units.prefix(4) { for n in 0..<min(unit.count, 12) { _ = H264Syntax.sliceStart(unit.prefix(n), frameNumberBits: bits); _ = H264Syntax.frameNumberBits(sequenceParameterSet: unit.prefix(n)) } }
        #expect(H264Syntax.frameNumberBits(sequenceParameterSet: [0x67, 0x64]) == nil && H264Syntax.sliceStart([0x41], frameNumberBits: 4) == nil)
    }

    @Test func badInputIsAnErrorNotACrash() throws {
        let decoder = try H264Decoder()
        var generator = SeededGenerator(seed: 7)
        var errors = 0
        for length in [0, 1, 4, 100, 5000] {
            let noise = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            do { _ = try decoder.decode([0, 0, 0, 1] + noise) } catch { errors += 1 }
        }
        // A slice with no parameter sets before it cannot be decoded.
        do { _ = try decoder.decode([0, 0, 0, 1, 0x65, 0x88, 0x84, 0x00, 0x33]) } catch { errors += 1 }
        #expect(errors >= 1)
        // The decoder still works after the garbage.
        let encoder = try H264Encoder(configuration: H264EncoderConfiguration(width: 64, height: 48, targetBitrate: 100_000))
        let frame = VideoFrame(width: 64, height: 48, luma: 90)
        let encoded = try #require(try encoder.encode(frame).first)
        #expect(try decoder.decode(encoded.data)?.width == 64)

        for bad in [(15, 16), (17, 16), (16, 4000)] {
            #expect(throws: MediaError.self) { try H264Encoder(configuration: H264EncoderConfiguration(width: bad.0, height: bad.1)) }
        }
        #expect(throws: MediaError.self) { try H264Encoder(configuration: H264EncoderConfiguration(width: 64, height: 48, targetBitrate: 1)) }
        #expect(throws: MediaError.self) { try encoder.setTargetBitrate(-5) }
        #expect(H264Encoder.unavailableReason == nil && H264Decoder.unavailableReason == nil)
    }
}
