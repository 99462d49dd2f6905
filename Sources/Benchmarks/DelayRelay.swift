import Platform
import CallEndpoint
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fixed one-way delay in user space: a TUN device whose every packet is written back after
/// `delay`. The router routes the traffic it forwards through the device (policy routing, see
/// `NamespaceTopology.addDelay`), so each direction of the path gets the delay before the
/// bottleneck, as RFC 8867's test cases ask (netem is not available on every machine).
public final class DelayRelay {
    public let device: String
    public let delay: Duration
    private let tun: TUNDevice
    private var fd: Int32 { tun.fd }

    public init(device: String, delay: Duration) throws {
        tun = try TUNDevice(name: device, user: "delay relay")
        self.device = device
        self.delay = delay
    }

    public typealias RelayError = TUNDevice.Failure

    /// Holds every packet read from the device for `delay`, then writes it back, in order, until
    /// `shouldStop` says so (checked at least every 100 ms).
    public func run(shouldStop: () -> Bool = { false }) {
        var held: [(due: MediaTime, bytes: [UInt8])] = []
        var next = 0  // index of the first packet still held (the array is compacted now and then)
        var buffer = [UInt8](repeating: 0, count: 65536)
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while !shouldStop() {
            let now = MediaTime.now
            while next < held.count, held[next].due <= now {
                _ = held[next].bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                next += 1
            }
            if next > 1024 {
                held.removeFirst(next)
                next = 0
            }
            let wait = next < held.count ? max(0, Int32((held[next].due - now) / .milliseconds(1))) : 100
            guard poll(&descriptor, 1, min(wait, 100)) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 { held.append((MediaTime.now + delay, Array(buffer[0..<count]))) }
        }
    }
}

/// A TUN device (layer 3, no packet information header) a relay reads the router's forwarded
/// packets from and writes them back to; closed with its owner.
public final class TUNDevice {
    public let name: String
    public let fd: Int32

    // linux/if_tun.h, which Glibc does not bring in.
    private static let tunSetInterface: UInt = 0x4004_54ca  // TUNSETIFF = _IOW('T', 202, int)
    private static let tunFlags: Int16 = 0x0001 | 0x1000  // IFF_TUN | IFF_NO_PI

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// `user` names who wants it, in errors ("delay relay", "cellular link").
    public init(name: String, user: String) throws {
        guard !name.isEmpty, name.utf8.count < Int(IFNAMSIZ) else {
            throw Failure(description: "\(user): device name '\(name)' must be 1-\(IFNAMSIZ - 1) characters")
        }
        let fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(description: "\(user): open /dev/net/tun: \(String(cString: strerror(errno))) (needs root)") }
        var request = ifreq()
        withUnsafeMutableBytes(of: &request.ifr_ifrn.ifrn_name) { raw in
            for (i, byte) in name.utf8.enumerated() { raw[i] = byte }
        }
        request.ifr_ifru.ifru_flags = Self.tunFlags
        guard ioctl(fd, Self.tunSetInterface, &request) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "\(user): create TUN device \(name): \(reason)")
        }
        self.fd = fd
        self.name = name
    }

    deinit { close(fd) }
}
