import Foundation
import Testing
import TestSupport

/// `callend serve` on a loopback port (0: any free one) and the port it took.
func startServe(_ secret: SecretFile, port: Int = 0, _ extra: [String] = []) throws -> (Process, Int) {
    let (server, out, _) = try launchCallend(["serve", "--listen", "127.0.0.1:\(port)", "--secret-file", secret.path] + extra)
    let first = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
    return (server, try #require(Int(first.split(separator: ":").last?.split(separator: " ").first ?? "")))
}

/// Starts `callend join` and returns once it has joined (its "joined room" log line), so that
/// the order of two launches is the order of the joins (the one who joins second offers).
func launchJoined(_ arguments: [String], environment: [String: String] = [:], input: Pipe? = nil,
                  sourceLocation: SourceLocation = #_sourceLocation) throws -> (process: Process, out: StreamCollector, log: StreamCollector) {
    let (process, out, err) = try launchCallend(arguments, environment: environment, input: input)
    let (outText, log) = (StreamCollector(out), StreamCollector(err))
    #expect(log.wait(for: "joined room", seconds: 30), "no join: \(log.text)", sourceLocation: sourceLocation)
    return (process, outText, log)
}

/// From a join's summary line: frames this side decoded, and frames it sent.
func joinSummary(_ text: String) -> (decoded: Int, sent: Int) {
    func number(_ pattern: String) -> Int {
        guard let range = text.range(of: pattern, options: .regularExpression) else { return 0 }
        return Int(text[range].split(separator: " ").first { Int($0) != nil } ?? "") ?? 0
    }
    return (number(#"video \d+ frames decoded"#), number(#"sent \d+ frames"#))
}

/// A token from `callend token` for `who` in `room`.
func token(_ who: String, _ secret: SecretFile, room: String = "r") throws -> String {
    try runCallend(["token", "--room", room, "--identity", who, "--secret-file", secret.path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite(.serialized) struct JoinTests {
    /// `callend serve` and two `callend join` processes on loopback: both sides decode the other's video.
    @Test func twoJoinProcessesCallEachOtherThroughServe() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--duration", "4"]
        let a = try launchJoined(["join", "call", "--token", try token("roof", secret, room: "call")] + common)
        let b = try launchJoined(["join", "call"] + common, environment: ["CALLEND_TOKEN": try token("bench", secret, room: "call")])
        a.process.waitUntilExit()
        b.process.waitUntilExit()
        let (aText, bText) = (a.out.finalText, b.out.finalText)
        #expect(a.process.terminationStatus == 0 && b.process.terminationStatus == 0, "\(aText) \(bText)")
        for (text, peerText, peer) in [(aText, bText, "bench"), (bText, aText, "roof")] {
            #expect(text.contains("<- \(peer)"), "\(text)")
            // Not on a terminal: one JSON stats object per second before the summary.
            let stats = text.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            #expect(stats.count >= 2, "\(text)")
            #expect(stats.contains { $0["receivedFps"] as? Double ?? 0 > 0 && $0["resolution"] as? String == "320x240" }, "\(stats)")
            // What the peer sent arrived: judged against what it sent, not a frame rate.
            let (decoded, sent) = (joinSummary(text).decoded, joinSummary(peerText).sent)
            #expect(sent > 0 && Double(decoded) >= 0.9 * Double(sent), "decoded \(decoded) of the \(sent) frames \(peer) sent: \(text)")
        }
    }

    /// The same in H.264: one side takes H.264 only, the other offers both (auto, VP8 first);
    /// the call is H.264, and each side decodes what the other sent.
    @Test func twoJoinProcessesCallInH264() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--duration", "4"]
        let a = try launchJoined(["join", "call", "--token", try token("roof", secret, room: "call"), "--video-codec", "h264"] + common)
        let b = try launchJoined(["join", "call", "--token", try token("bench", secret, room: "call"), "--video-codec", "auto"] + common)
        a.process.waitUntilExit()
        b.process.waitUntilExit()
        let (aText, bText) = (a.out.finalText, b.out.finalText)
        #expect(a.process.terminationStatus == 0 && b.process.terminationStatus == 0, "\(aText) \(bText)")
        for (text, log, peerText) in [(aText, a.log.text, bText), (bText, b.log.text, aText)] {
            #expect(log.contains("video H264 with ULPFEC in RED sendrecv"), "\(log)")
            let (decoded, sent) = (joinSummary(text).decoded, joinSummary(peerText).sent)
            #expect(sent > 0 && Double(decoded) >= 0.9 * Double(sent), "decoded \(decoded) of the \(sent) frames sent: \(text)")
        }
    }

    @Test func badJoinCommandLines() throws {
        let cases: [([String], String)] = [
            (["join"], "join needs a ROOM"),
            (["join", "lab"], "join needs --token"),
            (["join", "lab", "--token", "t", "--encoding", "fast"], "--encoding takes auto or manual"),
            (["join", "lab", "--token", "t", "--encoding", "auto", "--max-video-bitrate", "500000"], "cannot take EncodingParameters"),
            (["join", "lab", "--token", "t", "--server", "nowhere"], "HOST:PORT"),
            (["demo", "--seconds", "0"], "--seconds takes"),
            (["join", "lab", "--token", "t", "--camera", "/dev/video0", "--video-source", "clip.y4m"], "alternatives"),
            (["join", "lab", "--token", "t", "--mic", "default", "--audio-source", "none"], "alternatives"),
            (["join", "lab", "--token", "t", "--speaker", "default", "--audio-out", "x.wav"], "alternatives"),
            (["join", "lab", "--token", "t", "--pixel-format", "YUYV"], "--camera only"),
            (["join", "lab", "--token", "t", "--camera", "/dev/video0", "--pixel-format", "YUV"], "FourCC"),
            (["join", "lab", "--token", "t", "--video-out", "x.mp4"], ".y4m, .ivf or .ppm"),
            (["join", "lab", "--token", "t", "--video-codec", "vp9"], "--video-codec takes vp8, h264 or auto"),
            (["join", "lab", "--token", "t", "--video-codec", "h264", "--record-dir", "/tmp/x"], "does not go with --record-dir"),
            (["join", "lab", "--token", "t", "--video-codec", "h264", "--video-out", "x.ivf"], "does not go with --video-out F.ivf"),
            (["join", "lab", "--token", "t", "--video-codec", "h264", "--mesh"], "does not go with --mesh"),
            (["publish", "http://127.0.0.1:9/whip", "--video-codec", "h265"], "--video-codec takes vp8, h264 or auto"),
        ]
        for (arguments, message) in cases {
            let result = try runCallend(arguments)
            #expect(result.status == 2, "\(arguments) exited \(result.status)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        // A token the server refuses ends the call with exit code 1 and the reason.
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let refused = try runCallend(["join", "lab", "--token", "a.b.c", "--server", "127.0.0.1:\(port)", "--duration", "2"])
        #expect(refused.status == 1 && refused.stderr.contains("token_"), "\(refused.stderr)")
        // Devices are opened before joining: a missing camera or microphone fails at once, by name.
        let noCamera = try runCallend(["join", "lab", "--token", "t", "--server", "127.0.0.1:\(port)", "--camera", "/dev/callend-no-camera"])
        #expect(noCamera.status == 1 && noCamera.stderr.contains("/dev/callend-no-camera"), "\(noCamera.stderr)")
        let noMic = try runCallend(["join", "lab", "--token", "t", "--server", "127.0.0.1:\(port)", "--mic", "callend-no-such-pcm"])
        #expect(noMic.status == 1 && noMic.stderr.contains("callend-no-such-pcm"), "\(noMic.stderr)")
    }

    /// A call endpoint maps FoundationEssentials and no Foundation, FoundationInternationalization
    /// or Foundation's ICU (the memory they cost, issue 33), nor libavformat when it records
    /// nothing (--record-dir loads it); the benches, which use them, run as
    /// callend-bench beside it, and callend without it says so.
    @Test func anEndpointMapsNoFoundationAndTheBenchesRunBeside() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let (join, _, _) = try launchJoined(["join", "lean", "--token", try token("a", secret, room: "lean"), "--server", "127.0.0.1:\(port)",
                                             "--video-size", "320x240", "--no-stdin", "--duration", "30"])
        defer { terminate(join) }
        // Read to its end: /proc gives the file a size of 0.
        let maps = String(decoding: try #require(FileHandle(forReadingAtPath: "/proc/\(join.processIdentifier)/maps")).readDataToEndOfFile(), as: UTF8.self)
        #expect(maps.contains("libvpx") && maps.contains("libFoundationEssentials"), "the maps are read: \(maps.count) bytes")
        for library in ["libFoundation.so", "libFoundationInternationalization", "_FoundationICU", "libavformat", "libavcodec"] {
            #expect(!maps.contains(library), "a call endpoint maps \(library)")
        }
        terminate(join)

        let alone = try ScratchFolder()
        let copy = alone.path + "/callend"
        try FileManager.default.copyItem(atPath: URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("callend").path, toPath: copy)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: copy)
        process.arguments = ["bench", "rtp", "--packets", "1000"]
        let err = Pipe()
        (process.standardOutput, process.standardError) = (FileHandle.nullDevice, err)
        try process.run()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 2 && message.contains("callend-bench, which is not installed beside callend"), "\(message)")
        let beside = try runCallend(["bench", "rtp", "--packets", "1000"])
        #expect(beside.status == 0 && beside.stdout.contains("plain RTP"), "\(beside.stderr)")
    }

    /// Commands reach a running join from its control socket and from standard input; replies
    /// are JSON lines; 'leave' ends the call with exit code 0.
    @Test func controlSocketAndStandardInputDriveARunningCall() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let socketPath = FileManager.default.temporaryDirectory.appendingPathComponent("callend-ctl-\(getpid()).sock").path
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--duration", "30"]
        let input = Pipe()
        let (a, aLog, _) = try launchJoined(["join", "ctl", "--token", try token("a", secret, room: "ctl"), "--control", socketPath] + common, input: input)
        let (b, bLog, _) = try launchJoined(["join", "ctl", "--token", try token("b", secret, room: "ctl"), "--no-stdin"] + common)
        defer { terminate(a); terminate(b) }
        #expect(aLog.wait(for: #""receivedFps""#, seconds: 10), "stats lines: \(aLog.text)")
        let client = try UnixClient(path: socketPath)
        client.send("camera pattern 160x120@15\nstats\nfly\n")
        let replies = client.readLines(3)
        #expect(replies.count == 3)
        #expect(replies.first?.contains(#""ok":true"#) == true && replies.first?.contains(#""size":"160x120""#) == true, "\(replies)")
        #expect(replies.dropFirst().first?.contains(#""status""#) == true)
        #expect(replies.last?.contains(#""ok":false"#) == true)
        #expect(bLog.wait(for: #""resolution":"160x120""#, seconds: 5), "b receives the new mode: \(bLog.text.suffix(400))")
        input.fileHandleForWriting.write(Data("mute video\n".utf8))
        #expect(aLog.wait(for: #""command":"mute""#, seconds: 3))
        input.fileHandleForWriting.write(Data("leave\n".utf8))
        eventually(5) { !a.isRunning }
        #expect(!a.isRunning && a.terminationStatus == 0)
        #expect(aLog.text.contains("ended: stopped"), "\(aLog.text.suffix(300))")
        #expect(!FileManager.default.fileExists(atPath: socketPath), "the socket file is removed")
    }
}

/// Reads a pipe on its own thread so a test can wait for a line with a deadline.
final class StreamCollector: @unchecked Sendable {  // `buffer` is guarded by `lock`
    private var buffer = ""
    private let lock = NSLock()

    private let ended = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        Thread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                lock.lock()
                buffer += String(decoding: data, as: UTF8.self)
                lock.unlock()
            }
            ended.signal()
        }.start()
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return buffer
    }

    /// Everything, once the writer has closed the pipe (its process ended).
    var finalText: String {
        ended.wait()
        ended.signal()
        return text
    }

    func wait(for needle: String, seconds: Double) -> Bool {
        eventually(seconds) { text.contains(needle) }
    }
}

@Suite(.serialized) struct CallResilienceTests {
    /// A peer killed mid-call (no bye) is noticed from RTCP silence within 5 s, as an outage:
    /// the survivor stays in the room and waits for the path, and the peer joining again (a new
    /// process, a new session) gets media without the survivor restarting.
    @Test func aVanishedPeerIsNoticedAndARejoinGetsMediaAgain() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240"]
        let (a, aOut, log) = try launchJoined(["join", "r", "--token", try token("a", secret), "--duration", "60"] + common)
        defer { terminate(a) }
        let (b, bOut, _) = try launchJoined(["join", "r", "--token", try token("b", secret), "--duration", "60"] + common)
        // Media flows both ways (a stats line of each that shows decoded video), then b dies.
        #expect(aOut.wait(for: #""resolution":"320x240""#, seconds: 20) && bOut.wait(for: #""resolution":"320x240""#, seconds: 20), "\(log.text)")
        kill(b.processIdentifier, SIGKILL)
        b.waitUntilExit()
        let killedAt = Date()
        // No bye came: RTCP silence (a 4 s idle timeout) is what tells a. The bound is only there
        // to tell "noticed by the timeout" from "never".
        #expect(log.wait(for: "peer silent for 4.0 s: waiting for the path to return", seconds: 20), "\(log.text)")
        #expect(Date().timeIntervalSince(killedAt) >= 3.9, "noticed by silence, not by a message")
        // b comes back (a new process, the same identity): a answers and media flows again.
        let again = try launchJoined(["join", "r", "--token", try token("b", secret), "--duration", "3"] + common)
        again.process.waitUntilExit()
        let againText = again.out.finalText
        let (decoded, aSent) = (joinSummary(againText).decoded, joinSummary(againText).sent)
        #expect(decoded > 0 && aSent > 0 && againText.contains("b <- a"), "the rejoined peer decoded \(decoded) frames: \(againText.suffix(300))")
        terminate(a)
        #expect(aOut.finalText.contains("media sessions 2"), "\(aOut.text.suffix(300))")
    }

    /// The signaling service going away mid-call does not interrupt the media between the peers.
    @Test func mediaContinuesWhenTheSignalingServiceRestarts() throws {
        let secret = try SecretFile()
        var (server, port) = try startServe(secret)
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--duration", "8"]
        let a = try launchJoined(["join", "r", "--token", try token("a", secret)] + common)
        let b = try launchJoined(["join", "r", "--token", try token("b", secret)] + common)
        // Media flows both ways, then the service goes away: both lose their connection.
        #expect(a.out.wait(for: #""resolution":"320x240""#, seconds: 20) && b.out.wait(for: #""resolution":"320x240""#, seconds: 20))
        terminate(server)
        #expect(a.log.wait(for: "signaling: ", seconds: 10) && b.log.wait(for: "signaling: ", seconds: 10), "\(a.log.text) \(b.log.text)")
        (server, port) = try startServe(secret, port: port)
        defer { terminate(server) }
        for (me, peer) in [(a, b), (b, a)] {
            me.process.waitUntilExit()
            #expect(me.process.terminationStatus == 0)
            let text = me.out.finalText
            // Nothing the peer sent was lost across the outage: judged against what it sent. (A
            // gap of half a second would cost 15 of the peer's frames, about 7 %.)
            let (decoded, sent) = (joinSummary(text).decoded, joinSummary(peer.out.finalText).sent)
            #expect(sent > 0 && Double(decoded) >= 0.97 * Double(sent), "decoded \(decoded) of \(sent) frames across the restart: \(text.suffix(300))")
        }
    }
}

@Suite(.serialized) struct FailoverTests {
    /// `--server A,B`: when service A dies mid-call, both endpoints move to B and rejoin there,
    /// and the media between them (which never passed through a service) goes on.
    @Test func endpointsMoveToTheNextServiceWhenOneDies() throws {
        let secret = try SecretFile()
        let (first, firstPort) = try startServe(secret)
        let (second, secondPort) = try startServe(secret)
        defer { terminate(second) }
        let common = ["--server", "127.0.0.1:\(firstPort),127.0.0.1:\(secondPort)", "--video-size", "320x240", "--duration", "8"]
        let a = try launchJoined(["join", "r", "--token", try token("a", secret)] + common)
        let b = try launchJoined(["join", "r", "--token", try token("b", secret)] + common)
        #expect(a.out.wait(for: #""resolution":"320x240""#, seconds: 20) && b.out.wait(for: #""resolution":"320x240""#, seconds: 20))
        terminate(first)
        for side in [a, b] {
            #expect(side.log.wait(for: "again on 127.0.0.1:\(secondPort)", seconds: 10), "\(side.log.text.suffix(600))")
        }
        for (me, peer) in [(a, b), (b, a)] {
            me.process.waitUntilExit()
            #expect(me.process.terminationStatus == 0)
            let (decoded, sent) = (joinSummary(me.out.finalText).decoded, joinSummary(peer.out.finalText).sent)
            #expect(sent > 0 && Double(decoded) >= 0.97 * Double(sent), "decoded \(decoded) of \(sent) frames across the failover")
        }
    }
}

@Suite(.serialized) struct CallBenchTests {
    @Test func callBenchMeasuresEverySide() throws {
        // 5 s: the A/V offset by the sender reports needs a report of each stream after the first
        // frames; 3 s calls on a loaded CI machine (setup 0.5 s) ended with none ("n/a").
        let result = try runCallend(["bench", "call", "--calls", "1", "--seconds", "5"])
        #expect(result.status == 0, "\(result.stderr)")
        for needle in ["setup (join -> first decoded frame): p50", "over 2 endpoints", "video glass-to-glass", "audio glass-to-glass", "CPU per endpoint"] {
            #expect(result.stdout.contains(needle), "\(needle) missing: \(result.stdout)")
        }
        #expect(!result.stdout.contains("n/a"), "\(result.stdout)")
    }
}
