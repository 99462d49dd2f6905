import CallEndpoint
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import CLIKit
import Signaling

let publishHelp = """
    usage: callend publish URL [--bearer-token-file F | CALLEND_BEARER_TOKEN=T] [--ca-file F] [--insecure-plaintext]
                           [--camera DEV | --video-source pattern|F.y4m|none] [--video-size WxH] [--fps N] [--pixel-format FOURCC]
                           [--mic PCM | --audio-source tone|F.wav|none] [--encoding auto|manual] [--max-video-bitrate B]
                           [--video-codec vp8|h264|auto] [--h264-encoder openh264|DEV]
                           [--duration S] [--no-stdin] [--log-level L]
                           [--ice-server URL]... [--turn-username U --turn-credential-file F] [--ice-transport all|relay]

    Publishes the camera and microphone (or the test pattern and tone) to a WHIP server (RFC 9725):
    MediaMTX, LiveKit ingress, Janus behind simple-whip-server, Cloudflare, pion, or the
    /whip/ROOM of a 'callend serve --http'. The offer (sendonly VP8 or H.264 + Opus, bundled, with the
    candidates gathered in the first two seconds) goes by POST as application/sdp; the server's
    201 gives the answer, the session's Location and ETag, and ICE servers in Link fields. Later
    candidates go by PATCH (application/trickle-ice-sdpfrag); a lost path is restarted by PATCH
    (If-Match: "*"), or published again by a new POST when the server takes no restart. 307 and
    308 are followed. The session is DELETEd when publishing ends: after --duration, on 'leave'
    (standard input), on SIGINT or SIGTERM.

      URL                   the WHIP endpoint: https://HOST[:PORT]/PATH (http:// on loopback only,
                            unless --insecure-plaintext)
      --bearer-token-file F the bearer token the server wants (or CALLEND_BEARER_TOKEN); sent in
                            the Authorization field to the URL's host only, never on a redirect
                            to another host
      --ca-file F           PEM CAs that sign the server's certificate (default: the system's)
      --insecure-plaintext  http:// to a host that is not loopback: the token and the DTLS
                            fingerprint cross the network readable and rewritable
      --encoding auto       callend manages bitrates from the server's feedback (default); manual
                            sends at --max-video-bitrate
      --video-codec C       vp8 (default), h264 or auto (both offered, VP8 first): as for 'callend join'
      --h264-encoder E      openh264 (default) or the kernel's H.264 encoder DEV, as for 'callend join'
      Sources, ICE servers and --log-level as for 'callend join' (see 'callend join --help').

    Output: log lines on standard error; at the end one summary line on standard output.
    Exit codes: 0 published and ended, 1 the server refused (401, 403, 404, 409, 415, 422, 429,
    5xx: the message says which and what it means), its answer was unusable, or no path to it
    came up; 2 bad command line.
    """

func runPublish(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(publishHelp); return }
    guard let urlText = args.popOperand() else { throw UsageError(description: "publish needs the WHIP endpoint's URL") }
    let url: HTTPURL
    do { url = try HTTPURL(parsing: urlText) } catch { throw UsageError(description: "publish: \(error.description)") }
    let tokenFile = try args.value("--bearer-token-file")
    let caFile = try args.value("--ca-file")
    let insecurePlaintext = args.flag("--insecure-plaintext")
    let (video, audio) = try parseCallSources(&args)
    let videoCodecs = try parseVideoCodec(&args, video: video)
    let h264Encoder = try parseH264Encoder(&args, codecs: videoCodecs)
    let encoding = try args.value("--encoding")
    let maxVideo = try args.integer("--max-video-bitrate", in: 50_000...50_000_000)
    let duration = try args.integer("--duration", in: 1...86_400)
    let noStdin = args.flag("--no-stdin")
    let (iceServers, iceTransport) = try parseICEOptions(&args)
    let logger = try logWriter(program: "callend publish", &args)
    try args.finish(command: "publish")
    if let encoding, encoding != "auto" && encoding != "manual" { throw UsageError(description: "--encoding takes auto or manual, not '\(encoding)'") }
    try checkHTTPEndpoint(url, caFile: caFile, insecurePlaintext: insecurePlaintext, doing: "publish to")
    let token = try readCredential(file: tokenFile, option: "--bearer-token-file", environment: "CALLEND_BEARER_TOKEN")
    guard video != .none || audio != .none else { throw UsageError(description: "nothing to publish: --video-source none and --audio-source none") }

    var options = WHIPPublisher.Options(endpoint: url)
    options.bearerToken = token
    options.caFile = caFile
    options.iceServers = iceServers
    options.iceTransportPolicy = iceTransport
    if encoding == "manual" { options.encodingMode = .manual }
    if let maxVideo { options.maxVideoBitrate = maxVideo }
    var media = Call.Media(videoTrack: try video.makeTrack(loopFiles: true), audioTrack: try audio.makeTrack(loopFiles: true))
    media.videoCodecs = videoCodecs
    media.h264EncoderDevice = h264Encoder
    let publisher = try WHIPPublisher(options: options, media: media, duration: duration.map { .seconds($0) }) { logger.write($0) }
    onTerminationSignals { publisher.stop() }
    if !noStdin { readLeaveCommand(program: "publish") { publisher.stop() } }
    let summary = try publisher.run()
    var parts = ["published to \(url)"]
    if let answered = summary.answeredIn { parts.append("answered in \(Int(answered.inMilliseconds)) ms") }
    if let connected = summary.connectedIn { parts.append("media from \(Int(connected.inMilliseconds)) ms") }
    if let sent = summary.sent { parts.append("sent \(sent.videoFrames) frames, \(sent.audioPackets) audio packets") }
    if summary.sessions > 1 { parts.append("sessions \(summary.sessions)") }
    if summary.iceRestarts > 0 { parts.append("ICE restarts \(summary.iceRestarts)") }
    parts.append(summary.deleted ? "session deleted" : "session NOT deleted")
    parts.append("ended: \(summary.endReason)")
    print(parts.joined(separator: "; "))
}
