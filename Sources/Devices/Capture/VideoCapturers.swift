import Dispatch
import FoundationEssentials
import MediaCore
import Platform
import Synchronization

/// What a video capturer delivers, on its capture thread, to whoever encodes it.
public enum CameraOutput: Sendable {
    case frame(VideoFrame)
    /// The source changed size or rate (a switch): the next frame should be a keyframe.
    case modeChanged(width: Int, height: Int, frameRate: Double)
    /// A file source ran out (only when not looping).
    case ended
    /// The camera went away (unplugged): black pictures follow at `CameraCapturer.placeholderRate`
    /// until it is back, so the call and the peer's decoder go on.
    case lost(reason: String)
    /// The camera is back, at `path`; its `modeChanged` and pictures follow.
    case restored(path: String)
    /// An access unit of a camera's own H.264 (Annex B), captured at `timestamp` (monotonic).
    case encoded([UInt8], timestamp: Duration)
    /// A control call on a camera that encodes: its name, the value, the error if it failed.
    case controlSet(name: String, value: Int, error: String?)
}

/// One open video input with its capture thread: a V4L2 camera, the test pattern or a Y4M file.
public protocol VideoCapturer: AnyObject, Sendable {
    var format: (width: Int, height: Int, frameRate: Double) { get }
    /// The modes the input really offers (empty for the pattern and files, which are scaled instead).
    var modes: [CameraMode] { get }
    func start(_ deliver: @escaping @Sendable (CameraOutput) -> Void)
    func stop()
}

/// A thread that produces pictures on a schedule until stopped.
public class PacedCapturer: @unchecked Sendable {  // `stopping` is atomic; the thread owns everything else
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

    public func stop() {
        guard started, !stopping.exchange(true, ordering: .relaxed) else { return }
        finished.wait()
    }
}

/// The synthetic test pattern at its frame rate.
public final class PatternCapturer: PacedCapturer, VideoCapturer, @unchecked Sendable {  // the pattern is behind its Mutex; the rest is let or PacedCapturer's (see there)
    let pattern: Mutex<TestPatternSource>
    public let format: (width: Int, height: Int, frameRate: Double)
    public var modes: [CameraMode] { [] }

    public init(width: Int, height: Int, frameRate: Int) throws(DeviceError) {
        guard (16...4096).contains(width), (16...4096).contains(height), width % 2 == 0, height % 2 == 0, (1...120).contains(frameRate) else {
            throw DeviceError(operation: "pattern \(width)x\(height)@\(frameRate)", detail: "the size must be even, 16 ... 4096, the rate 1 ... 120")
        }
        pattern = Mutex(TestPatternSource(width: width, height: height, frameRate: frameRate))
        format = (width, height, Double(frameRate))
    }

    public func start(_ deliver: @escaping @Sendable (CameraOutput) -> Void) {
        run(name: "pattern", frameRate: format.frameRate, produce: { [self] _ in
            pattern.withLock { $0.nextFrame(captureTime: MonotonicClock.now) }
        }, deliver: deliver)
    }
}

/// A Y4M file at its frame rate, looped or not; with `stamped`, each picture carries its capture
/// time and number in the test pattern's marks (`TestPatternSource.stamp`), for a receiver that
/// measures latency on a clip.
public final class FileCapturer: PacedCapturer, VideoCapturer, @unchecked Sendable {  // the file source is behind its Mutex; the rest is let or PacedCapturer's (see there)
    let source: Mutex<Y4MFileSource>
    let stamped: Bool
    public let format: (width: Int, height: Int, frameRate: Double)
    public var modes: [CameraMode] { [] }

    public init(path: String, loop: Bool, stamped: Bool = false) throws(MediaError) {
        let file = try Y4MFileSource(path: path, paced: false, loop: loop)
        format = (file.width, file.height, max(1, file.frameRate))
        source = Mutex(file)
        self.stamped = stamped
    }

    public func start(_ deliver: @escaping @Sendable (CameraOutput) -> Void) {
        run(name: "y4m", frameRate: format.frameRate, produce: { [self] index in
            guard var frame = try source.withLock({ try $0.nextFrame() }) else { return nil }
            if stamped {
                let now = MonotonicClock.now
                frame.timestamp = now
                TestPatternSource.stamp(&frame, number: index, captureTime: now)
            }
            return frame
        }, deliver: deliver)
    }
}

/// A V4L2 camera in one of its modes, streaming on the camera's thread. While the camera is
/// lost, black pictures of its last size stand in for it.
public final class CameraCapturer: VideoCapturer, @unchecked Sendable {  // the camera is thread-safe; `device` is immutable; the placeholder is behind its lock
    public let device: CaptureDevice
    public var path: String { camera.path }
    let camera: V4L2Camera
    /// Pictures per second while the camera is lost: enough for the peer's decoder and freeze
    /// count to see a running stream, few enough to cost nothing.
    public static let placeholderRate = 5.0
    private let placeholder = Mutex<PacedCapturer?>(nil)

    public init(device: CaptureDevice, mode: CameraMode) throws(DeviceError) {
        self.device = device
        camera = try V4L2Camera(path: device.path, mode: mode)
    }

    public var format: (width: Int, height: Int, frameRate: Double) {
        let m = camera.currentMode
        return (m.width, m.height, m.frameRate.value)
    }

    public var modes: [CameraMode] { device.modes }
    /// The mode the camera is in now.
    public var currentMode: CameraMode { camera.currentMode }

    /// Another mode of the same camera, switched in place.
    public func switchMode(_ mode: CameraMode) { camera.switchMode(mode) }
    /// The bitrate for a camera that encodes (see `V4L2Camera.setBitrate`).
    public func setBitrate(_ bitsPerSecond: Int) { camera.setBitrate(bitsPerSecond) }
    /// A keyframe from a camera that encodes (see `V4L2Camera.requestKeyframe`).
    public func requestKeyframe() { camera.requestKeyframe() }

    public func start(_ deliver: @escaping @Sendable (CameraOutput) -> Void) {
        camera.start { [self] event in
            switch event {
            case .frame(let frame, _): deliver(.frame(frame))
            case .encoded(let unit, let timestamp, _): deliver(.encoded(unit, timestamp: timestamp))
            case .controlSet(let name, let value, let error): deliver(.controlSet(name: name, value: value, error: error?.description))
            case .modeChanged(let m): deliver(.modeChanged(width: m.width, height: m.height, frameRate: m.frameRate.value))
            case .deviceLost(let error):
                deliver(.lost(reason: error.description))
                let black = PacedCapturer()
                let size = camera.currentMode
                black.run(name: "camera lost", frameRate: Self.placeholderRate, produce: { _ in
                    VideoFrame(width: size.width, height: size.height, timestamp: MonotonicClock.now, luma: 16)
                }, deliver: deliver)
                placeholder.withLock { $0 = black }
            case .deviceRestored(let path):
                stopPlaceholder()
                deliver(.restored(path: path))
            case .frameDropped: break
            }
        }
    }

    public func stop() {
        camera.stop()
        stopPlaceholder()
    }

    private func stopPlaceholder() {
        placeholder.withLock { p in defer { p = nil }; return p }?.stop()
    }
}
