import Platform
import CallEndpoint
import Codecs
import MediaCore
import Devices
import Foundation
import RTPTransport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `callend bench rtp`: the packet path packetize → (SRTP protect) → UDP on loopback → (SRTP
/// unprotect) → parse → depacketize, measured in packets per second and CPU time per packet,
/// without SRTP and with each SRTP profile, side by side in one process.
public struct RTPBenchmark {
    public struct Row: Sendable {
        public var name: String
        public var packets: Int
        public var received: Int
        public var seconds: Double
        public var cpuSeconds: Double
        public var packetsPerSecond: Double { Double(received) / seconds }
        public var cpuMicrosecondsPerPacket: Double { cpuSeconds * 1e6 / Double(max(1, received)) }
    }

    public let packets: Int

    public init(packets: Int) { self.packets = packets }

    public func run() throws -> [Row] {
        // Real VP8 frames of the test pattern, so payload sizes are those of a call.
        var pattern = TestPatternSource(width: 640, height: 480, frameRate: 30)
        let encoder = try VP8Encoder(configuration: VP8EncoderConfiguration(width: 640, height: 480, targetBitrate: 1_500_000))
        var frames: [[UInt8]] = []
        for _ in 0..<30 { frames += try encoder.encode(pattern.nextFrame()).map(\.data) }
        var rows: [Row] = []
        let profiles: [SRTPProfile?] = [nil, .aes128CmSha1_80, .aeadAes128Gcm]
        for profile in profiles {
            rows.append(try measure(profile: profile, frames: frames))
        }
        return rows
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    func measure(profile: SRTPProfile?, frames: [[UInt8]]) throws -> Row {
        let key = (0..<(profile?.keyMaterialLength ?? 0)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let protect = try profile.map { try SRTPSession(profile: $0, keyMaterial: key, direction: .outbound) }
        let unprotect = try profile.map { try SRTPSession(profile: $0, keyMaterial: key, direction: .inbound) }
        let receiver = try UDPSocket(bindHost: "127.0.0.1", port: 0, bufferBytes: 1 << 23)
        let sender = try UDPSocket(bindHost: "127.0.0.1", port: 0, bufferBytes: 1 << 23)
        let destination = try UDPAddress(host: "127.0.0.1", port: receiver.localPort)
        let received = Atomic<Int>(0)
        let bytesOut = Atomic<Int>(0)
        receiver.startReceiving(name: "bench-receive") { datagram, _, _ in
            var bytes = datagram
            if let unprotect {
                guard let clear = try? unprotect.unprotectRTP(datagram) else { return }
                bytes = clear
            }
            guard let packet = try? RTPPacket(parsing: bytes), let fragment = try? VP8PayloadFragment(parsing: packet.payload) else { return }
            bytesOut.add(fragment.data.count, ordering: .relaxed)
            received.add(1, ordering: .relaxed)
        }
        var packetizer = VP8Packetizer()
        var sequence: UInt16 = 0
        var sent = 0
        let cpuStart = Self.cpuSeconds()
        let start = MediaTime.now
        var frameIndex = 0
        while sent < packets {
            let payloads = packetizer.packetize(frames[frameIndex % frames.count])
            for (i, payload) in payloads.enumerated() where sent < packets {
                // Keep at most 2000 packets in flight so the socket buffer never overflows.
                while sent - received.load(ordering: .relaxed) > 2000 { sched_yield() }
                let packet = RTPPacket(payloadType: 96, sequenceNumber: sequence, timestamp: UInt32(frameIndex * 3000), ssrc: 1,
                                       marker: i == payloads.count - 1, payload: payload)
                sequence &+= 1
                var bytes = packet.serialized()
                if let protect { bytes = try protect.protectRTP(bytes) }
                try sender.send(bytes, to: destination)
                sent += 1
            }
            frameIndex += 1
        }
        let deadline = MediaTime.now + .seconds(5)
        while received.load(ordering: .relaxed) < sent && MediaTime.now < deadline { sched_yield() }
        let seconds = (MediaTime.now - start).inSeconds
        let cpu = Self.cpuSeconds() - cpuStart
        receiver.close()
        sender.close()
        return Row(name: profile?.rawValue ?? "plain RTP", packets: sent, received: received.load(ordering: .relaxed), seconds: seconds, cpuSeconds: cpu)
    }

    public static func format(_ rows: [Row]) -> String {
        var lines = ["RTP path bench: VP8 packetize -> (SRTP protect) -> UDP loopback -> (SRTP unprotect) -> parse -> depacketize, one process, two threads",
                     "  path                        packets   received   packets/s   CPU us/packet   ratio to plain"]
        let plain = rows.first { $0.name == "plain RTP" }
        for r in rows {
            let ratio = plain.map { String(format: "%.2fx pps, %.2fx CPU", r.packetsPerSecond / $0.packetsPerSecond, r.cpuMicrosecondsPerPacket / $0.cpuMicrosecondsPerPacket) } ?? ""
            lines.append("  " + r.name.padding(toLength: 28, withPad: " ", startingAt: 0)
                         + String(format: "%7d   %8d   %9.0f   %13.2f   ", r.packets, r.received, r.packetsPerSecond, r.cpuMicrosecondsPerPacket) + ratio)
        }
        return lines.joined(separator: "\n")
    }
}
