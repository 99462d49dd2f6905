import Foundation
import Testing
import TestSupport

/// `callend serve` on a loopback port (0: any free one) and the port it took.
func startServe(_ secret: SecretFile, port: Int = 0) throws -> (Process, Int) {
    let (server, out, _) = try launchCallend(["serve", "--listen", "127.0.0.1:\(port)", "--secret-file", secret.path])
    let first = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
    return (server, try #require(Int(first.split(separator: ":").last?.split(separator: " ").first ?? "")))
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
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--duration", "4", "--advertise", "127.0.0.1"]
        let (a, aOut, _) = try launchCallend(["join", "call", "--token", try token("roof", secret, room: "call")] + common)
        usleep(300_000)
        let (b, bOut, _) = try launchCallend(["join", "call"] + common, environment: ["CALLEND_TOKEN": try token("bench", secret, room: "call")])
        let aText = String(decoding: aOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let bText = String(decoding: bOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        a.waitUntilExit()
        b.waitUntilExit()
        #expect(a.terminationStatus == 0 && b.terminationStatus == 0, "\(aText) \(bText)")
        for (text, peer) in [(aText, "bench"), (bText, "roof")] {
            #expect(text.contains("<- \(peer)"), "\(text)")
            // Not on a terminal: one JSON stats object per second before the summary.
            let stats = text.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            #expect(stats.count >= 2, "\(text)")
            #expect(stats.last?["receivedFps"] as? Double ?? 0 > 20, "\(stats.last ?? [:])")
            let decoded = text.range(of: #"video (\d+) frames decoded"#, options: .regularExpression).map { Int(text[$0].split(separator: " ")[1]) ?? 0 } ?? 0
            #expect(decoded >= 100, "decoded \(decoded) of about 120 frames: \(text)")
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

    /// Commands reach a running join from its control socket and from standard input; replies
    /// are JSON lines; 'leave' ends the call with exit code 0.
    @Test func controlSocketAndStandardInputDriveARunningCall() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let socketPath = FileManager.default.temporaryDirectory.appendingPathComponent("callend-ctl-\(getpid()).sock").path
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--advertise", "127.0.0.1", "--duration", "30"]
        let input = Pipe()
        let (a, aOut, _) = try launchCallend(["join", "ctl", "--token", try token("a", secret, room: "ctl"), "--control", socketPath] + common, input: input)
        usleep(300_000)
        let (b, bOut, _) = try launchCallend(["join", "ctl", "--token", try token("b", secret, room: "ctl"), "--no-stdin"] + common)
        defer { terminate(a); terminate(b) }
        let aLog = StreamCollector(aOut), bLog = StreamCollector(bOut)
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
        let deadline = Date().addingTimeInterval(5)
        while a.isRunning && Date() < deadline { usleep(20_000) }
        #expect(!a.isRunning && a.terminationStatus == 0)
        #expect(aLog.text.contains("ended: stopped"), "\(aLog.text.suffix(300))")
        #expect(!FileManager.default.fileExists(atPath: socketPath), "the socket file is removed")
    }
}

/// Reads a pipe on its own thread so a test can wait for a line with a deadline.
final class StreamCollector: @unchecked Sendable {  // `buffer` is guarded by `lock`
    private var buffer = ""
    private let lock = NSLock()

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
        }.start()
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return buffer
    }

    func wait(for needle: String, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if text.contains(needle) { return true }
            usleep(20_000)
        }
        return text.contains(needle)
    }
}

@Suite(.serialized) struct CallResilienceTests {
    /// A peer killed mid-call (no bye) is noticed from RTCP silence within 5 s; the survivor stays
    /// in the room, and the peer joining again gets media without the survivor restarting.
    @Test func aVanishedPeerIsNoticedAndARejoinGetsMediaAgain() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--advertise", "127.0.0.1"]
        let (a, aOut, aErr) = try launchCallend(["join", "r", "--token", try token("a", secret), "--duration", "40"] + common)
        defer { terminate(a) }
        let log = StreamCollector(aErr)
        usleep(300_000)
        let (b, _, _) = try launchCallend(["join", "r", "--token", try token("b", secret), "--duration", "40"] + common)
        #expect(log.wait(for: "media:", seconds: 10))
        usleep(2_000_000)
        kill(b.processIdentifier, SIGKILL)
        b.waitUntilExit()
        let killedAt = Date()
        #expect(log.wait(for: "waiting for b to join again", seconds: 10), "\(log.text)")
        let noticed = Date().timeIntervalSince(killedAt)
        #expect(noticed < 5.5, "a noticed after \(noticed) s")
        #expect(log.text.contains("peer silent"))
        // b comes back (a new process, the same identity): a answers and media flows again.
        let (again, againOut, _) = try launchCallend(["join", "r", "--token", try token("b", secret), "--duration", "3"] + common)
        let againText = String(decoding: againOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        again.waitUntilExit()
        let decoded = againText.range(of: #"video (\d+) frames decoded"#, options: .regularExpression).map { Int(againText[$0].split(separator: " ")[1]) ?? 0 } ?? 0
        #expect(decoded >= 60, "the rejoined peer decoded \(decoded) frames: \(againText.suffix(300))")
        terminate(a)
        let aText = String(decoding: aOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(aText.contains("media sessions 2"), "\(aText.suffix(300))")
    }

    /// The signaling service going away mid-call does not interrupt the media between the peers.
    @Test func mediaContinuesWhenTheSignalingServiceRestarts() throws {
        let secret = try SecretFile()
        var (server, port) = try startServe(secret)
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--advertise", "127.0.0.1", "--duration", "6"]
        let (a, aOut, _) = try launchCallend(["join", "r", "--token", try token("a", secret)] + common)
        usleep(300_000)
        let (b, bOut, _) = try launchCallend(["join", "r", "--token", try token("b", secret)] + common)
        usleep(2_000_000)
        terminate(server)
        usleep(1_000_000)
        (server, port) = try startServe(secret, port: port)
        defer { terminate(server) }
        for (process, out) in [(a, aOut), (b, bOut)] {
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            let decoded = text.range(of: #"video (\d+) frames decoded"#, options: .regularExpression).map { Int(text[$0].split(separator: " ")[1]) ?? 0 } ?? 0
            // About 170 frames are sent in the 6 s (less the time to negotiate); an interruption of
            // half a second or more would cost 15 frames.
            #expect(decoded >= 160, "decoded \(decoded) of about 170 frames across the restart: \(text.suffix(300))")
            #expect(process.terminationStatus == 0)
        }
    }
}

@Suite(.serialized) struct CallBenchTests {
    @Test func callBenchMeasuresEverySide() throws {
        let result = try runCallend(["bench", "call", "--calls", "1", "--seconds", "3"])
        #expect(result.status == 0, "\(result.stderr)")
        for needle in ["setup (join -> first decoded frame): p50", "over 2 endpoints", "video glass-to-glass", "audio glass-to-glass", "CPU per endpoint"] {
            #expect(result.stdout.contains(needle), "\(needle) missing: \(result.stdout)")
        }
        #expect(!result.stdout.contains("n/a"), "\(result.stdout)")
    }
}
