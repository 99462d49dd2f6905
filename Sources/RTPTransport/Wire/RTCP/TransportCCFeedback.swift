/// Transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01
/// §3.1), RTPFB with FMT = 15:
///
///     |                     SSRC of packet sender                     |
///     |                      SSRC of media source                     |
///     |      base sequence number     |      packet status count      |
///     |                 reference time                | fb pkt. count |
///     |          packet chunk         |         packet chunk          |  ...
///     |  recv delta   |  recv delta   |  ...                 | zero padding |
///
/// Packet chunks say, per transport sequence number from the base, whether the packet arrived and
/// how its arrival delta is coded: run-length chunks (bit 15 = 0: 2-bit symbol, 13-bit run) or
/// status vectors (bit 15 = 1: bit 14 = 0 for 14 one-bit symbols, 1 for 7 two-bit symbols).
/// Symbols: 0 not received, 1 received with a 1-byte delta (0 ... 63.75 ms), 2 received with a
/// 2-byte signed delta. Deltas are in 250 µs ticks; the reference time in 64 ms units (24-bit
/// signed). The chunks are kept as received, so parse and serialize are exact inverses.
public struct TransportCCFeedback: Sendable, Equatable {
    public enum Status: UInt8, Sendable {
        case notReceived = 0, smallDelta = 1, largeDelta = 2
    }

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var baseSequenceNumber: UInt16
    public var packetStatusCount: UInt16
    /// 24-bit signed reference time in 64 ms units.
    public var referenceTime: Int32
    public var feedbackPacketCount: UInt8
    public var chunks: [UInt16]
    /// Receive deltas in 250 µs ticks, one per received packet, in order.
    public var deltas: [Int16]

    static let format: UInt8 = 15
    static let fixedSize = 20
    public static let deltaTickMicroseconds: Int64 = 250
    public static let referenceTimeMicroseconds: Int64 = 64_000

    /// Builds feedback for consecutive transport sequence numbers starting at `base`: nil in
    /// `arrivals` means not received; times are in microseconds on the receiver's clock. Returns nil
    /// if a gap between arrivals does not fit a 16-bit delta (over 8 s): start a new feedback then.
    public init?(senderSSRC: UInt32, mediaSSRC: UInt32, feedbackPacketCount: UInt8, base: UInt16, arrivals: [Int64?]) {
        guard let firstArrival = arrivals.compactMap({ $0 }).first, arrivals.count <= 0xffff else { return nil }
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.feedbackPacketCount = feedbackPacketCount
        self.baseSequenceNumber = base
        self.packetStatusCount = UInt16(arrivals.count)
        let reference = firstArrival >= 0 ? firstArrival / Self.referenceTimeMicroseconds
            : (firstArrival - Self.referenceTimeMicroseconds + 1) / Self.referenceTimeMicroseconds
        self.referenceTime = (Int32(truncatingIfNeeded: reference) << 8) >> 8
        var previousTicks = Int64(referenceTime) * Self.referenceTimeMicroseconds / Self.deltaTickMicroseconds
        var statuses: [Status] = []
        var deltas: [Int16] = []
        for arrival in arrivals {
            guard let arrival else {
                statuses.append(.notReceived)
                continue
            }
            let ticks = arrival / Self.deltaTickMicroseconds
            let delta = ticks - previousTicks
            previousTicks = ticks
            guard let small = Int16(exactly: delta) else { return nil }
            statuses.append((0...255).contains(delta) ? .smallDelta : .largeDelta)
            deltas.append(small)
        }
        self.deltas = deltas
        self.chunks = Self.encode(statuses)
    }

    /// Canonical chunking: runs of 7 or more equal symbols as run-length chunks, the rest as
    /// status vectors (one-bit when only "not received"/"small" appear, else two-bit).
    static func encode(_ statuses: [Status]) -> [UInt16] {
        var chunks: [UInt16] = []
        var i = 0
        while i < statuses.count {
            var run = 1
            while i + run < statuses.count && statuses[i + run] == statuses[i] && run < 0x1fff { run += 1 }
            if run >= 7 {
                chunks.append(UInt16(statuses[i].rawValue) << 13 | UInt16(run))
                i += run
                continue
            }
            let window14 = statuses[i..<min(statuses.count, i + 14)]
            if window14.allSatisfy({ $0 != .largeDelta }) {
                var chunk: UInt16 = 0x8000
                for (k, s) in window14.enumerated() { chunk |= UInt16(s.rawValue) << UInt16(13 - k) }
                chunks.append(chunk)
                i += window14.count
            } else {
                let window7 = statuses[i..<min(statuses.count, i + 7)]
                var chunk: UInt16 = 0xc000
                for (k, s) in window7.enumerated() { chunk |= UInt16(s.rawValue) << UInt16(12 - 2 * k) }
                chunks.append(chunk)
                i += window7.count
            }
        }
        return chunks
    }

    /// The status of each packet from the base, decoded from the chunks.
    static func decode(_ chunks: [UInt16], count: Int) throws(ParseError) -> [Status] {
        var statuses: [Status] = []
        for chunk in chunks {
            if chunk & 0x8000 == 0 {
                guard let status = Status(rawValue: UInt8((chunk >> 13) & 0x3)) else {
                    throw ParseError("RTCP transport-cc", "reserved status symbol 3 in a run-length chunk")
                }
                statuses += [Status](repeating: status, count: Int(chunk & 0x1fff))
            } else if chunk & 0x4000 == 0 {
                for k in 0..<14 { statuses.append((chunk >> UInt16(13 - k)) & 1 == 1 ? .smallDelta : .notReceived) }
            } else {
                for k in 0..<7 {
                    guard let status = Status(rawValue: UInt8((chunk >> UInt16(12 - 2 * k)) & 0x3)) else {
                        throw ParseError("RTCP transport-cc", "reserved status symbol 3 in a status vector")
                    }
                    statuses.append(status)
                }
            }
        }
        guard statuses.count >= count else {
            throw ParseError("RTCP transport-cc", "chunks describe \(statuses.count) packets, the header says \(count)")
        }
        return Array(statuses.prefix(count))
    }

    init(parsing body: [UInt8]) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        guard let sender = reader.readUInt32(), let media = reader.readUInt32(), let base = reader.readUInt16(),
              let count = reader.readUInt16(), let reference = reader.readUInt24(), let fbCount = reader.readUInt8() else {
            throw .truncated("RTCP transport-cc", need: Self.fixedSize, have: body.count)
        }
        senderSSRC = sender
        mediaSSRC = media
        baseSequenceNumber = base
        packetStatusCount = count
        referenceTime = Int32(bitPattern: reference << 8) >> 8
        feedbackPacketCount = fbCount
        // Read chunks until they cover the status count.
        var chunks: [UInt16] = []
        var covered = 0
        while covered < Int(count) {
            guard let chunk = reader.readUInt16() else {
                throw ParseError("RTCP transport-cc", "chunks end after \(covered) of \(count) packets")
            }
            chunks.append(chunk)
            covered += chunk & 0x8000 == 0 ? Int(chunk & 0x1fff) : (chunk & 0x4000 == 0 ? 14 : 7)
        }
        self.chunks = chunks
        var deltas: [Int16] = []
        for status in try Self.decode(chunks, count: Int(count)) {
            switch status {
            case .notReceived: continue
            case .smallDelta:
                guard let d = reader.readUInt8() else { throw ParseError("RTCP transport-cc", "receive deltas truncated") }
                deltas.append(Int16(d))
            case .largeDelta:
                guard let d = reader.readUInt16() else { throw ParseError("RTCP transport-cc", "receive deltas truncated") }
                deltas.append(Int16(bitPattern: d))
            }
        }
        self.deltas = deltas
    }

    /// Arrival time in microseconds for each packet from the base, nil when not received.
    public func arrivals() throws(ParseError) -> [(sequenceNumber: UInt16, arrival: Int64?)] {
        var ticks = Int64(referenceTime) * Self.referenceTimeMicroseconds / Self.deltaTickMicroseconds
        var deltaIndex = 0
        var out: [(UInt16, Int64?)] = []
        for (offset, status) in try Self.decode(chunks, count: Int(packetStatusCount)).enumerated() {
            let seq = baseSequenceNumber &+ UInt16(truncatingIfNeeded: offset)
            guard status != .notReceived else { out.append((seq, nil)); continue }
            guard deltaIndex < deltas.count else { throw ParseError("RTCP transport-cc", "fewer deltas than received packets") }
            ticks += Int64(deltas[deltaIndex])
            deltaIndex += 1
            out.append((seq, ticks * Self.deltaTickMicroseconds))
        }
        return out
    }

    private var deltaBytes: Int {
        let statuses = (try? Self.decode(chunks, count: Int(packetStatusCount))) ?? []
        return statuses.reduce(0) { $0 + ($1 == .smallDelta ? 1 : $1 == .largeDelta ? 2 : 0) }
    }

    var serializedSize: Int { (Self.fixedSize + 2 * chunks.count + deltaBytes + 3) / 4 * 4 }

    func serialize(into out: inout [UInt8]) {
        let start = out.count
        let size = serializedSize
        RTCPHeader(padding: false, count: Self.format, packetType: RTCPHeader.transportFeedback, size: size).serialize(into: &out)
        out.writeUInt32(senderSSRC)
        out.writeUInt32(mediaSSRC)
        out.writeUInt16(baseSequenceNumber)
        out.writeUInt16(packetStatusCount)
        out.writeUInt24(UInt32(bitPattern: referenceTime) & 0xff_ffff)
        out.append(feedbackPacketCount)
        for chunk in chunks { out.writeUInt16(chunk) }
        let statuses = (try? Self.decode(chunks, count: Int(packetStatusCount))) ?? []
        var index = 0
        for status in statuses where status != .notReceived {
            let delta = index < deltas.count ? deltas[index] : 0
            index += 1
            if status == .smallDelta { out.append(UInt8(truncatingIfNeeded: delta)) } else { out.writeUInt16(UInt16(bitPattern: delta)) }
        }
        while out.count - start < size { out.append(0) }
    }
}
