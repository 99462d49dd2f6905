/// ULPFEC's receiving side (RFC 5109): keeps the last media packets as they arrived (RED taken
/// off) and the FEC packets that could still repair something, and rebuilds a lost packet as
/// soon as one FEC packet has every other packet of its group, over and over while a rebuilt
/// packet completes another group.
///
/// Only packets that arrived as sent go in: a retransmission carries the RTX stream's own
/// header extensions, not the original's, and XORed in it would rebuild garbage.
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
    static let capacity = 512
    static let maxPending = 64
    private(set) var recovered = 0

    /// A media packet arrived (serialized, RED taken off): what it lets FEC rebuild.
    mutating func media(_ bytes: [UInt8], sequenceNumber: UInt16) -> [[UInt8]] {
        store(bytes, sequenceNumber)
        return recoverAll()
    }

    /// An FEC packet arrived on `ssrc`: what it rebuilds, now or with later packets.
    mutating func fec(_ fec: ULPFECPayload, ssrc: UInt32) -> [[UInt8]] {
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
