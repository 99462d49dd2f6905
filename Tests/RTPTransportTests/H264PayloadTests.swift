import MediaCore
import Testing
@testable import RTPTransport

/// Units shaped like an encoder's: header byte (F, NRI, type), then a body.
private func unit(_ type: UInt8, nri: UInt8 = 3, size: Int, fill: UInt8 = 0xab) -> [UInt8] {
    [nri << 5 | type] + [UInt8](repeating: fill, count: size - 1)
}

private func numbered(_ payloads: [[UInt8]], from first: UInt16 = 0) -> [(sequence: UInt16, payload: [UInt8])] {
    payloads.enumerated().map { (first &+ UInt16($0.offset), $0.element) }
}

@Suite struct H264PayloadTests {
    @Test func annexBStreamsSplitIntoUnitsAndBack() {
        // Three- and four-byte start codes, trailing zeros before the next start code (H.264
        // B.1.1), junk before the first start code.
        let stream: [UInt8] = [0xff, 0, 0, 0, 1, 0x67, 0x42, 0x00, 0, 0, 1, 0x68, 0xce, 0, 0, 0, 0, 1, 0x65, 0x88, 0x00, 0x01]
        let units = H264NALUnit.units(inAnnexB: stream).map(Array.init)
        #expect(units == [[0x67, 0x42], [0x68, 0xce], [0x65, 0x88, 0x00, 0x01]])
        #expect(H264NALUnit.annexB(units) == [0, 0, 0, 1, 0x67, 0x42, 0, 0, 0, 1, 0x68, 0xce, 0, 0, 0, 1, 0x65, 0x88, 0x00, 0x01])
        #expect(H264NALUnit.units(inAnnexB: [0x41, 0x9a]).map(Array.init) == [[0x41, 0x9a]], "one bare unit")
        #expect(H264NALUnit.units(inAnnexB: []).isEmpty)
        #expect(H264NALUnit.units(inAnnexB: [0, 0, 1]).isEmpty, "a start code with nothing after it")
    }

    /// A camera's access units: P-pictures before the first SPS/PPS/IDR are held back, an IDR
    /// without its parameter sets gets the latest ones in front, one with them goes as it is,
    /// and a bad stream (an IDR before any SPS) gives nothing rather than an undecodable picture.
    @Test func cameraAccessUnitsCarryParameterSetsWithEveryIDR() {
        let sps = unit(7, size: 4, fill: 1), pps = unit(8, size: 3, fill: 2), idr = unit(5, size: 6), p = unit(1, nri: 2, size: 5)
        var sets = H264ParameterSets()
        #expect(sets.take(H264NALUnit.annexB([p])) == nil, "a P-picture before anything")
        #expect(sets.take(H264NALUnit.annexB([idr])) == nil, "an IDR before any SPS/PPS cannot be decoded")
        let first = H264NALUnit.annexB([sps, pps, idr])
        #expect(sets.take(first).map { $0.data == first && $0.isKeyframe } == true, "an IDR with its sets goes as it is")
        #expect(sets.take(H264NALUnit.annexB([p])).map { !$0.isKeyframe } == true, "then P-pictures go")
        #expect(sets.take(H264NALUnit.annexB([idr])).map { $0.data == H264NALUnit.annexB([sps, pps, idr]) && $0.isKeyframe } == true,
                "a later IDR alone gets the sets in front")
        let newSPS = unit(7, size: 4, fill: 9)
        _ = sets.take(H264NALUnit.annexB([newSPS, pps, idr]))
        #expect(sets.take(H264NALUnit.annexB([unit(6, size: 3), idr])).map { $0.data == H264NALUnit.annexB([newSPS, pps, unit(6, size: 3), idr]) } == true,
                "the latest sets, and the SEI kept")
    }

    /// RFC 6184 byte layouts: a single unit as it is, STAP-A with its F/NRI rule (§5.7), FU-A
    /// indicator and header (§5.8).
    @Test func payloadVectors() throws {
        #expect(try H264Payload(parsing: [0x41, 0x9a, 0x02]) == .single([0x41, 0x9a, 0x02]))
        // STAP-A: NRI 3 (the highest of its units), SPS of 3 bytes, PPS of 2.
        let stap: [UInt8] = [0x78, 0x00, 0x03, 0x67, 0x42, 0xe0, 0x00, 0x02, 0x68, 0xce]
        #expect(try H264Payload(parsing: stap) == .aggregate([[0x67, 0x42, 0xe0], [0x68, 0xce]]))
        // FU-A: indicator NRI 3 type 28, header S=1 type 5.
        #expect(try H264Payload(parsing: [0x7c, 0x85, 0x01, 0x02]) == .fragment(header: 0x65, start: true, end: false, data: [1, 2]))
        #expect(try H264Payload(parsing: [0x5c, 0x41, 0x09]) == .fragment(header: 0x41, start: false, end: true, data: [9]))

        let bad: [(String, [UInt8])] = [
            ("empty", []),
            ("type 0", [0x00, 1]),
            ("STAP-B", [0x19, 0, 0, 0, 1, 0x41]),
            ("MTAP16", [0x1a]),
            ("FU-B", [0x1d, 0x85, 0, 0]),
            ("type 30", [0x1e]),
            ("STAP-A with nothing", [0x78]),
            ("STAP-A size past the end", [0x78, 0x00, 0x05, 0x67, 0x42]),
            ("STAP-A half a size", [0x78, 0x00, 0x02, 0x67, 0x42, 0x00]),
            ("STAP-A unit of size 0", [0x78, 0x00, 0x00]),
            ("STAP-A in a STAP-A", [0x78, 0x00, 0x02, 0x78, 0x00]),
            ("FU-A without its header", [0x7c]),
            ("FU-A start and end", [0x7c, 0xc5, 1]),
            ("FU-A of a STAP-A", [0x7c, 0x98, 1]),
        ]
        for (name, bytes) in bad {
            #expect(throws: ParseError.self, "\(name)") { try H264Payload(parsing: bytes) }
        }
        // Every truncation of a good STAP-A either parses as fewer whole units or is refused.
        for length in 0..<stap.count {
            if case .aggregate(let units)? = try? H264Payload(parsing: Array(stap[..<length])) {
                #expect(units == [[0x67, 0x42, 0xe0]], "only a whole unit survives a cut at \(length)")
            }
        }
    }

    @Test func smallUnitsShareAStapAAndLargeOnesAreFragmented() throws {
        var packetizer = H264Packetizer(maxPayloadSize: 100)
        let sps = unit(7, size: 10), pps = unit(8, size: 4), sei = unit(6, nri: 0, size: 20)
        let idr = unit(5, size: 250, fill: 0x11), aud = unit(9, nri: 0, size: 2)
        let payloads = packetizer.packetize(units: [aud[...], sps[...], pps[...], sei[...], idr[...]])
        // AUD dropped; SPS, PPS and SEI in one STAP-A (1 + 3*2 + 34 = 41 bytes); the IDR in
        // three balanced FU-As of 2 + 83 (its 249-byte body over three).
        #expect(payloads.map(\.count) == [41, 85, 85, 85])
        #expect(payloads[0][0] == 0x78, "STAP-A with NRI 3")
        #expect(payloads[1][0] == 0x7c && payloads[1][1] == 0x85, "FU-A start of an IDR")
        #expect(payloads[2][1] == 0x05 && payloads[3][1] == 0x45, "middle, then end")
        #expect(payloads.allSatisfy { $0.count <= 100 })

        var depacketizer = H264Depacketizer()
        let accessUnit = depacketizer.accessUnit(from: numbered(payloads))
        #expect(accessUnit.units == [sps, pps, sei, idr])
        #expect(accessUnit.decodable && accessUnit.isKeyframe)

        // A unit that fits alone with nothing beside it goes as a single NAL unit packet.
        let slice = unit(1, nri: 2, size: 60)
        #expect(packetizer.packetize(units: [slice[...]]) == [slice])
        #expect(packetizer.packetize(annexB: H264NALUnit.annexB([slice, slice])) == [slice, slice], "two that do not fit together")
    }

    @Test func everyIDRLeavesWithItsParameterSets() throws {
        var packetizer = H264Packetizer(maxPayloadSize: 1200)
        let sps = unit(7, size: 12), pps = unit(8, size: 5), idr = unit(5, size: 300), slice = unit(1, size: 200)
        _ = packetizer.packetize(units: [sps[...], pps[...], idr[...]])
        _ = packetizer.packetize(units: [slice[...]])
        // The encoder writes no parameter sets with its second IDR: they are put back.
        let second = packetizer.packetize(units: [idr[...]])
        var late = H264Depacketizer()
        let seen = late.accessUnit(from: numbered(second, from: 65535))
        #expect(seen.units == [sps, pps, idr], "a receiver that joins here can decode")
        #expect(seen.decodable)
        #expect(packetizer.packetize(units: [slice[...]]) == [slice], "not before other slices")
    }

    /// Loss, reordering and duplicates: what is whole is kept, what has a hole is left out, and
    /// the stream waits for the next IDR.
    @Test func depacketizerSurvivesLossAndReordering() throws {
        var packetizer = H264Packetizer(maxPayloadSize: 100)
        let sps = unit(7, size: 10), pps = unit(8, size: 4)
        let idr = unit(5, size: 250, fill: 0x22), slice = unit(1, size: 250, fill: 0x33), small = unit(1, size: 30)
        let key = numbered(packetizer.packetize(units: [sps[...], pps[...], idr[...]]), from: 65534)  // wraps
        var receiver = H264Depacketizer()
        #expect(!receiver.accessUnit(from: numbered([small])).decodable, "nothing before the first IDR")
        let shuffled = [key[2], key[0], key[3], key[1], key[2]]
        let rebuilt = receiver.accessUnit(from: shuffled)
        #expect(rebuilt.units == [sps, pps, idr] && rebuilt.decodable, "reordered across the wrap, with a duplicate")

        let next = numbered(packetizer.packetize(units: [slice[...]]), from: 2)
        #expect(receiver.accessUnit(from: next).decodable)
        // The middle fragment lost: the unit is dropped whole, not handed over with a hole.
        let holed = receiver.accessUnit(from: [next[0], next[2]])
        #expect(holed.units.isEmpty && !holed.decodable && receiver.waitingForKeyframe)
        // The first fragment lost.
        #expect(receiver.accessUnit(from: [next[1], next[2]]).units.isEmpty)
        // The last fragment lost.
        #expect(receiver.accessUnit(from: [next[0], next[1]]).units.isEmpty)
        // A whole picture after a loss still waits for the keyframe…
        #expect(!receiver.accessUnit(from: next).decodable)
        // … a damaged payload does too, and the caller can say the picture's end is missing …
        #expect(!receiver.accessUnit(from: [(9, [0x1e, 0])]).decodable)
        #expect(!receiver.accessUnit(from: key, complete: false).decodable)
        // … and an IDR ends the wait.
        #expect(receiver.accessUnit(from: key).decodable && !receiver.waitingForKeyframe)
        #expect(receiver.accessUnit(from: next).decodable)
        #expect(!receiver.accessUnit(from: []).decodable)
    }
}
