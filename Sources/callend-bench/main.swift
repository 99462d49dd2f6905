import Benchmarks
import CallEndpoint
import Dispatch
import Foundation
import MediaCore
import Platform
import CLIKit

// callend-bench: the benches, run as `callend bench ...` (callend replaces itself with this
// executable, same arguments after "bench"), so the call endpoint maps neither Foundation nor the
// bench harness. The benches that start endpoints run the callend beside this file.

/// The callend executable beside this one, which the benches run as their endpoints and service.
let executable = besideSelf("callend") ?? "callend"

let benchCodecsHelp = """
    usage: callend bench codecs [--frames N] [--repeat N] [--sizes WxH[,WxH...]] [--audio-seconds S]
                                [--work-dir DIR]

    Makes ffmpeg testsrc clips, encodes each with callend's VP8Encoder and with vpxenc at the same
    settings (realtime, cpu-used -6, CBR, one thread, error resilient), and prints encode fps, PSNR
    and bitrate for both and their ratios. Encodes the same clips in H.264 with callend's
    H264Encoder (OpenH264), with GStreamer's openh264enc at the same settings and with x264
    (ffmpeg) at the same bitrate, and prints the same figures. Then encodes and decodes a stereo
    clip with Opus and with opusenc/opusdec and prints both realtime factors. Needs ffmpeg,
    vpxenc, opusenc, opusdec, gst-launch-1.0 with openh264enc (scripts/install-deps.sh installs
    them).

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
    usage: callend bench call [--calls N] [--seconds S] [--video-codec vp8|h264]

    Starts 'callend serve' and, N times (default 3), two 'callend join' processes that call each
    other on loopback for S seconds (default 8) with 640x480@30 VP8 (or H.264) + Opus over SRTP. Prints setup
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
    let result: (video: [CodecBenchmark.VideoRow], h264: [CodecBenchmark.H264Row], audio: [CodecBenchmark.AudioRow])
    do {
        result = try bench.run()
    } catch {
        fail(error, code: .failure)
    }
    let settings = VP8EncoderSettingsNote.text
    print(CodecBenchmark.report(video: result.video, h264: result.h264, audio: result.audio, configurationNote: settings))
}

let benchSignalingHelp = """
    usage: callend bench signaling [--clients N] [--rooms-per-second R] [--nodes N]

    Starts 'callend serve' as a child process on 127.0.0.1, connects N clients (default 10000),
    holds them all open, joins them to rooms in pairs and relays an offer and an answer in each
    room. Prints connections held at once, joins per second, p50/p99 latency from the second join
    to the first participant's peer-joined, offer/answer round trip, and the server's resident
    memory per connection. Needs a descriptor limit of N + 100 (it raises the soft limit to the hard one).

      --clients N             clients (default 10000), two per room
      --rooms-per-second R    start R rooms a second (2R joins/s) to measure latency at a steady
                              rate; default 0 starts every room at once to measure throughput
      --nodes N               also run N nodes sharing rooms through a private redis-server (Debian's),
                              each room's two participants on two nodes, and print each figure
                              beside one node's; then kill node 1 under 100 pairs of clients (their
                              next servers the other nodes) and time each one's return to its room
    """

func runBenchSignaling(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(benchSignalingHelp); return }
    let clients = try args.integer("--clients", in: 2...100_000) ?? 10_000
    let rate = try args.integer("--rooms-per-second", in: 0...1_000_000) ?? 0
    let nodes = try args.integer("--nodes", in: 1...16) ?? 1
    try args.finish(command: "bench signaling")
    raiseFileLimit()
    var bench = SignalingBenchmark(clients: clients, roomsPerSecond: Double(rate), executable: executable) {
        FileHandle.standardError.write(Data("\($0)\n".utf8))
    }
    guard nodes > 1 else {
        print(SignalingBenchmark.format(try bench.run(), roomsPerSecond: Double(rate)))
        return
    }
    bench.nodes = nodes
    print(SignalingBenchmark.format(try bench.runCluster(), roomsPerSecond: Double(rate)))
}

var args = Arguments(Array(CommandLine.arguments.dropFirst()))
do {
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
        let codec = try args.value("--video-codec") ?? "vp8"
        guard codec == "vp8" || codec == "h264" else { throw UsageError(description: "bench call's --video-codec takes vp8 or h264, not '\(codec)'") }
        try args.finish(command: "bench call")
        let bench = CallBenchmark(calls: calls, seconds: seconds, executable: executable, videoCodec: codec) { FileHandle.standardError.write(Data("\($0)\n".utf8)) }
        print(CallBenchmark.format(try bench.run(), calls: calls, seconds: seconds, videoCodec: codec))
    case "congestion": try runBenchCongestion(&args)
    case "delay-relay": try runBenchDelayRelay(&args)
    case "cellular-link": try runBenchCellularLink(&args)
    case "cellular": try runBenchCellular(&args)
    case "voice": try runBenchVoice(&args)
    case "soak":
        if args.flag("--help") || args.flag("-h") { print(benchSoakHelp); break }
        guard let minutesText = try args.value("--minutes") else { throw UsageError(description: "bench soak needs --minutes M") }
        guard let minutes = Double(minutesText), minutes >= 1, minutes <= 100_000 else {
            throw UsageError(description: "--minutes takes a number of minutes from 1, not '\(minutesText)'")
        }
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
    default: throw UsageError(description: "unknown bench '\(what)'; available: call, codecs, congestion, cellular, delay-relay, cellular-link, signaling, soak, rtp")
    }
} catch let error as UsageError {
    fail(error, code: .usage)
} catch {
    fail(error, code: .failure)
}
