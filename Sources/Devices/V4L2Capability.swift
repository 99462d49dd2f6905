internal import CV4L2
#if canImport(Glibc)
import Glibc
#endif

/// What VIDIOC_QUERYCAP says about a video device node.
public struct V4L2Capability: Sendable, Equatable {
    public var driver: String
    public var card: String
    public var busInfo: String
    public var capabilities: UInt32

    /// Opens `path` through libv4l2, asks the driver what it is, and closes it again.
    public static func query(path: String) throws(DeviceError) -> V4L2Capability {
        let fd = cv4l2_open(path, O_RDWR | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            // libv4l2 asks VIDIOC_QUERYCAP while opening, so a non-V4L2 node fails here.
            throw DeviceError(operation: "open video device \(path)", errno: code,
                              hint: code == ENOTTY ? "not a V4L2 device (VIDIOC_QUERYCAP refused)" : nil)
        }
        defer { v4l2_close(fd) }
        var cap = v4l2_capability()
        guard cv4l2_querycap(fd, &cap) == 0 else {
            throw DeviceError(operation: "query capabilities of \(path) (VIDIOC_QUERYCAP)", errno: errno,
                              hint: "is it a V4L2 video device?")
        }
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
        }
        return V4L2Capability(driver: text(cap.driver), card: text(cap.card), busInfo: text(cap.bus_info),
                              capabilities: cap.capabilities)
    }
}
