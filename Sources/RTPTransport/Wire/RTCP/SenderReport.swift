/// Sender report (RFC 3550 §6.4.1), PT = 200:
///
///     |V=2|P|    RC   |   PT=SR=200   |             length            |
///     |                         SSRC of sender                        |
///     |              NTP timestamp, most significant word             |
///     |             NTP timestamp, least significant word             |
///     |                         RTP timestamp                         |
///     |                     sender's packet count                     |
///     |                      sender's octet count                     |
///     |                 report blocks (RC x 24 bytes)                 |
///     |                  profile-specific extensions                  |
public struct SenderReport: Sendable, Equatable {
    public var ssrc: UInt32
    public var ntpTimestamp: UInt64
    public var rtpTimestamp: UInt32
    public var packetCount: UInt32
    public var octetCount: UInt32
    public var reports: [ReceptionReport]
    public var profileExtension: [UInt8]

    static let fixedSize = 28

    public init(ssrc: UInt32, ntpTimestamp: UInt64, rtpTimestamp: UInt32, packetCount: UInt32, octetCount: UInt32,
                reports: [ReceptionReport] = [], profileExtension: [UInt8] = []) {
        self.ssrc = ssrc
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.reports = reports
        self.profileExtension = profileExtension
    }

    init(parsing body: [UInt8], header: RTCPHeader) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        guard let ssrc = reader.readUInt32(), let ntpHigh = reader.readUInt32(), let ntpLow = reader.readUInt32(),
              let rtp = reader.readUInt32(), let packets = reader.readUInt32(), let octets = reader.readUInt32() else {
            throw .truncated("RTCP SR", need: Self.fixedSize, have: body.count)
        }
        self.ssrc = ssrc
        self.ntpTimestamp = UInt64(ntpHigh) << 32 | UInt64(ntpLow)
        self.rtpTimestamp = rtp
        self.packetCount = packets
        self.octetCount = octets
        self.reports = []
        for _ in 0..<header.count { reports.append(try ReceptionReport(reader: &reader)) }
        self.profileExtension = Array(body[reader.offset...])
    }

    var serializedSize: Int { Self.fixedSize + ReceptionReport.size * reports.count + profileExtension.count }

    func serialize(into out: inout [UInt8]) {
        RTCPHeader(count: UInt8(reports.count), packetType: RTCPHeader.senderReport, size: serializedSize).serialize(into: &out)
        out.writeUInt32(ssrc)
        out.writeUInt32(UInt32(ntpTimestamp >> 32))
        out.writeUInt32(UInt32(ntpTimestamp & 0xffff_ffff))
        out.writeUInt32(rtpTimestamp)
        out.writeUInt32(packetCount)
        out.writeUInt32(octetCount)
        for report in reports { report.serialize(into: &out) }
        out += profileExtension
    }
}

/// Receiver report (RFC 3550 §6.4.2), PT = 201: the SR without the sender information.
public struct ReceiverReport: Sendable, Equatable {
    public var ssrc: UInt32
    public var reports: [ReceptionReport]
    public var profileExtension: [UInt8]

    static let fixedSize = 8

    public init(ssrc: UInt32, reports: [ReceptionReport] = [], profileExtension: [UInt8] = []) {
        self.ssrc = ssrc
        self.reports = reports
        self.profileExtension = profileExtension
    }

    init(parsing body: [UInt8], header: RTCPHeader) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        guard let ssrc = reader.readUInt32() else { throw .truncated("RTCP RR", need: Self.fixedSize, have: body.count) }
        self.ssrc = ssrc
        self.reports = []
        for _ in 0..<header.count { reports.append(try ReceptionReport(reader: &reader)) }
        self.profileExtension = Array(body[reader.offset...])
    }

    var serializedSize: Int { Self.fixedSize + ReceptionReport.size * reports.count + profileExtension.count }

    func serialize(into out: inout [UInt8]) {
        RTCPHeader(count: UInt8(reports.count), packetType: RTCPHeader.receiverReport, size: serializedSize).serialize(into: &out)
        out.writeUInt32(ssrc)
        for report in reports { report.serialize(into: &out) }
        out += profileExtension
    }
}
