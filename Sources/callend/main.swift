import Benchmarks
import CallEndpoint
import Foundation
import Platform
import ServeCommand

let version = "0.1.0"

let mainHelp = """
    callend \(version) — a headless peer-to-peer call endpoint (Opus + VP8 over RTP/UDP)

    usage: callend COMMAND [OPTIONS]

    commands:
      demo            a signaling service and two endpoints calling each other on loopback, with a summary
      join            join a room through 'callend serve' and hold a two-party call
      publish         send the camera and microphone to a WHIP server (RFC 9725) by its URL
      devices         list cameras (formats, sizes, rates) and ALSA sound devices; --json for scripts
      send            stream VP8 + Opus over RTP to HOST:PORT (and PORT+2), write the SDP; optional SRTP
      receive         receive the streams an SDP file describes; write Y4M/IVF and WAV
      serve           run the signaling service (rooms, tokens, relay; optional TLS)
      token           mint an access token (HS256 JWT) for a room and identity
      tls             make a private CA and a server certificate for 'serve' (the CA file is what
                      endpoints trust: join --ca-file)
      bench signaling thousands of clients join rooms in pairs on loopback against 'callend serve';
                      print joins/s, join latency p50/p99 and server memory per connection
      bench call      real join processes calling each other: setup time, glass-to-glass video and
                      audio latency (p50/p95), CPU and memory per endpoint
      bench rtp       packets/s and CPU per packet through packetize -> SRTP -> UDP -> unprotect ->
                      depacketize, against the same path without SRTP
      bench congestion (root) callend and an aiortc pair through a tbf bottleneck whose capacity
                      follows RFC 8867 §5.1: utilization, queueing delay, loss, reaction times, ratios
      bench soak      (root) one long call through a router with random loss and a blackout every
                      few minutes: memory growth, CPU, frames lost, freezes, A/V offset, outages
      bench delay-relay (root) a TUN device that holds every packet for a fixed delay (used by
                      'bench congestion --delay')
      bench voice     join --voice's echo cancellation, noise suppression and gain control over WAV
                      files (scripts/echo/bench.sh measures it beside GStreamer's webrtcdsp)
      bench codecs    encode the same clips with callend's VP8 encoder and libvpx's vpxenc, and
                      Opus with opusenc/opusdec, side by side; print fps, PSNR, bitrate and ratios

    options:
      -h, --help      show this help (also: callend COMMAND --help)
      --version       show the version and the C libraries linked

    exit codes: 0 success, 1 the command failed, 2 bad command line
    """

let benchCodecsHelp = """
    usage: callend bench codecs [--frames N] [--repeat N] [--sizes WxH[,WxH...]] [--audio-seconds S]
                                [--work-dir DIR]

    Makes ffmpeg testsrc clips, encodes each with callend's VP8Encoder and with vpxenc at the same
    settings (realtime, cpu-used -6, CBR, one thread, error resilient), and prints encode fps, PSNR
    and bitrate for both and their ratios. Then encodes and decodes a stereo clip with Opus and with
    opusenc/opusdec and prints both realtime factors. Needs ffmpeg, vpxenc, opusenc, opusdec
    (scripts/install-deps.sh installs them).

      --frames N          frames per clip (default 300)
      --repeat N          runs of each encoder; the median is reported (default 3)
      --sizes LIST        clip sizes (default 640x480,1280x720)
      --audio-seconds S   length of the Opus clip (default 60)
      --work-dir DIR      keep clips and outputs in DIR (default: a temporary folder, removed)
    """

let benchSoakHelp = """
    usage: callend bench soak --minutes M [--loss PERCENT] [--blackout-every S] [--blackout-seconds S] [--out DIR]

    Root: makes namespaces A and B joined through router R, runs 'callend serve' in A and a call
    between 'callend join' in A and in B (640x480@30 test pattern and tone both ways) for M
    minutes while R drops PERCENT (default 5) of every packet it forwards at random and, every S
    seconds (default 300), drops everything for --blackout-seconds (default 10) through
    blackhole routes. Prints per side: resident memory after a minute of warm-up and at the end,
    CPU in cores, frames decoded against frames the peer sent, freezes of 300 ms or more (and
    those outside outages), outages and ICE restarts, the A/V offset by the sender reports and by
    the capture stamps in picture and tone (first minute, last minute, range outside outages),
    and the seconds to full motion after each blackout. --out keeps the endpoints' logs there.
    """

let benchCallHelp = """
    usage: callend bench call [--calls N] [--seconds S]

    Starts 'callend serve' and, N times (default 3), two 'callend join' processes that call each
    other on loopback for S seconds (default 8) with 640x480@30 VP8 + Opus over SRTP. Prints setup
    time (join to first decoded frame) p50/p95, glass-to-glass latency read from the capture stamps
    in the synthetic video and the timing marks in the synthetic audio (p50/p95), and CPU (cores) and
    resident memory per endpoint, against the targets.
    """

let benchRTPHelp = """
    usage: callend bench rtp [--packets N]

    Sends N VP8 RTP packets (default 200000) of a real encoded test pattern through packetize ->
    SRTP protect -> UDP on loopback -> SRTP unprotect -> RTP parse -> VP8 depacketize, once as plain
    RTP and once per SRTP profile, and prints packets per second, CPU time per packet and the
    ratios to plain RTP.
    """

func runBenchCodecs(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(benchCodecsHelp); return }
    var options = CodecBenchmark.Options()
    if let frames = try args.integer("--frames", in: 10...100_000) { options.frames = frames }
    if let reps = try args.integer("--repeat", in: 1...50) { options.repetitions = reps }
    if let seconds = try args.integer("--audio-seconds", in: 1...3600) { options.audioSeconds = seconds }
    if let sizes = try args.value("--sizes") {
        options.sizes = try sizes.split(separator: ",").map { text throws(UsageError) in try parseSize(String(text)) }
    }
    options.workDirectory = try args.value("--work-dir")
    try args.finish(command: "bench codecs")

    let bench = CodecBenchmark(options: options) { FileHandle.standardError.write(Data("\($0)\n".utf8)) }
    let result: (video: [CodecBenchmark.VideoRow], audio: [CodecBenchmark.AudioRow])
    do {
        result = try bench.run()
    } catch {
        fail(error, code: .failure)
    }
    let settings = VP8EncoderSettingsNote.text
    print(CodecBenchmark.report(video: result.video, audio: result.audio, configurationNote: settings))
}

var args = Arguments(Array(CommandLine.arguments.dropFirst()))
do {
    let first = CommandLine.arguments.dropFirst().first
    if first == nil || first == "--help" || first == "-h" {
        _ = args.flag("--help") || args.flag("-h")
        try args.finish(command: "")
        print(mainHelp)
        exit(ExitCode.success.rawValue)
    }
    if first == "--version" {
        _ = args.flag("--version")
        try args.finish(command: "--version")
        print("callend \(version)")
        for library in LinkedLibraries.all { print("  \(library.name): \(library.version)") }
        exit(ExitCode.success.rawValue)
    }
    guard let command = args.popOperand() else {
        try args.finish(command: "")
        exit(ExitCode.usage.rawValue)
    }
    switch command {
    case "help":
        print(mainHelp)
    case "devices":
        try runDevices(&args)
    case "join":
        try runJoin(&args)
    case "publish":
        try runPublish(&args)
    case "demo":
        try runDemo(&args)
    case "send":
        try runSend(&args)
    case "receive":
        try runReceive(&args)
    case "serve":
        // The service runs as callend-serve where it is installed beside this executable: the
        // same code without the media libraries mapped (a third of the memory, idle).
        execServeBeside(CommandLine.arguments.dropFirst(2))
        try runServe(&args)
    case "token":
        try runToken(&args)
    case "tls":
        try runTLS(&args)
    case "bench":
        guard let what = args.popOperand() else {
            throw UsageError(description: "'bench' needs a subject: callend bench codecs")
        }
        switch what {
        case "codecs": try runBenchCodecs(&args)
        case "signaling": try runBenchSignaling(&args)
        case "call":
            if args.flag("--help") || args.flag("-h") { print(benchCallHelp); break }
            let calls = try args.integer("--calls", in: 1...100) ?? 3
            let seconds = try args.integer("--seconds", in: 3...600) ?? 8
            try args.finish(command: "bench call")
            let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
            let bench = CallBenchmark(calls: calls, seconds: seconds, executable: executable) { FileHandle.standardError.write(Data("\($0)\n".utf8)) }
            print(CallBenchmark.format(try bench.run(), calls: calls, seconds: seconds))
        case "congestion": try runBenchCongestion(&args)
        case "delay-relay": try runBenchDelayRelay(&args)
        case "voice": try runBenchVoice(&args)
        case "soak":
            if args.flag("--help") || args.flag("-h") { print(benchSoakHelp); break }
            guard let minutesText = try args.value("--minutes") else { throw UsageError(description: "bench soak needs --minutes M") }
            guard let minutes = Double(minutesText), minutes >= 1, minutes <= 100_000 else {
                throw UsageError(description: "--minutes takes a number of minutes from 1, not '\(minutesText)'")
            }
            let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
            var options = SoakBenchmark.Options(minutes: minutes, executable: executable)
            if let loss = try args.value("--loss") {
                guard let value = Double(loss), (0...50).contains(value) else { throw UsageError(description: "--loss takes a percentage 0 ... 50, not '\(loss)'") }
                options.lossPercent = value
            }
            if let every = try args.integer("--blackout-every", in: 30...86_400) { options.blackoutEvery = Double(every) }
            if let length = try args.integer("--blackout-seconds", in: 1...600) { options.blackoutSeconds = Double(length) }
            options.outputDirectory = try args.value("--out")
            try args.finish(command: "bench soak")
            let bench = SoakBenchmark(options: options) { FileHandle.standardError.write(Data("\($0)\n".utf8)) }
            // Ctrl-C ends the run early with what it measured, and the namespaces go with it.
            onTerminationSignals { bench.stop() }
            print(SoakBenchmark.format(try bench.run()))
        case "rtp":
            if args.flag("--help") || args.flag("-h") { print(benchRTPHelp); break }
            let packets = try args.integer("--packets", in: 1000...10_000_000) ?? 200_000
            try args.finish(command: "bench rtp")
            print(RTPBenchmark.format(try RTPBenchmark(packets: packets).run()))
        default: throw UsageError(description: "unknown bench '\(what)'; available: call, codecs, congestion, delay-relay, signaling, soak, rtp")
        }
    default:
        throw UsageError(description: "unknown command '\(command)'; see 'callend --help'")
    }
} catch let error as UsageError {
    fail(error, code: .usage)
} catch {
    fail(error, code: .failure)
}
