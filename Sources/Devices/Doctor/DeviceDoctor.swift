import Dispatch
import FoundationEssentials
import MediaCore
import Platform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `callend devices --doctor`: whether each camera and sound device works here and now. Every
/// camera mode callend can convert is opened and run for a moment to measure the frame rate it
/// really delivers; a device another program holds is busy (with the processes holding it, from
/// /proc); one this user may not open is forbidden (with the group to join); each ALSA device
/// runs for a moment in each direction and its xruns are counted.
public enum DeviceDoctor {
    public enum Status: String, Codable, Sendable { case ok, busy, forbidden, failed }

    public struct Holder: Codable, Sendable, Equatable {
        public var pid: Int
        public var command: String
    }

    public struct ModeCheck: Codable, Sendable {
        public var mode: String
        public var requestedFps: Double
        /// Frames a second it delivered (nil when it delivered fewer than two).
        public var measuredFps: Double?
        public var frames: Int
        public var error: String?
    }

    public struct CameraCheck: Codable, Sendable {
        public var path: String
        public var stableName: String?
        public var card: String?
        public var status: Status
        public var detail: String?
        public var holders: [Holder]
        public var group: String?
        public var modes: [ModeCheck]
        /// Formats the camera offers that callend does not convert (not measured).
        public var unusedFormats: [String]
        /// For a camera that delivers H.264: whether callend can send it as it comes, and how
        /// the automatic mode would steer its rate (nil for other cameras).
        public var passThrough: String?
    }

    public struct AudioCheck: Codable, Sendable {
        public var name: String
        public var card: String
        public var direction: String
        public var status: Status
        public var detail: String?
        public var holders: [Holder]
        public var group: String?
        public var seconds: Double
        public var xruns: Int?
    }

    public struct Report: Codable, Sendable {
        public var cameras: [CameraCheck]
        public var audio: [AudioCheck]
        /// Whether every device works.
        public var healthy: Bool { cameras.allSatisfy { $0.status == .ok && $0.modes.allSatisfy { $0.error == nil } } && audio.allSatisfy { $0.status == .ok } }
    }

    /// Checks every camera under `directory` (or those in `paths`) and every ALSA device, running
    /// each mode (of the formats in `formats`, when given) and each device for `seconds`.
    public static func run(directory: String = "/dev", seconds: Double = 0.5, cameras paths: [String]? = nil, formats: Set<String>? = nil,
                           audio: Bool = true) -> Report {
        let nodes = paths ?? ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("video") }
            .sorted { (Int($0.dropFirst(5)) ?? 0) < (Int($1.dropFirst(5)) ?? 0) }
            .map { directory + "/" + $0 }
        let cameras = nodes.compactMap { checkCamera($0, seconds: seconds, formats: formats) }
        return Report(cameras: cameras, audio: audio ? checkAudio(seconds: seconds) : [])
    }

    // MARK: Cameras

    static func checkCamera(_ path: String, seconds: Double, formats: Set<String>?) -> CameraCheck? {
        let device: CaptureDevice
        do {
            guard let described = try CameraDevices.describe(path: path) else { return nil }  // not a capture node
            device = described
        } catch {
            return CameraCheck(path: path, stableName: CameraDevices.stableName(for: path), card: nil, status: status(of: error), detail: error.description,
                               holders: error.errno?.rawValue == EBUSY ? holders(of: path) : [], group: error.errno?.rawValue == EACCES ? group(of: path) : nil,
                               modes: [], unusedFormats: [], passThrough: nil)
        }
        // Each size of each format callend converts, at the highest rate it lists.
        var best: [String: CameraMode] = [:]
        var order: [String] = []
        let taken = { (fourCC: String) in PixelFormat(rawValue: fourCC) != nil || CaptureDevice.passedThroughFormats.contains(fourCC) }
        for mode in device.modes where taken(mode.fourCC) && formats.map({ $0.contains(mode.fourCC) }) != false {
            let key = "\(mode.fourCC) \(mode.width)x\(mode.height)"
            if let known = best[key] {
                if mode.frameRate.value > known.frameRate.value { best[key] = mode }
            } else {
                best[key] = mode
                order.append(key)
            }
        }
        let unused = Set(device.formats.map(\.fourCC).filter { !taken($0) }).sorted()
        var check = CameraCheck(path: path, stableName: device.stableName, card: device.card, status: .ok, detail: nil, holders: [], group: nil,
                                modes: [], unusedFormats: unused, passThrough: nil)
        var keyframes = 0
        for key in order {
            let mode = best[key]!
            let result = measure(path: path, mode: mode, seconds: seconds)
            if case .failure(let error) = result, check.modes.isEmpty, error.errno?.rawValue == EBUSY || error.detail.contains("busy") || error.detail.contains("in use") {
                // The first mode found the camera held: the rest would say the same.
                check.status = .busy
                check.detail = error.description
                check.holders = holders(of: path)
                return check
            }
            switch result {
            case .success(let (frames, fps, idrs)):
                check.modes.append(ModeCheck(mode: mode.description, requestedFps: mode.frameRate.value, measuredFps: fps, frames: frames, error: nil))
                keyframes += idrs
            case .failure(let error):
                check.modes.append(ModeCheck(mode: mode.description, requestedFps: mode.frameRate.value, measuredFps: nil, frames: 0, error: error.description))
            }
        }
        if device.deliversEncodedVideo { check.passThrough = passThroughVerdict(device, ran: check.modes, keyframes: keyframes) }
        return check
    }

    /// Whether a camera that delivers H.264 can be sent as it comes, and how its rate would be steered.
    static func passThroughVerdict(_ device: CaptureDevice, ran: [ModeCheck], keyframes: Int) -> String {
        let h264 = ran.filter { $0.mode.hasPrefix("H264 ") }
        guard h264.contains(where: { $0.error == nil && $0.frames > 0 }) else {
            return "no: its H.264 modes delivered nothing here" + (h264.isEmpty ? " (none was run)" : "")
        }
        let sizes = Set(device.modes.filter { CaptureDevice.passedThroughFormats.contains($0.fourCC) }.map { "\($0.width)x\($0.height)@\($0.frameRate)" })
        let rate: String
        if device.bitrateControl != nil {
            rate = "its bitrate follows the estimate (V4L2_CID_MPEG_VIDEO_BITRATE)"
        } else if sizes.count >= 2 {
            rate = "no bitrate control: the automatic mode steps its \(sizes.count) H.264 modes"
        } else {
            rate = "no bitrate control and one H.264 mode: nothing steers its rate under congestion (--video-codec vp8 encodes it instead)"
        }
        let keyframe = device.keyframeControl != nil ? "keyframes on request (V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME)"
            : "no keyframe control: a request restarts its stream"
        let seen = keyframes > 0 ? "" : "; no IDR came while it ran (a long keyframe interval: the peer waits for one)"
        return "yes (--video-codec h264 --pixel-format H264): \(rate); \(keyframe)\(seen)"
    }

    /// Runs one mode for `seconds`, longer for a slow mode (until six frame intervals of the rate
    /// asked have passed and five frames came, up to six seconds): the frames it delivered and
    /// their rate, from the driver's stamps.
    static func measure(path: String, mode: CameraMode, seconds: Double) -> Result<(Int, Double?, Int), DeviceError> {
        let camera: V4L2Camera
        do { camera = try V4L2Camera(path: path, mode: mode) } catch { return .failure(error) }
        let stamps = Mutex<[Duration]>([])
        let keyframes = Atomic<Int>(0)
        let lost = Mutex<DeviceError?>(nil)
        let arrived = DispatchSemaphore(value: 0)
        camera.start { event in
            switch event {
            case .frame(let frame, _): stamps.withLock { $0.append(frame.timestamp) }
            case .encoded(let unit, let timestamp, _):
                stamps.withLock { $0.append(timestamp) }
                if H264NALUnit.units(inAnnexB: unit).contains(where: { $0.first.map(H264NALUnit.type(of:)) == H264NALUnit.idrSlice }) {
                    keyframes.add(1, ordering: .relaxed)
                }
            case .deviceLost(let error): lost.withLock { $0 = $0 ?? error }
            default: return
            }
            arrived.signal()
        }
        let shortest = Duration.seconds(max(seconds, 6 / max(mode.frameRate.value, 0.1)))
        let longest = max(shortest * 1.5, .seconds(min(6, max(seconds * 4, 6 / max(mode.frameRate.value, 0.1)))))
        let start = MonotonicClock.now
        while true {
            // Until a frame or the loss comes, or the time is up.
            _ = arrived.wait(for: start + longest - MonotonicClock.now)
            let elapsed = MonotonicClock.now - start
            let count = stamps.withLock { $0.count }
            if lost.withLock({ $0 }) != nil || elapsed >= longest || (elapsed >= shortest && count >= 5) { break }
        }
        camera.stop()
        if let error = lost.withLock({ $0 }) { return .failure(error) }
        // The first frame comes when streaming starts, not on the mode's clock: measured from it.
        let times = stamps.withLock { $0 }
        let idrs = keyframes.load(ordering: .relaxed)
        guard times.count >= 3 else { return .success((times.count, nil, idrs)) }
        let span = times.last! - times[1]
        return .success((times.count, Double(times.count - 2) / span.inSeconds, idrs))
    }

    // MARK: Sound

    static func checkAudio(seconds: Double) -> [AudioCheck] {
        var checks: [AudioCheck] = []
        let (devices, problems) = ALSADeviceList.list()
        for problem in problems {
            // A card whose control node cannot be opened ("/dev/snd/controlC0: ..."): its PCM
            // devices are unknown.
            let node = problem.detail.hasPrefix("/dev/snd/") ? String(problem.detail.prefix { $0 != ":" }) : "/dev/snd"
            let status = status(of: problem)
            checks.append(AudioCheck(name: problem.operation, card: "", direction: "", status: status, detail: problem.description,
                                     holders: status == .busy ? holders(of: node) : [], group: status == .forbidden ? group(of: node) : nil,
                                     seconds: 0, xruns: nil))
        }
        for device in devices {
            for (direction, capabilities) in [(ALSAPCM.Direction.capture, device.capture), (.playback, device.playback)] {
                // A direction whose capabilities could not be read (every substream taken) is
                // still run when its node exists: that is how it shows as busy.
                let node = "/dev/snd/pcmC\(device.cardIndex)D\(device.device)\(direction == .capture ? "c" : "p")"
                guard capabilities != nil || access(node, F_OK) == 0 else { continue }
                var check = AudioCheck(name: device.plugName, card: device.cardID, direction: direction == .capture ? "capture" : "playback", status: .ok, detail: nil,
                                       holders: [], group: nil, seconds: 0, xruns: nil)
                let start = MonotonicClock.now
                do {
                    let pcm = try ALSAPCM(name: device.plugName, direction: direction)
                    let block = pcm.periodFrames
                    let silence = [Int16](repeating: 0, count: block * pcm.channels)
                    while (MonotonicClock.now - start).inSeconds < seconds {
                        if direction == .capture { _ = try pcm.read(frames: block) } else { try pcm.write(silence) }
                    }
                    check.xruns = pcm.xruns
                } catch {
                    check.status = status(of: error)
                    check.detail = error.description
                    if check.status == .busy { check.holders = holders(of: node) }
                    if check.status == .forbidden { check.group = group(of: node) }
                }
                check.seconds = (MonotonicClock.now - start).inSeconds
                checks.append(check)
            }
        }
        return checks
    }

    // MARK: Who holds it, who may use it

    static func status(of error: DeviceError) -> Status {
        switch error.errno?.rawValue {
        case EBUSY: return .busy
        case EACCES, EPERM: return .forbidden
        default:
            if error.detail.contains("in use by another program") { return .busy }
            if error.detail.contains("ermission denied") || error.detail.contains("group") { return .forbidden }
            return .failed
        }
    }

    /// Processes with the device open, from /proc/PID/fd (those this user may look into).
    public static func holders(of path: String) -> [Holder] {
        let target = realpath(path, nil).map { p in defer { free(p) }; return String(cString: p) } ?? path
        var found: [Holder] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int(entry) else { continue }
            let fds = "/proc/\(pid)/fd"
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: fds)) ?? [] {
                var buffer = [CChar](repeating: 0, count: 4096)
                let n = readlink(fds + "/" + fd, &buffer, buffer.count - 1)
                guard n > 0, String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) == target else { continue }
                let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmed() ?? "?"
                found.append(Holder(pid: pid, command: comm))
                break
            }
        }
        return found
    }

    /// The group a device node belongs to: the one to add the user to.
    static func group(of path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0, let entry = getgrgid(info.st_gid) else { return nil }
        return String(cString: entry.pointee.gr_name)
    }
}
