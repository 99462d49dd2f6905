import CallEndpoint
import Devices
import Dispatch
import FoundationEssentials
import Platform
import Glibc
import CLIKit

let devicesHelp = """
    usage: callend devices [--json]
           callend devices --doctor [--json] [--seconds S] [--camera DEV]... [--format FOURCC]... [--no-audio]
           callend devices --watch [--json] [--duration S]

    Lists V4L2 cameras (/dev/video*: driver, card, bus, the stable /dev/v4l/by-id name, every pixel
    format with its sizes and frame rates) and ALSA PCM devices (stable hw:CARD=<id>,DEV=<n> and
    plughw: names, rates and channel counts for capture and playback). Devices that cannot be read
    (busy, permission) are listed with the reason. --json prints one JSON document instead.

    Memory-to-memory encoders (a board's H.264 block, for --h264-encoder) are listed with what
    they encode. Each camera's controls are listed by name; a camera that encodes H.264 itself says whether it
    has the two controls its pass-through uses (the encoder's bitrate, a keyframe on request).

    --doctor checks each device works here and now: every camera mode callend converts (YUYV, NV12,
    MJPG, YU12, RGB3, ...) or sends as it comes (H264) is opened and run for S seconds (default 0.5; longer for a slow mode,
    until five frames) and the frame rate it really delivers is measured; a device another program
    holds is "busy", with the processes holding it (from /proc); one this user may not open is
    "forbidden", with the group to join; each ALSA device runs S seconds in each direction and its
    xruns are counted. A camera that delivers H.264 gets a verdict: whether callend can send it as
    it comes (--video-codec h264 --pixel-format H264) and how its rate would follow the network
    (its bitrate control, else its H.264 modes, else nothing). --camera limits it to those cameras, --format to those pixel formats,
    --no-audio skips sound. Exit code 1
    when any device is busy, forbidden or failed, or a mode failed.

    --watch prints the sound cards present, then each card as it is plugged in (+, with its PCM
    devices) or removed (-), until SIGINT/SIGTERM or --duration S; with --json one JSON object a
    line. It needs no udev daemon (inotify on /dev/snd and /proc/asound/cards).
    """

struct SoundCardEvent: Encodable {
    var event: String
    var index: Int
    var card: String
    var devices: [AudioDeviceInfo]
}

func runDevicesWatch(json: Bool, duration: Int?) {
    let finished = DispatchSemaphore(value: 0)
    onTerminationSignals { finished.signal() }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let watch = SoundCardWatch { added, removed, _ in
        let devices = added.isEmpty ? [] : ALSADeviceList.devices()
        let events = removed.map { SoundCardEvent(event: "removed", index: $0.index, card: $0.id, devices: []) }
            + added.map { card in SoundCardEvent(event: "added", index: card.index, card: card.id, devices: devices.filter { $0.cardID == card.id }) }
        var text = ""
        for e in events {
            if json {
                text += String(decoding: (try? encoder.encode(e)) ?? Data(), as: UTF8.self) + "\n"
            } else {
                text += "\(e.event == "added" ? "+" : "-") card \(e.index) \(e.card)\n"
                for d in e.devices {
                    func channels(_ c: AudioStreamCapabilities?) -> String { c.map { "\($0.minChannels)-\($0.maxChannels) ch" } ?? "none" }
                    text += "    \(d.plugName): \(d.name) (capture \(channels(d.capture)), playback \(channels(d.playback)))\n"
                }
            }
        }
        // Written at once, unbuffered: a reader of a pipe sees each change as it happens.
        LogWriter.writeStandardOutput(text)
    }
    if let duration { finished.wait(for: .seconds(duration)) } else { finished.wait() }
    watch.stop()
}

struct DevicesReport: Encodable {
    var cameras: [CaptureDevice]
    var encoders: [MemoryToMemoryEncoder.Description]
    var audio: [AudioDeviceInfo]
    var problems: [String]
}

func runDevices(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(devicesHelp); return }
    let json = args.flag("--json")
    let watching = args.flag("--watch")
    let doctor = args.flag("--doctor")
    let duration = try args.integer("--duration", in: 1...86_400)
    let seconds = try args.value("--seconds").map { text throws(UsageError) -> Double in
        guard let value = Double(text), value >= 0.1, value <= 60 else { throw UsageError(description: "--seconds takes 0.1 ... 60, not '\(text)'") }
        return value
    }
    let cameraPaths = try args.values("--camera")
    let formats = try args.values("--format")
    let noAudio = args.flag("--no-audio")
    try args.finish(command: "devices")
    if duration != nil && !watching { throw UsageError(description: "--duration applies to devices --watch") }
    if watching && doctor { throw UsageError(description: "--watch and --doctor are separate uses of devices; give one") }
    if !doctor && (seconds != nil || !cameraPaths.isEmpty || !formats.isEmpty || noAudio) {
        throw UsageError(description: "--seconds, --camera, --format and --no-audio apply to devices --doctor")
    }
    if doctor {
        let report = DeviceDoctor.run(seconds: seconds ?? 0.5, cameras: cameraPaths.isEmpty ? nil : cameraPaths,
                                      formats: formats.isEmpty ? nil : Set(formats), audio: !noAudio)
        printDoctor(report, json: json)
        if !report.healthy { exit(1) }
        return
    }
    if watching {
        runDevicesWatch(json: json, duration: duration)
        return
    }
    let (cameras, cameraProblems) = CameraDevices.list()
    let (audio, audioProblems) = ALSADeviceList.list()
    let report = DevicesReport(cameras: cameras, encoders: MemoryToMemoryEncoder.list(), audio: audio, problems: (cameraProblems + audioProblems).map(\.description))
    if json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        print(String(decoding: try encoder.encode(report), as: UTF8.self))
        return
    }
    print("cameras:")
    if report.cameras.isEmpty { print("  none found under /dev/video*") }
    for camera in report.cameras {
        print("  \(camera.path)\(camera.stableName.map { " (\($0))" } ?? ""): \(camera.card) [\(camera.driver), \(camera.busInfo)]")
        for format in camera.formats {
            let sizes = format.sizes.map { size -> String in
                if let w = size.maxWidth, let h = size.maxHeight {
                    return "\(size.width)x\(size.height)-\(w)x\(h)" + (size.minFrameRate.map { " @\($0)-\(size.maxFrameRate?.description ?? "?")" } ?? "")
                }
                return "\(size.width)x\(size.height)@" + size.frameRates.sorted(by: >).map(\.description).joined(separator: ",")
            }
            print("    \(format.fourCC) (\(format.description)\(format.emulated ? ", converted by libv4l2" : "")): \(sizes.joined(separator: " "))")
        }
        if !camera.controls.isEmpty { print("    controls: \(camera.controls.map(\.name).joined(separator: ", "))") }
        if camera.deliversEncodedVideo {
            print("    encodes H.264 itself: bitrate control \(camera.bitrateControl == nil ? "no" : "yes"), keyframe control \(camera.keyframeControl == nil ? "no" : "yes") ('devices --doctor' says whether it can be passed through)")
        }
    }
    if !report.encoders.isEmpty {
        print("encoders (the kernel's; one that encodes H264 serves --h264-encoder):")
        for encoder in report.encoders { print("  \(encoder.path): \(encoder.card) [\(encoder.driver)]: \(encoder.encodes.joined(separator: " "))") }
    }
    print("audio:")
    if report.audio.isEmpty { print("  no ALSA sound cards") }
    for device in report.audio {
        func caps(_ c: AudioStreamCapabilities?) -> String {
            c.map { "\($0.minRate)-\($0.maxRate) Hz, \($0.minChannels)-\($0.maxChannels) ch" } ?? "no"
        }
        print("  \(device.hardwareName) / \(device.plugName): \(device.cardName) — \(device.name)")
        print("    capture: \(caps(device.capture)); playback: \(caps(device.playback))")
        for problem in device.problems { print("    \(problem)") }
    }
    if !report.problems.isEmpty {
        print("problems:")
        for problem in report.problems { print("  \(problem)") }
    }
}

func printDoctor(_ report: DeviceDoctor.Report, json: Bool) {
    if json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        print(String(decoding: (try? encoder.encode(report)) ?? Data(), as: UTF8.self))
        return
    }
    func problem(_ status: DeviceDoctor.Status, _ detail: String?, _ holders: [DeviceDoctor.Holder], _ group: (name: String, usual: String)?) -> String {
        var text = status.rawValue
        if !holders.isEmpty { text += ", held by " + holders.map { "pid \($0.pid) (\($0.command))" }.joined(separator: ", ") }
        if let group {
            text += group.name == "root"
                ? "; the device belongs to root, with no group for users (no udev rule gave it to the '\(group.usual)' group, as Debian's udev does): run as root or add such a rule"
                : "; the device belongs to group '\(group.name)': add the user to it (usermod -aG \(group.name) USER) and log in again"
        }
        if let detail { text += " [\(detail)]" }
        return text
    }
    print("cameras:")
    if report.cameras.isEmpty { print("  none found under /dev/video*") }
    for camera in report.cameras {
        let name = camera.path + (camera.stableName.map { " (\($0))" } ?? "") + (camera.card.map { ": \($0)" } ?? "")
        guard camera.status == .ok else {
            print("  \(name): " + problem(camera.status, camera.detail, camera.holders, camera.group.map { ($0, "video") }))
            continue
        }
        print("  \(name): \(camera.modes.count) modes run")
        for mode in camera.modes {
            if let error = mode.error {
                print("    \(mode.mode): FAILED: \(error)")
            } else if let fps = mode.measuredFps {
                let low = fps < 0.9 * mode.requestedFps
                print("    \(mode.mode): \(fps.fixed(1)) fps measured\(low ? " (LOW: \((100 * fps / mode.requestedFps).fixed(0)) % of the rate asked)" : "")")
            } else {
                print("    \(mode.mode): \(mode.frames) frames: too few to measure (LOW)")
            }
        }
        if !camera.unusedFormats.isEmpty { print("    not run (callend does not convert them): \(camera.unusedFormats.joined(separator: " "))") }
        if let passThrough = camera.passThrough { print("    passed through as H.264: \(passThrough)") }
    }
    print("audio:")
    if report.audio.isEmpty { print("  no ALSA sound cards") }
    for device in report.audio {
        let name = device.direction.isEmpty ? device.name : "\(device.name) \(device.direction)"
        if device.status == .ok {
            print("  \(name): ok, \(device.seconds.fixed(1)) s, \(device.xruns ?? 0) xruns")
        } else {
            print("  \(name): " + problem(device.status, device.detail, device.holders, device.group.map { ($0, "audio") }))
        }
    }
    print(report.healthy ? "every device works" : "some devices do not work: see above")
}
