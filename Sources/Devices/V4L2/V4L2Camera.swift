internal import CV4L2
import MediaCore
import Dispatch
import FoundationEssentials
import Platform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What a running camera reports.
public enum CameraEvent: Sendable {
    /// A picture in I420 with the driver's capture timestamp (CLOCK_MONOTONIC).
    case frame(VideoFrame, sequence: Int)
    /// The camera now runs in this mode (after start, a switch or a reopen): encode the next frame as a keyframe.
    case modeChanged(CameraMode)
    /// The device went away (unplugged, ENODEV); the camera retries opening it.
    case deviceLost(DeviceError)
    /// The device is back, opened at `path` (its stable name's node now); `modeChanged` follows.
    case deviceRestored(path: String)
    /// A frame could not be converted (a corrupt MJPEG frame, say); capture goes on.
    case frameDropped(String)
    /// An access unit of the camera's own H.264 (Annex B), as it came: a passed-through mode.
    case encoded([UInt8], timestamp: Duration, sequence: Int)
    /// A control call made on the capture thread (the bitrate asked, a keyframe), with the error when it failed.
    case controlSet(name: String, value: Int, error: DeviceError?)
}

/// A V4L2 capture device streaming through memory-mapped buffers on its own thread, converting
/// each frame to I420. Mode changes happen on the running camera (stream off, set format and
/// interval, stream on); a lost device is reopened every `reopenInterval` until it returns: by
/// its stable name (/dev/v4l/by-id, which udev points at whatever node a replugged camera gets)
/// when it had one, in the mode it had or, when that mode is gone, the nearest one it offers.
public final class V4L2Camera: @unchecked Sendable {  // the descriptor and buffers belong to the capture thread; others only set atomics or the pending mode under a lock
    public let path: String
    /// The /dev/v4l/by-id link that pointed at `path` when it was opened.
    public let stableName: String?
    public var reopenInterval: Duration = .milliseconds(250)

    private let pendingMode = Mutex<CameraMode?>(nil)
    /// The encoder bitrate to set on a camera that encodes (0: none pending), and a keyframe asked.
    private let pendingBitrate = Atomic<Int>(0)
    private let keyframeWanted = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    /// Entered while the capture thread runs: `stop` waits on it.
    private let running = DispatchGroup()
    /// Signalled by `stop` for a capture thread waiting to reopen the device.
    private let stopWake = DispatchSemaphore(value: 0)
    private var session: Session?
    private var mode: CameraMode

    /// The mapped buffers and format of one open of the device.
    final class Session {
        let fd: Int32
        var buffers: [(pointer: UnsafeMutableRawPointer, length: Int)] = []
        /// nil: a format sent as it comes (H.264), not converted.
        var format: PixelFormat?
        var width: Int
        var height: Int
        var bytesPerLine: Int
        var mode: CameraMode

        init(fd: Int32, mode: CameraMode) {
            self.fd = fd
            self.mode = mode
            self.format = .yuyv
            self.width = mode.width
            self.height = mode.height
            self.bytesPerLine = 0
        }

        func unmapAll() {
            for buffer in buffers { v4l2_munmap(buffer.pointer, buffer.length) }
            buffers = []
        }

        deinit {
            _ = cv4l2_stream(fd, 0)
            unmapAll()
            v4l2_close(fd)
        }
    }

    /// Opens the device in `mode` (use `CaptureDevice.nearestMode` to pick one it has).
    public init(path: String, mode: CameraMode) throws(DeviceError) {
        self.path = path
        self.mode = mode
        stableName = CameraDevices.stableName(for: path)
        session = try Self.open(path: path, mode: mode)
    }

    deinit { stop() }

    /// The mode the camera is in now.
    public var currentMode: CameraMode { session?.mode ?? mode }

    static func open(path: String, mode: CameraMode) throws(DeviceError) -> Session {
        let fd = cv4l2_open(path, O_RDWR | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            throw DeviceError(operation: "open camera \(path)", errno: code, hint: code == EBUSY ? "the camera is in use by another program" : nil)
        }
        let session = Session(fd: fd, mode: mode)
        try configure(session, path: path, mode: mode)
        return session
    }

    /// Sets format and interval, maps buffers, queues them and starts streaming.
    static func configure(_ s: Session, path: String, mode: CameraMode) throws(DeviceError) {
        let format = PixelFormat(rawValue: mode.fourCC)
        let passedThrough = CaptureDevice.passedThroughFormats.contains(mode.fourCC)
        guard format != nil || passedThrough else {
            throw DeviceError(operation: "capture \(mode) from \(path)",
                              detail: "callend converts \(PixelFormat.allCases.map(\.rawValue).joined(separator: ", ")) to I420 and sends H264 as it is, not \(mode.fourCC)")
        }
        let wantedFourCC = format?.fourCC ?? cv4l2_pix_fmt_h264()
        var width: UInt32 = 0, height: UInt32 = 0, fourCC: UInt32 = 0, bytesPerLine: UInt32 = 0, size: UInt32 = 0
        guard cv4l2_set_format(s.fd, UInt32(mode.width), UInt32(mode.height), wantedFourCC, &width, &height, &fourCC, &bytesPerLine, &size) == 0 else {
            let code = errno
            throw DeviceError(operation: "set \(mode) on \(path) (VIDIOC_S_FMT)", errno: code,
                              hint: code == EBUSY ? "the camera is streaming to another program" : nil)
        }
        guard fourCC == wantedFourCC, Int(width) == mode.width, Int(height) == mode.height else {
            throw DeviceError(operation: "set \(mode) on \(path)",
                              detail: "the driver chose \(CameraDevices.fourCC(fourCC)) \(width)x\(height) instead")
        }
        var num: UInt32 = 0, den: UInt32 = 0
        // Drivers keep their default rate (vivid: 5 fps at 640x480) unless the interval is set.
        if cv4l2_set_frame_interval(s.fd, UInt32(mode.frameRate.per), UInt32(mode.frameRate.frames), &num, &den) == 0, num > 0 {
            s.mode.frameRate = FrameRate(frames: Int(den), per: Int(num))
        }
        s.format = format
        s.width = Int(width)
        s.height = Int(height)
        s.bytesPerLine = Int(bytesPerLine)
        var granted: UInt32 = 0
        guard cv4l2_request_buffers(s.fd, 4, &granted) == 0, granted >= 2 else {
            throw DeviceError(operation: "request capture buffers from \(path) (VIDIOC_REQBUFS)", errno: errno)
        }
        for index in 0..<granted {
            var offset: UInt32 = 0, length: UInt32 = 0
            guard cv4l2_query_buffer(s.fd, index, &offset, &length) == 0 else {
                throw DeviceError(operation: "query buffer \(index) of \(path)", errno: errno)
            }
            guard let pointer = cv4l2_mmap(s.fd, length, offset), pointer != UnsafeMutableRawPointer(bitPattern: -1) else {
                throw DeviceError(operation: "map buffer \(index) of \(path)", errno: errno)
            }
            s.buffers.append((pointer, Int(length)))
            guard cv4l2_queue_buffer(s.fd, index) == 0 else { throw DeviceError(operation: "queue buffer \(index) of \(path)", errno: errno) }
        }
        guard cv4l2_stream(s.fd, 1) == 0 else { throw DeviceError(operation: "start streaming \(path) (VIDIOC_STREAMON)", errno: errno) }
    }

    /// Asks the running camera to switch mode; `modeChanged` follows once it has.
    public func switchMode(_ newMode: CameraMode) {
        pendingMode.withLock { $0 = newMode }
    }

    /// Asks a camera that encodes (H.264) for this bitrate, through V4L2_CID_MPEG_VIDEO_BITRATE;
    /// the capture thread sets it and reports a `controlSet`.
    public func setBitrate(_ bitsPerSecond: Int) {
        pendingBitrate.store(max(1, bitsPerSecond), ordering: .relaxed)
    }

    /// Asks a camera that encodes for a keyframe: V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME where it
    /// has it, else a restart of its stream (stream off and on), which UVC cameras answer with an IDR.
    public func requestKeyframe() {
        keyframeWanted.store(true, ordering: .relaxed)
    }

    /// Starts the capture thread; `handler` runs on it for every event.
    public func start(handler: @escaping @Sendable (CameraEvent) -> Void) {
        running.enter()
        startThread(named: "camera \(path.split(separator: "/").last ?? "")") { [self] in
            run(handler)
            running.leave()
        }
    }

    /// Stops capturing and waits for the thread; the device is closed.
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        stopWake.signal()
        running.wait()
        session = nil
    }

    private func run(_ handler: @Sendable (CameraEvent) -> Void) {
        if let session { handler(.modeChanged(session.mode)) }
        while !stopping.load(ordering: .relaxed) {
            guard let s = session else {
                reopen(handler)
                continue
            }
            if let wanted = pendingMode.withLock({ m -> CameraMode? in defer { m = nil }; return m }) {
                applySwitch(to: wanted, s, handler)
                continue
            }
            if s.format == nil {
                applyControls(s, handler)
                guard session != nil else { continue }
            }
            var pfd = pollfd(fd: s.fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, 200)
            if ready < 0 && errno != EINTR {
                lost(DeviceError(operation: "poll \(path)", errno: errno), handler)
                continue
            }
            guard ready > 0 else { continue }
            if pfd.revents & Int16(POLLERR | POLLHUP) != 0 && pfd.revents & Int16(POLLIN) == 0 {
                lost(DeviceError(operation: "capture from \(path)", errno: ENODEV, hint: "the device went away"), handler)
                continue
            }
            var index: UInt32 = 0, used: UInt32 = 0, sequence: UInt32 = 0, flags: UInt32 = 0
            var seconds = 0, micros = 0
            guard cv4l2_dequeue_buffer(s.fd, &index, &used, &seconds, &micros, &sequence, &flags) == 0 else {
                let code = errno
                if code == EAGAIN || code == EINTR { continue }
                lost(DeviceError(operation: "dequeue a frame from \(path) (VIDIOC_DQBUF)", errno: code), handler)
                continue
            }
            let timestamp = Duration.seconds(seconds) + .microseconds(micros)
            let buffer = s.buffers[Int(index)]
            switch s.format {
            case nil:
                let unit = [UInt8](UnsafeRawBufferPointer(start: buffer.pointer, count: Int(used)))
                if !unit.isEmpty { handler(.encoded(unit, timestamp: timestamp, sequence: Int(sequence))) }
            case let format?:
                do {
                    let frame = try PixelConverter.toI420(UnsafeRawBufferPointer(start: buffer.pointer, count: Int(used)), format: format,
                                                          width: s.width, height: s.height, stride: format == .mjpeg ? 0 : s.bytesPerLine,
                                                          timestamp: timestamp)
                    handler(.frame(frame, sequence: Int(sequence)))
                } catch {
                    handler(.frameDropped(error.description))
                }
            }
            if cv4l2_queue_buffer(s.fd, index) != 0 {
                lost(DeviceError(operation: "requeue a buffer on \(path) (VIDIOC_QBUF)", errno: errno), handler)
            }
        }
    }

    /// A passed-through camera's pending bitrate and keyframe request, on the capture thread.
    private func applyControls(_ s: Session, _ handler: @Sendable (CameraEvent) -> Void) {
        let bitrate = pendingBitrate.exchange(0, ordering: .relaxed)
        if bitrate > 0 {
            let id = cv4l2_cid_video_bitrate()
            let failed: DeviceError? = cv4l2_set_ext_control(s.fd, id, Int32(clamping: bitrate)) == 0 ? nil
                : DeviceError(operation: "set the bitrate of \(path) (V4L2_CID_MPEG_VIDEO_BITRATE)", errno: errno)
            handler(.controlSet(name: "bitrate", value: bitrate, error: failed))
        }
        guard keyframeWanted.exchange(false, ordering: .relaxed) else { return }
        if cv4l2_set_ext_control(s.fd, cv4l2_cid_force_key_frame(), 1) == 0 {
            handler(.controlSet(name: "keyframe", value: 1, error: nil))
        } else {
            // No such button: restart the stream in the same mode (no `modeChanged`: nothing changed).
            handler(.controlSet(name: "keyframe", value: 1, error: DeviceError(operation: "force a keyframe on \(path) (V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME)", errno: errno,
                                                                               hint: "restarting its stream instead")))
            applySwitch(to: s.mode, s, handler, announce: false)
        }
    }

    /// Stream off, release buffers, set the new format and interval, stream on (same descriptor).
    private func applySwitch(to wanted: CameraMode, _ s: Session, _ handler: @Sendable (CameraEvent) -> Void, announce: Bool = true) {
        _ = cv4l2_stream(s.fd, 0)
        s.unmapAll()
        var none: UInt32 = 0
        _ = cv4l2_request_buffers(s.fd, 0, &none)
        s.mode = wanted
        do {
            try Self.configure(s, path: path, mode: wanted)
            mode = s.mode
            if announce { handler(.modeChanged(s.mode)) }
        } catch {
            // Go back to the mode that worked and say why the switch failed.
            handler(.frameDropped("mode switch to \(wanted) failed: \(error)"))
            s.unmapAll()
            _ = cv4l2_request_buffers(s.fd, 0, &none)
            s.mode = mode
            do {
                try Self.configure(s, path: path, mode: mode)
                handler(.modeChanged(s.mode))
            } catch {
                lost(error, handler)
            }
        }
    }

    private func lost(_ error: DeviceError, _ handler: @Sendable (CameraEvent) -> Void) {
        // Every handle must be closed before some drivers (vivid, USB) let the device come back.
        session = nil
        handler(.deviceLost(error))
    }

    private func reopen(_ handler: @Sendable (CameraEvent) -> Void) {
        let deadline = MediaTime.now + reopenInterval
        // Until the interval has passed, or at once on stop().
        stopWake.wait(for: deadline - MediaTime.now)
        guard !stopping.load(ordering: .relaxed) else { return }
        // The stable name follows the camera to whatever node it comes back at; a camera without
        // one (no udev, a platform device) is looked for where it was.
        let node = stableName.flatMap(Self.resolve) ?? path
        guard access(node, F_OK) == 0 else { return }
        var reopened = try? Self.open(path: node, mode: mode)
        if reopened == nil, let described = try? CameraDevices.describe(path: node),
           let nearest = try? described.nearestMode(width: mode.width, height: mode.height, frameRate: mode.frameRate, fourCC: nil),
           PixelFormat(rawValue: nearest.fourCC) != nil {
            // Another mode set (firmware, another camera under the same name): the nearest one.
            reopened = try? Self.open(path: node, mode: nearest)
        }
        guard let reopened else { return }
        session = reopened
        mode = reopened.mode
        handler(.deviceRestored(path: node))
        handler(.modeChanged(reopened.mode))
    }

    /// The node a /dev/v4l/by-id link points at now, if it exists.
    static func resolve(_ link: String) -> String? {
        guard let resolved = realpath(link, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
