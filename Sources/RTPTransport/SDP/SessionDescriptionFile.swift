import FoundationEssentials

/// One RTP stream as SDP describes it (RFC 8866 m= section).
public struct StreamDescription: Sendable, Equatable {
    public enum Kind: String, Sendable { case audio, video }

    public var kind: Kind
    public var port: Int
    public var payloadType: UInt8
    /// "VP8" or "opus", as in a=rtpmap.
    public var encodingName: String
    public var clockRate: Int
    public var channels: Int?
    public var fmtp: String?
    public var feedback: [String]
    public var rtcpMux: Bool
    public var ssrc: UInt32?
    public var cname: String?
    /// SDES-SRTP keying (RFC 4568 a=crypto): the profile and master key plus salt.
    public var crypto: (profile: SRTPProfile, keyMaterial: [UInt8])?
    /// RFC 4588 retransmission on its own payload type, when offered.
    public var rtxPayloadType: UInt8?

    public init(kind: Kind, port: Int, payloadType: UInt8, encodingName: String, clockRate: Int, channels: Int? = nil,
                fmtp: String? = nil, feedback: [String] = [], rtcpMux: Bool = true, ssrc: UInt32? = nil, cname: String? = nil,
                crypto: (profile: SRTPProfile, keyMaterial: [UInt8])? = nil, rtxPayloadType: UInt8? = nil) {
        self.kind = kind
        self.port = port
        self.payloadType = payloadType
        self.encodingName = encodingName
        self.clockRate = clockRate
        self.channels = channels
        self.fmtp = fmtp
        self.feedback = feedback
        self.rtcpMux = rtcpMux
        self.ssrc = ssrc
        self.cname = cname
        self.crypto = crypto
        self.rtxPayloadType = rtxPayloadType
    }

    public static func == (a: StreamDescription, b: StreamDescription) -> Bool {
        a.kind == b.kind && a.port == b.port && a.payloadType == b.payloadType && a.encodingName == b.encodingName
            && a.clockRate == b.clockRate && a.channels == b.channels && a.fmtp == b.fmtp && a.feedback == b.feedback
            && a.rtcpMux == b.rtcpMux && a.ssrc == b.ssrc && a.cname == b.cname && a.crypto?.profile == b.crypto?.profile
            && a.crypto?.keyMaterial == b.crypto?.keyMaterial && a.rtxPayloadType == b.rtxPayloadType
    }
}

/// A plain SDP file (RFC 8866) describing streams sent to one address, as GStreamer, ffmpeg and
/// VLC read it; also the reader for SDP files that outside senders (ffmpeg -sdp_file) write.
public struct SessionDescriptionFile: Sendable, Equatable {
    public var connectionAddress: String
    public var sessionName: String
    public var streams: [StreamDescription]

    public init(connectionAddress: String, sessionName: String = "callend", streams: [StreamDescription]) {
        self.connectionAddress = connectionAddress
        self.sessionName = sessionName
        self.streams = streams
    }

    public var text: String {
        var lines = [
            "v=0",
            "o=- \(UInt32.random(in: 1...UInt32.max)) 1 IN IP4 \(connectionAddress)",
            "s=\(sessionName)",
            "c=IN IP4 \(connectionAddress)",
            "t=0 0",
        ]
        for s in streams {
            let proto = s.crypto == nil ? "RTP/AVP" : "RTP/SAVP"
            let types = [s.payloadType] + (s.rtxPayloadType.map { [$0] } ?? [])
            lines.append("m=\(s.kind.rawValue) \(s.port) \(proto) \(types.map(String.init).joined(separator: " "))")
            lines.append("a=rtpmap:\(s.payloadType) \(s.encodingName)/\(s.clockRate)" + (s.channels.map { "/\($0)" } ?? ""))
            if let fmtp = s.fmtp { lines.append("a=fmtp:\(s.payloadType) \(fmtp)") }
            for fb in s.feedback { lines.append("a=rtcp-fb:\(s.payloadType) \(fb)") }
            if let rtx = s.rtxPayloadType {
                lines.append("a=rtpmap:\(rtx) rtx/\(s.clockRate)")
                lines.append("a=fmtp:\(rtx) apt=\(s.payloadType)")
            }
            if s.rtcpMux { lines.append("a=rtcp-mux") }
            if let crypto = s.crypto {
                lines.append("a=crypto:1 \(crypto.profile.rawValue) inline:\(Data(crypto.keyMaterial).base64EncodedString())")
            }
            if let ssrc = s.ssrc { lines.append("a=ssrc:\(ssrc) cname:\(s.cname ?? "callend")") }
            lines.append("a=sendonly")
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    public init(parsing text: String) throws(ParseError) {
        var address: String?
        var name = "-"
        var streams: [StreamDescription] = []
        var rtpmaps: [UInt8: (String, Int, Int?)] = [:]
        var fmtps: [UInt8: String] = [:]
        var mediaTypes: [UInt8] = []
        func finishStream() throws(ParseError) {
            guard var stream = streams.last else { return }
            let media = mediaTypes.first { rtpmaps[$0]?.0.lowercased() != "rtx" } ?? stream.payloadType
            stream.payloadType = media
            if let map = rtpmaps[media] {
                stream.encodingName = map.0
                stream.clockRate = map.1
                stream.channels = map.2
            } else if media == 0 || media == 8 {
                throw ParseError("SDP", "static payload type \(media) (PCMU/PCMA) is not supported; send VP8 or Opus")
            } else {
                throw ParseError("SDP", "m=\(stream.kind.rawValue): no a=rtpmap for payload type \(media)")
            }
            stream.fmtp = fmtps[media]
            stream.rtxPayloadType = mediaTypes.first { rtpmaps[$0]?.0.lowercased() == "rtx" && fmtps[$0] == "apt=\(media)" }
            streams[streams.count - 1] = stream
            rtpmaps = [:]
            fmtps = [:]
            mediaTypes = []
        }
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = String(raw)
            guard line.count >= 2, line.dropFirst().first == "=" else { continue }
            let value = String(line.dropFirst(2))
            switch line.first {
            case "s": name = value
            case "c":
                let parts = value.split(separator: " ")
                guard parts.count >= 3 else { throw ParseError("SDP", "c= line '\(value)' is not 'IN IP4 ADDRESS'") }
                let host = String(parts[2].split(separator: "/")[0])
                if streams.isEmpty { address = host } else { address = address ?? host }
            case "m":
                try finishStream()
                let parts = value.split(separator: " ")
                guard parts.count >= 4, let kind = StreamDescription.Kind(rawValue: String(parts[0])) else {
                    if parts.first.map({ $0 == "audio" || $0 == "video" }) == false { continue }
                    throw ParseError("SDP", "m= line '\(value)' is not 'audio|video PORT PROTO PT...'")
                }
                guard let port = Int(parts[1].split(separator: "/")[0]), (1...65535).contains(port) else {
                    throw ParseError("SDP", "m= port '\(parts[1])' is not 1 ... 65535")
                }
                mediaTypes = parts.dropFirst(3).compactMap { UInt8($0) }.filter { $0 < 128 }
                guard let first = mediaTypes.first else { throw ParseError("SDP", "m= line lists no payload type") }
                streams.append(StreamDescription(kind: kind, port: port, payloadType: first, encodingName: "", clockRate: 0,
                                                 rtcpMux: false))
            case "a":
                guard !streams.isEmpty else { continue }
                let (key, rest) = value.firstIndex(of: ":").map { (String(value[..<$0]), String(value[value.index(after: $0)...])) } ?? (value, "")
                switch key {
                case "rtpmap":
                    let parts = rest.split(separator: " ", maxSplits: 1)
                    guard parts.count == 2, let pt = UInt8(parts[0]) else { throw ParseError("SDP", "a=rtpmap:\(rest) is malformed") }
                    let codec = parts[1].split(separator: "/")
                    guard codec.count >= 2, let rate = Int(codec[1]) else { throw ParseError("SDP", "a=rtpmap:\(rest) has no clock rate") }
                    rtpmaps[pt] = (String(codec[0]), rate, codec.count > 2 ? Int(codec[2]) : nil)
                case "fmtp":
                    let parts = rest.split(separator: " ", maxSplits: 1)
                    if parts.count == 2, let pt = UInt8(parts[0]) { fmtps[pt] = String(parts[1]) }
                case "rtcp-mux":
                    streams[streams.count - 1].rtcpMux = true
                case "rtcp-fb":
                    let parts = rest.split(separator: " ", maxSplits: 1)
                    if parts.count == 2 { streams[streams.count - 1].feedback.append(String(parts[1])) }
                case "crypto":
                    let parts = rest.split(separator: " ")
                    guard parts.count >= 3, let profile = SRTPProfile(rawValue: String(parts[1])) else {
                        throw ParseError("SDP", "a=crypto:\(rest): supported suites are \(SRTPProfile.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    let inline = parts[2].hasPrefix("inline:") ? String(parts[2].dropFirst(7).split(separator: "|")[0]) : ""
                    guard let key = Data(base64Encoded: inline), key.count == profile.keyMaterialLength else {
                        throw ParseError("SDP", "a=crypto: the inline key is not \(profile.keyMaterialLength) bytes of base64")
                    }
                    streams[streams.count - 1].crypto = (profile, [UInt8](key))
                case "ssrc":
                    let parts = rest.split(separator: " ", maxSplits: 1)
                    if let ssrc = UInt32(parts[0]) {
                        streams[streams.count - 1].ssrc = ssrc
                        if parts.count == 2, parts[1].hasPrefix("cname:") { streams[streams.count - 1].cname = String(parts[1].dropFirst(6)) }
                    }
                default: break
                }
            default: break
            }
        }
        try finishStream()
        guard let address else { throw ParseError("SDP", "no c= line: the address to receive on is unknown") }
        guard !streams.isEmpty else { throw ParseError("SDP", "no audio or video m= line") }
        self.connectionAddress = address
        self.sessionName = name
        self.streams = streams
    }
}
