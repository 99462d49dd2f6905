import FoundationEssentials
import Platform
import Glibc

/// A frame rate as V4L2 states frame intervals, inverted: frames per `per` seconds.
public struct FrameRate: Sendable, Equatable, Hashable, Codable, Comparable, CustomStringConvertible {
    public var frames: Int
    public var per: Int

    public init(frames: Int, per: Int = 1) {
        self.frames = frames
        self.per = max(1, per)
    }

    public var value: Double { Double(frames) / Double(per) }
    public var description: String { per == 1 ? "\(frames)" : value.significant(3) }
    public static func < (a: FrameRate, b: FrameRate) -> Bool { a.value < b.value }
}

/// One size a format offers, with its frame rates (discrete), or a range (stepwise/continuous).
public struct CameraFrameSize: Sendable, Equatable, Codable {
    public var width: Int
    public var height: Int
    public var frameRates: [FrameRate]
    /// For stepwise/continuous sizes: the largest size and the steps; nil for a discrete size.
    public var maxWidth: Int?
    public var maxHeight: Int?
    public var stepWidth: Int?
    public var stepHeight: Int?
    /// For stepwise/continuous intervals: the slowest and fastest rate.
    public var minFrameRate: FrameRate?
    public var maxFrameRate: FrameRate?

    public init(width: Int, height: Int, frameRates: [FrameRate]) {
        self.width = width
        self.height = height
        self.frameRates = frameRates
    }
}

/// A pixel format of a camera (V4L2 FourCC) and its sizes.
public struct CameraFormat: Sendable, Equatable, Codable {
    public var fourCC: String
    public var description: String
    public var compressed: Bool
    /// Offered by libv4l2's conversion rather than by the driver.
    public var emulated: Bool
    public var sizes: [CameraFrameSize]
}

/// A V4L2 capture device and everything it can do.
public struct CaptureDevice: Sendable, Equatable, Codable {
    public var path: String
    /// The /dev/v4l/by-id link to this node, which survives reboots and re-plugging.
    public var stableName: String?
    public var driver: String
    public var card: String
    public var busInfo: String
    public var formats: [CameraFormat]
    /// The controls it has (VIDIOC_QUERYCTRL), enabled ones only; older listings without them read as none.
    public var controls: [CameraControl] = []

    public init(path: String, stableName: String?, driver: String, card: String, busInfo: String, formats: [CameraFormat], controls: [CameraControl] = []) {
        (self.path, self.stableName, self.driver, self.card, self.busInfo, self.formats, self.controls) = (path, stableName, driver, card, busInfo, formats, controls)
    }

    enum CodingKeys: String, CodingKey { case path, stableName, driver, card, busInfo, formats, controls }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(path: try c.decode(String.self, forKey: .path), stableName: try c.decodeIfPresent(String.self, forKey: .stableName),
                  driver: try c.decode(String.self, forKey: .driver), card: try c.decode(String.self, forKey: .card),
                  busInfo: try c.decode(String.self, forKey: .busInfo), formats: try c.decode([CameraFormat].self, forKey: .formats),
                  controls: try c.decodeIfPresent([CameraControl].self, forKey: .controls) ?? [])
    }

    /// The formats callend sends as they come, without decoding or encoding them (a camera's own H.264).
    public static let passedThroughFormats: Set<String> = ["H264"]

    /// Whether the camera can be passed through: it delivers a format callend sends as it is.
    public var deliversEncodedVideo: Bool { formats.contains { Self.passedThroughFormats.contains($0.fourCC) } }
}

/// One control of a camera (as `v4l2-ctl --list-ctrls` shows it).
public struct CameraControl: Sendable, Equatable, Codable {
    public var id: UInt32
    public var name: String
    /// V4L2_CTRL_TYPE_*: 1 integer, 2 boolean, 3 menu, 4 button, ...
    public var type: UInt32
    public var minimum: Int
    public var maximum: Int
    public var defaultValue: Int

    public init(id: UInt32, name: String, type: UInt32, minimum: Int, maximum: Int, defaultValue: Int) {
        (self.id, self.name, self.type, self.minimum, self.maximum, self.defaultValue) = (id, name, type, minimum, maximum, defaultValue)
    }
}

/// A concrete mode: format, size, rate.
public struct CameraMode: Sendable, Equatable, Hashable, Codable, CustomStringConvertible {
    public var fourCC: String
    public var width: Int
    public var height: Int
    public var frameRate: FrameRate

    public init(fourCC: String, width: Int, height: Int, frameRate: FrameRate) {
        self.fourCC = fourCC
        self.width = width
        self.height = height
        self.frameRate = frameRate
    }

    public var description: String { "\(fourCC) \(width)x\(height)@\(frameRate)" }
}

extension CaptureDevice {
    /// Every discrete mode (stepwise ranges contribute their corners).
    public var modes: [CameraMode] {
        formats.flatMap { format in
            format.sizes.flatMap { size -> [CameraMode] in
                var rates = size.frameRates
                if rates.isEmpty { rates = [size.minFrameRate, size.maxFrameRate].compactMap { $0 } }
                var sizes = [(size.width, size.height)]
                if let w = size.maxWidth, let h = size.maxHeight, (w, h) != (size.width, size.height) { sizes.append((w, h)) }
                return sizes.flatMap { s in rates.map { CameraMode(fourCC: format.fourCC, width: s.0, height: s.1, frameRate: $0) } }
            }
        }
    }

    /// The mode nearest to a request: the smallest size that covers the request (so nothing is
    /// scaled up), else the size closest in pixel count; then the rate closest to the one asked, preferring formats callend converts itself (YUYV, NV12, MJPG,
    /// YU12) and the driver's own over libv4l2's emulated ones. `fourCC` restricts the format.
    /// Fails, listing what the camera can do, when nothing is within a factor of two in width and
    /// height (four in pixels) and in rate, or the format is not offered.
    public func nearestMode(width: Int, height: Int, frameRate: FrameRate?, fourCC: String? = nil) throws(DeviceError) -> CameraMode {
        let supported = Set(["YUYV", "NV12", "MJPG", "YU12"])
        let candidates = modes.filter { fourCC == nil || $0.fourCC == fourCC }
        let emulated = Set(formats.filter(\.emulated).map(\.fourCC))
        let operation = "choose a mode of \(path) near \(fourCC ?? "any format") \(width)x\(height)\(frameRate.map { "@\($0)" } ?? "")"
        guard !candidates.isEmpty else {
            throw DeviceError(operation: operation, detail: "not offered. Supported modes: \(Self.summary(modes))")
        }
        func distance(_ m: CameraMode) -> Double { abs(log(Double(m.width * m.height) / Double(width * height))) }
        func cost(_ m: CameraMode) -> (Double, Double, Int) {
            let covers = m.width >= width && m.height >= height
            let sizeCost = distance(m) + (covers ? 0 : 10)
            let rateCost = frameRate.map { abs(log(m.frameRate.value / $0.value)) } ?? -m.frameRate.value / 1000
            let formatCost = (supported.contains(m.fourCC) ? 0 : 2) + (emulated.contains(m.fourCC) ? 1 : 0)
            return (sizeCost, rateCost, formatCost)
        }
        let best = candidates.min { a, b in
            let (ca, cb) = (cost(a), cost(b))
            return ca.0 != cb.0 ? ca.0 < cb.0 : (ca.1 != cb.1 ? ca.1 < cb.1 : ca.2 < cb.2)
        }!
        let rateCost = cost(best).1
        guard distance(best) <= log(4.0) + 0.01, frameRate == nil || rateCost <= log(2.0) + 0.01 else {
            throw DeviceError(operation: operation, detail: "nothing close (nearest is \(best)). Supported modes: \(Self.summary(modes))")
        }
        return best
    }

    /// "YUYV 640x480@30,25 1280x720@10; MJPG ..." — one line, like ffmpeg's list of supported modes.
    static func summary(_ modes: [CameraMode]) -> String {
        var byFormat: [String: [String: [FrameRate]]] = [:]
        var order: [String] = []
        for m in modes {
            if byFormat[m.fourCC] == nil { order.append(m.fourCC) }
            byFormat[m.fourCC, default: [:]]["\(m.width)x\(m.height)", default: []].append(m.frameRate)
        }
        return order.map { format in
            let sizes = byFormat[format]!.sorted { Int($0.key.split(separator: "x")[0])! < Int($1.key.split(separator: "x")[0])! }
            return format + " " + sizes.map { "\($0.key)@" + $0.value.sorted(by: >).map(\.description).joined(separator: ",") }.joined(separator: " ")
        }.joined(separator: "; ")
    }
}
