import Testing
import TestSupport
@testable import RTPTransport

/// ULPFEC (RFC 5109) wire form and the XOR that protects and rebuilds packets.
@Suite struct ULPFECTests {
    /// Two small packets of one frame, PT 96, SSRC 0x11223344, timestamp 100:
    /// seq 10 (M = 0) with payload AA BB, seq 11 (M = 1) with payload 01 02 03.
    static let first: [UInt8] = [0x80, 0x60, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x64, 0x11, 0x22, 0x33, 0x44, 0xaa, 0xbb]
    static let second: [UInt8] = [0x80, 0xe0, 0x00, 0x0b, 0x00, 0x00, 0x00, 0x64, 0x11, 0x22, 0x33, 0x44, 0x01, 0x02, 0x03]
    /// Their FEC packet, worked by hand from RFC 5109 §7.3-7.4.
    static let fec: [UInt8] = [
        0x00,                    // E = 0, L = 0 (16-bit mask), P X CC recovery: 0x80 ^ 0x80, low six bits
        0x80,                    // M + PT recovery: 0x60 ^ 0xe0
        0x00, 0x0a,              // SN base: 10
        0x00, 0x00, 0x00, 0x00,  // TS recovery: 100 ^ 100
        0x00, 0x01,              // length recovery: 2 ^ 3
        0x00, 0x03,              // protection length: the longer payload
        0xc0, 0x00,              // mask: 10 and 11
        0xab, 0xb9, 0x03,        // AA^01, BB^02, 00^03
    ]

    @Test func twoPacketsMakeTheFECPacketWorkedByHand() throws {
        let made = try #require(ULPFECPayload(protecting: [Self.first, Self.second]))
        #expect(made.serialized() == Self.fec)
        #expect(made.serializedSize == Self.fec.count)
        let parsed = try ULPFECPayload(parsing: Self.fec)
        #expect(parsed == made)
        #expect(parsed.protectedSequenceNumbers == [10, 11])
        #expect(parsed.recover(sequenceNumber: 11, ssrc: 0x1122_3344, from: [Self.first]) == Self.second)
        #expect(parsed.recover(sequenceNumber: 10, ssrc: 0x1122_3344, from: [Self.second]) == Self.first)
    }

    /// Packets of every shape (CSRCs, header extensions, padding, marker, lengths from 0 to a
    /// full MTU): each one is rebuilt exactly from the others and the FEC packet, through the
    /// wire form, with the short mask and the long one, across the sequence number's wrap.
    @Test(arguments: [(UInt16(1000), 5), (UInt16(65_530), 12), (UInt16(200), 48)])
    func everyPacketOfAGroupIsRebuiltFromTheOthers(base: UInt16, count: Int) throws {
        var random = SeededGenerator(seed: UInt64(base) + UInt64(count))
        let packets: [[UInt8]] = (0..<count).map { i in
            var packet = RTPPacket(payloadType: 96, sequenceNumber: base &+ UInt16(i), timestamp: 90_000 &* UInt32(i / 3), ssrc: 77,
                                   marker: i % 3 == 2, csrcs: i % 4 == 1 ? [1, 2] : [])
            if i % 2 == 0 {
                packet.extensionProfile = 0xbede
                packet.extensionData = [0x32, 0x00, UInt8(i), 0x40, 0x31, 0x00, 0x00, 0x00]
            }
            packet.payload = (0..<Int.random(in: 0...1_200, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            if i % 5 == 3 { packet.padding = [0, 0, 3] }
            return packet.serialized()
        }
        let made = try #require(ULPFECPayload(protecting: packets))
        let fec = try ULPFECPayload(parsing: made.serialized())
        #expect(fec.isLongMask == (count > 16))
        #expect(fec.sequenceBase == base && fec.protectedSequenceNumbers == (0..<count).map { base &+ UInt16($0) })
        for lost in 0..<count {
            var others = packets
            others.remove(at: lost)
            #expect(fec.recover(sequenceNumber: base &+ UInt16(lost), ssrc: 77, from: others) == packets[lost], "packet \(lost)")
        }
    }

    @Test func aGroupWiderThanAMaskIsNotProtected() {
        let packets = [UInt16(0), 48].map { RTPPacket(payloadType: 96, sequenceNumber: $0, timestamp: 0, ssrc: 1, payload: [1]).serialized() }
        #expect(ULPFECPayload(protecting: packets) == nil)
        #expect(ULPFECPayload(protecting: []) == nil)
    }

    /// Bytes from the network: every truncation, the reserved E bit and a mask of nothing are
    /// errors, never a trap; a rebuilt length past what was protected is no packet.
    @Test func badFECPacketsAreRefused() throws {
        for length in 0..<Self.fec.count {
            #expect(throws: ParseError.self, "\(length) bytes") { try ULPFECPayload(parsing: Array(Self.fec.prefix(length))) }
        }
        var extended = Self.fec
        extended[0] |= 0x80
        #expect(throws: ParseError.self) { try ULPFECPayload(parsing: extended) }
        var empty = Self.fec
        (empty[12], empty[13]) = (0, 0)
        #expect(throws: ParseError.self) { try ULPFECPayload(parsing: empty) }
        var long = try ULPFECPayload(parsing: Self.fec)
        long.headerRecovery.length = 0x0100  // XORs to a length of 258 or 259: past the 3 bytes protected
        #expect(long.recover(sequenceNumber: 11, ssrc: 1, from: [Self.first]) == nil)
    }
}
