import Codecs
import Devices
import Foundation
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

/// What a camera source delivers to whoever encodes it.
public enum CameraOutput: Sendable {
    case frame(VideoFrame)
    /// The source changed size or rate (a switch): the next frame should be a keyframe.
    case modeChanged(width: Int, height: Int, frameRate: Double)
    /// A file source ran out (only when not looping).
    case ended
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

    private let capturer = Mutex<(any Capturer)?>(nil)
    private let sink = LockedCallback<CameraOutput>()
    private let running = Atomic<Bool>(false)
    private let current = Mutex<(input: CameraInput, width: Int, height: Int, frameRate: Double, modes: [CameraMode])>((.pattern(width: 0, height: 0, frameRate: 0), 0, 0, 0, []))
    /// Whether a Y4M file starts again at its end (a call) or ends the source (`callend send`).
    public let loopFiles: Bool

    public init(_ input: CameraInput, loopFiles: Bool = true) throws {
        self.loopFiles = loopFiles
        let opened = try Self.open(input, loop: loopFiles)
        capturer.withLock { $0 = opened }
        record(input, opened)
    }

    /// What the source captures from now.
    public var input: CameraInput { current.withLock { $0.input } }
    /// The size and rate of the pictures it delivers now.
    public var format: (width: Int, height: Int, frameRate: Double) { current.withLock { ($0.width, $0.height, $0.frameRate) } }
    /// The modes the current input really offers (empty for the pattern and files, which are scaled instead).
    public var offeredModes: [CameraMode] { current.withLock { $0.modes } }

    /// Switches to another camera, or to another mode of the same one.
    public func selectCaptureDevice(_ path: String, format: CameraModeRequest?) throws {
        try select(.device(path: path, mode: format))
    }

    /// Switches input. A running V4L2 camera asked for another mode of itself switches mode in
    /// place (stream off, set format, stream on); anything else opens the new input, then
    /// closes the old one.
    public func select(_ input: CameraInput) throws {
        if case .device(let path, let request) = input, let camera = capturer.withLock({ $0 as? DeviceCapturer }), camera.path == path {
            let mode = try camera.switchMode(request)
            current.withLock { $0 = (input, mode.width, mode.height, mode.frameRate.value, $0.modes) }
            return
        }
        let opened = try Self.open(input, loop: loopFiles)
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

    private func start(_ c: any Capturer) {
        let f = c.format
        deliver(.modeChanged(width: f.width, height: f.height, frameRate: f.frameRate))
        c.start { [weak self] output in self?.deliver(output) }
    }

    private func deliver(_ output: CameraOutput) {
        if case .modeChanged(let w, let h, let r) = output { current.withLock { ($0.width, $0.height, $0.frameRate) = (w, h, r) } }
        sink(output)
    }

    private func record(_ input: CameraInput, _ c: any Capturer) {
        let f = c.format
        current.withLock { $0 = (input, f.width, f.height, f.frameRate, c.modes) }
    }

    private static func open(_ input: CameraInput, loop: Bool) throws -> any Capturer {
        switch input {
        case .device(let path, let request): try DeviceCapturer(path: path, request: request)
        case .pattern(let w, let h, let f): try PatternCapturer(width: w, height: h, frameRate: f)
        case .file(let path): try FileCapturer(path: path, loop: loop)
        }
    }
}

/// One open input of a `CameraSource`.
protocol Capturer: AnyObject, Sendable {
    var format: (width: Int, height: Int, frameRate: Double) { get }
    var modes: [CameraMode] { get }
    func start(_ deliver: @escaping @Sendable (CameraOutput) -> Void)
    func stop()
}

/// A thread that produces pictures on a schedule until stopped.
class PacedCapturer: @unchecked Sendable {  // `stopping` is atomic; the thread owns everything else
    let stopping = Atomic<Bool>(false)
    let finished = DispatchSemaphore(value: 0)
    var started = false

    func run(name: String, frameRate: Double, produce: @escaping @Sendable (Int) throws -> VideoFrame?, deliver: @escaping @Sendable (CameraOutput) -> Void) {
        started = true
        startThread(named: name) { [self] in
            defer { finished.signal() }
            var pacer = RealTimePacer(period: .microseconds(Int64(1_000_000 / frameRate)))
            var index = 0
            while !stopping.load(ordering: .relaxed) {
                pacer.waitForNext()
                do {
                    guard let frame = try produce(index) else { deliver(.ended); return }
                    deliver(.frame(frame))
                } catch {
                    deliver(.ended)
                    return
                }
                index += 1
            }
        }
    }

    func stop() {
        guard started, !stopping.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
    }
}

final class PatternCapturer: PacedCapturer, Capturer, @unchecked Sendable {  // the pattern is behind its Mutex; the rest is let or PacedCapturer's (see there)
    let pattern: Mutex<TestPatternSource>
    let format: (width: Int, height: Int, frameRate: Double)
    var modes: [CameraMode] { [] }

    init(width: Int, height: Int, frameRate: Int) throws {
        guard (16...4096).contains(width), (16...4096).contains(height), width % 2 == 0, height % 2 == 0, (1...120).contains(frameRate) else {
            throw ConfigurationError("pattern \(width)x\(height)@\(frameRate): the size must be even, 16 ... 4096, the rate 1 ... 120")
        }
        pattern = Mutex(TestPatternSource(width: width, height: height, frameRate: frameRate))
        format = (width, height, Double(frameRate))
    }

    func start(_ deliver: @escaping @Sendable (CameraOutput) -> Void) {
        run(name: "pattern", frameRate: format.frameRate, produce: { [self] _ in
            pattern.withLock { $0.nextFrame(captureTime: MonotonicClock.now) }
        }, deliver: deliver)
    }
}

final class FileCapturer: PacedCapturer, Capturer, @unchecked Sendable {  // the file source is behind its Mutex; the rest is let or PacedCapturer's (see there)
    let source: Mutex<Y4MFileSource>
    let format: (width: Int, height: Int, frameRate: Double)
    var modes: [CameraMode] { [] }

    init(path: String, loop: Bool) throws {
        let file = try Y4MFileSource(path: path, paced: false, loop: loop)
        format = (file.width, file.height, max(1, file.frameRate))
        source = Mutex(file)
    }

    func start(_ deliver: @escaping @Sendable (CameraOutput) -> Void) {
        run(name: "y4m", frameRate: format.frameRate, produce: { [self] _ in try source.withLock { try $0.nextFrame() } }, deliver: deliver)
    }
}

final class DeviceCapturer: Capturer, @unchecked Sendable {  // the camera is thread-safe; `device` is immutable
    let path: String
    let device: CaptureDevice
    let camera: V4L2Camera

    init(path: String, request: CameraModeRequest?) throws {
        guard let described = try CameraDevices.describe(path: path) else {
            throw DeviceError(operation: "open camera \(path)", detail: "not a video capture device (see 'callend devices')")
        }
        self.path = path
        device = described
        camera = try V4L2Camera(path: path, mode: try Self.mode(of: described, request))
    }

    static func mode(of device: CaptureDevice, _ request: CameraModeRequest?) throws(DeviceError) -> CameraMode {
        let r = request ?? CameraModeRequest(width: 640, height: 480, frameRate: 30)
        return try device.nearestMode(width: r.width, height: r.height, frameRate: r.frameRate.map { FrameRate(frames: $0) }, fourCC: r.fourCC)
    }

    var format: (width: Int, height: Int, frameRate: Double) {
        let m = camera.currentMode
        return (m.width, m.height, m.frameRate.value)
    }

    var modes: [CameraMode] { device.modes }

    func switchMode(_ request: CameraModeRequest?) throws(DeviceError) -> CameraMode {
        let mode = try Self.mode(of: device, request)
        camera.switchMode(mode)
        return mode
    }

    func start(_ deliver: @escaping @Sendable (CameraOutput) -> Void) {
        camera.start { event in
            switch event {
            case .frame(let frame, _): deliver(.frame(frame))
            case .modeChanged(let m): deliver(.modeChanged(width: m.width, height: m.height, frameRate: m.frameRate.value))
            case .deviceLost, .frameDropped: break
            }
        }
    }

    func stop() { camera.stop() }
}

/// A published video track: a camera source that can be muted (black pictures are sent, so the
/// peer's decoder and statistics keep running) and unmuted.
public final class LocalVideoTrack: Sendable {
    public let source: CameraSource
    private let enabled = Atomic<Bool>(true)

    public init(source: CameraSource) { self.source = source }

    public var isEnabled: Bool {
        get { enabled.load(ordering: .relaxed) }
        set { enabled.store(newValue, ordering: .relaxed) }
    }
}
