import Foundation
import Testing
@testable import Benchmarks
import CallEndpoint

@Suite struct CodecBenchmarkTests {
    /// With the same libvpx and the same settings, our encoder and vpxenc must produce the same
    /// stream: equal PSNR and bitrate prove the bench compares like with like.
    @Test func smallBenchRunsBothSidesWithTheSameSettings() throws {
        var options = CodecBenchmark.Options()
        options.sizes = [(320, 240)]
        options.frames = 30
        options.repetitions = 1
        options.audioSeconds = 2
        let result = try CodecBenchmark(options: options) { _ in }.run()
        let row = try #require(result.video.first)
        #expect(row.ourFPS > 0 && row.theirFPS > 0)
        #expect(abs(row.psnrDelta) < 0.01, "PSNR callend \(row.ourPSNR) vs vpxenc \(row.theirPSNR)")
        #expect(abs(row.bitrateRatio - 1) < 0.001, "bitrate callend \(row.ourBitrate) vs vpxenc \(row.theirBitrate)")
        #expect(row.ourPSNR > 35)
        // OpenH264 under callend and under GStreamer, same settings: the same stream.
        let h264 = try #require(result.h264.first)
        #expect(h264.entries.map(\.encoder) == ["callend", "openh264enc", "x264"])
        #expect(h264.entries.allSatisfy { $0.fps > 0 && $0.psnr > 30 && $0.bitrate > 100_000 }, "\(h264.entries)")
        #expect(abs(h264.psnrDelta) < 0.2 && abs(h264.bitrateRatio - 1) < 0.05, "callend vs openh264enc: \(h264.entries)")
        #expect(result.audio.map(\.operation) == ["encode", "decode"])
        #expect(result.audio.allSatisfy { $0.ourRealtime > 1 && $0.theirRealtime > 1 })
        let report = CodecBenchmark.report(video: result.video, h264: result.h264, audio: result.audio, configurationNote: "x")
        #expect(report.contains("320x240") && report.contains("ratio") && report.contains("openh264enc"))
    }

    @Test func bitrateScalesWithPixelCount() {
        #expect(CodecBenchmark.bitrate(width: 640, height: 480) == 1_000_000)
        #expect(CodecBenchmark.bitrate(width: 1280, height: 720) == 3_000_000)
        #expect(CodecBenchmark.bitrate(width: 320, height: 240) == 300_000)
    }
}
