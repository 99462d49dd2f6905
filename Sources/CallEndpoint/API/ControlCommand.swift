import Dispatch
import FoundationEssentials
import Glibc

/// A command to a running call, one per line, from standard input or the control socket.
public enum ControlCommand: Sendable, Equatable {
    case help
    case stats
    case mute(TrackKind?)
    case unmute(TrackKind?)
    /// Switch the camera: a V4L2 device (optionally in a mode), `pattern` or a `.y4m` file.
    case camera(CameraInput)
    /// Switch the current camera's mode (or the pattern's size and rate).
    case mode(CameraModeRequest)
    case microphone(String)
    case speaker(String)
    case leave

    public static let usage = """
        commands: stats | mute [audio|video] | unmute [audio|video] | camera DEV [WxH[@FPS][/FOURCC]] | camera pattern [WxH[@FPS]] \
        | camera FILE.y4m | mode WxH[@FPS][/FOURCC] | mic PCM | speaker PCM | leave | help
        """

    public init(parsing line: String) throws(ConfigurationError) {
        let words = line.split(whereSeparator: \.isWhitespace).map(String.init)
        guard let verb = words.first?.lowercased() else { throw ConfigurationError("empty command; \(Self.usage)") }
        let rest = Array(words.dropFirst())
        func kind() throws(ConfigurationError) -> TrackKind? {
            guard let word = rest.first else { return nil }
            guard rest.count == 1, let kind = TrackKind(rawValue: word.lowercased()) else {
                throw ConfigurationError("\(verb) takes audio, video or nothing (both), not '\(rest.joined(separator: " "))'")
            }
            return kind
        }
        func one(_ what: String) throws(ConfigurationError) -> String {
            guard rest.count == 1 else { throw ConfigurationError("\(verb) takes one \(what)") }
            return rest[0]
        }
        switch verb {
        case "help", "?": guard rest.isEmpty else { throw ConfigurationError("help takes nothing") }; self = .help
        case "stats": guard rest.isEmpty else { throw ConfigurationError("stats takes nothing") }; self = .stats
        case "leave", "quit", "bye": guard rest.isEmpty else { throw ConfigurationError("\(verb) takes nothing") }; self = .leave
        case "mute": self = .mute(try kind())
        case "unmute": self = .unmute(try kind())
        case "mic", "microphone": self = .microphone(try one("ALSA PCM name"))
        case "speaker": self = .speaker(try one("ALSA PCM name"))
        case "mode": self = .mode(try CameraModeRequest(parsing: try one("mode, WxH[@FPS][/FOURCC]")))
        case "camera":
            guard (1...2).contains(rest.count) else { throw ConfigurationError("camera takes DEV [MODE], pattern [MODE] or FILE.y4m") }
            let mode = rest.count == 2 ? try CameraModeRequest(parsing: rest[1]) : nil
            switch rest[0] {
            case "pattern":
                self = .camera(.pattern(width: mode?.width ?? 640, height: mode?.height ?? 480, frameRate: mode?.frameRate ?? 30))
            case let path where path.hasSuffix(".y4m"):
                guard mode == nil else { throw ConfigurationError("a Y4M file has its own size and rate") }
                self = .camera(.file(path: path))
            case let path:
                self = .camera(.device(path: path, mode: mode))
            }
        default:
            throw ConfigurationError("unknown command '\(verb)'; \(Self.usage)")
        }
    }
}

/// The one-line JSON reply to a control command.
struct ControlReply: Encodable {
    var ok: Bool
    var command: String
    var detail: String?
    var error: String?
    var status: CallStatus?
    var video: VideoState?
    var audio: AudioState?

    struct VideoState: Encodable {
        var input: String
        var size: String
        var frameRate: Double
        var muted: Bool
    }

    struct AudioState: Encodable {
        var microphone: String
        var speaker: String
        var muted: Bool
    }

    var line: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? #"{"ok":false}"#
    }
}

extension Call {
    /// Runs one control command against the running call; the reply is one JSON line.
    public func perform(_ line: String) -> String {
        let verb = line.split(whereSeparator: \.isWhitespace).first.map(String.init) ?? ""
        var reply = ControlReply(ok: true, command: verb)
        do {
            switch try ControlCommand(parsing: line) {
            case .help:
                reply.detail = ControlCommand.usage
            case .stats:
                reply.status = current.withLock { $0.status }
            case .mute(let kind):
                try setEnabled(false, kind, verb)
            case .unmute(let kind):
                try setEnabled(true, kind, verb)
            case .camera(let input):
                guard let track = media.videoTrack else { throw ConfigurationError("no video track: the call was started without video") }
                try track.source.select(input)
            case .mode(let request):
                guard let track = media.videoTrack else { throw ConfigurationError("no video track: the call was started without video") }
                switch track.source.input {
                case .device(let path, _): try track.source.select(.device(path: path, mode: request))
                case .pattern: try track.source.select(.pattern(width: request.width, height: request.height, frameRate: request.frameRate ?? 30))
                case .file: throw ConfigurationError("a Y4M file has its own size and rate; switch with 'camera' instead")
                }
            case .microphone(let pcm):
                guard let device = media.audioTrack?.device else { throw ConfigurationError("no audio track: the call was started without audio") }
                try device.selectCapture(pcm)
            case .speaker(let pcm):
                guard let device = media.audioPlayout else { throw ConfigurationError("no speaker: start with --speaker PCM to play audio") }
                try device.selectPlayback(pcm)
            case .leave:
                stop()
            }
        } catch {
            reply.ok = false
            reply.error = "\(error)"
        }
        if let track = media.videoTrack {
            let f = track.source.format
            reply.video = .init(input: track.source.input.description, size: "\(f.width)x\(f.height)", frameRate: f.frameRate, muted: !track.isEnabled)
        }
        if media.audioTrack != nil || media.audioPlayout != nil {
            reply.audio = .init(microphone: media.audioTrack?.device.route.capture ?? "none", speaker: media.audioPlayout?.route.playback ?? "none",
                                muted: !(media.audioTrack?.isEnabled ?? true))
        }
        return reply.line
    }

    /// Mutes or unmutes one kind of track, or both (nil).
    private func setEnabled(_ enabled: Bool, _ kind: TrackKind?, _ verb: String) throws(ConfigurationError) {
        if kind != .audio {
            guard let track = media.videoTrack else { throw ConfigurationError("no video track to \(verb)") }
            track.isEnabled = enabled
        }
        if kind != .video {
            guard let track = media.audioTrack else { throw ConfigurationError("no audio track to \(verb)") }
            track.isEnabled = enabled
        }
    }
}
