import CallEndpoint
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import MediaCore
import Platform
import RTPTransport
import CLIKit
import Signaling
import SignalingService
import Synchronization
import ICEServers

let joinHelp = """
    usage: callend join ROOM (--token-file F | CALLEND_TOKEN=T | --token T) [--server tls://HOST:PORT [--ca-file F] | --server HOST:PORT]
                        [--insecure-plaintext]
                        [--camera DEV | --video-source pattern|F.y4m|none] [--video-size WxH] [--fps N] [--pixel-format FOURCC]
                        [--mic PCM [--mic-channels N] [--mic-channel K | --mic-mix W,...] [--voice] | --audio-source tone|F.wav|none]
                        [--mic-prefer D]... [--speaker PCM | --audio-out F.wav] [--speaker-prefer D]... [--video-out F.y4m|F.ivf|F.ppm] [--encoding auto|manual] [--max-video-bitrate B]
                        [--video-codec vp8|h264|auto] [--h264-encoder openh264|DEV]
                        [--control PATH] [--no-stdin] [--duration S] [--metrics HOST:PORT] [--log-level L]
                        [--record-dir D [--record-quota SIZE] [--record-keep AGE] [--record-segment S]]
                        [--data-socket PATH [--data-label L] [--data-mode lines|bytes] [--data-unreliable]]
                        [--measure-latency] [--max-viewers N] [--ice-server URL]... [--turn-username U --turn-credential-file F]
                        [--ice-transport all|relay] [--mesh] [--config F [--check]]

    Joins ROOM through the signaling service (callend serve) and holds a two-party call: the second
    participant to join sends the offer (SDP, trickled ICE candidates), and media flows both ways
    over one ICE path (host, STUN and TURN candidates; DTLS-SRTP; VP8 or H.264 + Opus, RTCP, NACK/PLI). The
    call ends after --duration, on 'leave', on SIGINT/SIGTERM, or when the peer leaves for good. A
    peer that drops out is waited for; when it joins again media resumes. Through a service with
    --http, WHEP players holding a token for the room watch this endpoint (each its own session,
    beside the call), and a WHIP publisher into /whip/ROOM is a peer like any other.

      --token-file F        the access token from F (or CALLEND_TOKEN): a token given with --token
                            shows in the process list to every user of the machine
      --server tls://HOST:PORT  the signaling service over TLS; its certificate must be signed by a CA
                            the system trusts (or one in --ca-file F, PEM: 'callend tls' writes
                            one) and name HOST; a certificate that fails ends the join with exit
                            code 1. A list HOST1:PORT1,HOST2:PORT2 is tried in turn: when a
                            connection fails or is lost the next one is used and the endpoint
                            rejoins there (media goes on)
      --server HOST:PORT    the same in plain TCP (default 127.0.0.1:7000): on loopback only,
                            unless --insecure-plaintext
      --insecure-plaintext  plain TCP to a service that is not on loopback: the token, TURN
                            passwords and the call's DTLS fingerprint cross the network readable
                            and rewritable, so whoever is on the path can take the call over
      --camera DEV          a V4L2 camera (/dev/video0); --video-size/--fps/--pixel-format pick the
                            nearest mode it offers (default 640x480@30); 'callend devices' lists them.
                            --pixel-format H264: a camera that encodes H.264 itself is sent as it
                            comes in an H.264 call (no encoder runs; its bitrate control, keyframe
                            button and H.264 modes follow the network); a VP8 call decodes it
      --video-source S      the moving test pattern (default), a Y4M file (looped), or none
      --mic PCM             capture from an ALSA PCM (default, plughw:CARD=...,DEV=0); else --audio-source:
                            tone (default, 440 Hz), a 48 kHz WAV file (looped) or none
      --mic-channels N      channels to open on --mic (default 1; a microphone array: its count)
      --mic-channel K       the microphone is channel K (1 ... N) of them, sent mono
      --mic-mix W,W,...     or a mix of them, one weight per channel (0.5,0.5,0,0)
      --voice               voice processing on --mic (webrtc-audio-processing): echo cancellation
                            against what --speaker plays, noise suppression, gain control, a
                            high-pass filter; mono; the stats show the echo delay and ERLE
      --speaker PCM         play the peer's audio to an ALSA PCM; --audio-out writes it to a WAV file
      --mic-prefer D        (repeatable, best first) microphones by card id (USB) or PCM name: the
      --speaker-prefer D    best one present is used; one plugged in mid-call that ranks higher
                            takes over, and when the route's device goes the next one does (the
                            call goes on); --mic/--speaker, when given, come last. Changes show in
                            the log and the stats (audioRoute, audioRouteChanges); 'callend
                            devices --watch' shows cards as they come and go
      --video-out F         the peer's video: .y4m decoded, .ivf as received, .ppm a snapshot every second
      --record-dir D        record the call, both directions as encoded (no re-encode), into D
                            (made if missing): WebM segments, VP8 and Opus in each, named
                            callend-<UTC start>-sent|received.webm, each starting on a keyframe;
                            written a second at a time, so a kill or a power cut loses about the
                            last second. Needs libavformat (Debian libavformat59), loaded only then
      --record-quota SIZE   the most D's recordings may hold (500M, 20G): the oldest segments are
                            deleted to make room, and the newest never pushes past it
      --record-keep AGE     delete segments older than AGE (90m, 12h, 7d; up to 3650d)
      --record-segment S    seconds per segment (default 60, 5 ... 3600)
      --data-socket PATH    a data channel (RFC 8831, over the call's DTLS) as a Unix socket at PATH
                            (owner-only): what a program writes to it goes to the peer, what the
                            peer sends comes out of it. The call offers data channels, and takes
                            those a peer offers (a browser, aiortc, pion, another callend); both
                            sides need them. Writes wait while no channel is open or the link is
                            full; what comes while no program is connected is kept (4 MiB) for
                            the first that connects; nothing is dropped on a reliable channel
      --data-label L        the channel's label (default callend): this side opens one, and takes
                            the peer's of that label too
      --data-mode M         lines (default): each line one text message, each message a line;
                            bytes: the stream in binary messages of up to 16 KiB, written as they come
      --data-unreliable     the channel this side opens is unordered and never retransmitted
                            (telemetry where only the latest value counts); default ordered, reliable
      --encoding auto       callend manages bitrates (default); manual takes --max-video-bitrate
      --video-codec C       vp8 (default), h264 (RFC 6184 packetization mode 1, constrained baseline
                            from OpenH264, decoded by libavcodec: Debian libopenh264-7 and
                            libavcodec59, loaded only then) or auto (both offered and accepted,
                            VP8 first, H.264 first with --pixel-format H264; H.264 only where
                            those libraries load). Auto mode steers
                            H.264's rate and size as it does VP8's. --record-dir, --video-out F.ivf
                            and --mesh keep to VP8. WHEP viewers share one VP8 encoder; with auto
                            or h264, a player that offers H.264 alone gets an encoder of its own
      --h264-encoder E      what makes the H.264: openh264 (default) or DEV, the kernel's
                            memory-to-memory H.264 encoder (a Raspberry Pi 4's /dev/video11);
                            its bitrate control follows auto mode where it has one, a keyframe
                            asked for resets its stream where it has no control for it
      --control PATH        a Unix socket taking the commands below, one per line, one JSON reply each
      --no-stdin            do not read commands from standard input
      --max-viewers N       WHEP players watching at once (default 4; 0 refuses them); all share
                            one encode of the camera in the call's mode, in three temporal layers:
                            a viewer on a thin link is sent fewer (a lower frame rate), one too
                            thin even for the lowest gets an encode of its own
      --mesh                a room of up to four (serve --max-participants 4): a session with each
                            other participant (the newcomer offers to those present), all sent
                            from one encode in temporal layers, each peer's media decoded and
                            counted; a leaver ends only its own session. Standard output: one
                            JSON line per peer at the end (frames decoded, the time watched,
                            freezes), then a summary. Takes no recording, data socket, video or
                            audio output, control socket, metrics or viewers
      --measure-latency     read the capture stamps in a peer's test pattern and tone: glass-to-
                            glass latency in the stats (latencyMs, audioLatencyMs) and the summary;
                            a --video-source clip's pictures carry the same stamps
      --ice-server URL      a STUN or TURN server of this endpoint's own (stun:HOST:PORT,
                            turn:HOST:PORT?transport=udp|tcp), beside those the service hands out
      --turn-username U     the username for this endpoint's TURN servers; the credential comes
      --turn-credential-file F  from F (or CALLEND_TURN_CREDENTIAL), never the command line
      --ice-transport relay only relayed candidates: media goes through TURN (default all)
      --metrics HOST:PORT   Prometheus metrics of the call at http://HOST:PORT/metrics (plain
                            HTTP: bind it where only the monitoring reaches): bitrates, fps, sizes,
                            RTT, loss, estimate, mode, candidate pair, outages, decoder errors, a
                            network-quality score 0-5 per direction, and with --record-dir the
                            recording's bytes, free disk and whether it is written (alert rules:
                            deploy/prometheus/callend-alerts.yml)
      --log-level L         error, warning, info (default) or debug. Log lines go to standard
                            error with the time (UTC) and the level; under systemd, with the
                            priority journald files them by (journalctl -p warning)
    \(configHelp(file: "/etc/callend/join/ROOM.conf", column: 24, more: ["(ROOM may be given there as 'room = NAME'). SIGHUP (systemctl reload) reads",
                                                                              "the command line and F again during the call and takes the token, the",
                                                                              "ICE servers and the record quota; the rest waits for a restart"]))

    Commands (standard input and --control), during the call, with no new join:
      stats | mute [audio|video] | unmute [audio|video] | camera DEV [WxH[@FPS][/FOURCC]] | camera pattern [WxH[@FPS]]
      camera FILE.y4m | mode WxH[@FPS][/FOURCC] | mic PCM | speaker PCM | leave | help

    Output: a live status line on a terminal; otherwise one JSON object per second
    ({"seconds":..,"sentVideoKbps":..,"receivedFps":..,"resolution":..,"lossPercent":..,"rttMs":..}),
    command replies as JSON lines ({"ok":..,"command":..}), and a summary line at the end.
    Exit codes: 0 the call ran, 1 it failed (signaling refused, negotiation failed, a device
    could not be opened), 2 bad command line.
    """

let demoHelp = """
    usage: callend demo [--seconds N]

    Runs a signaling service and two endpoints (alice and bob) with synthetic video and audio on
    loopback for N seconds (default 10), then prints for each direction: setup time (join to first
    decoded frame), frames sent and decoded, audio decoded / recovered / concealed, and the
    capture-to-decode latency of the video (p50/p95) read from the stamps in the test pattern.
    """

func summaryLine(_ s: CallSummary) -> String {
    var parts = ["\(s.participant) <- \(s.peer ?? "?")"]
    if let setup = s.setupTime { parts.append("setup \((setup.inSeconds * 1000).fixed(0)) ms") }
    if let r = s.received {
        parts.append("video \(r.framesDecoded) frames decoded (\(r.keyframes) keyframes, \(r.framesDropped) dropped, \(r.decodeErrors) errors, \(r.pliSent) PLIs)"
                     + (r.videoPacketsInRED > 0 ? ", \(r.videoPacketsInRED) packets in RED, \(r.retransmissionsReceived) repaired by RTX, \(r.videoRecoveredByFEC) rebuilt from \(r.videoFECPackets) FEC" : ""))
        parts.append("audio \(r.audioDecoded) decoded" + (r.audioPacketsInRED > 0 ? " (\(r.audioPacketsInRED) packets in RED, \(r.audioRecoveredByRED) rebuilt from it)" : "")
                     + ", \(r.audioRecoveredByFEC) FEC, \(r.audioConcealed) concealed")
        if let p50 = r.videoLatencyMs.percentile(0.5), let p95 = r.videoLatencyMs.percentile(0.95) {
            parts.append("latency p50 \(p50.fixed(0)) ms p95 \(p95.fixed(0)) ms")
        }
        if let p50 = r.audioLatencyMs.percentile(0.5), let p95 = r.audioLatencyMs.percentile(0.95) {
            parts.append("audio latency p50 \(p50.fixed(0)) ms p95 \(p95.fixed(0)) ms")
        }
        if let offset = r.avOffsetMs { parts.append("A/V offset \(offset.signedFixed(0)) ms (holds: video \(r.lipSyncHoldMs.video.fixed(0)) ms, audio \(r.lipSyncHoldMs.audio.fixed(0)) ms)") }
    }
    if let sent = s.sent { parts.append("sent \(sent.videoFrames) frames, \(sent.audioPackets) audio packets") }
    if s.mediaRounds > 1 { parts.append("media sessions \(s.mediaRounds)") }
    parts.append("ended: \(s.endReason)")
    return parts.joined(separator: "; ")
}


/// The access token: --token T, --token-file F (one of them), else CALLEND_TOKEN.
func readToken(_ args: inout Arguments) throws -> String {
    let given = try args.value("--token"), file = try args.value("--token-file")
    if given != nil && file != nil { throw UsageError(description: "--token and --token-file are alternatives; give one") }
    var token = given ?? ProcessInfo.processInfo.environment["CALLEND_TOKEN"]
    if let file {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw UsageError(description: "cannot read --token-file \(file)") }
        token = text.trimmed(newlines: true)
        guard token?.isEmpty == false else { throw UsageError(description: "--token-file \(file) is empty") }
    }
    guard let token, !token.isEmpty else {
        throw UsageError(description: "join needs --token-file F (or CALLEND_TOKEN, or --token T); mint one with 'callend token'")
    }
    return token
}

/// --h264-encoder openh264|DEV: what makes the H.264 that --video-codec h264 or auto sends:
/// OpenH264 (the default), or the kernel's memory-to-memory encoder at DEV (the Raspberry Pi 4's
/// /dev/video11), which must be one that encodes H.264 from I420 pictures.
func parseH264Encoder(_ args: inout Arguments, codecs: [VideoCodec]) throws -> String? {
    guard let choice = try args.value("--h264-encoder"), choice != "openh264" else { return nil }
    guard codecs.contains(.h264) else { throw UsageError(description: "--h264-encoder makes H.264: give --video-codec h264 or auto") }
    let found = MemoryToMemoryEncoder.devices(encoding: "H264")
    guard found.contains(choice) else {
        throw UsageError(description: "--h264-encoder \(choice): not a memory-to-memory device that encodes H.264 from I420 pictures; "
            + (found.isEmpty ? "this machine has none: leave it out for OpenH264" : "this machine has \(found.joined(separator: ", "))"))
    }
    return choice
}

/// --video-codec vp8|h264|auto: the video codecs offered and accepted, best first. vp8 (the
/// default) and h264 alone; auto offers and accepts both, VP8 first, H.264 only where OpenH264
/// and libavcodec load; H.264 first when `video` is a camera asked for its own H.264
/// (--pixel-format H264), which is then sent as it comes. `vp8Only`: why this run must stay in
/// VP8 (it writes VP8 files), if it must.
func parseVideoCodec(_ args: inout Arguments, vp8Only: String? = nil, video: MediaSenderConfiguration.VideoSource = .none) throws -> [VideoCodec] {
    let choice = try args.value("--video-codec") ?? "vp8"
    // Asked only when H.264 may be used: the question loads its libraries (a VP8 call maps neither).
    var h264Missing: String? { VideoCodec.h264.unavailableReason }
    switch choice {
    case "vp8": return [.vp8]
    case "h264":
        if let h264Missing { throw UsageError(description: "--video-codec h264: \(h264Missing) (Debian: apt-get install libopenh264-7 libavcodec59)") }
        if let vp8Only { throw UsageError(description: "--video-codec h264 does not go with \(vp8Only)") }
        return [.h264]
    case "auto":
        guard h264Missing == nil, vp8Only == nil else { return [.vp8] }
        if case .camera(_, let mode) = video, let fourCC = mode?.fourCC, CaptureDevice.passedThroughFormats.contains(fourCC) { return [.h264, .vp8] }
        return [.vp8, .h264]
    default: throw UsageError(description: "--video-codec takes vp8, h264 or auto, not '\(choice)'")
    }
}

/// The media sources of join and publish: --camera or --video-source (with --video-size, --fps,
/// --pixel-format), --mic or --audio-source.
func parseCallSources(_ args: inout Arguments) throws -> (MediaSenderConfiguration.VideoSource, MediaSenderConfiguration.AudioSource) {
    let camera = try args.value("--camera"), mic = try args.value("--mic")
    let pixelFormat = try args.value("--pixel-format")
    var (video, audio) = try parseSources(&args, maxFrameRate: 60)
    if let camera {
        guard case .pattern(let w, let h, let fps) = video else { throw UsageError(description: "--camera and --video-source are alternatives; give one") }
        if let pixelFormat, pixelFormat.count != 4 { throw UsageError(description: "--pixel-format takes a FourCC such as YUYV, MJPG, NV12 or H264") }
        if let pixelFormat, CaptureDevice.passedThroughFormats.contains(pixelFormat.uppercased()), let missing = VideoCodec.h264.unavailableReason {
            throw UsageError(description: "--pixel-format \(pixelFormat.uppercased()): a camera's own H.264 needs the H.264 libraries: \(missing) (Debian: apt-get install libopenh264-7 libavcodec59)")
        }
        video = .camera(path: camera, mode: CameraModeRequest(width: w, height: h, frameRate: fps, fourCC: pixelFormat?.uppercased()))
    } else if pixelFormat != nil {
        throw UsageError(description: "--pixel-format applies to --camera only")
    }
    if let mic {
        guard audio == .tone else { throw UsageError(description: "--mic and --audio-source are alternatives; give one") }
        audio = .alsa(pcm: mic)
    }
    return (video, audio)
}

/// How --mic is captured: --mic-channels N opened, --mic-channel K or --mic-mix W,W,... of them,
/// and --voice (echo cancellation against --speaker, noise suppression, gain control).
struct MicrophoneOptions {
    var channels: Int?
    var selection = MicrophoneSelection.all
    var voice = false

    var given: Bool { channels != nil || selection != .all || voice }

    init(_ args: inout Arguments) throws {
        channels = try args.integer("--mic-channels", in: 1...32)
        voice = args.flag("--voice")
        let channel = try args.integer("--mic-channel", in: 1...32)
        let mix = try args.value("--mic-mix")
        if channel != nil && mix != nil { throw UsageError(description: "--mic-channel and --mic-mix are alternatives; give one") }
        if let channel { selection = .channel(channel) }
        if let mix {
            let weights = mix.split(separator: ",", omittingEmptySubsequences: false).map { Double($0.trimmed()) }
            guard !weights.isEmpty, weights.allSatisfy({ $0 != nil }) else {
                throw UsageError(description: "--mic-mix takes one weight per channel, such as 0.5,0.5,0,0, not '\(mix)'")
            }
            selection = .mix(weights.map { $0! })
        }
    }

    /// The ALSA device for --mic PCM (and the ranked --mic-prefer devices) with these options
    /// and, with --voice, the speaker on the same device, so the echo canceller hears exactly
    /// what the speaker plays.
    func device(capture pcm: String?, speaker: String?, routes: AudioRoutePreferences) throws -> ALSAAudioDevice {
        let channels: Int
        switch (self.channels, selection) {
        case (let n?, _): channels = n
        case (nil, .channel): throw UsageError(description: "--mic-channel needs --mic-channels N: how many channels the capture device has")
        case (nil, .mix(let weights)): channels = weights.count
        case (nil, .all): channels = 1
        }
        do {
            try selection.validate(channels: channels)
        } catch {
            throw UsageError(description: "--mic-channels \(channels): \(error)")
        }
        return try ALSAAudioDevice {
            $0.capturePCM = pcm
            $0.preferredCapture = routes.microphones
            $0.playbackPCM = voice ? speaker : nil
            if voice { $0.preferredPlayback = routes.speakers }
            $0.captureChannels = channels
            $0.microphone = selection
            if voice { $0.mode = .voiceChat }
        }
    }
}

/// Ranked microphones and speakers (--mic-prefer, --speaker-prefer, each repeatable, best first):
/// card ids or PCM names; the route follows them as devices are plugged in and removed.
struct AudioRoutePreferences {
    var microphones: [String]
    var speakers: [String]

    init(_ args: inout Arguments) throws {
        microphones = try args.values("--mic-prefer")
        speakers = try args.values("--speaker-prefer")
        for entry in microphones + speakers where entry.isEmpty || entry.contains(where: { $0.isWhitespace || $0.isNewline }) {
            throw UsageError(description: "--mic-prefer and --speaker-prefer take a card id (USB) or an ALSA PCM name, not '\(entry)'")
        }
    }
}

/// The endpoint's own ICE servers and policy: --ice-server URL..., --turn-username with
/// --turn-credential-file (or CALLEND_TURN_CREDENTIAL), --ice-transport all|relay.
func parseICEOptions(_ args: inout Arguments) throws -> ([ICEServer], ICETransportPolicy) {
    let iceURLs = try args.values("--ice-server")
    let turnUsername = try args.value("--turn-username")
    let turnCredentialFile = try args.value("--turn-credential-file")
    let iceTransport = try args.value("--ice-transport")
    guard iceTransport == nil || ICETransportPolicy(rawValue: iceTransport!) != nil else {
        throw UsageError(description: "--ice-transport takes all or relay, not '\(iceTransport!)'")
    }
    var turnCredential = ProcessInfo.processInfo.environment["CALLEND_TURN_CREDENTIAL"]
    if let turnCredentialFile {
        guard let text = try? String(contentsOfFile: turnCredentialFile, encoding: .utf8) else {
            throw UsageError(description: "cannot read --turn-credential-file \(turnCredentialFile)")
        }
        turnCredential = text.trimmed(newlines: true)
    }
    var iceServers: [ICEServer] = []
    for url in iceURLs {
        do {
            var server = try ICEServer(url: url)
            if case .turn = server.kind {
                guard let turnUsername, let turnCredential else {
                    throw UsageError(description: "--ice-server \(url) is a TURN server: give --turn-username and --turn-credential-file (or CALLEND_TURN_CREDENTIAL)")
                }
                (server.username, server.credential) = (turnUsername, turnCredential)
            }
            iceServers.append(server)
        } catch let error as ICEError {
            throw UsageError(description: error.description)
        } catch {
            throw error
        }
    }
    return (iceServers, iceTransport.flatMap(ICETransportPolicy.init(rawValue:)) ?? .all)
}

func runJoin(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(joinHelp); return }
    let commandLine = args  // what a reload (SIGHUP) reads again, the config file with it
    let operand = args.popOperand()
    _ = try args.applyConfig()
    let check = args.flag("--check")
    // The ROOM operand, or 'room = NAME' in a config file (a unit's instance names its file).
    let configuredRoom = try args.value("--room")
    guard let room = operand ?? configuredRoom else { throw UsageError(description: "join needs a ROOM (or 'room = NAME' in its --config file)") }
    let token = try readToken(&args)
    let serverArgument = try args.value("--server") ?? "127.0.0.1:7000"
    let overTLS = serverArgument.hasPrefix("tls://")
    // A list of services (nodes sharing rooms, or a standby) is tried in turn: HOST1:PORT1,HOST2:PORT2.
    let servers = try (overTLS ? String(serverArgument.dropFirst(6)) : serverArgument).split(separator: ",").map { text throws(UsageError) in
        try parseHostPort(String(text), option: "--server")
    }
    guard let server = servers.first else { throw UsageError(description: "--server takes HOST:PORT[,HOST:PORT...]") }
    let caFile = try args.value("--ca-file")
    let insecurePlaintext = args.flag("--insecure-plaintext")
    if overTLS && insecurePlaintext { throw UsageError(description: "--insecure-plaintext applies to a plain --server HOST:PORT, not tls://") }
    if !overTLS && !insecurePlaintext, let remote = servers.first(where: { !PlaintextPolicy.isLoopback(host: $0.host) }) {
        throw UsageError(description: PlaintextPolicy.refusal("join --server \(remote.host):\(remote.port)"))
    }
    if let caFile {
        guard overTLS else { throw UsageError(description: "--ca-file applies to --server tls://HOST:PORT only") }
        guard FileManager.default.isReadableFile(atPath: caFile) else { throw UsageError(description: "cannot read --ca-file \(caFile)") }
    }
    let (video, audio) = try parseCallSources(&args)
    let microphone = try MicrophoneOptions(&args)
    let routes = try AudioRoutePreferences(&args)
    let speaker = try args.value("--speaker")
    let videoOutput = try args.value("--video-out")
    let audioOutput = try args.value("--audio-out")
    let encoding = try args.value("--encoding")
    let maxVideo = try args.integer("--max-video-bitrate", in: 50_000...50_000_000)
    let duration = try args.integer("--duration", in: 1...86_400)
    let control = try args.value("--control")
    let noStdin = args.flag("--no-stdin")
    let measureLatency = args.flag("--measure-latency")
    let recordDir = try args.value("--record-dir")
    let recordQuota = try args.value("--record-quota").map { text throws(UsageError) in try parseByteSize(text, option: "--record-quota", minimum: 1 << 20) }
    let recordKeep = try args.value("--record-keep").map { text throws(UsageError) in try parseDuration(text, option: "--record-keep", maxDays: 3650) }
    let recordSegment = try args.integer("--record-segment", in: 5...3600)
    let maxViewers = try args.integer("--max-viewers", in: 0...64)
    let data = try DataSocketOptions.parse(&args)
    let (iceServers, iceTransport) = try parseICEOptions(&args)
    let metricsAddress = try args.value("--metrics").map { text throws(UsageError) in try parseHostPort(text, option: "--metrics") }
    let mesh = args.flag("--mesh")
    // Recordings and .ivf files are VP8 containers; a mesh shares one VP8 encode in layers.
    let vp8Only = recordDir != nil ? "--record-dir (WebM recordings are VP8)"
        : videoOutput?.hasSuffix(".ivf") == true ? "--video-out F.ivf (IVF holds VP8 here)"
        : mesh ? "--mesh (one VP8 encode in temporal layers feeds every peer)" : nil
    let videoCodecs = try parseVideoCodec(&args, vp8Only: vp8Only, video: video)
    let h264Encoder = try parseH264Encoder(&args, codecs: videoCodecs)
    let logger = try logWriter(program: "callend join", &args)
    try args.finish(command: "join")
    if mesh {
        let twoPartyOnly: [(String, Bool)] = [("--record-dir", recordDir != nil), ("--data-socket", data != nil), ("--video-out", videoOutput != nil),
                                              ("--speaker", speaker != nil), ("--audio-out", audioOutput != nil), ("--control", control != nil),
                                              ("--metrics", metricsAddress != nil), ("--max-viewers", maxViewers != nil), ("--measure-latency", measureLatency)]
        if let (option, _) = twoPartyOnly.first(where: \.1) { throw UsageError(description: "--mesh does not take \(option) (a two-party call's)") }
    }
    if speaker != nil && audioOutput != nil { throw UsageError(description: "--speaker and --audio-out are alternatives; give one") }
    if recordDir == nil, recordQuota != nil || recordKeep != nil || recordSegment != nil {
        throw UsageError(description: "--record-quota, --record-keep and --record-segment apply to a recording: give --record-dir")
    }
    if let videoOutput, ![".y4m", ".ivf", ".ppm"].contains(where: videoOutput.hasSuffix) {
        throw UsageError(description: "--video-out takes a .y4m, .ivf or .ppm file, not '\(videoOutput)'")
    }
    let options: ConnectOptions
    do {
        options = try ConnectOptions(token: token) {
            $0.roomName = room
            $0.iceServers = iceServers
            $0.iceTransportPolicy = iceTransport
            if overTLS { $0.signalingTLS = caFile.map { .caFile($0) } ?? .systemTrust }
            $0.insecurePlaintext = insecurePlaintext
            $0.fallbackServers = Array(servers.dropFirst())
            if let maxViewers { $0.maxViewers = maxViewers }
            switch encoding {
            case "auto": $0.videoEncodingMode = .auto
            case "manual": $0.videoEncodingMode = .manual
            default: break
            }
            if let maxVideo { $0.encodingParameters = EncodingParameters(maxVideoBitrate: maxVideo) }
        }
    } catch {
        throw UsageError(description: "\(error)")
    }
    if let encoding, encoding != "auto" && encoding != "manual" { throw UsageError(description: "--encoding takes auto or manual, not '\(encoding)'") }
    if check {
        printCheckedSettings(command: "join", args, subject: "room \(room)")
        return
    }
    // Devices are opened before joining, so a missing camera or microphone fails at once.
    var microphoneDevice: ALSAAudioDevice?
    if microphone.given || !routes.microphones.isEmpty {
        let pcm: String?
        switch audio {
        case .alsa(let name): pcm = name
        case .tone where !routes.microphones.isEmpty: pcm = nil  // the ranked list alone
        default: throw UsageError(description: "--voice, --mic-channels, --mic-channel, --mic-mix and --mic-prefer apply to an ALSA microphone (--mic PCM), not --audio-source")
        }
        microphoneDevice = try microphone.device(capture: pcm, speaker: speaker, routes: routes)
    }
    if !routes.speakers.isEmpty && audioOutput != nil { throw UsageError(description: "--speaker-prefer and --audio-out are alternatives; give one") }
    let playout: (any AudioDevice)? = if speaker != nil || !routes.speakers.isEmpty {
        // With --voice the microphone's device plays too: one device for both, like a
        // voice-processing audio unit.
        try microphone.voice && microphoneDevice != nil ? microphoneDevice
            : ALSAAudioDevice { $0.capturePCM = nil; $0.playbackPCM = speaker; $0.preferredPlayback = routes.speakers }
    } else {
        try audioOutput.map { try SyntheticAudioDevice(source: .silence, outputPath: $0) }
    }
    let audioTrack = try microphoneDevice.map { LocalAudioTrack(device: $0) } ?? audio.makeTrack(loopFiles: true)
    var media = Call.Media(videoTrack: try video.makeTrack(loopFiles: true, stamped: measureLatency), audioTrack: audioTrack,
                           renderers: videoOutput.map { [VideoRenderers.forPath($0)] } ?? [],
                           audioPlayout: playout)
    media.measuresLatency = measureLatency
    media.videoCodecs = videoCodecs
    media.h264EncoderDevice = h264Encoder
    if let recordDir {
        var recording = RecordingOptions(directory: recordDir)
        recording.quotaBytes = recordQuota
        recording.keep = recordKeep.map { .seconds($0) }
        if let recordSegment { recording.segmentLength = .seconds(recordSegment) }
        media.recording = try CallRecording(recording) { logger.write(.warning($0)) }
    }
    if mesh {
        onSignals([SIGHUP]) { logger.write(.warning("reload: a mesh endpoint reads its config file again on restart only; nothing changed")) }
        try runMesh(options: options, server: server, media: media, duration: duration, noStdin: noStdin, logger: logger)
        return
    }
    let bridge = try data.map { options -> DataSocketBridge in
        let track = DataTrack(channels: [options.unreliable ? .unreliable(options.label) : .reliable(options.label)])
        media.dataTrack = track
        track.onChannel { channel in
            logger.write("data: channel '\(channel.label)' open (stream \(channel.stream), \(channel.options.ordered ? "ordered" : "unordered"), \(channel.options.reliability))")
        }
        return try DataSocketBridge(path: options.path, track: track, label: options.label, mode: options.mode) { logger.write(.warning($0)) }
    }
    defer { bridge?.stop() }
    let call = try Call(options: options, server: server, media: media, duration: duration.map { .seconds($0) }) { logger.write($0) }
    // A live status line on a terminal; one JSON stats object per second otherwise.
    let terminal = isatty(STDOUT_FILENO) == 1
    let output = Mutex(())
    @Sendable func emit(_ line: String, status: Bool) {
        output.withLock { _ in
            if terminal && status {
                LogWriter.writeStandardOutput("\r" + (line.count >= 120 ? String(line.prefix(120)) : line + String(repeating: " ", count: 120 - line.count)))
            } else {
                LogWriter.writeStandardOutput(((terminal ? "\n" : "") + line + "\n"))
            }
        }
    }
    let latest = Mutex<(status: CallStatus, at: MediaTime)?>(nil)
    let clock = MonotonicClock()
    call.onStatus = { status in
        latest.withLock { $0 = (status, clock.now) }
        emit(terminal ? status.line : status.json, status: true)
    }
    // The peer's session ended (it left, the network went): no call is up from that moment. The
    // staleness above covers a status thread that stopped without it.
    call.onEvent = { event in if case .participantLeft = event { latest.withLock { $0 = nil } } }
    let recording = media.recording
    let metrics = try metricsAddress.map { address in
        try MetricsEndpoint(host: address.host, port: address.port) {
            // A call's statuses come each second while media flows; the last one of a call that
            // ended (the peer left, the network went) is not a call that is up.
            let current = latest.withLock { $0 }.flatMap { clock.now - $0.at <= .seconds(3) ? $0.status : nil }
            return "# HELP callend_call_up Whether media flows (a status in the last 3 s).\n# TYPE callend_call_up gauge\n"
                + (current.map { "callend_call_up 1\n" + $0.prometheus } ?? "callend_call_up 0\n")
                + (recording.map { $0.health.prometheus(quotaBytes: $0.quotaBytes) } ?? "")
        }
    }
    if let metrics, let metricsAddress {
        metrics.start()
        LogWriter.writeStandardError("callend join: metrics at http://\(metricsAddress.host):\(metrics.port)/metrics\n")
    }
    defer { metrics?.stop() }
    onTerminationSignals { call.stop() }
    let running = Mutex(JoinReload(token: token, iceServers: iceServers, recordQuota: recordQuota))
    onSignals([SIGHUP]) {
        do {
            let reloaded = try JoinReload(commandLine)
            if recording == nil && reloaded.recordQuota != nil { throw UsageError(description: "record-quota applies to a recording, and this call records nothing") }
            let changes = running.withLock { old in defer { old = reloaded }; return reloaded.changes(from: old) }
            call.reload(token: reloaded.token, iceServers: reloaded.iceServers)
            recording?.quotaBytes = reloaded.recordQuota
            logger.write("reload: \(changes.isEmpty ? "nothing changed" : changes.joined(separator: ", ")); the call goes on (other settings take effect on restart)")
        } catch {
            logger.write(.warning("reload refused: \(error); the call goes on with the settings it had"))
        }
    }
    let socket = try control.map { path in try ControlSocket(path: path) { call.perform($0) } }
    defer { socket?.stop() }
    if !noStdin {
        startThread(named: "stdin-commands") {
            while let line = readLine() {
                guard !line.trimmed().isEmpty else { continue }
                emit(call.perform(line), status: false)
            }
        }
    }
    let summary = try call.run()
    if terminal { print("") }
    // Written out now, not left in print's buffer until the process ends: whatever ends it after
    // this (a crash in a library's exit handler) must not take the call's summary with it.
    LogWriter.writeStandardOutput(summaryLine(summary) + "\n")
    if let recording = media.recording {
        let counts = recording.counts
        logger.write("recording: \(counts.sent) sent and \(counts.received) received segments in \(recording.options.directory), \(counts.deleted) deleted for the quota or their age")
    }
}

/// What `join` takes again from its command line and config file on a reload (SIGHUP,
/// `systemctl reload`) while the call goes on: the token, its own ICE servers, the recording quota.
struct JoinReload: Equatable {
    var token: String
    var iceServers: [ICEServer]
    var recordQuota: Int64?

    init(token: String, iceServers: [ICEServer], recordQuota: Int64?) {
        (self.token, self.iceServers, self.recordQuota) = (token, iceServers, recordQuota)
    }

    /// The command line read again, its config file with it (checked as at start: a
    /// world-readable token file, a bad value or a file gone is an error that changes nothing).
    init(_ commandLine: Arguments) throws {
        var args = commandLine
        _ = args.popOperand()
        _ = try args.applyConfig()
        token = try readToken(&args)
        iceServers = try parseICEOptions(&args).0
        recordQuota = try args.value("--record-quota").map { text throws(UsageError) in try parseByteSize(text, option: "--record-quota", minimum: 1 << 20) }
    }

    /// What differs from `old`, for the log (a token's value never appears).
    func changes(from old: JoinReload) -> [String] {
        var changed: [String] = []
        if token != old.token { changed.append("a new token") }
        if iceServers != old.iceServers { changed.append("ICE servers \(iceServers.isEmpty ? "none" : iceServers.map(\.description).joined(separator: " "))") }
        if recordQuota != old.recordQuota { changed.append("record quota \(recordQuota.map(String.init) ?? "none")") }
        return changed
    }
}

/// `join --data-socket PATH [--data-label L] [--data-mode lines|bytes] [--data-unreliable]`.
struct DataSocketOptions {
    var path: String
    var label: String
    var mode: DataSocketBridge.Mode
    var unreliable: Bool

    /// nil without --data-socket (and then none of the others may be given).
    static func parse(_ args: inout Arguments) throws -> DataSocketOptions? {
        let path = try args.value("--data-socket")
        let label = try args.value("--data-label")
        let modeText = try args.value("--data-mode")
        let unreliable = args.flag("--data-unreliable")
        guard let path else {
            if label != nil || modeText != nil || unreliable {
                throw UsageError(description: "--data-label, --data-mode and --data-unreliable apply to a data channel: give --data-socket PATH")
            }
            return nil
        }
        guard let mode = DataSocketBridge.Mode(rawValue: modeText ?? "lines") else {
            throw UsageError(description: "--data-mode takes lines or bytes, not '\(modeText ?? "")'")
        }
        let name = label ?? "callend"
        guard !name.isEmpty, name.utf8.count <= 1024 else { throw UsageError(description: "--data-label must be 1 ... 1024 bytes") }
        return DataSocketOptions(path: path, label: name, mode: mode, unreliable: unreliable)
    }
}

func runDemo(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(demoHelp); return }
    let seconds = try args.integer("--seconds", in: 2...3600) ?? 10
    try args.finish(command: "demo")
    let secret = TokenSecret.random()
    let server = try SignalingServer(configuration: SignalingServerConfiguration(host: "127.0.0.1", port: 0, secret: secret))
    server.start()
    defer { server.stop() }
    print("demo: signaling on 127.0.0.1:\(server.port); alice and bob join room 'demo' for \(seconds) s (640x480@30 VP8 + Opus, ICE + DTLS-SRTP)")
    let now = Int64(WallClock.unixSeconds)
    let results = Mutex<[String: Result<CallSummary, any Error>]>([:])
    let group = DispatchGroup()
    for name in ["alice", "bob"] {
        let token = TokenIssuer(secret: secret).mint(TokenClaims(identity: name, room: "demo", issuedAt: now, expires: now + 3600))
        let options = try ConnectOptions(token: token) { $0.roomName = "demo" }
        // The demo's summary gives capture-to-decode latency: both ends read the stamps.
        var media = try Call.Media.synthetic()
        media.measuresLatency = true
        let call = try Call(options: options, server: ("127.0.0.1", server.port), media: media, duration: .seconds(seconds)) { line in
            print("demo: \(name): \(line)")
        }
        call.onStatus = { status in print("demo: " + status.line) }
        // Bob joins once alice has (the second to join makes the offer).
        let joined = DispatchSemaphore(value: 0)
        call.onEvent = { event in if case .connected = event { joined.signal() } }
        group.enter()
        startThread(named: name) {
            let result = Result { try call.run() }
            results.withLock { $0[name] = result }
            joined.signal()
            group.leave()
        }
        joined.wait()
    }
    group.wait()
    var ok = true
    let summaries = ["alice", "bob"].map { name in results.withLock { $0[name]! } }
    for (index, name) in ["alice", "bob"].enumerated() {
        switch summaries[index] {
        case .success(let summary):
            print("demo: " + summaryLine(summary))
            // Judged against what the other side sent, not against a frame rate this machine may not reach.
            let decoded = summary.received?.framesDecoded ?? 0
            let sent = (try? summaries[1 - index].get())?.sent?.videoFrames ?? 0
            if sent == 0 || decoded < sent * 8 / 10 { ok = false }
        case .failure(let error):
            print("demo: \(name) failed: \(error)")
            ok = false
        }
    }
    print("demo: \(ok ? "both directions delivered video and audio" : "FAILED: a direction lost too much")")
    if !ok { exit(ExitCode.failure.rawValue) }
}

/// `join --mesh`: a room of up to four, then one JSON line per peer and a summary line.
func runMesh(options: ConnectOptions, server: (host: String, port: Int), media: Call.Media, duration: Int?, noStdin: Bool, logger: LogWriter) throws {
    let call = try MeshCall(options: options, server: server, media: media, duration: duration.map { .seconds($0) }) { logger.write($0) }
    onTerminationSignals { call.stop() }
    if !noStdin { readLeaveCommand(program: "join --mesh") { call.stop() } }
    let summary = try call.run()
    for (name, p) in summary.peers.sorted(by: { $0.key < $1.key }) {
        let fields: [String: JSONValue] = [
            "peer": .string(name), "sessions": .number(Double(p.sessions)), "framesDecoded": .number(Double(p.framesDecoded)),
            "watchedMs": .number(Double(p.watched.inMilliseconds)),
            "decodeErrors": .number(Double(p.decodeErrors)), "freezes": .number(Double(p.freezes)), "longestFreezeMs": .number(Double(p.longestFreeze.inMilliseconds)),
            "videoPackets": .number(Double(p.videoPackets)), "videoPacketsLost": .number(Double(p.videoPacketsLost)),
            "audioDecoded": .number(Double(p.audioDecoded)), "framesSent": .number(Double(p.framesSent)),
        ]
        print(String(decoding: JSONValue.object(fields).serialized, as: UTF8.self))
    }
    print("mesh: \(summary.participant) in room \(options.roomName) with \(summary.peers.count) peers over the call; ended: \(summary.endReason)")
}
