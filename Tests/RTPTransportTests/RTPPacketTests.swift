import Testing
@testable import RTPTransport

@Suite struct RTPPacketTests {
    /// V=2 P=0 X=0 CC=0 | M=1 PT=96 | seq 0x1234 | ts 0xdeadbeef | SSRC 0x01020304 | payload 0xaa 0xbb
    let simple: [UInt8] = [0x80, 0xe0, 0x12, 0x34, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0xaa, 0xbb]

    /// V=2 P=1 X=1 CC=2 | M=0 PT=111 | seq 1 | ts 2 | SSRC 3 | CSRC 4, 5 |
    /// extension 0xBEDE, 1 word: ID 1 L=1 (2 bytes 0x00 0x07) then one padding byte |
    /// payload 0x01 | padding 3 bytes (0 0 3)
    let full: [UInt8] = [
        0xb2, 0x6f, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03,
        0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x05,
        0xbe, 0xde, 0x00, 0x01, 0x11, 0x00, 0x07, 0x00,
        0x01,
        0x00, 0x00, 0x03,
    ]

    @Test func parsesTheFixedHeader() throws {
        let p = try RTPPacket(parsing: simple)
        #expect(p.marker && p.payloadType == 96 && p.sequenceNumber == 0x1234 && p.timestamp == 0xdead_beef && p.ssrc == 0x0102_0304)
        #expect(p.payload == [0xaa, 0xbb] && p.csrcs.isEmpty && p.extensionProfile == nil && p.paddingLength == 0)
        #expect(p.serialized() == simple)
    }

    @Test func parsesCSRCExtensionAndPadding() throws {
        let p = try RTPPacket(parsing: full)
        #expect(p.csrcs == [4, 5] && p.payloadType == 111 && !p.marker)
        #expect(p.extensionProfile == 0xbede)
        #expect(try p.headerExtensionElements() == [HeaderExtensionElement(id: 1, data: [0x00, 0x07])])
        #expect(TransportSequenceNumber.decode(p.headerExtension(id: 1)!) == 7)
        #expect(p.payload == [0x01] && p.paddingLength == 3)
        #expect(p.serialized() == full)
        #expect(p.serializedSize == full.count)
    }

    @Test func everyTruncatedPrefixIsAnError() {
        for packet in [simple, full] {
            // RTP has no length field: a cut inside the payload is a valid shorter packet (and with
            // P = 1 its last byte reads as a pad count), so what must fail is every cut before the
            // payload: fixed header, CSRC list, extension.
            let required = packet == simple ? 12 : 28
            for length in 0..<required {
                #expect(throws: ParseError.self, "prefix \(length)") { try RTPPacket(parsing: Array(packet.prefix(length))) }
            }
        }
    }

    @Test func wrongVersionAndBadPaddingAreErrors() {
        var bad = simple
        bad[0] = 0x40
        #expect(throws: ParseError.self) { try RTPPacket(parsing: bad) }
        var pad = simple
        pad[0] |= 0x20
        pad[pad.count - 1] = 200
        #expect(throws: ParseError.self) { try RTPPacket(parsing: pad) }
        pad[pad.count - 1] = 0
        #expect(throws: ParseError.self) { try RTPPacket(parsing: pad) }
    }

    @Test func twoByteExtensionsAndElementsRoundTrip() throws {
        var p = RTPPacket(payloadType: 96, sequenceNumber: 65535, timestamp: 1, ssrc: 9, payload: [1, 2, 3])
        p.setHeaderExtensionElements([HeaderExtensionElement(id: 3, data: AbsoluteSendTime.encode(microseconds: 1_500_000)),
                                      HeaderExtensionElement(id: 5, data: TransportSequenceNumber.encode(40000))])
        #expect(p.extensionProfile == 0xbede)
        var back = try RTPPacket(parsing: p.serialized())
        #expect(back == p)
        #expect(AbsoluteSendTime.decode(back.headerExtension(id: 3)!) == UInt32((1_500_000 << 18) / 1_000_000))
        #expect(TransportSequenceNumber.decode(back.headerExtension(id: 5)!) == 40000)
        // An ID above 14 needs the two-byte form.
        back.setHeaderExtensionElements([HeaderExtensionElement(id: 20, data: []), HeaderExtensionElement(id: 1, data: [9])])
        #expect(back.extensionProfile == 0x1000)
        #expect(try RTPPacket(parsing: back.serialized()).headerExtensionElements() == [HeaderExtensionElement(id: 20, data: []), HeaderExtensionElement(id: 1, data: [9])])
        back.setHeaderExtensionElements([])
        #expect(back.extensionProfile == nil && back.serializedSize == 15)
    }

    @Test func malformedExtensionElementsAreErrors() throws {
        // One-byte element claiming 16 bytes inside a 4-byte block.
        let p = try RTPPacket(parsing: [0x90, 0x60, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xbe, 0xde, 0x00, 0x01, 0x1f, 0, 0, 0])
        #expect(throws: ParseError.self) { try p.headerExtensionElements() }
    }

    @Test func seededRandomBytesNeverTrap() {
        var rng = SeededGenerator(seed: 11)
        var parsed = 0
        for _ in 0..<20_000 {
            var bytes = randomBytes(Int.random(in: 0...64, using: &rng), &rng)
            if !bytes.isEmpty { bytes[0] = 0x80 | (bytes[0] & 0x3f) }
            if let p = try? RTPPacket(parsing: bytes) {
                parsed += 1
                _ = try? p.headerExtensionElements()
                #expect(p.serialized() == bytes)
            }
        }
        #expect(parsed > 1000)
    }
}
