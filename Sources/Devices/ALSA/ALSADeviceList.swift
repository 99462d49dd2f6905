internal import CALSA
import FoundationEssentials
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// What one direction of a PCM device accepts.
public struct AudioStreamCapabilities: Sendable, Equatable, Codable {
    public var minRate: Int
    public var maxRate: Int
    public var minChannels: Int
    public var maxChannels: Int
}

/// One PCM device of a sound card, with names that stay valid when card numbers shift (ALSA's
/// CARD=<id> form uses the card's id, not its index).
public struct AudioDeviceInfo: Sendable, Equatable, Codable {
    public var cardIndex: Int
    public var cardID: String
    public var cardName: String
    public var device: Int
    public var name: String
    /// `hw:CARD=<id>,DEV=<n>`: the device as it is.
    public var hardwareName: String
    /// `plughw:CARD=<id>,DEV=<n>`: with rate, format and channel conversion by alsa-lib.
    public var plugName: String
    public var capture: AudioStreamCapabilities?
    public var playback: AudioStreamCapabilities?
    /// Why a direction could not be probed (busy, permission), if so.
    public var problems: [String]
}

public enum ALSADeviceList {
    /// Every PCM device of every sound card alsa-lib sees.
    public static func devices() -> [AudioDeviceInfo] { list().devices }

    /// The devices, and the cards that exist but could not be opened (permissions, say).
    public static func list() -> (devices: [AudioDeviceInfo], problems: [DeviceError]) {
        var out: [AudioDeviceInfo] = []
        var problems: [DeviceError] = []
        var card: Int32 = -1
        while snd_card_next(&card) == 0, card >= 0 {
            var ctl: OpaquePointer?
            let opened = snd_ctl_open(&ctl, "hw:\(card)", 0)
            guard opened == 0, let ctl else {
                problems.append(ALSAPCM.error("open sound card \(card) (hw:\(card))", opened))
                continue
            }
            defer { snd_ctl_close(ctl) }
            var info: OpaquePointer?
            guard snd_ctl_card_info_malloc(&info) == 0, let info else { continue }
            defer { snd_ctl_card_info_free(info) }
            guard snd_ctl_card_info(ctl, info) == 0 else { continue }
            let id = String(cString: snd_ctl_card_info_get_id(info))
            let cardName = String(cString: snd_ctl_card_info_get_name(info))
            var device: Int32 = -1
            while snd_ctl_pcm_next_device(ctl, &device) == 0, device >= 0 {
                let hw = "hw:CARD=\(id),DEV=\(device)"
                var entry = AudioDeviceInfo(cardIndex: Int(card), cardID: id, cardName: cardName, device: Int(device),
                                            name: pcmName(ctl, device) ?? cardName, hardwareName: hw,
                                            plugName: "plughw:CARD=\(id),DEV=\(device)", capture: nil, playback: nil, problems: [])
                for stream in [SND_PCM_STREAM_CAPTURE, SND_PCM_STREAM_PLAYBACK] {
                    switch probe(hw, stream) {
                    case .success(let caps):
                        if stream == SND_PCM_STREAM_CAPTURE { entry.capture = caps } else { entry.playback = caps }
                    case .failure(let problem):
                        if -problem.code != ENOENT && -problem.code != ENODEV {
                            entry.problems.append("\(stream == SND_PCM_STREAM_CAPTURE ? "capture" : "playback"): \(problem.text)")
                        }
                    }
                }
                out.append(entry)
            }
        }
        // A card the kernel has but this user cannot open is invisible to snd_card_next: say so.
        let seen = Set(out.map(\.cardIndex))
        for (index, name) in kernelCards() where !seen.contains(index) {
            if access("/dev/snd/controlC\(index)", R_OK | W_OK) != 0 {
                problems.append(DeviceError(operation: "open sound card \(index) (\(name))",
                                            detail: "/dev/snd/controlC\(index): \(String(cString: strerror(errno))); add the user to the 'audio' group"))
            }
        }
        return (out, problems)
    }

    /// Cards as /proc/asound/cards lists them (readable by every user): " 0 [Loopback ]: Loopback - Loopback".
    static func kernelCards(path: String = "/proc/asound/cards") -> [(Int, String)] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let trimmed = line.drop { $0 == " " }
            guard let space = trimmed.firstIndex(of: " "), let index = Int(trimmed[..<space]),
                  let open = trimmed.firstIndex(of: "["), let close = trimmed.firstIndex(of: "]") else { return nil }
            return (index, trimmed[trimmed.index(after: open)..<close].trimmed())
        }
    }

    private static func pcmName(_ ctl: OpaquePointer, _ device: Int32) -> String? {
        var info: OpaquePointer?
        guard snd_pcm_info_malloc(&info) == 0, let info else { return nil }
        defer { snd_pcm_info_free(info) }
        snd_pcm_info_set_device(info, UInt32(device))
        snd_pcm_info_set_subdevice(info, 0)
        for stream in [SND_PCM_STREAM_PLAYBACK, SND_PCM_STREAM_CAPTURE] {
            snd_pcm_info_set_stream(info, stream)
            if snd_ctl_pcm_info(ctl, info) == 0 { return String(cString: snd_pcm_info_get_name(info)) }
        }
        return nil
    }

    struct ProbeFailure: Error {
        let code: Int32
        var text: String {
            -code == EBUSY ? "busy (in use by another program)" : String(cString: snd_strerror(code))
        }
    }

    private static func probe(_ name: String, _ stream: snd_pcm_stream_t) -> Result<AudioStreamCapabilities, ProbeFailure> {
        var pcm: OpaquePointer?
        let opened = snd_pcm_open(&pcm, name, stream, SND_PCM_NONBLOCK)
        guard opened == 0, let pcm else { return .failure(ProbeFailure(code: opened)) }
        defer { snd_pcm_close(pcm) }
        var hw: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&hw) == 0, let hw else { return .failure(ProbeFailure(code: -ENOMEM)) }
        defer { snd_pcm_hw_params_free(hw) }
        let any = snd_pcm_hw_params_any(pcm, hw)
        guard any >= 0 else { return .failure(ProbeFailure(code: any)) }
        var minRate: UInt32 = 0, maxRate: UInt32 = 0, minChannels: UInt32 = 0, maxChannels: UInt32 = 0
        var dir: Int32 = 0
        snd_pcm_hw_params_get_rate_min(hw, &minRate, &dir)
        snd_pcm_hw_params_get_rate_max(hw, &maxRate, &dir)
        snd_pcm_hw_params_get_channels_min(hw, &minChannels)
        snd_pcm_hw_params_get_channels_max(hw, &maxChannels)
        return .success(AudioStreamCapabilities(minRate: Int(minRate), maxRate: Int(maxRate), minChannels: Int(minChannels), maxChannels: Int(maxChannels)))
    }
}
