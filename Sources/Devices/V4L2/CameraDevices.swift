internal import CV4L2
import FoundationEssentials
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// Finds V4L2 capture devices and enumerates every pixel format × frame size × frame interval
/// (VIDIOC_ENUM_FMT, VIDIOC_ENUM_FRAMESIZES, VIDIOC_ENUM_FRAMEINTERVALS) through libv4l2.
public enum CameraDevices {
    /// Capture devices under /dev, with the problems met on nodes that could not be read.
    public static func list(directory: String = "/dev") -> (devices: [CaptureDevice], problems: [DeviceError]) {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("video") }
            .sorted { (Int($0.dropFirst(5)) ?? 0) < (Int($1.dropFirst(5)) ?? 0) }
        var devices: [CaptureDevice] = []
        var problems: [DeviceError] = []
        for name in names {
            do {
                if let device = try describe(path: directory + "/" + name) { devices.append(device) }
            } catch {
                problems.append(error)
            }
        }
        return (devices, problems)
    }

    /// Everything one node can capture; nil when it is not a video capture node (metadata nodes
    /// of UVC cameras, output-only devices).
    public static func describe(path: String) throws(DeviceError) -> CaptureDevice? {
        let fd = cv4l2_open(path, O_RDWR | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            let hint: String? = switch code {
            case EACCES: "permission denied: add the user to the 'video' group"
            case EBUSY: "the device is in use by another program"
            case ENOTTY: "not a V4L2 device"
            default: nil
            }
            throw DeviceError(operation: "open video device \(path)", errno: code, hint: hint)
        }
        defer { v4l2_close(fd) }
        var cap = v4l2_capability()
        guard cv4l2_querycap(fd, &cap) == 0 else {
            throw DeviceError(operation: "query \(path) (VIDIOC_QUERYCAP)", errno: errno)
        }
        let caps = cap.capabilities & cv4l2_cap_device_caps() != 0 ? cap.device_caps : cap.capabilities
        guard caps & cv4l2_cap_video_capture() != 0 else { return nil }
        return CaptureDevice(path: path, stableName: stableName(for: path), driver: text(cap.driver), card: text(cap.card),
                             busInfo: text(cap.bus_info), formats: formats(fd), controls: controls(fd))
    }

    /// Every enabled control of an open device, in the driver's order.
    static func controls(_ fd: Int32) -> [CameraControl] {
        var out: [CameraControl] = []
        var id: UInt32 = 0
        var name = [CChar](repeating: 0, count: 33)
        var type: UInt32 = 0, minimum: Int32 = 0, maximum: Int32 = 0, defaultValue: Int32 = 0
        while out.count < 512 {
            id = cv4l2_next_control(fd, id, &name, &type, &minimum, &maximum, &defaultValue)
            guard id != 0 else { break }
            let text = String(decoding: name.prefix(32).prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            out.append(CameraControl(id: id, name: text, type: type, minimum: Int(minimum), maximum: Int(maximum), defaultValue: Int(defaultValue)))
        }
        return out
    }

    static func text<T>(_ field: T) -> String {
        withUnsafeBytes(of: field) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    }

    /// The FourCC as text; V4L2 marks big-endian variants with bit 31 (V4L2_PIX_FMT_FLAG_BE), shown as "-BE".
    static func fourCC(_ value: UInt32) -> String {
        let bigEndian = value & (1 << 31) != 0
        let code = value & ~(1 << 31)
        let text = String(decoding: (0..<4).map { UInt8((code >> (8 * $0)) & 0xff) }, as: UTF8.self).trimmed()
        return bigEndian ? text + "-BE" : text
    }

    private static func formats(_ fd: Int32) -> [CameraFormat] {
        var out: [CameraFormat] = []
        var index: UInt32 = 0
        while true {
            var desc = v4l2_fmtdesc()
            desc.index = index
            desc.type = cv4l2_buf_type_video_capture()
            guard cv4l2_enum_fmt(fd, &desc) == 0 else { break }
            out.append(CameraFormat(fourCC: fourCC(desc.pixelformat), description: text(desc.description),
                                    compressed: desc.flags & UInt32(V4L2_FMT_FLAG_COMPRESSED) != 0,
                                    emulated: desc.flags & UInt32(V4L2_FMT_FLAG_EMULATED) != 0,
                                    sizes: sizes(fd, desc.pixelformat)))
            index += 1
        }
        return out
    }

    private static func sizes(_ fd: Int32, _ pixelFormat: UInt32) -> [CameraFrameSize] {
        var out: [CameraFrameSize] = []
        var index: UInt32 = 0
        while true {
            var size = v4l2_frmsizeenum()
            size.index = index
            size.pixel_format = pixelFormat
            guard cv4l2_enum_framesizes(fd, &size) == 0 else { break }
            if size.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue {
                let d = cv4l2_frmsize_discrete(&size)
                out.append(CameraFrameSize(width: Int(d.width), height: Int(d.height),
                                           frameRates: intervals(fd, pixelFormat, Int(d.width), Int(d.height), into: nil)))
            } else {
                let s = cv4l2_frmsize_stepwise(&size)
                var entry = CameraFrameSize(width: Int(s.min_width), height: Int(s.min_height), frameRates: [])
                entry.maxWidth = Int(s.max_width)
                entry.maxHeight = Int(s.max_height)
                entry.stepWidth = Int(s.step_width)
                entry.stepHeight = Int(s.step_height)
                entry.frameRates = intervals(fd, pixelFormat, Int(s.max_width), Int(s.max_height), into: &entry)
                out.append(entry)
                break  // a stepwise size is the only entry
            }
            index += 1
        }
        return out
    }

    private static func intervals(_ fd: Int32, _ pixelFormat: UInt32, _ width: Int, _ height: Int, into stepwise: UnsafeMutablePointer<CameraFrameSize>?) -> [FrameRate] {
        var out: [FrameRate] = []
        var index: UInt32 = 0
        while true {
            var ival = v4l2_frmivalenum()
            ival.index = index
            ival.pixel_format = pixelFormat
            ival.width = UInt32(width)
            ival.height = UInt32(height)
            guard cv4l2_enum_frameintervals(fd, &ival) == 0 else { break }
            if ival.type == V4L2_FRMIVAL_TYPE_DISCRETE.rawValue {
                let f = cv4l2_frmival_discrete(&ival)
                if f.numerator > 0 { out.append(FrameRate(frames: Int(f.denominator), per: Int(f.numerator))) }
            } else {
                let s = cv4l2_frmival_stepwise(&ival)
                // Intervals are seconds per frame: the longest interval is the slowest rate.
                if s.max.numerator > 0 { stepwise?.pointee.minFrameRate = FrameRate(frames: Int(s.max.denominator), per: Int(s.max.numerator)) }
                if s.min.numerator > 0 { stepwise?.pointee.maxFrameRate = FrameRate(frames: Int(s.min.denominator), per: Int(s.min.numerator)) }
                break
            }
            index += 1
        }
        return out
    }

    /// Sets a camera control found by its name (as `v4l2-ctl --list-ctrls` shows it, any case):
    /// brightness, exposure, or vivid's "Disconnect" button, which the device lab uses to pull a
    /// virtual plug.
    public static func setControl(path: String, named name: String, to value: Int32) throws(DeviceError) {
        let fd = cv4l2_open(path, O_RDWR | O_NONBLOCK)
        guard fd >= 0 else { throw DeviceError(operation: "open \(path) to set control '\(name)'", errno: errno) }
        defer { v4l2_close(fd) }
        let id = cv4l2_find_control(fd, name)
        guard id != 0 else { throw DeviceError(operation: "set control '\(name)' on \(path)", detail: "the device has no control of that name") }
        guard cv4l2_set_control(fd, id, value) == 0 else {
            throw DeviceError(operation: "set control '\(name)' on \(path) (VIDIOC_S_CTRL)", errno: errno)
        }
    }

    /// The /dev/v4l/by-id link that points at `path`, if any.
    static func stableName(for path: String) -> String? {
        let directory = "/dev/v4l/by-id"
        guard let links = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        return links.map { directory + "/" + $0 }.first { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path == target }
    }
}

extension CaptureDevice {
    /// The control that sets its encoder's bitrate (V4L2_CID_MPEG_VIDEO_BITRATE), if it has one.
    public var bitrateControl: CameraControl? { controls.first { $0.id == cv4l2_cid_video_bitrate() } }
    /// The button that makes its encoder send a keyframe (V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME), if it has one.
    public var keyframeControl: CameraControl? { controls.first { $0.id == cv4l2_cid_force_key_frame() } }
}
