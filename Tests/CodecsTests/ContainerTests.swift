import Foundation
import Testing
@testable import Codecs
@testable import MediaCore

@Suite struct Y4MTests {
    @Test func readsFFmpegHeadersAndFrames() throws {
        let dir = try TemporaryDirectory()
        let path = try makeTestClip(in: dir, width: 176, height: 144, frames: 5)
        let header = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)).prefix(80), as: UTF8.self)
        #expect(header.contains("C420jpeg") && header.contains(" X"), "ffmpeg header: \(header)")
        let reader = try Y4MReader(path: path)
        #expect(reader.width == 176 && reader.height == 144 && reader.frameRate == 30)
        var count = 0
        while let frame = try reader.readFrame() {
            #expect(frame.timestamp == .seconds(Double(count) / 30))
            count += 1
        }
        #expect(count == 5)
    }

    @Test func writerOutputIsReadByFFmpegAndUs() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("out.y4m")
        let writer = try Y4MWriter(path: path, width: 64, height: 48, frameRate: 25)
        for i in 0..<7 { try writer.write(VideoFrame(width: 64, height: 48, luma: UInt8(i * 30))) }
        try writer.close()
        let probe = try runTool("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0",
                                            "-show_entries", "stream=nb_read_frames,width,height", "-of", "csv=p=0", path])
        #expect(probe.trimmingCharacters(in: .whitespacesAndNewlines) == "64,48,7")
        let frames = try readAllFrames(path)
        #expect(frames.map { $0.y[0] } == (0..<7).map { UInt8($0 * 30) })
    }

    @Test func malformedFilesAreErrors() throws {
        let dir = try TemporaryDirectory()
        func attempt(_ text: String, extra: [UInt8] = []) throws -> MediaError? {
            let path = dir.file("bad.y4m")
            try Data(Array(text.utf8) + extra).write(to: URL(fileURLWithPath: path))
            do {
                let reader = try Y4MReader(path: path)
                while try reader.readFrame() != nil {}
                return nil
            } catch { return error }
        }
        #expect(try attempt("")?.kind == .invalidData)
        #expect(try attempt("RIFF1234WAVE\n")?.kind == .invalidData)
        #expect(try attempt("YUV4MPEG2 W0 H10\n")?.kind == .invalidData)
        #expect(try attempt("YUV4MPEG2 W16 H16 F30:0\n")?.kind == .invalidData)
        #expect(try attempt("YUV4MPEG2 W16 H16 F-1:1\n")?.kind == .invalidData)
        // GStreamer's "unknown rate" header is accepted.
        #expect(try attempt("YUV4MPEG2 C420 W2 H2 Ip F0:1 A1:1\nFRAME\n", extra: [1, 2, 3, 4, 5, 6]) == nil)
        let c444 = try attempt("YUV4MPEG2 W16 H16 C444\n")
        #expect(c444?.detail.contains("C420jpeg") == true, "the error lists what is supported: \(String(describing: c444))")
        #expect(try attempt("YUV4MPEG2 W16 H16\nFRAME\n", extra: [1, 2, 3])?.detail.contains("ends inside") == true)
        #expect(try attempt("YUV4MPEG2 W2 H2\nFRAMX\n", extra: [1, 2, 3, 4, 5, 6])?.kind == .invalidData)
        #expect(throws: MediaError.self) { try Y4MReader(path: dir.file("missing.y4m")) }
    }
}

@Suite struct IVFTests {
    @Test func writerOutputDecodesWithFFmpegAndRoundTrips() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("out.ivf")
        let encoder = try VP8Encoder(configuration: VP8EncoderConfiguration(width: 160, height: 120))
        let writer = try IVFWriter(path: path, width: 160, height: 120)
        var written: [[UInt8]] = []
        for i in 0..<20 {
            var frame = VideoFrame(width: 160, height: 120, timestamp: .milliseconds(33 * i))
            frame.y[i * 7] = 255
            for encoded in try encoder.encode(frame) {
                try writer.write(encoded.data, pts: UInt64(i * 3000))
                written.append(encoded.data)
            }
        }
        try writer.close()
        let probe = try runTool("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0",
                                            "-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0", path])
        #expect(probe.trimmingCharacters(in: .whitespacesAndNewlines) == "vp8,20")
        let reader = try IVFReader(path: path)
        #expect(reader.header.frameCount == 20 && reader.header.fourCC == "VP80" && reader.header.width == 160)
        var read: [[UInt8]] = []
        while let (data, pts) = try reader.readFrame() {
            #expect(pts == UInt64(read.count * 3000))
            read.append(data)
        }
        #expect(read == written)
    }

    @Test func truncatedFileIsAnError() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("bad.ivf")
        var bytes = IVFWriter.serialize(IVFHeader(fourCC: "VP80", width: 16, height: 16, timebaseDenominator: 30, timebaseNumerator: 1, frameCount: 1))
        bytes.writeLE32(1000)
        bytes.writeLE64(0)
        bytes += [1, 2, 3]
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let reader = try IVFReader(path: path)
        #expect(throws: MediaError.self) { try reader.readFrame() }
        try Data("not ivf at all, but long enough to hold a header".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: MediaError.self) { try IVFReader(path: path) }
    }
}

@Suite struct WAVTests {
    @Test func readsFFmpegWAVAndWritesOneFFmpegReads() throws {
        let dir = try TemporaryDirectory()
        let source = dir.file("in.wav")
        // ffmpeg adds a LIST chunk before the data: the reader must skip it.
        try runTool("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=0.5",
                               "-ac", "2", "-c:a", "pcm_s16le", source])
        let reader = try WAVReader(path: source)
        #expect(reader.channels == 2 && reader.sampleRate == 48_000 && reader.frameCount == 24_000)
        var samples: [Int16] = []
        while let chunk = reader.read(samplesPerChannel: 960) { samples += chunk }
        #expect(samples.count == 48_000)

        let copy = dir.file("copy.wav")
        let writer = try WAVWriter(path: copy, channels: 2)
        try writer.write(samples)
        try writer.close()
        let probe = try runTool("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,sample_rate,channels,duration_ts",
                                            "-of", "csv=p=0", copy])
        #expect(probe.trimmingCharacters(in: .whitespacesAndNewlines) == "pcm_s16le,48000,2,24000")
        let again = try WAVReader(path: copy)
        var back: [Int16] = []
        while let chunk = again.read(samplesPerChannel: 1000) { back += chunk }
        #expect(back == samples)
    }

    @Test func unsupportedFormatsAreErrors() throws {
        let dir = try TemporaryDirectory()
        let float = dir.file("float.wav")
        try runTool("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=duration=0.1", "-c:a", "pcm_f32le", float])
        #expect(throws: MediaError.self) { try WAVReader(path: float) }
        let junk = dir.file("junk.wav")
        try Data("RIFF\u{0}\u{0}\u{0}\u{0}WAVEjunk".utf8).write(to: URL(fileURLWithPath: junk))
        #expect(throws: MediaError.self) { try WAVReader(path: junk) }
    }
}
