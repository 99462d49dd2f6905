internal import CV4L2
import Foundation
import Synchronization

/// The device lab's camera that encodes: writes H.264 access units (Annex B) into the output
/// side of a v4l2loopback device at a frame rate, looping, so that its capture side delivers
/// `H264` as a UVC 1.5 camera does. The writer thread runs until `stop()`.
public final class LoopbackH264Camera: @unchecked Sendable {  // the descriptor is the writer thread's; `stopping` is atomic
    private let fd: Int32
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    public let written = Atomic<Int>(0)

    /// Opens `path`'s output side in H.264 `width`x`height` and starts writing `units` at `frameRate`.
    public init(path: String, width: Int, height: Int, frameRate: Int, units: [[UInt8]]) throws {
        fd = open(path, O_RDWR)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let largest = units.map(\.count).max() ?? 0
        guard cv4l2_set_output_format(fd, UInt32(width), UInt32(height), cv4l2_pix_fmt_h264(), UInt32(max(largest * 2, width * height))) == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        let period = 1.0 / Double(frameRate)
        Thread { [self] in
            defer { done.signal() }
            var next = Date()
            var index = 0
            while !stopping.load(ordering: .relaxed) {
                let unit = units[index % units.count]
                if unit.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == unit.count { written.add(1, ordering: .relaxed) }
                index += 1
                next += period
                let wait = next.timeIntervalSinceNow
                if wait > 0 { Thread.sleep(forTimeInterval: wait) } else { next = Date() }
            }
        }.start()
    }

    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        done.wait()
        close(fd)
    }

    deinit { stop() }
}
