import Foundation
import Testing

/// Runs the built `callend` binary, which sits next to the test bundle in the build folder.
func runCallend(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let buildDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let binary = buildDirectory.appendingPathComponent("callend")
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}

@Suite struct CommandLineTests {
    @Test func helpDescribesCommandsAndExitCodes() throws {
        for arguments in [["--help"], ["-h"], [], ["help"]] {
            let result = try runCallend(arguments)
            #expect(result.status == 0, "callend \(arguments)")
            #expect(result.stdout.contains("usage: callend COMMAND"))
            #expect(result.stdout.contains("bench codecs"))
            #expect(result.stdout.contains("exit codes"))
        }
        let bench = try runCallend(["bench", "codecs", "--help"])
        #expect(bench.status == 0 && bench.stdout.contains("--frames N"))
    }

    @Test func benchSoakSaysWhatItNeeds() throws {
        let help = try runCallend(["bench", "soak", "--help"])
        #expect(help.status == 0 && help.stdout.contains("--minutes M") && help.stdout.contains("blackout"))
        let cases: [([String], String)] = [
            (["bench", "soak"], "needs --minutes"),
            (["bench", "soak", "--minutes", "0"], "--minutes takes"),
            (["bench", "soak", "--minutes", "ten"], "--minutes takes"),
            (["bench", "soak", "--minutes", "5", "--loss", "90"], "--loss takes"),
            (["bench", "soak", "--minutes", "5", "--blackout-every", "5"], "--blackout-every"),
            (["bench", "soak", "--minutes", "5", "--fast"], "--fast"),
        ]
        for (arguments, message) in cases {
            let result = try runCallend(arguments)
            #expect(result.status == 2 && result.stderr.contains(message), "\(arguments): \(result.status) \(result.stderr)")
        }
    }

    @Test func versionNamesTheLinkedLibraries() throws {
        let result = try runCallend(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("callend "))
        for library in ["libopus 1.", "libvpx: v1.", "libsrtp2", "OpenSSL 3", "alsa-lib: 1."] {
            #expect(result.stdout.contains(library), "missing \(library) in \(result.stdout)")
        }
    }

    @Test(arguments: [
        (["--bogus"], "unknown option '--bogus'"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["bench"], "'bench' needs a subject"),
        (["bench", "video"], "unknown bench 'video'"),
        (["bench", "codecs", "--frames"], "--frames needs a value"),
        (["bench", "codecs", "--frames", "ten"], "--frames takes a whole number"),
        (["bench", "codecs", "--sizes", "640by480"], "is not a size"),
        (["bench", "codecs", "--turbo"], "unknown option '--turbo' for 'bench codecs'"),
        (["bench", "congestion", "--schedule", "1000"], "a phase is KBIT:SECONDS"),
        (["bench", "congestion", "--schedule", "1000:40,10:20"], "not '10:20'"),
        (["bench", "congestion", "--schedule", "1000:40,"], "a phase is KBIT:SECONDS"),
        (["bench", "congestion", "--no-aiortc", "--python", "/usr/bin/python3"], "alternatives"),
        (["bench", "congestion", "--burst", "100"], "--burst"),
        (["bench", "congestion", "--fps", "0"], "--fps"),
        (["bench", "congestion", "--delay", "0"], "--delay"),
        (["bench", "congestion", "--delay", "5000"], "--delay"),
        (["bench", "congestion", "--short"], "go with --case"),
        (["bench", "congestion", "--case", "sideways", "--no-aiortc"], "--case: sideways is not one of fairness, tcp, both-ways"),
        (["bench", "congestion", "--case", "both-ways", "--capacity", "1000", "--no-aiortc"], "runs its own schedules"),
        (["bench", "congestion", "--case", "both-ways", "--schedule", "1000:10", "--no-aiortc"], "runs its own schedules"),
        (["bench", "congestion", "--case", "tcp", "--delay", "50", "--no-aiortc"], "without --schedule, --chromium or --delay"),
        (["bench", "delay-relay"], "needs --device NAME and --delay-ms MS"),
        (["bench", "delay-relay", "--device", "cbtest0", "--delay-ms", "0"], "--delay-ms"),
        (["--version", "extra"], "unexpected argument 'extra'"),
        (["bench", "voice"], "needs --far F.wav, --mic M.wav and --out O.wav"),
        (["bench", "voice", "--far", "a.wav", "--mic", "b.wav", "--out", "c.wav", "--parts", "aec,echo"], "--parts takes"),
        (["bench", "voice", "--far", "a.wav", "--mic", "b.wav", "--out", "c.wav", "--echo-suppression", "3"], "--echo-suppression"),
        (["join", "r", "--token", "t", "--voice"], "apply to an ALSA microphone (--mic PCM)"),
        (["join", "r", "--token", "t", "--audio-source", "none", "--mic-prefer", "USB"], "apply to an ALSA microphone"),
        (["join", "r", "--token", "t", "--mic-prefer", "a b"], "take a card id"),
        (["join", "r", "--token", "t", "--speaker-prefer", "USB", "--audio-out", "x.wav"], "alternatives"),
        (["devices", "--duration", "5"], "--duration applies to devices --watch"),
        (["join", "r", "--token", "t", "--mic", "default", "--mic-channel", "2"], "--mic-channel needs --mic-channels"),
        (["join", "r", "--token", "t", "--mic", "default", "--mic-channels", "4", "--mic-channel", "5"], "channels are 1 to 4"),
        (["join", "r", "--token", "t", "--mic", "default", "--mic-channels", "4"], "needs a microphone channel or a mix"),
        (["join", "r", "--token", "t", "--mic", "default", "--mic-mix", "0.5,x"], "--mic-mix takes"),
        (["join", "r", "--token", "t", "--mic", "default", "--mic-channels", "2", "--mic-mix", "1,1,1"], "one weight per channel"),
        (["join", "r", "--token", "t", "--mic", "default", "--mic-channel", "1", "--mic-mix", "1"], "alternatives"),
    ])
    func badCommandLinesExitWithCode2(arguments: [String], message: String) throws {
        let result = try runCallend(arguments)
        #expect(result.status == 2, "callend \(arguments) exited \(result.status)")
        #expect(result.stderr.contains(message), "stderr: \(result.stderr)")
        #expect(result.stdout.isEmpty)
    }
}

@Suite struct StreamingCommandLineTests {
    @Test func badSendAndReceiveCommandLines() throws {
        let cases: [([String], String)] = [
            (["send"], "send needs --to"),
            (["send", "--to", "127.0.0.1"], "HOST:PORT"),
            (["send", "--to", "127.0.0.1:65535"], "PORT+2"),
            (["send", "--to", "127.0.0.1:5000", "--video-source", "camera"], "--video-source takes"),
            (["send", "--to", "127.0.0.1:5000", "--video-source", "none", "--audio-source", "none"], "nothing to send"),
            (["send", "--to", "127.0.0.1:5000", "--srtp-key", "short"], "base64 of 30 bytes"),
            (["send", "--to", "127.0.0.1:5000", "--srtp-profile", "NULL"], "--srtp-profile takes"),
            (["send", "--to", "127.0.0.1:5000", "--video-size", "10x10"], "is not a size"),
            (["receive"], "receive needs --sdp"),
            (["receive", "--sdp", "/nonexistent.sdp"], "cannot read the SDP file"),
            (["receive", "--sdp", "x.sdp", "--video-out", "out.mp4"], "--video-out must end in"),
            (["bench", "rtp", "--packets", "5"], "--packets takes"),
        ]
        for (arguments, message) in cases {
            let result = try runCallend(arguments)
            #expect(result.status == 2, "\(arguments) exited \(result.status)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }

    @Test func aMissingY4MFileFailsWithItsName() throws {
        let result = try runCallend(["send", "--to", "127.0.0.1:5000", "--video-source", "/nonexistent.y4m", "--audio-source", "none"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("/nonexistent.y4m"), "\(result.stderr)")
    }
}
