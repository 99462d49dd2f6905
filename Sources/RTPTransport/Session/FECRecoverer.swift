/// ULPFEC's receiving side (RFC 5109): keeps the last media packets as they arrived (RED taken
/// off) and the FEC packets that could still repair something, and rebuilds a lost packet as
/// soon as one FEC packet has every other packet of its group, over and over while a rebuilt
/// packet completes another group.
///
/// Only packets that arrived as sent go in: a retransmission carries the RTX stream's own
/// header extensions, not the original's, and XORed in it would rebuild garbage. And only while
/// the peer sends FEC (one in the last 500 media packets): on a clean path it sends none, and
/// keeping every packet cost a call 1.5 MiB and a copy of each packet.
struct FECRecoverer: Sendable {
    private struct Pending: Sendable {
        var fec: ULPFECPayload
        var ssrc: UInt32
        var numbers: [UInt16]
    }
    /// Media packets by sequence number, the newest `capacity`.
    private var media: [UInt16: [UInt8]] = [:]
    private var order: [UInt16] = []
    private var pending: [Pending] = []
    /// Media packets since the last FEC packet.
    private var sinceFEC = Int.max
    /// FEC follows its frame at once and spans 48 packets at most: 128 is room enough.
    static let capacity = 128
    static let maxPending = 64
    static let activeFor = 500
    private(set) var recovered = 0

    /// Whether the peer sends FEC lately (media packets are worth keeping).
    var isActive: Bool { sinceFEC < Self.activeFor }

    /// A media packet arrived (RED taken off): what it lets FEC rebuild.
    mutating func media(_ packet: RTPPacket) -> [[UInt8]] {
        sinceFEC = sinceFEC == .max ? .max : sinceFEC + 1
        guard isActive else { return [] }
        store(packet.serialized(), packet.sequenceNumber)
        return recoverAll()
    }

    /// An FEC packet arrived on `ssrc`: what it rebuilds, now or with later packets.
    mutating func fec(_ fec: ULPFECPayload, ssrc: UInt32) -> [[UInt8]] {
        sinceFEC = 0
        pending.append(Pending(fec: fec, ssrc: ssrc, numbers: fec.protectedSequenceNumbers))
        if pending.count > Self.maxPending { pending.removeFirst(pending.count - Self.maxPending) }
        return recoverAll()
    }

    private mutating func store(_ bytes: [UInt8], _ number: UInt16) {
        if media.updateValue(bytes, forKey: number) == nil { order.append(number) }
        if order.count > Self.capacity * 2 {
            for old in order.prefix(order.count - Self.capacity) { media[old] = nil }
            order.removeFirst(order.count - Self.capacity)
        }
    }

    private mutating func recoverAll() -> [[UInt8]] {
        var out: [[UInt8]] = []
        var progress = true
        while progress {
            progress = false
            var keep: [Pending] = []
            for entry in pending {
                let missing = entry.numbers.filter { media[$0] == nil }
                if missing.isEmpty { continue }  // nothing left to repair
                guard missing.count == 1 else {
                    keep.append(entry)
                    continue
                }
                guard let bytes = entry.fec.recover(sequenceNumber: missing[0], ssrc: entry.ssrc, from: entry.numbers.compactMap({ media[$0] })) else { continue }
                store(bytes, missing[0])
                recovered += 1
                out.append(bytes)
                progress = true
            }
            pending = keep
        }
        return out
    }
}
