import Testing
@testable import RTPTransport

/// Transport-cc feedback from outside: packets Chromium 156 sent to callend (captured with
/// CALLEND_RTCP_CAPTURE during a call through 8 % random loss: run-length chunks, one-bit and
/// two-bit status vectors, lost packets), each decoded here and by Wireshark 4.0 (tshark -V, the
/// expected values below), and a packet whose Wireshark dissection another project published.
@Suite struct TransportCCReferenceTests {
    struct Vector {
        let hex: String
        let base: UInt16, count: UInt16, referenceTime: Int32, feedbackCount: UInt8
        /// Wireshark's reading: each received packet's sequence number and its delta in ms.
        let received: [(UInt16, Double)]
    }

    static let chromium: [Vector] = [
        // rtcp-0001.bin
        Vector(hex: "afcd000981050613b443ffc80000000f03652100bff920019d4f0000000001060005040a04000003", base: 0, count: 15, referenceTime: 222497, feedbackCount: 0,
               received: [(0, 39.25), (1, 19.75), (2, 0.0), (3, 0.0), (4, 0.0), (5, 0.0), (6, 0.25), (7, 1.5), (8, 0.0), (9, 1.25), (10, 1.0), (13, 2.5), (14, 1.0)]),
        // rtcp-0002.bin
        Vector(hex: "afcd000e81050613d3d4b458000f0026036522019bfebaffbfd01305043000000000000000000000170000000e0000001100000004000700054b0002", base: 15, count: 38, referenceTime: 222498, feedbackCount: 1,
               received: [(16, 4.75), (17, 1.25), (19, 1.0), (20, 12.0), (21, 0.0), (22, 0.0), (23, 0.0), (24, 0.0), (25, 0.0), (26, 0.0), (27, 0.0), (29, 0.0), (30, 0.0), (31, 0.0), (33, 5.75), (35, 0.0), (36, 0.0), (37, 0.0), (38, 3.5), (39, 0.0), (40, 0.0), (41, 0.0), (42, 4.25), (43, 0.0), (44, 0.0), (45, 0.0), (46, 1.0), (47, 0.0), (48, 1.75), (49, 0.0), (50, 1.25), (52, 18.75)]),
        // rtcp-0004.bin
        Vector(hex: "8fcd001081050613b3c4a8640035003103652302b7fd83fe9fffd51511000104040500040505020528090e0405010500040a450000000000000000000001000800000503", base: 53, count: 49, referenceTime: 222499, feedbackCount: 2,
               received: [(53, 4.25), (54, 0.0), (56, 0.25), (57, 1.0), (58, 1.0), (59, 1.25), (60, 0.0), (61, 1.0), (62, 1.25), (63, 1.25), (64, 0.5), (66, 1.25), (71, 10.0), (72, 2.25), (73, 3.5), (74, 1.0), (75, 1.25), (76, 0.25), (77, 1.25), (78, 0.0), (79, 1.0), (82, 2.5), (83, 17.25), (84, 0.0), (85, 0.0), (86, 0.0), (87, 0.0), (88, 0.0), (89, 0.0), (90, 0.0), (91, 0.0), (92, 0.0), (93, 0.0), (94, 0.25), (95, 0.0), (96, 2.0), (97, 0.0), (99, 0.0), (100, 1.25), (101, 0.75)]),
        // rtcp-0006.bin
        Vector(hex: "afcd000781050613b3c4a864008f00090365250420090d4d00000c4725050001", base: 143, count: 9, referenceTime: 222501, feedbackCount: 4,
               received: [(143, 3.25), (144, 19.25), (145, 0.0), (146, 0.0), (147, 3.0), (148, 17.75), (149, 9.25), (150, 1.25), (151, 0.0)]),
        // rtcp-0016.bin
        Vector(hex: "afcd000681050613d3d4b45800cf000703652a0ad055d73a003b5c01", base: 207, count: 7, referenceTime: 222506, feedbackCount: 10,
               received: [(207, 53.75), (210, 14.5), (211, 0.0), (212, 14.75), (213, 23.0)]),
        // rtcp-0017.bin
        Vector(hex: "afcd000a81050613b3c4a86400d6001403652b0b2010c540e50100060412120d100b060f10100f0f16091001", base: 214, count: 20, referenceTime: 222507, feedbackCount: 11,
               received: [(214, 57.25), (215, 0.25), (216, 0.0), (217, 1.5), (218, 1.0), (219, 4.5), (220, 4.5), (221, 3.25), (222, 4.0), (223, 2.75), (224, 1.5), (225, 3.75), (226, 4.0), (227, 4.0), (228, 3.75), (229, 3.75), (231, 5.5), (232, 2.25), (233, 4.0)]),
        // rtcp-0019.bin
        Vector(hex: "8fcd000981050613b3c4a86400fc001103652d0d9fff2003d1131a1e19010006101015000c390000", base: 252, count: 17, referenceTime: 222509, feedbackCount: 13,
               received: [(253, 52.25), (254, 4.75), (255, 6.5), (256, 7.5), (257, 6.25), (258, 0.25), (259, 0.0), (260, 1.5), (261, 4.0), (262, 4.0), (263, 5.25), (264, 0.0), (265, 3.0), (266, 14.25), (267, 0.0), (268, 0.0)]),
        // rtcp-0005.bin
        Vector(hex: "afcd000f81050613b3c4a8640066002903652403bfdfbffbbf5e0600050b04030d000c0000050008000a000e050d000504000604050005000600052824000001", base: 102, count: 41, referenceTime: 222500, feedbackCount: 3,
               received: [(102, 1.5), (103, 0.0), (104, 1.25), (105, 2.75), (106, 1.0), (107, 0.75), (108, 3.25), (109, 0.0), (111, 3.0), (112, 0.0), (113, 0.0), (114, 1.25), (115, 0.0), (116, 2.0), (117, 0.0), (118, 2.5), (119, 0.0), (120, 3.5), (121, 1.25), (122, 3.25), (123, 0.0), (124, 1.25), (125, 1.0), (126, 0.0), (128, 1.5), (129, 1.0), (130, 1.25), (131, 0.0), (132, 1.25), (133, 0.0), (134, 1.5), (135, 0.0), (137, 1.25), (139, 10.0), (140, 9.0), (141, 0.0), (142, 0.0)]),
        // rtcp-0026.bin
        Vector(hex: "8fcd000981050613b3c4a864011d001403652f0f9fdfc544c700000a1211091c112d000016101015", base: 285, count: 20, referenceTime: 222511, feedbackCount: 15,
               received: [(286, 49.75), (287, 0.0), (288, 0.0), (289, 2.5), (290, 4.5), (291, 4.25), (292, 2.25), (294, 7.0), (295, 4.25), (296, 11.25), (297, 0.0), (298, 0.0), (300, 5.5), (301, 4.0), (302, 4.0), (304, 5.25)]),
    ]

    /// Wireshark's dissection of a Chrome packet, published with webrtc-analysis (test/include/data.h):
    /// padding bit set, one run-length chunk of nine small deltas.
    static let published = Vector(hex: "afcd000700000001dd586eb6000100095e9110002009" + "1c0c2c3800040008" + "1801",
                                  base: 1, count: 9, referenceTime: 6_197_520, feedbackCount: 0,
                                  received: [(1, 7), (2, 3), (3, 11), (4, 14), (5, 0), (6, 1), (7, 0), (8, 2), (9, 6)])

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            out.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    @Test(arguments: chromium + [published])
    func decodesAsWiresharkDoes(vector: Vector) throws {
        let packets = try RTCPPacket.parseCompound(Self.bytes(vector.hex))
        guard case .transportFeedback(let feedback)? = packets.first, packets.count == 1 else {
            Issue.record("not one transport-cc packet: \(packets)")
            return
        }
        #expect(feedback.baseSequenceNumber == vector.base && feedback.packetStatusCount == vector.count)
        #expect(feedback.referenceTime == vector.referenceTime && feedback.feedbackPacketCount == vector.feedbackCount)
        let arrivals = try feedback.arrivals()
        #expect(arrivals.count == Int(vector.count))
        let received = arrivals.filter { $0.arrival != nil }
        #expect(received.map(\.sequenceNumber) == vector.received.map(\.0))
        // Each delta from the one before (the first from the reference time), in microseconds.
        var previous = Int64(vector.referenceTime) * TransportCCFeedback.referenceTimeMicroseconds
        for ((_, arrival), (_, ms)) in zip(received, vector.received) {
            #expect(arrival! - previous == Int64((ms * 1000).rounded()))
            previous = arrival!
        }
    }
}
