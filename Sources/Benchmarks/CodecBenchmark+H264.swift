import Platform
import Codecs
import MediaCore
import Foundation

/// `bench codecs`' H.264 rows: callend's H264Encoder (OpenH264) beside the same library under
/// GStreamer (openh264enc with the same settings: the pair the targets judge) and beside x264
/// through ffmpeg at the same bitrate (another encoder, for reference), on the clip the VP8 rows
/// use. Every output is measured the same way: PSNR by ffmpeg's psnr filter against the clip,
/// bitrate from its size over the clip's length.
extension CodecBenchmark {
    public struct H264Row: Sendable {
        public struct Entry: Sendable {
            public var encoder: String
            public var fps: Double
            public var psnr: Double
            public var bitrate: Double
        }
        public var size: String
        public var targetBitrate: Int
        /// callend, openh264enc (GStreamer), x264 (ffmpeg), in that order.
        public var entries: [Entry]
        public var fpsRatio: Double { entries[0].fps / entries[1].fps }
        public var psnrDelta: Double { entries[0].psnr - entries[1].psnr }
        public var bitrateRatio: Double { entries[0].bitrate / entries[1].bitrate }
        public var meetsTargets: Bool { fpsRatio >= 0.95 && abs(psnrDelta) <= 0.2 && abs(bitrateRatio - 1) <= 0.05 }
    }

    func benchH264(width: Int, height: Int, clip: String, dir: String) throws -> H264Row {
        var configuration = H264EncoderConfiguration(width: width, height: height, frameRate: 30,
                                                     targetBitrate: Self.bitrate(width: width, height: height))
        configuration.threads = 1
        let bitrate = configuration.targetBitrate
        let outputs = ["callend", "openh264enc", "x264"].map { "\(dir)/\($0)-\(width)x\(height).h264" }
        let gstreamer = ["-q", "filesrc", "location=\(clip)", "!", "y4mdec", "!", "openh264enc", "bitrate=\(bitrate)",
                         "rate-control=bitrate", "usage-type=camera", "complexity=low", "gop-size=\(configuration.keyframeInterval)",
                         "slice-mode=n-slices", "num-slices=1", "multi-thread=1", "enable-frame-skip=true", "background-detection=true",
                         "adaptive-quantization=true", "scene-change-detection=false", "enable-denoise=false",
                         "!", "video/x-h264,stream-format=byte-stream", "!", "filesink", "location=\(outputs[1])"]
        let ffmpeg = ["-v", "error", "-y", "-i", clip, "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency",
                      "-profile:v", "baseline", "-b:v", "\(bitrate)", "-maxrate", "\(bitrate)", "-bufsize", "\(bitrate / 4)",
                      "-g", "\(configuration.keyframeInterval)", "-threads", "1", "-f", "h264", outputs[2]]
        // The outside tools' time to read the clip and start, taken off their encode runs.
        let gstreamerIdle = ["-q", "filesrc", "location=\(clip)", "!", "y4mdec", "!", "fakesink"]
        let ffmpegIdle = ["-v", "error", "-i", clip, "-f", "null", "-"]
        var fps: [[Double]] = [[], [], []]
        for rep in 0..<options.repetitions {
            for which in rep % 2 == 0 ? [0, 1, 2] : [2, 1, 0] {
                switch which {
                case 0: fps[0].append(try encodeH264WithCallend(clip: clip, configuration: configuration, output: outputs[0]))
                case 1: fps[1].append(try outsideFPS("gst-launch-1.0", gstreamer, idle: gstreamerIdle))
                default: fps[2].append(try outsideFPS("ffmpeg", ffmpeg, idle: ffmpegIdle))
                }
            }
            log("  \(width)x\(height) H.264 rep \(rep + 1): callend \(format(fps[0].last!, 1)) fps, openh264enc \(format(fps[1].last!, 1)), x264 \(format(fps[2].last!, 1))")
        }
        let entries = try zip(["callend", "openh264enc", "x264"], zip(outputs, fps)).map { name, run in
            let (psnr, bits) = try measureH264(run.0, against: clip)
            return H264Row.Entry(encoder: name, fps: median(run.1), psnr: psnr, bitrate: bits)
        }
        return H264Row(size: "\(width)x\(height)", targetBitrate: bitrate, entries: entries)
    }

    /// Frames per second of encode calls, as for VP8.
    func encodeH264WithCallend(clip: String, configuration: H264EncoderConfiguration, output: String) throws -> Double {
        let reader = try Y4MReader(path: clip)
        let encoder = try H264Encoder(configuration: configuration)
        let clock = MonotonicClock()
        var encodeTime = Duration.zero, count = 0, stream: [UInt8] = []
        while let frame = try reader.readFrame() {
            let start = clock.now
            let encoded = try encoder.encode(frame)
            encodeTime += clock.now - start
            for e in encoded { stream += e.data }
            count += 1
        }
        try Data(stream).write(to: URL(fileURLWithPath: output))
        return Double(count) / encodeTime.inSeconds
    }

    /// An outside encoder's frames per second: its wall time less that of the same tool only
    /// reading the clip.
    func outsideFPS(_ tool: String, _ arguments: [String], idle: [String]) throws -> Double {
        let busy = try ExternalTool.run(tool, arguments).wallTime
        let reading = try ExternalTool.run(tool, idle).wallTime
        return Double(options.frames) / max(0.001, (busy - reading).inSeconds)
    }

    /// ffmpeg's mean PSNR (all planes) of an Annex B stream against the clip, and its bitrate
    /// over the clip's length at 30 fps. The stream is read at the clip's 30 fps: OpenH264 writes
    /// no timing in its parameter sets, and at ffmpeg's default 25 the filter paired pictures
    /// that were not the same (21 dB for a 52 dB stream).
    func measureH264(_ path: String, against clip: String) throws -> (psnr: Double, bitrate: Double) {
        let result = try ExternalTool.run("ffmpeg", ["-v", "info", "-nostats", "-r", "30", "-i", path, "-i", clip, "-lavfi", "[0:v][1:v]psnr", "-f", "null", "-"])
        guard let range = result.output.range(of: #"average:([0-9.]+|inf)"#, options: [.regularExpression, .backwards]) else {
            throw ExternalTool.Failure(description: "no PSNR in ffmpeg's output for \(path):\n\(result.output.suffix(400))")
        }
        let psnr = Double(result.output[range].dropFirst("average:".count)) ?? .infinity
        let bytes = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        return (psnr, Double(bytes * 8) * 30 / Double(options.frames))
    }

    static func reportH264(_ rows: [H264Row]) -> [String] {
        guard !rows.isEmpty else { return [] }
        var lines = ["", "H.264: callend H264Encoder (OpenH264, constrained baseline, complexity low, 1 thread, frame skip on) vs",
                     "  GStreamer openh264enc with the same settings, and x264 (ffmpeg: veryfast, zerolatency, baseline, 1 thread) at the same bitrate",
                     "  fps = callend: encode calls; outside tools: wall time less a run that only reads the clip. PSNR: ffmpeg's psnr filter, all planes",
                     pad(["clip", "encoder", "fps", "PSNR dB", "kbit/s"])]
        for r in rows {
            for e in r.entries { lines.append(pad([r.size, e.encoder, format(e.fps, 1), format(e.psnr, 2), format(e.bitrate / 1000, 1)])) }
            lines.append(pad([r.size, "ratio", format(r.fpsRatio, 3) + "x", (r.psnrDelta >= 0 ? "+" : "") + format(r.psnrDelta, 2),
                              format(r.bitrateRatio, 3) + "x"]))
        }
        let met = rows.allSatisfy(\.meetsTargets)
        lines.append("H.264 targets against openh264enc (fps ratio ≥ 0.95, |ΔPSNR| ≤ 0.2 dB, bitrate within 5 %): \(met ? "met" : "NOT met")")
        return lines
    }
}
