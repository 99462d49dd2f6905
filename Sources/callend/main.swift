import CallEndpoint
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import CLIKit
import ServeCommand

let version = callendVersion

let mainHelp = """
    callend \(version) — a headless peer-to-peer call endpoint (Opus + VP8 over RTP/UDP)

    usage: callend COMMAND [OPTIONS]

    commands:
      demo            a signaling service and two endpoints calling each other on loopback, with a summary
      join            join a room through 'callend serve': a two-party call, or (--mesh) a room of
                      up to four
      publish         send the camera and microphone to a WHIP server (RFC 9725) by its URL
      janus           publish into, or watch a publisher of, a Janus VideoRoom through Janus's HTTP API
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
      bench cellular-link (root) a TUN device that carries packets over a cellular link replayed
                      from capacity traces (used by scripts/cellular/bench.sh)
      bench voice     join --voice's echo cancellation, noise suppression and gain control over WAV
                      files (scripts/echo/bench.sh measures it beside GStreamer's webrtcdsp)
      bench codecs    encode the same clips with callend's VP8 encoder and libvpx's vpxenc, and
                      Opus with opusenc/opusdec, side by side; print fps, PSNR, bitrate and ratios

    options:
      -h, --help      show this help (also: callend COMMAND --help)
      --version       show the version and the C libraries linked

    exit codes: 0 success, 1 the command failed, 2 bad command line
    """

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
    case "janus":
        try runJanus(&args)
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
        // The benches live in callend-bench beside this executable (with Foundation and the bench
        // harness, which a call endpoint does not map).
        execBeside(benchExecutableName, CommandLine.arguments.dropFirst(2))
        throw UsageError(description: "'bench' runs \(benchExecutableName), which is not installed beside callend (swift build builds it)")
    default:
        throw UsageError(description: "unknown command '\(command)'; see 'callend --help'")
    }
} catch let error as UsageError {
    fail(error, code: .usage)
} catch {
    fail(error, code: .failure)
}
