import CallEndpoint
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import CLIKit

let sendHelp = """
    usage: callend send --to HOST:PORT [--sdp-out FILE] [--video-source pattern|FILE.y4m|none]
                        [--audio-source tone|FILE.wav|none] [--video-size WxH] [--fps N]
                        [--video-bitrate BPS] [--srtp-key BASE64|random] [--srtp-profile NAME] [--duration S]

    Streams VP8 video to HOST:PORT and Opus audio to HOST:PORT+2 over RTP, RTCP multiplexed on
    each port, without signaling, the way gst-launch or ffmpeg -f rtp do. --sdp-out writes the SDP
    a receiver needs (GStreamer, ffmpeg -protocol_whitelist file,udp,rtp -i FILE, VLC, callend
    receive). Payload types are fixed: VP8 96, its RFC 4588 retransmissions 97, H.264 102 (its
    retransmissions 103), Opus 111.
    Prints statistics at the end.

      --video-source S   pattern (moving test picture, default), a Y4M file, or none
      --audio-source S   tone (440 Hz, default), a 48 kHz 16-bit WAV file, or none
      --video-size WxH   size of the pattern (default 640x480); --fps N its rate (default 30)
      --video-bitrate B  the video target in bit/s (default 1000000)
      --video-codec C    vp8 (default) or h264: constrained baseline from OpenH264 (Debian
                         libopenh264-7), RFC 6184 packetization mode 1, parameter sets before each IDR
      --srtp-key K       encrypt with SRTP: K is the base64 master key and salt, or 'random'
      --srtp-profile P   AES_CM_128_HMAC_SHA1_80 (default) or AEAD_AES_128_GCM
      --duration S       seconds to send (default: until the file ends, or 10 for synthetic sources)
    """

let receiveHelp = """
    usage: callend receive --sdp FILE [--video-out FILE.y4m|FILE.ivf] [--audio-out FILE.wav] [--duration S]

    Receives the VP8 or H.264 (packetization mode 1) and Opus streams an SDP file describes (from
    'callend send --sdp-out', or 'ffmpeg ... -f rtp -sdp_file'), asking for lost video packets
    (NACK) and keyframes (PLI), and writes decoded video (Y4M), the VP8 frames as received (IVF)
    and decoded audio (WAV). H.264 is decoded by libavcodec (Debian libavcodec59).
    Stops after --duration, when the sender says BYE, or after 3 s without packets. Prints statistics.
    """

/// --video-source, --video-size, --fps and --audio-source, as send and join take them.
func parseSources(_ args: inout Arguments, maxFrameRate: Int) throws -> (MediaSenderConfiguration.VideoSource, MediaSenderConfiguration.AudioSource) {
    let size = try args.value("--video-size").map { text throws(UsageError) in try parseSize(text) } ?? (width: 640, height: 480)
    let fps = try args.integer("--fps", in: 1...maxFrameRate) ?? 30
    let video: MediaSenderConfiguration.VideoSource
    switch try args.value("--video-source") ?? "pattern" {
    case "pattern": video = .pattern(width: size.width, height: size.height, frameRate: fps)
    case "none": video = .none
    case let path where path.hasSuffix(".y4m"): video = .y4m(path: path)
    case let other: throw UsageError(description: "--video-source takes pattern, none or a .y4m file, not '\(other)'")
    }
    let audio: MediaSenderConfiguration.AudioSource
    switch try args.value("--audio-source") ?? "tone" {
    case "tone": audio = .tone
    case "none": audio = .none
    case let path where path.hasSuffix(".wav"): audio = .wav(path: path)
    case let other: throw UsageError(description: "--audio-source takes tone, none or a .wav file, not '\(other)'")
    }
    return (video, audio)
}

func runSend(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(sendHelp); return }
    guard let to = try args.value("--to") else { throw UsageError(description: "send needs --to HOST:PORT") }
    let (host, port) = try parseHostPort(to, option: "--to")
    guard port > 0 && port <= 65533 else { throw UsageError(description: "--to needs a port from 1 to 65533 (audio goes to PORT+2)") }
    var configuration = MediaSenderConfiguration(destinationHost: host, videoPort: port)
    (configuration.video, configuration.audio) = try parseSources(&args, maxFrameRate: 120)
    guard configuration.video != .none || configuration.audio != .none else {
        throw UsageError(description: "nothing to send: --video-source none and --audio-source none")
    }
    if let bitrate = try args.integer("--video-bitrate", in: 10_000...100_000_000) { configuration.videoBitrate = bitrate }
    switch try args.value("--video-codec") ?? "vp8" {
    case "vp8": break
    case "h264":
        if let missing = VideoCodec.h264.unavailableReason { throw UsageError(description: "--video-codec h264: \(missing)") }
        configuration.videoFormat = .h264
        configuration.payloadTypes.video = 102
        configuration.payloadTypes.rtx = 103
    case let other: throw UsageError(description: "send's --video-codec takes vp8 or h264, not '\(other)'")
    }
    let profileName = try args.value("--srtp-profile") ?? SRTPProfile.aes128CmSha1_80.rawValue
    guard let profile = SRTPProfile(rawValue: profileName) else {
        throw UsageError(description: "--srtp-profile takes \(SRTPProfile.allCases.map(\.rawValue).joined(separator: " or ")), not '\(profileName)'")
    }
    if let key = try args.value("--srtp-key") {
        if key == "random" {
            configuration.srtp = (profile, (0..<profile.keyMaterialLength).map { _ in UInt8.random(in: 0...255) })
        } else {
            guard let bytes = Data(base64Encoded: key), bytes.count == profile.keyMaterialLength else {
                throw UsageError(description: "--srtp-key must be base64 of \(profile.keyMaterialLength) bytes (key and salt) for \(profile.rawValue), or 'random'")
            }
            configuration.srtp = (profile, [UInt8](bytes))
        }
    }
    let sdpOut = try args.value("--sdp-out")
    if let seconds = try args.integer("--duration", in: 1...86_400) {
        configuration.duration = .seconds(seconds)
    } else if case .y4m = configuration.video {
    } else if case .wav = configuration.audio {
    } else {
        configuration.duration = .seconds(10)
    }
    try args.finish(command: "send")

    let sender = try MediaSender(configuration: configuration)
    let sdp = sender.sessionDescription.text
    if let sdpOut {
        // With SRTP the file holds the keys (a=crypto): owner only.
        do { try writePrivateFile(atPath: sdpOut, contents: Array(sdp.utf8)) } catch {
            throw UsageError(description: "--sdp-out: \(error)")
        }
    }
    LogWriter.writeStandardError("callend send: video to \(host):\(port), audio to \(host):\(port + 2)\(configuration.srtp == nil ? "" : " (SRTP \(profile.rawValue))")\n")
    let stats = try sender.run()
    print(stats)
}

func runReceive(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(receiveHelp); return }
    guard let sdpPath = try args.value("--sdp") else { throw UsageError(description: "receive needs --sdp FILE") }
    let videoOut = try args.value("--video-out")
    let audioOut = try args.value("--audio-out")
    if let videoOut, !(videoOut.hasSuffix(".y4m") || videoOut.hasSuffix(".ivf")) {
        throw UsageError(description: "--video-out must end in .y4m (decoded) or .ivf (VP8 as received)")
    }
    if let audioOut, !audioOut.hasSuffix(".wav") { throw UsageError(description: "--audio-out must end in .wav") }
    let duration = try args.integer("--duration", in: 1...86_400)
    try args.finish(command: "receive")
    guard let text = try? String(contentsOfFile: sdpPath, encoding: .utf8) else {
        throw UsageError(description: "cannot read the SDP file \(sdpPath)")
    }
    let description: SessionDescriptionFile
    do { description = try SessionDescriptionFile(parsing: text) } catch { throw UsageError(description: "\(sdpPath): \(error)") }
    var configuration = MediaReceiverConfiguration(description: description)
    configuration.videoOutput = videoOut
    configuration.audioOutput = audioOut
    configuration.duration = duration.map { .seconds($0) }
    let receiver = try MediaReceiver(configuration: configuration)
    print(try receiver.run())
}
