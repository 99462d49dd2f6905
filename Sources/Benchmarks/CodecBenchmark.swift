import Platform
import CallEndpoint
import Codecs
import MediaCore
import Foundation

/// `callend bench codecs`: our VP8Encoder against libvpx's own `vpxenc` on the same Y4M clips and
/// settings, and our Opus encode/decode against `opusenc`/`opusdec`, side by side in one run so
/// machine noise hits both. Each pair is repeated and the median kept.
public struct CodecBenchmark {
    public struct Options: Sendable {
        public var sizes: [(width: Int, height: Int)] = [(640, 480), (1280, 720)]
        public var frames = 300
        public var repetitions = 3
        public var audioSeconds = 60
        /// Where clips and outputs go; a temporary folder (removed afterwards) when nil.
        public var workDirectory: String?
        public init() {}
    }

    public struct VideoRow: Sendable {
        public var size: String
        public var targetBitrate: Int
        public var ourFPS: Double, theirFPS: Double
        public var ourPSNR: Double, theirPSNR: Double
        public var ourBitrate: Double, theirBitrate: Double
        public var fpsRatio: Double { ourFPS / theirFPS }
        public var psnrDelta: Double { ourPSNR - theirPSNR }
        public var bitrateRatio: Double { ourBitrate / theirBitrate }
        public var meetsTargets: Bool { fpsRatio >= 0.95 && abs(psnrDelta) <= 0.2 && abs(bitrateRatio - 1) <= 0.05 }
    }

    public struct AudioRow: Sendable {
        public var operation: String
        public var ourRealtime: Double, theirRealtime: Double
        public var ratio: Double { ourRealtime / theirRealtime }
    }

    public let options: Options
    let log: (String) -> Void

    public init(options: Options, log: @escaping (String) -> Void) {
        self.options = options
        self.log = log
    }

    /// Bitrate for a clip: 1 Mbit/s at 640x480, scaled by pixel count, as a call would use.
    static func bitrate(width: Int, height: Int) -> Int {
        let scaled = 1_000_000.0 * Double(width * height) / Double(640 * 480)
        return Int((scaled / 100_000).rounded()) * 100_000
    }

    public func run() throws -> (video: [VideoRow], h264: [H264Row], audio: [AudioRow]) {
        let temporary = options.workDirectory == nil
        let dir = options.workDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("callend-bench-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { if temporary { try? FileManager.default.removeItem(atPath: dir) } }

        var video: [VideoRow] = [], h264: [H264Row] = []
        for (width, height) in options.sizes {
            video.append(try benchVideo(width: width, height: height, dir: dir))
            h264.append(try benchH264(width: width, height: height, clip: Self.clip(width: width, height: height, dir: dir), dir: dir))
        }
        let audio = try benchAudio(dir: dir)
        return (video, h264, audio)
    }

    // MARK: VP8

    func benchVideo(width: Int, height: Int, dir: String) throws -> VideoRow {
        let clip = Self.clip(width: width, height: height, dir: dir)
        log("making \(clip) (ffmpeg testsrc, \(options.frames) frames)")
        try ExternalTool.run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=\(width)x\(height):rate=30",
                                        "-frames:v", "\(options.frames)", "-pix_fmt", "yuv420p", clip])
        let configuration = VP8EncoderConfiguration(width: width, height: height, frameRate: 30,
                                                    targetBitrate: Self.bitrate(width: width, height: height))
        let ours = "\(dir)/callend-\(width)x\(height).ivf", theirs = "\(dir)/vpxenc-\(width)x\(height).ivf"
        var ourFPS: [Double] = [], theirFPS: [Double] = []
        for rep in 0..<options.repetitions {
            // Alternate who goes first so drift in machine load does not favour one side.
            let order = rep % 2 == 0 ? [true, false] : [false, true]
            for isOurs in order {
                if isOurs {
                    ourFPS.append(try encodeWithCallend(clip: clip, configuration: configuration, output: ours))
                } else {
                    theirFPS.append(try encodeWithVpxenc(clip: clip, configuration: configuration, output: theirs))
                }
            }
            log("  \(width)x\(height) rep \(rep + 1): callend \(format(ourFPS.last!, 1)) fps, vpxenc \(format(theirFPS.last!, 1)) fps")
        }
        let (ourPSNR, ourBitrate) = try measure(ivf: ours, against: clip)
        let (theirPSNR, theirBitrate) = try measure(ivf: theirs, against: clip)
        return VideoRow(size: "\(width)x\(height)", targetBitrate: configuration.targetBitrate, ourFPS: median(ourFPS), theirFPS: median(theirFPS),
                        ourPSNR: ourPSNR, theirPSNR: theirPSNR, ourBitrate: ourBitrate, theirBitrate: theirBitrate)
    }

    static func clip(width: Int, height: Int, dir: String) -> String { "\(dir)/testsrc-\(width)x\(height).y4m" }

    /// Encodes the clip and returns frames per second of encoder time, measured around the
    /// encode calls as vpxenc measures its own (file reading and writing are outside).
    func encodeWithCallend(clip: String, configuration: VP8EncoderConfiguration, output: String) throws -> Double {
        let reader = try Y4MReader(path: clip)
        let encoder = try VP8Encoder(configuration: configuration)
        let writer = try IVFWriter(path: output, width: configuration.width, height: configuration.height,
                                   timebaseDenominator: configuration.frameRate)
        let clock = MonotonicClock()
        var encodeTime = Duration.zero
        var count = 0
        while let frame = try reader.readFrame() {
            let start = clock.now
            let encoded = try encoder.encode(frame)
            encodeTime += clock.now - start
            for e in encoded { try writer.write(e.data, pts: UInt64(count)) }
            count += 1
        }
        try writer.close()
        return Double(count) / encodeTime.inSeconds
    }

    func encodeWithVpxenc(clip: String, configuration: VP8EncoderConfiguration, output: String) throws -> Double {
        let result = try ExternalTool.run("vpxenc", configuration.vpxencArguments + ["--ivf", "--limit=\(options.frames)", "-o", output, clip])
        // The last progress line ends "... (123.45 fps)".
        guard let range = result.output.range(of: #"\(([0-9.]+) fps\)"#, options: [.regularExpression, .backwards]),
              let fps = Double(result.output[range].dropFirst().split(separator: " ")[0]) else {
            throw ExternalTool.Failure(description: "could not read vpxenc's fps from its output:\n\(result.output.suffix(400))")
        }
        return fps
    }

    /// Mean per-frame PSNR (all planes) of the IVF decoded by our decoder against the source,
    /// and the stream's bitrate at 30 fps. Both encoders' outputs go through the same measure.
    func measure(ivf: String, against clip: String) throws -> (psnr: Double, bitrate: Double) {
        let source = try Y4MReader(path: clip)
        let reader = try IVFReader(path: ivf)
        let decoder = try VP8Decoder()
        var total = 0.0, frames = 0, bytes = 0
        while let (data, _) = try reader.readFrame() {
            bytes += data.count
            guard let decoded = try decoder.decode(data), let original = try source.readFrame() else { continue }
            total += try decoded.psnr(against: original)
            frames += 1
        }
        guard frames > 0 else { throw ExternalTool.Failure(description: "\(ivf) holds no frames") }
        return (total / Double(frames), Double(bytes * 8) * source.frameRate / Double(frames))
    }

    // MARK: Opus

    func benchAudio(dir: String) throws -> [AudioRow] {
        let wav = "\(dir)/music.wav"
        let seconds = options.audioSeconds
        log("making \(wav) (\(seconds) s stereo: a chord over pink noise)")
        try ExternalTool.run("ffmpeg", ["-v", "error", "-y",
                                        "-f", "lavfi", "-i", "aevalsrc=0.2*sin(2*PI*220*t)+0.1*sin(2*PI*330*t)+0.05*sin(2*PI*440*t*(1+0.01*sin(2*PI*t))):s=48000:d=\(seconds)",
                                        "-f", "lavfi", "-i", "anoisesrc=color=pink:sample_rate=48000:amplitude=0.05:duration=\(seconds)",
                                        "-filter_complex", "[0][1]amerge=inputs=2", "-c:a", "pcm_s16le", wav])
        let reader = try WAVReader(path: wav)
        var samples: [Int16] = []
        while let chunk = reader.read(samplesPerChannel: 48_000) { samples += chunk }
        let frame = 960 * 2
        let usable = samples.count / frame * frame

        var ourEncode: [Double] = [], theirEncode: [Double] = [], ourDecode: [Double] = [], theirDecode: [Double] = []
        let clock = MonotonicClock()
        let audioSeconds = Double(usable / 2) / 48_000
        for _ in 0..<options.repetitions {
            let encoder = try OpusEncoder(channels: 2, application: .audio, bitrate: 96_000, complexity: 10)
            var packets: [[UInt8]] = []
            packets.reserveCapacity(usable / frame)
            var start = clock.now
            for offset in stride(from: 0, to: usable, by: frame) {
                packets.append(try encoder.encode(Array(samples[offset..<(offset + frame)])))
            }
            ourEncode.append(audioSeconds / (clock.now - start).inSeconds)

            let decoder = try OpusDecoder(channels: 2)
            start = clock.now
            for packet in packets { _ = try decoder.decode(packet) }
            ourDecode.append(audioSeconds / (clock.now - start).inSeconds)

            let opus = "\(dir)/music.opus"
            let enc = try ExternalTool.run("opusenc", ["--quiet", "--bitrate", "96", "--comp", "10", "--framesize", "20", wav, opus])
            theirEncode.append(audioSeconds / enc.wallTime.inSeconds)
            let dec = try ExternalTool.run("opusdec", ["--quiet", opus, "\(dir)/decoded.wav"])
            theirDecode.append(audioSeconds / dec.wallTime.inSeconds)
        }
        return [AudioRow(operation: "encode", ourRealtime: median(ourEncode), theirRealtime: median(theirEncode)),
                AudioRow(operation: "decode", ourRealtime: median(ourDecode), theirRealtime: median(theirDecode))]
    }

    // MARK: Report

    public static func report(video: [VideoRow], h264: [H264Row] = [], audio: [AudioRow], configurationNote: String) -> String {
        var lines: [String] = []
        lines.append("VP8: callend VP8Encoder vs vpxenc (libvpx \(CodecLibraries.vpxVersion)), same settings:")
        lines.append("  \(configurationNote)")
        lines.append("  target bitrate per clip: " + video.map { "\($0.size) \($0.targetBitrate / 1000) kbit/s" }.joined(separator: ", "))
        lines.append("  fps = frames per second of encode calls (vpxenc's own figure); PSNR = mean per-frame, all planes, both decoded by the same decoder")
        lines.append(pad(["clip", "encoder", "fps", "PSNR dB", "kbit/s"]))
        for r in video {
            lines.append(pad([r.size, "callend", format(r.ourFPS, 1), format(r.ourPSNR, 2), format(r.ourBitrate / 1000, 1)]))
            lines.append(pad([r.size, "vpxenc", format(r.theirFPS, 1), format(r.theirPSNR, 2), format(r.theirBitrate / 1000, 1)]))
            lines.append(pad([r.size, "ratio", format(r.fpsRatio, 3) + "x", (r.psnrDelta >= 0 ? "+" : "") + format(r.psnrDelta, 2),
                              format(r.bitrateRatio, 3) + "x"]))
        }
        lines += reportH264(h264)
        lines.append("")
        lines.append("Opus (\(CodecLibraries.opusVersion)): stereo 48 kHz, 96 kbit/s VBR, complexity 10, 20 ms frames, in times realtime")
        lines.append("  callend = codec calls only; opusenc/opusdec = whole process wall time (file I/O and Ogg included)")
        lines.append(pad(["operation", "callend", "opus-tools", "ratio"]))
        for r in audio {
            lines.append(pad([r.operation, format(r.ourRealtime, 0) + "x", format(r.theirRealtime, 0) + "x", format(r.ratio, 2)]))
        }
        lines.append("")
        let met = video.allSatisfy(\.meetsTargets)
        lines.append("VP8 targets (fps ratio ≥ 0.95, |ΔPSNR| ≤ 0.2 dB, bitrate within 5 %): \(met ? "met" : "NOT met")")
        return lines.joined(separator: "\n")
    }

    static func pad(_ columns: [String]) -> String {
        let widths = [12, 13, 12, 10, 10]
        return "  " + zip(columns, widths).map { $0.padding(toLength: max($1, $0.count + 1), withPad: " ", startingAt: 0) }.joined()
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func format(_ value: Double, _ decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}

/// The settings line the codec bench prints: the exact vpxenc arguments both sides used.
public enum VP8EncoderSettingsNote {
    public static var text: String {
        VP8EncoderConfiguration(width: 640, height: 480).vpxencArguments
            .filter { !$0.hasPrefix("--target-bitrate") }.joined(separator: " ")
    }
}
