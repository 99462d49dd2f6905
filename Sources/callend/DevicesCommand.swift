import CallEndpoint
import Devices
import Dispatch
import FoundationEssentials
import Platform
import Glibc
import ServeCommand

let devicesHelp = """
    usage: callend devices [--json]
           callend devices --watch [--json] [--duration S]

    Lists V4L2 cameras (/dev/video*: driver, card, bus, the stable /dev/v4l/by-id name, every pixel
    format with its sizes and frame rates) and ALSA PCM devices (stable hw:CARD=<id>,DEV=<n> and
    plughw: names, rates and channel counts for capture and playback). Devices that cannot be read
    (busy, permission) are listed with the reason. --json prints one JSON document instead.

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
    _ = finished.wait(timeout: duration.map { .now() + .seconds($0) } ?? .distantFuture)
    watch.stop()
}

struct DevicesReport: Encodable {
    var cameras: [CaptureDevice]
    var audio: [AudioDeviceInfo]
    var problems: [String]
}

func runDevices(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(devicesHelp); return }
    let json = args.flag("--json")
    let watching = args.flag("--watch")
    let duration = try args.integer("--duration", in: 1...86_400)
    try args.finish(command: "devices")
    if duration != nil && !watching { throw UsageError(description: "--duration applies to devices --watch") }
    if watching {
        runDevicesWatch(json: json, duration: duration)
        return
    }
    let (cameras, cameraProblems) = CameraDevices.list()
    let (audio, audioProblems) = ALSADeviceList.list()
    let report = DevicesReport(cameras: cameras, audio: audio, problems: (cameraProblems + audioProblems).map(\.description))
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
