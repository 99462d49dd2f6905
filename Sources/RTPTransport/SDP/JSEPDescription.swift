/// A WebRTC session description (JSEP, RFC 8829) read from and written to SDP: media sections
/// with mid, direction, codecs and their feedback, header extensions, SSRCs and msid, all on one
/// bundled transport (RFC 8843) with its ICE credentials, DTLS fingerprint and setup role. What
/// a browser, aiortc or libwebrtc sends is read; what callend writes is what they read.
public struct JSEPDescription: Sendable, Equatable {
    public enum SDPType: String, Sendable { case offer, answer }

    /// RFC 5763 §5 / RFC 4145: which side opens DTLS. The offerer says actpass, the answerer active.
    public enum Setup: String, Sendable { case actpass, active, passive }

    public enum Direction: String, Sendable {
        case sendrecv, sendonly, recvonly, inactive
        public var sends: Bool { self == .sendrecv || self == .sendonly }
        public var receives: Bool { self == .sendrecv || self == .recvonly }
        public init(sends: Bool, receives: Bool) {
            self = sends ? (receives ? .sendrecv : .sendonly) : (receives ? .recvonly : .inactive)
        }
    }

    public struct Codec: Sendable, Equatable {
        public var payloadType: UInt8
        public var name: String
        public var clockRate: Int
        public var channels: Int?
        /// The a=fmtp value, as given.
        public var parameters: String?
        /// RFC 4585 feedback: "nack", "nack pli", "ccm fir", "transport-cc", ...
        public var feedback: [String]
        /// RFC 4588: the payload type that carries this codec's retransmissions.
        public var rtxPayloadType: UInt8?
        /// RFC 2198: the payload type of redundant audio that carries only this codec
        /// ("red/48000/2" with fmtp "111/111", as libwebrtc offers it). Written before the codec
        /// in the m= line: libwebrtc sends RED only when the peer lists it first. For video, the
        /// section's "red/90000" that carries the codec and its ULPFEC (no fmtp, as libwebrtc
        /// writes it), with `ulpfecPayloadType`.
        public var redPayloadType: UInt8?
        /// Video: the section's "ulpfec/90000" (RFC 5109) and the RTX payload type of its RED.
        public var ulpfecPayloadType: UInt8?
        public var redRTXPayloadType: UInt8?

        public init(payloadType: UInt8, name: String, clockRate: Int, channels: Int? = nil, parameters: String? = nil,
                    feedback: [String] = [], rtxPayloadType: UInt8? = nil, redPayloadType: UInt8? = nil) {
            self.payloadType = payloadType
            self.name = name
            self.clockRate = clockRate
            self.channels = channels
            self.parameters = parameters
            self.feedback = feedback
            self.rtxPayloadType = rtxPayloadType
            self.redPayloadType = redPayloadType
        }

        public func isCodec(_ name: String, clockRate: Int) -> Bool { self.name.lowercased() == name.lowercased() && self.clockRate == clockRate }
    }

    public struct HeaderExtension: Sendable, Equatable {
        public var id: UInt8
        public var uri: String
        public init(id: UInt8, uri: String) {
            self.id = id
            self.uri = uri
        }
    }

    public struct Media: Sendable, Equatable {
        /// audio, video, application, ...
        public var kind: String
        public var mid: String
        /// 0 when the section is rejected.
        public var port: Int = 9
        public var proto: String = "UDP/TLS/RTP/SAVPF"
        /// The m= line's formats as written (kept for sections callend does not use).
        public var formats: [String] = []
        public var codecs: [Codec] = []
        public var extensions: [HeaderExtension] = []
        public var direction: Direction = .sendrecv
        public var ssrc: UInt32?
        public var rtxSSRC: UInt32?
        public var cname: String?
        /// a=msid: stream id and track id.
        public var msid: String?
        public var rtcpMux = true
        public var rtcpReducedSize = true
        /// m=application for data channels (RFC 8841): the SCTP port (a=sctp-port) and the
        /// largest message the side takes (a=max-message-size; 0: any size).
        public var sctpPort: UInt16?
        public var maxMessageSize: Int?

        public init(kind: String, mid: String) {
            self.kind = kind
            self.mid = mid
        }

        public var isRejected: Bool { port == 0 }
        /// An SCTP-over-DTLS section carrying data channels (RFC 8841 §4).
        public var isDataChannel: Bool { kind == "application" && proto.hasSuffix("DTLS/SCTP") && formats.contains("webrtc-datachannel") }

        /// A data channel section, as callend offers and answers it.
        public static func dataChannels(mid: String, maxMessageSize: Int = 262_144) -> Media {
            var m = Media(kind: "application", mid: mid)
            m.proto = "UDP/DTLS/SCTP"
            m.formats = ["webrtc-datachannel"]
            m.sctpPort = 5000
            m.maxMessageSize = maxMessageSize
            (m.rtcpMux, m.rtcpReducedSize) = (false, false)
            return m
        }
        public func extensionID(_ uri: String) -> UInt8? { extensions.first { $0.uri == uri }?.id }
    }

    /// The one transport every bundled section shares.
    public struct Transport: Sendable, Equatable {
        public var ufrag: String
        public var password: String
        public var fingerprint: DTLSFingerprint
        public var setup: Setup
        /// Candidates written into the description ("candidate:..."), from peers that gather
        /// before they offer (aiortc) instead of trickling.
        public var candidates: [String] = []
        public var endOfCandidates = false

        public init(ufrag: String, password: String, fingerprint: DTLSFingerprint, setup: Setup) {
            self.ufrag = ufrag
            self.password = password
            self.fingerprint = fingerprint
            self.setup = setup
        }
    }

    public var type: SDPType
    public var sessionID: UInt64
    public var sessionVersion: UInt64 = 1
    public var media: [Media]
    public var transport: Transport

    public init(type: SDPType, sessionID: UInt64 = UInt64.random(in: 1...(UInt64(1) << 62)), media: [Media], transport: Transport) {
        self.type = type
        self.sessionID = sessionID
        self.media = media
        self.transport = transport
    }

    /// Mids of the sections in use, in order: the BUNDLE group.
    public var bundle: [String] { media.filter { !$0.isRejected }.map(\.mid) }

    // MARK: Reading

    public init(type: SDPType, sdp text: String) throws(ParseError) {
        let message = try SDPMessage(parsing: text)
        self.type = type
        let origin = message.session.first { $0.type == "o" }?.value.split(separator: " ") ?? []
        sessionID = origin.count > 1 ? UInt64(origin[1]) ?? 0 : 0
        sessionVersion = origin.count > 2 ? UInt64(origin[2]) ?? 0 : 0
        let bundled = message.attributes("group").first { $0.hasPrefix("BUNDLE") }?.split(separator: " ").dropFirst().map(String.init) ?? []
        // RFC 8843 §7.3.3: an offerer may give every section but the first port 0 with
        // a=bundle-only (GStreamer's webrtcbin does): such a section is in the bundle, not rejected.
        let messageMedia = message.media.enumerated().map { index, m in
            var section = m
            if m.port == 0, m.has("bundle-only"), bundled.contains(m.attribute("mid") ?? String(index)) { section.port = 9 }
            return section
        }
        var sections: [Media] = []
        for (index, m) in messageMedia.enumerated() {
            sections.append(try Self.readMedia(m, index: index))
        }
        guard !sections.isEmpty else { throw ParseError("SDP", "no m= section") }
        media = sections
        let used = messageMedia.enumerated().filter { $0.element.port != 0 }
        guard let first = used.first else { throw ParseError("SDP", "every m= section is rejected") }
        if used.count > 1 {
            guard used.allSatisfy({ bundled.contains(sections[$0.offset].mid) }) else {
                throw ParseError("SDP", "more than one media section without a=group:BUNDLE over them; callend sends all media over one transport (RFC 8843)")
            }
        }
        // The transport: the first section in use, falling back to session-level attributes.
        func value(_ name: String) -> String? { first.element.attribute(name) ?? message.attribute(name) }
        guard let ufrag = value("ice-ufrag"), let password = value("ice-pwd") else {
            throw ParseError("SDP", "no a=ice-ufrag / a=ice-pwd: callend needs ICE (RFC 8839)")
        }
        guard (4...256).contains(ufrag.count), (22...256).contains(password.count) else {
            throw ParseError("SDP", "ICE credentials of the wrong length (ufrag 4-256, pwd 22-256 characters, RFC 8839 §5.4)")
        }
        guard let fingerprintText = value("fingerprint") else { throw ParseError("SDP", "no a=fingerprint: callend needs DTLS-SRTP (RFC 5763)") }
        guard let fingerprint = DTLSFingerprint(attribute: fingerprintText) else { throw ParseError("SDP", "a=fingerprint:\(fingerprintText.prefix(40)) is not HASH XX:XX:...") }
        let setupText = value("setup") ?? (type == .offer ? "actpass" : "active")
        guard let setup = Setup(rawValue: setupText) else { throw ParseError("SDP", "a=setup:\(setupText) is not actpass, active or passive") }
        if type == .answer && setup == .actpass { throw ParseError("SDP", "an answer must say a=setup:active or passive, not actpass (RFC 5763 §5)") }
        transport = Transport(ufrag: ufrag, password: password, fingerprint: fingerprint, setup: setup)
        for m in used.map(\.element) + [SDPMessage.MediaSection(kind: "", port: 0, proto: "", formats: [], lines: message.session)] {
            for c in m.attributes("candidate") where !transport.candidates.contains("candidate:" + c) { transport.candidates.append("candidate:" + c) }
            if m.has("end-of-candidates") { transport.endOfCandidates = true }
        }
        for section in sections where !section.isRejected && (section.kind == "audio" || section.kind == "video") && !section.rtcpMux {
            throw ParseError("SDP", "m=\(section.kind) (mid \(section.mid)) has no a=rtcp-mux; callend sends RTP and RTCP on one port (RFC 5761)")
        }
    }

    private static func readMedia(_ m: SDPMessage.MediaSection, index: Int) throws(ParseError) -> Media {
        var media = Media(kind: m.kind, mid: m.attribute("mid") ?? String(index))
        media.port = m.port
        media.proto = m.proto
        media.formats = m.formats
        media.rtcpMux = m.has("rtcp-mux")
        media.rtcpReducedSize = m.has("rtcp-rsize")
        media.msid = m.attribute("msid")
        for d in [Direction.sendrecv, .sendonly, .recvonly, .inactive] where m.has(d.rawValue) { media.direction = d }
        for e in m.attributes("extmap") {
            let fields = e.split(separator: " ")
            guard fields.count >= 2, let id = UInt8(fields[0].split(separator: "/").first ?? ""), (1...255).contains(id) else {
                throw ParseError("SDP", "a=extmap:\(e.prefix(40)) is not ID URI")
            }
            media.extensions.append(HeaderExtension(id: id, uri: String(fields[1])))
        }
        if media.isDataChannel, m.port != 0 {
            // RFC 8841 §5: 5000 and 64 KiB when not said.
            media.sctpPort = m.attribute("sctp-port").flatMap { UInt16($0) } ?? 5000
            // RFC 8841 §6: 0 (any size) or a positive size; anything else is the default.
            media.maxMessageSize = m.attribute("max-message-size").flatMap { Int($0) }.flatMap { $0 >= 0 ? $0 : nil } ?? 65_536
        }
        guard m.kind == "audio" || m.kind == "video", m.port != 0 else { return media }
        var codecs: [UInt8: Codec] = [:]
        for map in m.attributes("rtpmap") {
            let fields = map.split(separator: " ", maxSplits: 1)
            guard fields.count == 2, let pt = UInt8(fields[0]), pt < 128 else { throw ParseError("SDP", "a=rtpmap:\(map.prefix(40)) is not PT NAME/RATE") }
            let parts = fields[1].split(separator: "/")
            guard parts.count >= 2, let rate = Int(parts[1]), rate > 0 else { throw ParseError("SDP", "a=rtpmap:\(map.prefix(40)) has no clock rate") }
            codecs[pt] = Codec(payloadType: pt, name: String(parts[0]), clockRate: rate, channels: parts.count > 2 ? Int(parts[2]) : nil)
        }
        for f in m.attributes("fmtp") {
            let fields = f.split(separator: " ", maxSplits: 1)
            guard fields.count == 2, let pt = UInt8(fields[0]) else { continue }
            codecs[pt]?.parameters = String(fields[1])
        }
        for f in m.attributes("rtcp-fb") {
            let fields = f.split(separator: " ", maxSplits: 1)
            guard fields.count == 2 else { continue }
            if fields[0] == "*" {
                for pt in codecs.keys { codecs[pt]?.feedback.append(String(fields[1])) }
            } else if let pt = UInt8(fields[0]) {
                codecs[pt]?.feedback.append(String(fields[1]))
            }
        }
        // RTX (RFC 4588): "rtx/90000" with apt=PT names the codec it repeats.
        for (pt, codec) in codecs where codec.name.lowercased() == "rtx" {
            guard let apt = codec.parameters?.split(separator: ";").first(where: { $0.hasPrefix("apt=") }).flatMap({ UInt8($0.dropFirst(4)) }) else { continue }
            if codecs[apt]?.rtxPayloadType == nil { codecs[apt]?.rtxPayloadType = pt }
        }
        // RED (RFC 2198) whose fmtp names one codec only ("111/111"): that codec's redundancy.
        var attachedRED: Set<UInt8> = []
        for (pt, codec) in codecs.sorted(by: { $0.key < $1.key }) where codec.name.lowercased() == "red" {
            let carried = Set((codec.parameters ?? "").split(separator: "/").map { UInt8(String($0.filter { !$0.isWhitespace })) })
            guard carried.count == 1, let inner = carried.first ?? nil, inner != pt, let primary = codecs[inner],
                  primary.clockRate == codec.clockRate, primary.redPayloadType == nil else { continue }
            codecs[inner]?.redPayloadType = pt
            attachedRED.insert(pt)
        }
        // Video: one "red" and one "ulpfec" of the codecs' clock rate protect every codec of the
        // section (libwebrtc's FEC for VP8; RED carries the codec and the FEC packets).
        let fecFormats = m.formats.compactMap { UInt8($0).flatMap { codecs[$0] } }.filter { !attachedRED.contains($0.payloadType) }
        if m.kind == "video", let red = fecFormats.first(where: { $0.isCodec("red", clockRate: 90_000) }),
           let ulpfec = fecFormats.first(where: { $0.isCodec("ulpfec", clockRate: 90_000) }) {
            for (pt, codec) in codecs where codec.clockRate == 90_000 && !["rtx", "red", "ulpfec"].contains(codec.name.lowercased()) {
                codecs[pt]?.redPayloadType = red.payloadType
                codecs[pt]?.ulpfecPayloadType = ulpfec.payloadType
                codecs[pt]?.redRTXPayloadType = red.rtxPayloadType
            }
            attachedRED.formUnion([red.payloadType, ulpfec.payloadType])
        }
        // In the m= line's order (the offerer's preference), without the RTX and attached RED entries.
        media.codecs = m.formats.compactMap { UInt8($0).flatMap { codecs[$0] } }
            .filter { $0.name.lowercased() != "rtx" && !attachedRED.contains($0.payloadType) }
        // SSRCs: the FID group names media and retransmission; otherwise the first a=ssrc.
        if let fid = m.attributes("ssrc-group").first(where: { $0.hasPrefix("FID ") }) {
            let ids = fid.split(separator: " ").dropFirst().compactMap { UInt32($0) }
            media.ssrc = ids.first
            media.rtxSSRC = ids.dropFirst().first
        }
        for s in m.attributes("ssrc") {
            let fields = s.split(separator: " ", maxSplits: 1)
            guard let first = fields.first, let id = UInt32(first) else { continue }
            if media.ssrc == nil { media.ssrc = id }
            if id == media.ssrc, fields.count == 2, fields[1].hasPrefix("cname:") { media.cname = String(fields[1].dropFirst(6)) }
        }
        return media
    }

    // MARK: Writing

    /// The SDP text: session lines, then each section with the bundled transport's attributes.
    public var sdp: String {
        var session: [SDPMessage.Line] = [
            .init("v", "0"),
            .init("o", "- \(sessionID) \(sessionVersion) IN IP4 127.0.0.1"),
            .init("s", "-"),
            .init("t", "0 0"),
        ]
        if !bundle.isEmpty { session.append(.init("a", "group:BUNDLE " + bundle.joined(separator: " "))) }
        session.append(.init("a", "msid-semantic: WMS *"))
        var sections: [SDPMessage.MediaSection] = []
        for m in media {
            var lines: [SDPMessage.Line] = [.init("c", "IN IP4 0.0.0.0")]
            func a(_ value: String) { lines.append(.init("a", value)) }
            if m.isRejected {
                a("mid:\(m.mid)")
                a("inactive")
                sections.append(.init(kind: m.kind, port: 0, proto: m.proto, formats: m.formats.isEmpty ? ["0"] : m.formats, lines: lines))
                continue
            }
            a("rtcp:9 IN IP4 0.0.0.0")
            a("ice-ufrag:\(transport.ufrag)")
            a("ice-pwd:\(transport.password)")
            a("ice-options:trickle")
            a("fingerprint:\(transport.fingerprint)")
            a("setup:\(transport.setup.rawValue)")
            a("mid:\(m.mid)")
            if m.isDataChannel {
                if let port = m.sctpPort { a("sctp-port:\(port)") }
                if let size = m.maxMessageSize { a("max-message-size:\(size)") }
                if m.mid == bundle.first {
                    for c in transport.candidates { a(c.hasPrefix("candidate:") ? c : "candidate:" + c) }
                    if transport.endOfCandidates { a("end-of-candidates") }
                }
                sections.append(.init(kind: m.kind, port: 9, proto: m.proto, formats: m.formats, lines: lines))
                continue
            }
            for e in m.extensions { a("extmap:\(e.id) \(e.uri)") }
            a(m.direction.rawValue)
            if let msid = m.msid { a("msid:\(msid)") }
            if m.rtcpMux { a("rtcp-mux") }
            if m.rtcpReducedSize { a("rtcp-rsize") }
            var formats: [String] = []
            // Video's RED and ULPFEC serve every codec of the section: written once, after them.
            var videoFEC: [String: [SDPMessage.Line]] = [:]
            for c in m.codecs {
                if let red = c.redPayloadType, let fec = c.ulpfecPayloadType {
                    let rtx = c.redRTXPayloadType.map { [String($0)] } ?? []
                    var fecLines: [SDPMessage.Line] = [.init("a", "rtpmap:\(red) red/\(c.clockRate)")]
                    if let r = c.redRTXPayloadType { fecLines += [.init("a", "rtpmap:\(r) rtx/\(c.clockRate)"), .init("a", "fmtp:\(r) apt=\(red)")] }
                    fecLines.append(.init("a", "rtpmap:\(fec) ulpfec/\(c.clockRate)"))
                    videoFEC[([String(red)] + rtx + [String(fec)]).joined(separator: " ")] = fecLines
                } else if let red = c.redPayloadType {
                    formats.append(String(red))
                    a("rtpmap:\(red) red/\(c.clockRate)" + (c.channels.map { "/\($0)" } ?? ""))
                    a("fmtp:\(red) \(c.payloadType)/\(c.payloadType)")
                }
                formats.append(String(c.payloadType))
                a("rtpmap:\(c.payloadType) \(c.name)/\(c.clockRate)" + (c.channels.map { "/\($0)" } ?? ""))
                for fb in c.feedback { a("rtcp-fb:\(c.payloadType) \(fb)") }
                if let p = c.parameters { a("fmtp:\(c.payloadType) \(p)") }
                if let rtx = c.rtxPayloadType {
                    formats.append(String(rtx))
                    a("rtpmap:\(rtx) rtx/\(c.clockRate)")
                    a("fmtp:\(rtx) apt=\(c.payloadType)")
                }
            }
            for (types, fecLines) in videoFEC.sorted(by: { $0.key < $1.key }) {
                formats += types.split(separator: " ").map(String.init)
                lines += fecLines
            }
            if let ssrc = m.ssrc {
                if let rtx = m.rtxSSRC { a("ssrc-group:FID \(ssrc) \(rtx)") }
                for id in [ssrc] + (m.rtxSSRC.map { [$0] } ?? []) {
                    if let cname = m.cname { a("ssrc:\(id) cname:\(cname)") }
                    if let msid = m.msid { a("ssrc:\(id) msid:\(msid)") }
                }
            }
            if m.mid == bundle.first {
                for c in transport.candidates { a(c.hasPrefix("candidate:") ? c : "candidate:" + c) }
                if transport.endOfCandidates { a("end-of-candidates") }
            }
            sections.append(.init(kind: m.kind, port: 9, proto: m.proto, formats: formats, lines: lines))
        }
        return SDPMessage(session: session, media: sections).text
    }
}
