import CallEndpoint
import FoundationEssentials
import Glibc
import Platform
import CLIKit
import Signaling

let janusHelp = """
    usage: callend janus publish URL --room N [--display NAME] [--api-secret-file F] [--ca-file F] [--insecure-plaintext]
                           [--camera DEV | --video-source pattern|F.y4m|none] [--video-size WxH] [--fps N] [--pixel-format FOURCC]
                           [--mic PCM | --audio-source tone|F.wav|none] [--encoding auto|manual] [--max-video-bitrate B]
                           [--video-codec vp8|h264|auto] [--h264-encoder openh264|DEV] [--duration S] [--no-stdin] [--log-level L]
                           [--ice-server URL]... [--turn-username U --turn-credential-file F] [--ice-transport all|relay]
           callend janus subscribe URL --room N [--feed ID | --display NAME] [--wait S] [--api-secret-file F] [--ca-file F]
                           [--video-codec vp8|h264|auto] [--insecure-plaintext] [--duration S] [--no-stdin] [--log-level L]
                           [ICE options as above]

    Publishes into, or watches one publisher of, a Janus VideoRoom (Janus's janus.plugin.videoroom)
    through Janus's HTTP API: the SFU to use when a room outgrows callend's own rooms. Media goes
    between callend and Janus over ICE + DTLS-SRTP; Janus's receiver reports, NACK, PLI, REMB and
    transport-wide feedback drive the publisher's estimate as a peer's would.

    publish     joins room N as a publisher (joinandconfigure) with a sendonly VP8 (or H.264) + Opus offer
                (the candidates of the first two seconds in it, later ones trickled) and sends until
                --duration, 'leave' (standard input), SIGINT or SIGTERM, or Janus hangs up
    subscribe   joins room N as a subscriber of one publisher's feed, answers Janus's offer
                (recvonly) and decodes until the same; the summary says what was decoded

      URL                   Janus's API root: http://HOST:8088/janus (https:// when Janus serves
                            TLS; http:// on loopback only, unless --insecure-plaintext)
      --room N              the VideoRoom's number (1234 in Janus's sample configuration)
      --display NAME        publish: the name shown in the room; subscribe: watch the first
                            publisher of that name
      --feed ID             subscribe: the publisher's id (default: the first publisher in the room)
      --wait S              subscribe: how long to wait for a publisher to appear (default 10)
      --api-secret-file F   Janus's API secret (api_secret in janus.jcfg), or CALLEND_JANUS_API_SECRET
      --ca-file F           PEM CAs that sign Janus's certificate (default: the system's)
      --insecure-plaintext  http:// to a host that is not loopback: the secret and the DTLS
                            fingerprint cross the network readable and rewritable
      --video-codec C       vp8 (default), h264 (a room with videocodec = "h264") or auto, as for 'callend join'
      --h264-encoder E      openh264 (default) or the kernel's H.264 encoder DEV, as for 'callend join'
      Sources, encoding, ICE servers and --log-level as for 'callend publish' and 'callend join'.

    Output: log lines on standard error; at the end one summary line on standard output.
    Exit codes: 0 published (or watched) and ended, 1 Janus refused (no such room, a wrong secret:
    the message says which), its description was unusable, no publisher appeared, or no path to it
    came up; 2 bad command line.
    """

func runJanus(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(janusHelp); return }
    guard let verb = args.popOperand() else { throw UsageError(description: "janus needs 'publish' or 'subscribe'; see 'callend janus --help'") }
    let role: JanusVideoRoom.Role
    switch verb {
    case "publish": role = .publisher
    case "subscribe": role = .subscriber
    default: throw UsageError(description: "janus takes 'publish' or 'subscribe', not '\(verb)'")
    }
    if args.flag("--help") || args.flag("-h") { print(janusHelp); return }
    guard let urlText = args.popOperand() else { throw UsageError(description: "janus \(verb) needs the URL of Janus's API (http://HOST:8088/janus)") }
    let url: HTTPURL
    do { url = try HTTPURL(parsing: urlText) } catch { throw UsageError(description: "janus \(verb): \(error.description)") }
    guard let room = try args.integer("--room", in: 1...Int.max) else { throw UsageError(description: "janus \(verb) needs --room N (the VideoRoom's number)") }
    let display = try args.value("--display")
    let secretFile = try args.value("--api-secret-file")
    let caFile = try args.value("--ca-file")
    let insecurePlaintext = args.flag("--insecure-plaintext")
    let duration = try args.integer("--duration", in: 1...86_400)
    let noStdin = args.flag("--no-stdin")
    var media = Call.Media(videoTrack: nil, audioTrack: nil)
    let (sources, videoCodecs, h264Encoder) = try parseJanusMedia(role, &args)
    var options = JanusRoomOptions(endpoint: url, room: UInt64(room))
    switch role {
    case .publisher:
        guard let (video, audio) = sources else { preconditionFailure("a publisher's sources are parsed above") }
        let encoding = try args.value("--encoding")
        let maxVideo = try args.integer("--max-video-bitrate", in: 50_000...50_000_000)
        if let encoding, encoding != "auto" && encoding != "manual" { throw UsageError(description: "--encoding takes auto or manual, not '\(encoding)'") }
        guard video != .none || audio != .none else { throw UsageError(description: "nothing to publish: --video-source none and --audio-source none") }
        if encoding == "manual" { options.encodingMode = .manual }
        if let maxVideo { options.maxVideoBitrate = maxVideo }
        media = Call.Media(videoTrack: try video.makeTrack(loopFiles: true), audioTrack: try audio.makeTrack(loopFiles: true))
    case .subscriber:
        if let feed = try args.integer("--feed", in: 1...9_007_199_254_740_992) { options.feed = UInt64(feed) }
        if let wait = try args.integer("--wait", in: 0...3600) { options.feedWait = .seconds(wait) }
        if options.feed != nil && display != nil { throw UsageError(description: "--feed and --display both choose the publisher: give one") }
    }
    media.videoCodecs = videoCodecs
    media.h264EncoderDevice = h264Encoder
    let (iceServers, iceTransport) = try parseICEOptions(&args)
    let logger = try logWriter(program: "callend janus", &args)
    try args.finish(command: "janus \(verb)")
    try checkHTTPEndpoint(url, caFile: caFile, insecurePlaintext: insecurePlaintext, doing: "janus \(verb) to")
    options.apiSecret = try readCredential(file: secretFile, option: "--api-secret-file", environment: "CALLEND_JANUS_API_SECRET")
    options.display = display
    options.caFile = caFile
    options.iceServers = iceServers
    options.iceTransportPolicy = iceTransport

    let room_ = try JanusVideoRoom(role, options: options, media: media, duration: duration.map { .seconds($0) }) { logger.write($0) }
    onTerminationSignals { room_.stop() }
    if !noStdin { readLeaveCommand(program: "janus \(verb)") { room_.stop() } }
    let summary = try room_.run()
    var parts = [role == .publisher ? "published to Janus room \(room)" : "watched Janus room \(room)"]
    if let feed = summary.feed { parts.append("feed \(feed)") }
    if let answered = summary.answeredIn { parts.append("answered in \(Int(answered.inMilliseconds)) ms") }
    if let connected = summary.connectedIn { parts.append("media from \(Int(connected.inMilliseconds)) ms") }
    if let sent = summary.sent { parts.append("sent \(sent.videoFrames) frames, \(sent.audioPackets) audio packets") }
    if let r = summary.received {
        let watched = r.firstFrameAt.map { r.elapsed - $0 } ?? .zero
        parts.append("decoded \(r.framesDecoded) frames in \(Int(watched.inMilliseconds)) ms from the first (\(r.decodeErrors) decode errors, \(r.videoPacketsLost) of \(r.videoPackets) video packets lost)")
        parts.append("\(r.audioDecoded) audio packets decoded")
    }
    parts.append("ended: \(summary.endReason)")
    print(parts.joined(separator: "; "))
}

/// A publisher's sources, then the codecs and the H.264 encoder: the sources come first, as
/// `auto` puts H.264 first for a camera asked for its own H.264. A subscriber has no sources.
func parseJanusMedia(_ role: JanusVideoRoom.Role, _ args: inout Arguments) throws
    -> (sources: (MediaSenderConfiguration.VideoSource, MediaSenderConfiguration.AudioSource)?, codecs: [VideoCodec], h264Encoder: String?) {
    let sources = role == .publisher ? try parseCallSources(&args) : nil
    let codecs = try parseVideoCodec(&args, video: sources?.0 ?? .none)
    return (sources, codecs, try parseH264Encoder(&args, codecs: codecs))
}

/// Refuses a plaintext URL to a host that is not loopback (unless asked for), and a CA file that
/// is not for https or cannot be read.
func checkHTTPEndpoint(_ url: HTTPURL, caFile: String?, insecurePlaintext: Bool, doing what: String) throws {
    if !url.isSecure && !insecurePlaintext && !PlaintextPolicy.isLoopback(host: url.host) {
        throw UsageError(description: PlaintextPolicy.refusal("\(what) \(url)"))
    }
    if let caFile {
        guard url.isSecure else { throw UsageError(description: "--ca-file applies to an https:// URL only") }
        guard FileManager.default.isReadableFile(atPath: caFile) else { throw UsageError(description: "cannot read --ca-file \(caFile)") }
    }
}

/// A credential from its file (trimmed) or, without one, from the environment; one line, not empty.
func readCredential(file: String?, option: String, environment: String) throws -> String? {
    var value = ProcessInfo.processInfo.environment[environment]
    if let file {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw UsageError(description: "cannot read \(option) \(file)") }
        value = text.trimmed(newlines: true)
        guard value?.isEmpty == false else { throw UsageError(description: "\(option) \(file) is empty") }
    }
    if let value, value.contains(where: { $0.isNewline || $0 == "\0" }) {
        throw UsageError(description: "the credential from \(file.map { "\(option) \($0)" } ?? environment) has a line break in it")
    }
    return value
}

/// Reads standard input on a thread of its own: 'leave' calls `leave`; anything else is refused.
func readLeaveCommand(program: String, leave: @escaping @Sendable () -> Void) {
    startThread(named: "stdin-commands") {
        while let line = readLine() {
            switch line.trimmed() {
            case "": continue
            case "leave":
                print(#"{"ok":true,"command":"leave"}"#)
                leave()
            default:
                print(#"{"ok":false,"command":"\#(line.prefix(40).filter { $0 != "\"" && $0 != "\\" })","error":"\#(program) takes one command: leave"}"#)
            }
        }
    }
}
