import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Synchronization

/// Where a `CameraSource` takes its pictures from.
public enum CameraInput: Sendable, Equatable, CustomStringConvertible {
    /// A V4L2 device, in the mode nearest to `mode` (the camera's default size and 30 fps when nil).
    case device(path: String, mode: CameraModeRequest?)
    /// The synthetic test pattern (frame number and capture time stamped into every picture).
    case pattern(width: Int, height: Int, frameRate: Int)
    /// A Y4M file, paced at its frame rate and looped.
    case file(path: String)

    public var description: String {
        switch self {
        case .device(let path, let mode): mode.map { "\(path) \($0)" } ?? path
        case .pattern(let w, let h, let f): "pattern \(w)x\(h)@\(f)"
        case .file(let path): path
        }
    }
}

/// A requested camera mode: size, optional rate, optional pixel format ("640x480@30/YUYV").
public struct CameraModeRequest: Sendable, Equatable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public var frameRate: Int?
    public var fourCC: String?

    public init(width: Int, height: Int, frameRate: Int? = nil, fourCC: String? = nil) {
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.fourCC = fourCC
    }

    /// Parses `WxH`, `WxH@FPS`, `WxH@FPS/FOURCC`.
    public init(parsing text: String) throws(ConfigurationError) {
        var rest = Substring(text)
        var fourCC: String?
        if let slash = rest.firstIndex(of: "/") {
            fourCC = String(rest[rest.index(after: slash)...]).uppercased()
            rest = rest[..<slash]
        }
        var rate: Int?
        if let at = rest.firstIndex(of: "@") {
            guard let r = Int(rest[rest.index(after: at)...]), (1...240).contains(r) else {
                throw ConfigurationError("camera mode '\(text)': the rate after @ must be 1 ... 240 frames per second")
            }
            rate = r
            rest = rest[..<at]
        }
        let parts = rest.split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), (16...7680).contains(w), (16...4320).contains(h) else {
            throw ConfigurationError("camera mode '\(text)': expected WIDTHxHEIGHT[@FPS][/FOURCC], e.g. 640x480@30/YUYV")
        }
        if let fourCC, fourCC.count != 4 { throw ConfigurationError("camera mode '\(text)': a pixel format is four characters (YUYV, MJPG, NV12)") }
        self.init(width: w, height: h, frameRate: rate, fourCC: fourCC)
    }

    public var description: String { "\(width)x\(height)" + (frameRate.map { "@\($0)" } ?? "") + (fourCC.map { "/\($0)" } ?? "") }
}

/// Captures pictures from a V4L2 camera, the synthetic pattern or a Y4M file, on its own thread.
/// `selectCaptureDevice(_:format:)` and `select(_:)` switch the camera or its mode while a call
/// runs (the "flip camera" of a phone): the new input is opened first, so a switch that fails
/// leaves the old one running and throws an error saying what the camera can do.
public final class CameraSource: @unchecked Sendable {  // the running capturer and sink are behind locks
    /// The V4L2 capture devices on this machine and what they can do.
    public static var captureDevices: [CaptureDevice] { CameraDevices.list().devices }

    /// Every pixel format x size x rate a device offers.
    public static func supportedFormats(for device: CaptureDevice) -> [CameraMode] { device.modes }

    private let capturer = Mutex<(any VideoCapturer)?>(nil)
    private let sink = LockedCallback<CameraOutput>()
    private let running = Atomic<Bool>(false)
    private let current = Mutex<(input: CameraInput, width: Int, height: Int, frameRate: Double, modes: [CameraMode])>((.pattern(width: 0, height: 0, frameRate: 0), 0, 0, 0, []))
    private let health = Mutex<(lost: (reason: String, at: MediaTime)?, events: [CameraDeviceEvent])>((nil, []))
    /// Whether a Y4M file starts again at its end (a call) or ends the source (`callend send`).
    public let loopFiles: Bool
    /// Whether a Y4M file's pictures carry their capture time in the test pattern's marks, for a
    /// peer that measures glass-to-glass latency on a clip (`join --measure-latency`).
    public let stampsFiles: Bool

    public init(_ input: CameraInput, loopFiles: Bool = true, stampsFiles: Bool = false) throws {
        self.loopFiles = loopFiles
        self.stampsFiles = stampsFiles
        let opened = try Self.open(input, loop: loopFiles, stamped: stampsFiles)
        capturer.withLock { $0 = opened }
        record(input, opened)
    }

    /// What the source captures from now.
    public var input: CameraInput { current.withLock { $0.input } }
    /// The size and rate of the pictures it delivers now.
    public var format: (width: Int, height: Int, frameRate: Double) { current.withLock { ($0.width, $0.height, $0.frameRate) } }
    /// The modes the current input really offers (empty for the pattern and files, which are scaled instead).
    public var offeredModes: [CameraMode] { current.withLock { $0.modes } }
    /// Whether the camera delivers its own H.264 now (a mode callend sends as it comes).
    public var passesThrough: Bool {
        guard let camera = capturer.withLock({ $0 as? CameraCapturer }) else { return false }
        return CaptureDevice.passedThroughFormats.contains(camera.currentMode.fourCC)
    }
    /// The camera's encoder controls, for a camera that passes through (nil for other inputs).
    public var cameraDevice: CaptureDevice? { capturer.withLock { ($0 as? CameraCapturer)?.device } }
    /// Asks a camera that encodes for this bitrate (bits per second); `.controlSet` reports how it went.
    public func setCameraBitrate(_ bitsPerSecond: Int) { capturer.withLock { ($0 as? CameraCapturer) }?.setBitrate(bitsPerSecond) }
    /// Asks a camera that encodes for a keyframe.
    public func requestCameraKeyframe() { capturer.withLock { ($0 as? CameraCapturer) }?.requestKeyframe() }
    /// Why the camera is gone, while it is (black pictures stand in for it until it is back).
    public var lostReason: String? { health.withLock { $0.lost?.reason } }
    /// Each loss and return of the camera, oldest first.
    public var deviceEvents: [CameraDeviceEvent] { health.withLock { $0.events } }
    /// Called on the capture thread at each loss and return of the camera, after `deviceEvents`
    /// holds it (nil: no one); one observer, the call that sends the source.
    public func onDeviceEvent(_ observer: (@Sendable (CameraDeviceEvent) -> Void)?) { deviceEventSink.set(observer) }
    private let deviceEventSink = LockedCallback<CameraDeviceEvent>()

    /// Switches to another camera, or to another mode of the same one.
    public func selectCaptureDevice(_ path: String, format: CameraModeRequest?) throws {
        try select(.device(path: path, mode: format))
    }

    /// Switches input. A running V4L2 camera asked for another mode of itself switches mode in
    /// place (stream off, set format, stream on); anything else opens the new input, then
    /// closes the old one.
    public func select(_ input: CameraInput) throws {
        if case .device(let path, let request) = input, let camera = capturer.withLock({ $0 as? CameraCapturer }), camera.path == path {
            let mode = try Self.mode(of: camera.device, request)
            camera.switchMode(mode)
            current.withLock { $0 = (input, mode.width, mode.height, mode.frameRate.value, $0.modes) }
            return
        }
        let opened = try Self.open(input, loop: loopFiles, stamped: stampsFiles)
        let old = capturer.withLock { c in defer { c = opened }; return c }
        record(input, opened)
        if running.load(ordering: .relaxed) {
            old?.stop()
            start(opened)
        } else {
            old?.stop()
        }
    }

    /// Starts delivering to `sink` (on the capture thread); a second call replaces the sink.
    public func start(_ sink: @escaping @Sendable (CameraOutput) -> Void) {
        self.sink.set(sink)
        guard !running.exchange(true, ordering: .relaxed) else { return }
        if let c = capturer.withLock({ $0 }) { start(c) }
    }

    /// Stops delivering (the capture goes on, for the next media session of a call).
    public func detach() { sink.set(nil) }

    public func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        capturer.withLock { $0 }?.stop()
        sink.set(nil)
    }

    deinit { capturer.withLock { $0 }?.stop() }

    private func start(_ c: any VideoCapturer) {
        let f = c.format
        deliver(.modeChanged(width: f.width, height: f.height, frameRate: f.frameRate))
        c.start { [weak self] output in self?.deliver(output) }
    }

    private func deliver(_ output: CameraOutput) {
        switch output {
        case .modeChanged(let w, let h, let r): current.withLock { ($0.width, $0.height, $0.frameRate) = (w, h, r) }
        case .lost(let reason):
            let event = CameraDeviceEvent.lost(reason: reason)
            health.withLock { $0.lost = (reason, .now); $0.events.append(event) }
            deviceEventSink(event)
        case .restored(let path):
            let event = health.withLock { h in
                defer { h.lost = nil }
                let event = CameraDeviceEvent.back(path: path, after: h.lost.map { MediaTime.now - $0.at })
                h.events.append(event)
                return event
            }
            deviceEventSink(event)
        case .frame, .ended, .encoded, .controlSet: break
        }
        sink(output)
    }

    private func record(_ input: CameraInput, _ c: any VideoCapturer) {
        let f = c.format
        current.withLock { $0 = (input, f.width, f.height, f.frameRate, c.modes) }
    }

    private static func open(_ input: CameraInput, loop: Bool, stamped: Bool) throws -> any VideoCapturer {
        switch input {
        case .device(let path, let request):
            guard let described = try CameraDevices.describe(path: path) else {
                throw DeviceError(operation: "open camera \(path)", detail: "not a video capture device (see 'callend devices')")
            }
            return try CameraCapturer(device: described, mode: try mode(of: described, request))
        case .pattern(let w, let h, let f): return try PatternCapturer(width: w, height: h, frameRate: f)
        case .file(let path): return try FileCapturer(path: path, loop: loop, stamped: stamped)
        }
    }

    /// The mode of `device` nearest the request (640x480@30 when there is none).
    static func mode(of device: CaptureDevice, _ request: CameraModeRequest?) throws(DeviceError) -> CameraMode {
        let r = request ?? CameraModeRequest(width: 640, height: 480, frameRate: 30)
        return try device.nearestMode(width: r.width, height: r.height, frameRate: r.frameRate.map { FrameRate(frames: $0) }, fourCC: r.fourCC)
    }
}

/// A camera that went away mid-call, or came back.
public enum CameraDeviceEvent: Sendable, Equatable {
    case lost(reason: String)
    /// Reopened at `path` (where its stable name points now), `after` the loss.
    case back(path: String, after: Duration?)

    /// The line for the log.
    public var line: String {
        switch self {
        case .lost(let reason): "camera lost (\(reason)): sending black pictures until it is back"
        case .back(let path, let after): "camera back at \(path)" + (after.map { " after \($0.inSeconds.fixed(1)) s" } ?? "")
        }
    }
}

/// A published video track: a camera source that can be muted (black pictures are sent, so the
/// peer's decoder and statistics keep running) and unmuted.
public final class LocalVideoTrack: Sendable {
    public let source: CameraSource
    private let enabled = Atomic<Bool>(true)
    private let sinks = TrackSinks<CameraOutput>()

    public init(source: CameraSource) { self.source = source }

    /// Delivers the source's pictures to `sink` too (on the capture thread); the source starts
    /// with the first. Returns the key for `removeSink`.
    func addSink(_ sink: @escaping @Sendable (CameraOutput) -> Void) -> Int {
        let (key, first) = sinks.add(sink)
        if first { source.start { [sinks] output in sinks.deliver(output) } }
        return key
    }

    /// Stops delivering to one sink; with the last gone, the source stops delivering (it keeps
    /// capturing for the next session of a call).
    func removeSink(_ key: Int) {
        if sinks.remove(key) { source.detach() }
    }

    public var isEnabled: Bool {
        get { enabled.load(ordering: .relaxed) }
        set { enabled.store(newValue, ordering: .relaxed) }
    }
}
