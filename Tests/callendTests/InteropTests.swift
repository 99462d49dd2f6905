import Codecs
import MediaCore
import Foundation
import RTPTransport
import Testing
import TestSupport

/// An even port P with P and P+2 free for UDP on loopback (video and audio).
func freePortPair() throws -> Int {
    for _ in 0..<50 {
        let probe = try UDPSocket(bindHost: "127.0.0.1", port: 0)
        let port = probe.localPort & ~1
        probe.close()
        guard port > 1024, port < 65000 else { continue }
        if let a = try? UDPSocket(bindHost: "127.0.0.1", port: port), let b = try? UDPSocket(bindHost: "127.0.0.1", port: port + 2) {
            a.close()
            b.close()
            return port
        }
    }
    throw CocoaError(.fileWriteUnknown)
}

/// Waits (up to `seconds`) until something listens on each UDP port (read from /proc/net/udp),
/// so a receiver started in another process is ready before anything is sent to it.
func waitForUDPListeners(_ ports: [Int], seconds: Double = 10) -> Bool {
    eventually(seconds) {
        let table = ((try? String(contentsOfFile: "/proc/net/udp", encoding: .utf8)) ?? "").uppercased()
        return ports.allSatisfy { table.contains(String(format: ":%04X ", $0)) }
    }
}

final class WorkDirectory {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("callend-interop-\(UUID().uuidString)").path
    init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
    func file(_ name: String) -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Starts an outside tool; the caller stops or waits for it.
func launch(_ tool: String, _ arguments: [String]) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/" + tool)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    try process.run()
    return process
}

/// Waits up to `seconds` for a process to end; interrupts (SIGINT) and then kills it if it does not.
func finish(_ process: Process, within seconds: Double) {
    if !eventually(seconds, { !process.isRunning }) {
        process.interrupt()
        eventually(3) { !process.isRunning }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
    process.waitUntilExit()
}

/// Waits until `done` holds, or the file has not grown for two seconds (its writer has stopped),
/// or 30 s have passed.
func waitWhileGrowing(_ path: String, until done: () -> Bool) {
    let deadline = Date().addingTimeInterval(30)
    var (size, grewAt) = (-1, Date())
    while Date() < deadline, !done() {
        let now = fileSize(path)
        if now != size { (size, grewAt) = (now, Date()) }
        if Date().timeIntervalSince(grewAt) > 2 { return }
        usleep(50_000)
    }
}

func fileSize(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0 }

func countY4MFrames(_ path: String) -> Int {
    guard let reader = try? Y4MReader(path: path) else { return 0 }
    var count = 0
    while (try? reader.readFrame()) != nil, reader.framesRead > count { count = reader.framesRead }
    return count
}

func wavSeconds(_ path: String) -> Double {
    guard let reader = try? WAVReader(path: path) else { return 0 }
    var samples = 0
    while let chunk = reader.read(samplesPerChannel: 4800) { samples += chunk.count / reader.channels }
    return Double(samples) / Double(reader.sampleRate)
}

/// "video N frames" from `callend send`'s statistics line.
func framesSent(_ output: String) -> Int? {
    guard let range = output.range(of: #"video (\d+) frames"#, options: .regularExpression) else { return nil }
    return Int(output[range].split(separator: " ")[1])
}

func framesDecoded(_ output: String) -> Int? {
    guard let range = output.range(of: #"(\d+) frames decoded"#, options: .regularExpression) else { return nil }
    return Int(output[range].split(separator: " ")[0])
}

/// `callend receive --sdp SDP` with `outputs`, for at most 15 s; once it listens on `ports`,
/// `sender` starts the sending tool, which is given 15 s to end. Returns the receiver's summary.
func callendReceive(sdp: String, outputs: [String], ports: [Int], sender: () throws -> Process) throws -> String {
    let receiver = Process()
    receiver.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("callend")
    receiver.arguments = ["receive", "--sdp", sdp] + outputs + ["--duration", "15"]
    let out = Pipe()
    (receiver.standardOutput, receiver.standardError) = (out, FileHandle.nullDevice)
    try receiver.run()
    #expect(waitForUDPListeners(ports), "callend receive listens")
    finish(try sender(), within: 15)
    finish(receiver, within: 10)
    return String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
}

@Suite(.serialized) struct InteropTests {
    @Test func gstreamerDecodesWhatCallendSends() throws {
        let dir = try WorkDirectory()
        let port = try freePortPair()
        let video = dir.file("gst.y4m"), audio = dir.file("gst.wav")
        let gst = try launch("gst-launch-1.0", ["-e", "-q",
            "udpsrc", "port=\(port)", "caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=VP8,payload=96",
            "!", "rtpjitterbuffer", "latency=200", "!", "rtpvp8depay", "!", "vp8dec", "!", "y4menc", "!", "filesink", "location=\(video)",
            "udpsrc", "port=\(port + 2)", "caps=application/x-rtp,media=audio,clock-rate=48000,encoding-name=OPUS,payload=111",
            "!", "rtpjitterbuffer", "latency=200", "!", "rtpopusdepay", "!", "opusdec", "!", "audioconvert", "!", "wavenc", "!", "filesink", "location=\(audio)"])
        #expect(waitForUDPListeners([port, port + 2]), "gst-launch listens")
        let sent = try runCallend(["send", "--to", "127.0.0.1:\(port)", "--duration", "4"])
        #expect(sent.status == 0, "\(sent.stderr)")
        let total = try #require(framesSent(sent.stdout))
        // GStreamer writes as it decodes: wait until the file holds what was sent (or stops
        // growing), then end it (EOS flushes its jitter buffers and finishes the WAV header).
        waitWhileGrowing(video, until: { countY4MFrames(video) >= total })
        finish(gst, within: 0)
        let decoded = countY4MFrames(video)
        #expect(Double(decoded) >= 0.98 * Double(total), "GStreamer decoded \(decoded) of \(total) frames")
        #expect(wavSeconds(audio) > 3.5, "GStreamer decoded \(wavSeconds(audio)) s of Opus")
    }

    @Test(arguments: [false, true])
    func ffmpegDecodesFromOurSDP(srtp: Bool) throws {
        let dir = try WorkDirectory()
        let port = try freePortPair()
        let sdp = dir.file("stream.sdp"), video = dir.file("ff.y4m"), audio = dir.file("ff.wav")
        let key = srtp ? Data((0..<30).map { UInt8($0 * 7 & 0xff) }).base64EncodedString() : nil
        // Write the SDP first (a one-second send nobody listens to), then start ffmpeg, then send.
        var sdpArgs = ["send", "--to", "127.0.0.1:\(port)", "--sdp-out", sdp, "--duration", "1"]
        if let key { sdpArgs += ["--srtp-key", key] }
        _ = try runCallend(sdpArgs)
        let text = try String(contentsOfFile: sdp, encoding: .utf8)
        #expect(text.contains("RTP/\(srtp ? "SAVP" : "AVP") 96") && text.contains("a=rtpmap:111 opus/48000/2"))
        #expect(text.contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:") == srtp)
        // Each decoded picture written once (passthrough): when its stream probe ends before two
        // frames have arrived (a busy machine), ffmpeg guesses the RTP clock's 90000 fps for the
        // Y4M file and fills it with copies, gigabytes of them, never reaching the 3 s of audio.
        let ffmpeg = try launch("ffmpeg", ["-v", "error", "-protocol_whitelist", "file,udp,rtp", "-i", sdp,
                                           "-map", "0:v", "-fps_mode", "passthrough", "-y", video, "-map", "0:a", "-t", "3", "-y", audio])
        #expect(waitForUDPListeners([port, port + 2]), "ffmpeg listens")
        // Two seconds more than ffmpeg keeps of the sound, and time to finish: on a loaded machine (the
        // whole suite in parallel) ffmpeg once had not written its audio file 5 s after a 4 s send.
        var args = ["send", "--to", "127.0.0.1:\(port)", "--duration", "5"]
        if let key { args += ["--srtp-key", key] }
        let sent = try runCallend(args)
        #expect(sent.status == 0, "\(sent.stderr)")
        // ffmpeg keeps every picture (the stream has no end it could see): once its file holds
        // what was sent, or stops growing, it is interrupted, and finishes its files. (It kept
        // 3 s of the 5 s before, judged against 3/5 of what was sent: on a loaded machine the
        // sender's starved pattern source skips pictures unevenly, and the first 3 s held 60
        // where 3/5 was 66.)
        let total = try #require(framesSent(sent.stdout))
        waitWhileGrowing(video, until: { countY4MFrames(video) >= total })
        finish(ffmpeg, within: 0)
        let decoded = countY4MFrames(video)
        #expect(Double(decoded) >= 0.98 * Double(total), "ffmpeg decoded \(decoded) of \(total) frames (srtp: \(srtp))")
        #expect(wavSeconds(audio) > 2.9, "ffmpeg decoded \(wavSeconds(audio)) s of Opus (srtp: \(srtp))")
    }

    @Test func callendDecodesWhatGStreamerSends() throws {
        let dir = try WorkDirectory()
        let port = try freePortPair()
        let sdp = dir.file("gst.sdp"), video = dir.file("in.y4m"), audio = dir.file("in.wav")
        try """
            v=0\r
            o=- 1 1 IN IP4 127.0.0.1\r
            s=gstreamer\r
            c=IN IP4 127.0.0.1\r
            t=0 0\r
            m=video \(port) RTP/AVP 96\r
            a=rtpmap:96 VP8/90000\r
            m=audio \(port + 2) RTP/AVP 111\r
            a=rtpmap:111 OPUS/48000/2\r

            """.write(toFile: sdp, atomically: true, encoding: .utf8)
        let summary = try callendReceive(sdp: sdp, outputs: ["--video-out", video, "--audio-out", audio], ports: [port, port + 2]) {
            try launch("gst-launch-1.0", ["-q",
                "videotestsrc", "num-buffers=150", "is-live=true", "pattern=ball", "!", "video/x-raw,width=320,height=240,framerate=30/1",
                "!", "vp8enc", "deadline=1", "target-bitrate=600000", "!", "rtpvp8pay", "pt=96", "!", "udpsink", "host=127.0.0.1", "port=\(port)",
                "audiotestsrc", "num-buffers=250", "is-live=true", "samplesperbuffer=960", "!", "audio/x-raw,rate=48000,channels=2",
                "!", "opusenc", "!", "rtpopuspay", "pt=111", "!", "udpsink", "host=127.0.0.1", "port=\(port + 2)"])
        }
        let decoded = framesDecoded(summary) ?? 0
        #expect(decoded >= 147, "callend decoded \(decoded) of GStreamer's 150 frames: \(summary)")
        #expect(countY4MFrames(video) == decoded)
        #expect(wavSeconds(audio) > 4, "audio: \(summary)")
    }

    /// H.264 both ways with GStreamer through SDP files alone (no VP8 on either side): callend's
    /// OpenH264 stream decoded by avdec_h264, and GStreamer's openh264enc decoded by callend.
    /// (avdec_h264 renders into libav's padded pictures unless told not to, and y4menc 1.22
    /// writes their padding into the file.)
    @Test func gstreamerAndCallendExchangeH264() throws {
        let dir = try WorkDirectory()
        var port = try freePortPair()
        let video = dir.file("gst.y4m")
        let gst = try launch("gst-launch-1.0", ["-e", "-q",
            "udpsrc", "port=\(port)", "caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=H264,payload=102",
            "!", "rtpjitterbuffer", "latency=200", "!", "rtph264depay", "!", "avdec_h264", "direct-rendering=false", "!", "y4menc", "!", "filesink", "location=\(video)"])
        #expect(waitForUDPListeners([port]), "gst-launch listens")
        let sent = try runCallend(["send", "--to", "127.0.0.1:\(port)", "--video-codec", "h264", "--video-size", "320x240", "--audio-source", "none", "--duration", "4"])
        #expect(sent.status == 0, "\(sent.stderr)")
        let total = try #require(framesSent(sent.stdout))
        waitWhileGrowing(video, until: { countY4MFrames(video) >= total })
        finish(gst, within: 0)
        let decoded = countY4MFrames(video)
        #expect(total >= 100 && Double(decoded) >= 0.98 * Double(total), "GStreamer decoded \(decoded) of callend's \(total) H.264 frames; the file: \(fileSize(video)) bytes")

        port = try freePortPair()
        let sdp = dir.file("gst.sdp"), received = dir.file("in.y4m")
        try ["v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=gstreamer", "c=IN IP4 127.0.0.1", "t=0 0", "m=video \(port) RTP/AVP 102",
             "a=rtpmap:102 H264/90000", "a=fmtp:102 packetization-mode=1;profile-level-id=42e01f", ""].joined(separator: "\r\n")
            .write(toFile: sdp, atomically: true, encoding: .utf8)
        let summary = try callendReceive(sdp: sdp, outputs: ["--video-out", received], ports: [port]) {
            try launch("gst-launch-1.0", ["-q",
                "videotestsrc", "num-buffers=150", "is-live=true", "pattern=ball", "!", "video/x-raw,width=320,height=240,framerate=30/1",
                "!", "openh264enc", "bitrate=600000", "gop-size=60", "!", "rtph264pay", "pt=102", "config-interval=-1", "!", "udpsink", "host=127.0.0.1", "port=\(port)"])
        }
        let got = framesDecoded(summary) ?? 0
        #expect(got >= 147, "callend decoded \(got) of GStreamer's 150 H.264 frames: \(summary)")
        #expect(countY4MFrames(received) == got)
    }

    /// H.264 into an .ivf file is refused (IVF holds VP8 here), as is a codec send does not have.
    @Test func h264CommandLinesThatCannotWork() throws {
        let dir = try WorkDirectory()
        let sdp = dir.file("h264.sdp")
        try ["v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=x", "c=IN IP4 127.0.0.1", "t=0 0", "m=video 5004 RTP/AVP 102",
             "a=rtpmap:102 H264/90000", "a=fmtp:102 packetization-mode=1;profile-level-id=42e01f", ""].joined(separator: "\r\n")
            .write(toFile: sdp, atomically: true, encoding: .utf8)
        let ivf = try runCallend(["receive", "--sdp", sdp, "--video-out", dir.file("x.ivf"), "--duration", "1"])
        #expect(ivf.status != 0 && ivf.stderr.contains("write the pictures to a .y4m file"), "\(ivf.status) \(ivf.stderr)")
        let auto = try runCallend(["send", "--to", "127.0.0.1:9", "--video-codec", "auto"])
        #expect(auto.status == 2 && auto.stderr.contains("send's --video-codec takes vp8 or h264"), "\(auto.stderr)")
        // A camera's own H.264 is asked of a camera, by its four-character name.
        let noCamera = try runCallend(["join", "r", "--token", "t", "--pixel-format", "H264"])
        #expect(noCamera.status == 2 && noCamera.stderr.contains("--pixel-format applies to --camera only"), "\(noCamera.stderr)")
        let badName = try runCallend(["join", "r", "--token", "t", "--camera", "/dev/video99", "--pixel-format", "H.264"])
        #expect(badName.status == 2 && badName.stderr.contains("takes a FourCC such as YUYV, MJPG, NV12 or H264"), "\(badName.stderr)")
        // The kernel's H.264 encoder: a device that is one, for a run that sends H.264.
        for command in [["join", "r", "--token", "t"], ["publish", "https://127.0.0.1:9/whip"], ["janus", "publish", "http://127.0.0.1:9/janus", "--room", "1"]] {
            let notOne = try runCallend(command + ["--video-codec", "h264", "--h264-encoder", "/dev/null"])
            #expect(notOne.status == 2 && notOne.stderr.contains("--h264-encoder /dev/null: not a memory-to-memory device that encodes H.264"), "\(command[0]): \(notOne.stderr)")
        }
        let vp8 = try runCallend(["join", "r", "--token", "t", "--h264-encoder", "/dev/video11"])
        #expect(vp8.status == 2 && vp8.stderr.contains("--h264-encoder makes H.264: give --video-codec h264 or auto"), "\(vp8.stderr)")
        let openH264 = try runCallend(["join", "r", "--token", "t", "--video-codec", "h264", "--h264-encoder", "openh264", "--server", "tcp://127.0.0.1:9", "--duration", "1", "--no-stdin"])
        #expect(!openH264.stderr.contains("--h264-encoder"), "openh264 is the default's name: \(openH264.stderr)")
    }

    @Test func callendDecodesWhatFFmpegSends() throws {
        let dir = try WorkDirectory()
        let port = try freePortPair()
        let sdp = dir.file("ffmpeg.sdp"), video = dir.file("in.ivf")
        func ffmpegSend(frames: Int) throws -> Process {
            try launch("ffmpeg", ["-v", "error", "-re", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-f", "lavfi", "-i", "sine=frequency=500:sample_rate=48000",
                                  "-map", "0:v", "-frames:v", "\(frames)", "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "600k", "-payload_type", "96",
                                  "-f", "rtp", "rtp://127.0.0.1:\(port)",
                                  "-map", "1:a", "-t", "\(Double(frames) / 30)", "-c:a", "libopus", "-payload_type", "111", "-f", "rtp", "rtp://127.0.0.1:\(port + 2)",
                                  "-sdp_file", sdp])
        }
        // ffmpeg writes its SDP when it starts: a short first run makes it.
        finish(try ffmpegSend(frames: 3), within: 5)
        let text = try String(contentsOfFile: sdp, encoding: .utf8)
        #expect(text.contains("VP8/90000"))
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("callend")
        receiver.arguments = ["receive", "--sdp", sdp, "--video-out", video, "--duration", "15"]
        let out = Pipe()
        receiver.standardOutput = out
        receiver.standardError = FileHandle.nullDevice
        try receiver.run()
        #expect(waitForUDPListeners([port, port + 2]), "callend receive listens")
        finish(try ffmpegSend(frames: 150), within: 12)
        finish(receiver, within: 10)
        let summary = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let decoded = framesDecoded(summary) ?? 0
        #expect(decoded >= 147, "callend decoded \(decoded) of ffmpeg's 150 frames: \(summary)")
        let ivf = try IVFReader(path: video)
        #expect(ivf.header.width == 320 && ivf.header.height == 240)
    }
}

@Suite(.serialized) struct CaptureTests {
    /// Packets captured from ffmpeg's RTP muxer (VP8 RTP on P, its RTCP sender reports on P+1,
    /// as ffmpeg sends them without rtcp-mux) parse, and serialize back to the same bytes.
    @Test func ffmpegPacketsParseAndRoundTrip() throws {
        let port = try freePortPair()
        let rtp = try UDPSocket(bindHost: "127.0.0.1", port: port)
        let rtcp = try UDPSocket(bindHost: "127.0.0.1", port: port + 1)
        let captured = CaptureBox()
        rtp.startReceiving(name: "capture-rtp") { bytes, _, _ in captured.add(bytes, rtcp: false) }
        rtcp.startReceiving(name: "capture-rtcp") { bytes, _, _ in captured.add(bytes, rtcp: true) }
        let ffmpeg = try launch("ffmpeg", ["-v", "error", "-re", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-frames:v", "90",
                                           "-c:v", "libvpx", "-deadline", "realtime", "-b:v", "400k", "-f", "rtp", "rtp://127.0.0.1:\(port)"])
        finish(ffmpeg, within: 10)
        // Loopback delivers at once, but the receive threads may not have read it all yet.
        eventually(10) { captured.contents.0.count > 90 && !captured.contents.1.isEmpty }
        rtp.close()
        rtcp.close()
        let (media, reports) = captured.contents
        #expect(media.count > 90 && !reports.isEmpty, "captured \(media.count) RTP and \(reports.count) RTCP packets")
        var frames = 0
        for bytes in media {
            let packet = try RTPPacket(parsing: bytes)
            #expect(packet.serialized() == bytes)
            let fragment = try VP8PayloadFragment(parsing: packet.payload)
            if fragment.isFrameStart { frames += 1 }
        }
        #expect(frames == 90)
        for bytes in reports {
            let packets = try RTCPPacket.parseCompound(bytes)
            #expect(RTCPPacket.serializeCompound(packets) == bytes)
            #expect(packets.contains { if case .senderReport = $0 { return true }; return false })
        }
    }
}

final class CaptureBox: Sendable {
    private let store = Mutex<([[UInt8]], [[UInt8]])>(([], []))
    func add(_ bytes: [UInt8], rtcp: Bool) { store.withLock { rtcp ? $0.1.append(bytes) : $0.0.append(bytes) } }
    var contents: ([[UInt8]], [[UInt8]]) { store.withLock { $0 } }
}

import Synchronization
