import Foundation
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// A cellular link between two hosts, in user space: the router routes what it forwards through
/// a TUN device (as `DelayRelay`), and this relay carries each packet over the `TraceLink` of its
/// direction, the uplink for packets to `uplinkDestination` (the far host: A's uplink carries
/// A's packets to B) and the downlink for every other. Each second it writes a line per
/// direction to `log` (when given): the second, its start in Unix time (ms: a named edge, for
/// lining the link up with endpoints' logs), the direction, the trace's capacity then (bit/s),
/// what it delivered (bit/s), packets dropped at the full queue, and the longest a packet it
/// delivered waited in the queue (ms).
public final class CellularRelay {
    public let tun: TUNDevice
    private var links: [TraceLink<[UInt8]>]
    private let uplinkDestination: (address: UInt32, mask: UInt32)
    private let log: FileHandle?
    /// Unix time (ms) of the link's start.
    private let startedAt: Int64

    /// `uplinkDestination` is an IPv4 network, "10.71.2.0/24".
    public init(device: String, uplink: CapacityTrace, downlink: CapacityTrace, delay: Duration, queueLimit: Int,
                uplinkDestination: String, log: String?) throws {
        let parts = uplinkDestination.split(separator: "/")
        var address = in_addr()
        guard parts.count == 2, inet_pton(AF_INET, String(parts[0]), &address) == 1, let bits = Int(parts[1]), (0...32).contains(bits) else {
            throw TUNDevice.Failure(description: "cellular link: --uplink-to takes an IPv4 network such as 10.71.2.0/24, not '\(uplinkDestination)'")
        }
        let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
        self.uplinkDestination = (UInt32(bigEndian: address.s_addr) & mask, mask)
        tun = try TUNDevice(name: device, user: "cellular link")
        let start = Self.now
        let wall = WallClock.now
        startedAt = Int64(wall.tv_sec) * 1000 + Int64(wall.tv_nsec) / 1_000_000
        let delayMicroseconds = delay.components.seconds * 1_000_000 + delay.components.attoseconds / 1_000_000_000_000
        links = [uplink, downlink].map { TraceLink(trace: $0, queueLimit: queueLimit, delay: delayMicroseconds, start: start) }
        if let log {
            guard FileManager.default.createFile(atPath: log, contents: Data("second unix_ms direction capacity_bps delivered_bps dropped max_queue_ms\n".utf8)),
                  let handle = FileHandle(forWritingAtPath: log) else {
                throw TUNDevice.Failure(description: "cellular link: cannot write the log \(log)")
            }
            handle.seekToEndOfFile()
            self.log = handle
        } else {
            self.log = nil
        }
    }

    /// CLOCK_MONOTONIC in µs.
    static var now: Int64 { MediaTime.now.microseconds }

    /// Which link a packet takes: 0, the uplink (to the far host), or 1.
    func direction(of packet: [UInt8]) -> Int {
        guard packet.count >= 20, packet[0] >> 4 == 4 else { return 1 }
        let destination = UInt32(packet[16]) << 24 | UInt32(packet[17]) << 16 | UInt32(packet[18]) << 8 | UInt32(packet[19])
        return destination & uplinkDestination.mask == uplinkDestination.address ? 0 : 1
    }

    /// What each direction did in the second being counted.
    private struct Second {
        var delivered = 0
        var longestWait: Int64 = 0
        var opportunitiesBefore = 0
        var droppedBefore = 0
    }

    /// Carries packets until `shouldStop` says so (checked at least every 100 ms).
    public func run(shouldStop: () -> Bool = { false }) {
        // Delivered packets waiting out their delay, per direction (each in order).
        var pending: [[(at: Int64, bytes: [UInt8])]] = [[], []]
        var next = [0, 0]
        var buffer = [UInt8](repeating: 0, count: 65536)
        var descriptor = pollfd(fd: tun.fd, events: Int16(POLLIN), revents: 0)
        var counting = [Second(), Second()]
        var second: Int64 = 0
        let start = links[0].start
        func advance(_ d: Int, to now: Int64) {
            for departure in links[d].departures(until: now) {
                pending[d].append((departure.at, departure.packet))
                counting[d].delivered += departure.packet.count
                counting[d].longestWait = max(counting[d].longestWait, departure.waited)
            }
        }
        while !shouldStop() {
            var now = Self.now
            // The seconds that ended: their figures (opportunities counted up to each end).
            while now - start >= (second + 1) * 1_000_000 {
                for d in 0..<2 { advance(d, to: start + (second + 1) * 1_000_000 - 1) }
                writeSecond(second, &counting)
                second += 1
            }
            for d in 0..<2 {
                advance(d, to: now)
                while next[d] < pending[d].count, pending[d][next[d]].at <= now {
                    _ = pending[d][next[d]].bytes.withUnsafeBytes { write(tun.fd, $0.baseAddress, $0.count) }
                    next[d] += 1
                }
                if next[d] > 1024 {
                    pending[d].removeFirst(next[d])
                    next[d] = 0
                }
            }
            // Until the next delivery, the next opportunity a queue can use, the second's end, or 100 ms.
            var wake = min(now + 100_000, start + (second + 1) * 1_000_000)
            for d in 0..<2 {
                if next[d] < pending[d].count { wake = min(wake, pending[d][next[d]].at) }
                if links[d].queued > 0 { wake = min(wake, links[d].nextOpportunity) }
            }
            // The trace's times are whole milliseconds: so is the wait.
            let wait = Int32((max(0, wake - now) + 999) / 1000)
            guard poll(&descriptor, 1, wait) > 0 else { continue }
            // Every packet waiting now, each queued at the time it is read, after whatever the
            // link carried before it came.
            repeat {
                let count = buffer.withUnsafeMutableBytes { read(tun.fd, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                let packet = Array(buffer[0..<count])
                let d = direction(of: packet)
                now = Self.now
                advance(d, to: now)
                links[d].arrive(packet, size: count, at: now)
            } while poll(&descriptor, 1, 0) > 0
        }
    }

    private func writeSecond(_ second: Int64, _ counting: inout [Second]) {
        var lines = ""
        for d in 0..<2 {
            let opportunities = links[d].counters.opportunities - counting[d].opportunitiesBefore
            let dropped = links[d].counters.dropped - counting[d].droppedBefore
            lines += "\(second) \(startedAt + second * 1000) \(d == 0 ? "up" : "down") \(opportunities * CapacityTrace.opportunityBytes * 8) \(counting[d].delivered * 8) \(dropped) \(counting[d].longestWait / 1000)\n"
            counting[d] = Second(opportunitiesBefore: links[d].counters.opportunities, droppedBefore: links[d].counters.dropped)
        }
        log?.write(Data(lines.utf8))
    }
}
