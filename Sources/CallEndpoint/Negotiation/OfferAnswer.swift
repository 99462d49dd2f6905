import RTPTransport

public struct NegotiationError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The peer could not prove it is who its description said (its DTLS certificate did not match):
/// the call ends, because retrying would hand the media to whoever is on the path.
public struct CallSecurityError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
}

/// What this endpoint publishes, and under which names, for its session descriptions.
public struct LocalMedia: Sendable, Equatable {
    public var sendsVideo: Bool
    public var sendsAudio: Bool
    /// Whether this side takes the peer's media (false: a WHIP publisher offers sendonly).
    public var receives = true
    public var videoSSRC = UInt32.random(in: 1...UInt32.max)
    public var rtxSSRC = UInt32.random(in: 1...UInt32.max)
    public var audioSSRC = UInt32.random(in: 1...UInt32.max)
    public var cname = "callend-\(UInt32.random(in: 1...UInt32.max))"
    /// The msid stream identifier both tracks belong to (RFC 8830).
    public var streamID = "callend"
    /// Whether this side offers, and accepts, data channels (an m=application section).
    public var dataChannels = false
    /// The video codecs this side offers and accepts, most wanted first.
    public var videoCodecs: [VideoCodec] = [.vp8]

    public init(sendsVideo: Bool, sendsAudio: Bool) {
        self.sendsVideo = sendsVideo
        self.sendsAudio = sendsAudio
    }
}

/// The result of offer/answer for one call: per kind, the codec both use (the offerer's payload
/// types), which way media goes, the SSRCs, and the transport-wide sequence number extension; and
/// the peer's transport with who opens DTLS.
public struct NegotiatedCall: Sendable, Equatable {
    public struct Stream: Sendable, Equatable {
        public var kind: MediaKind
        /// The codec this side sends (the answer's first, or the one answered).
        public var codec: JSEPDescription.Codec
        /// The codec the peer sends when it is not `codec`: an answerer sends the offer's most
        /// preferred codec among those it answered, which need not be its answer's first.
        public var receivedCodec: JSEPDescription.Codec?
        /// What the peer's packets carry.
        public var incomingCodec: JSEPDescription.Codec { receivedCodec ?? codec }
        public var sends: Bool
        public var receives: Bool
        public var localSSRC: UInt32
        public var localRTXSSRC: UInt32?
        public var remoteSSRC: UInt32?
        public var transportSequenceExtensionID: UInt8?
        /// The MID header extension's ID and this section's mid, when negotiated.
        public var midExtensionID: UInt8?
        public var mid: String
    }

    public var streams: [Stream]
    public var remoteTransport: JSEPDescription.Transport
    public var dtlsRole: DTLSSession.Role
    /// Data channels, when both sides agreed on them: the peer's SCTP port and the largest
    /// message it takes (0: any).
    public var data: DataAgreement?

    public struct DataAgreement: Sendable, Equatable {
        public var remotePort: UInt16
        public var maxMessageSize: Int
    }

    public func stream(_ kind: MediaKind) -> Stream? { streams.first { $0.kind == kind } }
}

/// JSEP offer/answer (RFC 8829 §5, RFC 3264) for what callend speaks: Opus (with RED), VP8 and
/// H.264 with RTX, ULPFEC in RED, NACK, PLI, FIR and transport-cc, everything bundled with rtcp-mux. An offer from anyone is
/// answered with the first VP8 and the first Opus it lists (in its payload types); every other
/// section is declined with port 0; nothing acceptable is an error that says what was offered.
/// With H.264 among `LocalMedia.videoCodecs`, video is chosen in that order (`choose`).
public enum OfferAnswer {
    static let opus = JSEPDescription.Codec(payloadType: 111, name: "opus", clockRate: 48_000, channels: 2,
                                            parameters: "minptime=10;useinbandfec=1", feedback: ["transport-cc"], redPayloadType: 63)
    /// VP8 with RTX, and with ULPFEC in RED (RFC 5109, RFC 2198) as libwebrtc offers it for video:
    /// "red/90000" (with its own RTX) and "ulpfec/90000" after the codec.
    static let vp8: JSEPDescription.Codec = {
        var codec = JSEPDescription.Codec(payloadType: 96, name: "VP8", clockRate: 90_000,
                                          feedback: ["nack", "nack pli", "ccm fir", "transport-cc"], rtxPayloadType: 97, redPayloadType: 98)
        (codec.redRTXPayloadType, codec.ulpfecPayloadType) = (99, 100)
        return codec
    }()
    /// H.264 in packetization mode 1 with RTX, as libwebrtc offers it: constrained baseline
    /// (what callend's encoder makes), then baseline and main, in which the same stream is valid
    /// (H.264 A.2), so a peer that lists only those still gets it; all at level 3.1, which is
    /// what callend states it receives. The section's RED and ULPFEC (VP8's payload types)
    /// protect them too: a receiver follows H.264 pictures across the FEC's sequence numbers by
    /// their frame_num (`VideoJitterBuffer`), and callend resends a lost FEC packet when asked, for
    /// receivers that do not (libwebrtc).
    static let h264: [JSEPDescription.Codec] = [(102, "42e01f"), (104, "42001f"), (106, "4d001f")].map { (payloadType: UInt8, profile: String) -> JSEPDescription.Codec in
        var codec = JSEPDescription.Codec(payloadType: payloadType, name: "H264", clockRate: 90_000,
                                          parameters: H264FormatParameters(profileLevelID: H264ProfileLevelID(hex: profile)!).fmtp,
                                          feedback: ["nack", "nack pli", "ccm fir", "transport-cc"], rtxPayloadType: payloadType + 1,
                                          redPayloadType: vp8.redPayloadType)
        (codec.redRTXPayloadType, codec.ulpfecPayloadType) = (vp8.redRTXPayloadType, vp8.ulpfecPayloadType)
        return codec
    }
    /// The level callend states it receives (3.1: 1280x720 at 30 fps).
    static let h264Level: UInt8 = 0x1f
    static let supportedFeedback: [MediaKind: Set<String>] = [.video: ["nack", "nack pli", "ccm fir", "transport-cc"], .audio: ["transport-cc"]]
    /// The header extension callend reads and writes (RFC 8285, ID 3 where callend chooses).
    static let transportCC = JSEPDescription.HeaderExtension(id: 3, uri: TransportSequenceNumber.uri)
    /// The BUNDLE demultiplexing extension (RFC 8843 §15.2), ID 4 where callend chooses.
    static let mid = JSEPDescription.HeaderExtension(id: 4, uri: "urn:ietf:params:rtp-hdrext:sdes:mid")

    /// This side's offer: audio (mid 0) and video (mid 1), sendrecv where a track is published
    /// (sendonly when this side takes no media, recvonly when it publishes none of that kind).
    public static func offer(_ local: LocalMedia, transport: JSEPDescription.Transport) -> JSEPDescription {
        var audio = JSEPDescription.Media(kind: "audio", mid: "0")
        audio.codecs = [opus]
        audio.direction = .init(sends: local.sendsAudio, receives: local.receives)
        var video = JSEPDescription.Media(kind: "video", mid: "1")
        video.codecs = local.videoCodecs.flatMap { $0 == .vp8 ? [vp8] : h264 }
        video.direction = .init(sends: local.sendsVideo, receives: local.receives)
        for i in [0, 1] {
            var m = i == 0 ? audio : video
            m.extensions = [transportCC, mid]
            m.cname = local.cname
            m.msid = "\(local.streamID) \(m.kind)"
            m.ssrc = i == 0 ? local.audioSSRC : local.videoSSRC
            m.rtxSSRC = i == 0 ? nil : local.rtxSSRC
            if i == 0 { audio = m } else { video = m }
        }
        let data = local.dataChannels ? [JSEPDescription.Media.dataChannels(mid: "2")] : []
        return JSEPDescription(type: .offer, media: [audio, video] + data, transport: transport)
    }

    /// This side's answer to `offer`, and the call it makes. The answerer opens DTLS
    /// (a=setup:active) unless the offerer insists on being active itself.
    public static func answer(_ offer: JSEPDescription, local: LocalMedia, transport: JSEPDescription.Transport) throws(NegotiationError) -> (JSEPDescription, NegotiatedCall) {
        var sections: [JSEPDescription.Media] = []
        var streams: [NegotiatedCall.Stream] = []
        var data: NegotiatedCall.DataAgreement?
        for offered in offer.media {
            if offered.isDataChannel, !offered.isRejected, local.dataChannels, data == nil {
                sections.append(.dataChannels(mid: offered.mid))
                data = .init(remotePort: offered.sctpPort ?? 5000, maxMessageSize: offered.maxMessageSize ?? 65_536)
                continue
            }
            var answered = JSEPDescription.Media(kind: offered.kind, mid: offered.mid)
            answered.proto = offered.proto
            answered.formats = offered.formats
            guard let kind = MediaKind(rawValue: offered.kind), !offered.isRejected, !streams.contains(where: { $0.kind == kind }),
                  let chosen = choose(kind, from: offered.codecs, video: local.videoCodecs) else {
                // Declined (RFC 3264 §6): port 0; what callend does not speak, or a second section of a kind.
                answered.port = 0
                (answered.direction, answered.rtcpMux, answered.rtcpReducedSize) = (.inactive, false, false)
                sections.append(answered)
                continue
            }
            let sends = offered.direction.receives && (kind == .video ? local.sendsVideo : local.sendsAudio)
            answered.direction = .init(sends: sends, receives: offered.direction.sends && local.receives)
            answered.codecs = [chosen]
            answered.extensions = offered.extensions.filter { $0.uri == transportCC.uri || $0.uri == mid.uri }
            answered.rtcpReducedSize = offered.rtcpReducedSize
            answered.cname = local.cname
            answered.msid = "\(local.streamID) \(kind.rawValue)"
            answered.ssrc = kind == .video ? local.videoSSRC : local.audioSSRC
            answered.rtxSSRC = kind == .video && chosen.rtxPayloadType != nil ? local.rtxSSRC : nil
            sections.append(answered)
            streams.append(stream(kind, chosen, direction: answered.direction, local: local, remote: offered, extensions: answered.extensions, mid: offered.mid))
        }
        guard !streams.isEmpty else {
            let offered = offer.media.map { "\($0.kind) (\($0.codecs.map(\.name).joined(separator: ", ")))" }.joined(separator: "; ")
            let names = ["Opus"] + local.videoCodecs.map { $0 == .vp8 ? "VP8" : "H.264 (packetization mode 1)" }
            let spoken = names.dropLast().joined(separator: ", ") + " and " + names.last!
            throw NegotiationError("nothing in the offer that callend speaks: it sends and receives \(spoken); offered \(offered)")
        }
        var mine = transport
        mine.setup = offer.transport.setup == .active ? .passive : .active
        let answer = JSEPDescription(type: .answer, media: sections, transport: mine)
        return (answer, NegotiatedCall(streams: streams, remoteTransport: offer.transport, dtlsRole: mine.setup == .active ? .client : .server, data: data))
    }

    /// The call our offer and the peer's answer make.
    public static func negotiate(offer: JSEPDescription, answer: JSEPDescription, local: LocalMedia) throws(NegotiationError) -> NegotiatedCall {
        var streams: [NegotiatedCall.Stream] = []
        var data: NegotiatedCall.DataAgreement?
        for answered in answer.media where !answered.isRejected {
            if answered.isDataChannel {
                guard offer.media.contains(where: { $0.mid == answered.mid && $0.isDataChannel }) else {
                    throw NegotiationError("the answer has a data channel section (mid \(answered.mid)) the offer did not have")
                }
                data = .init(remotePort: answered.sctpPort ?? 5000, maxMessageSize: answered.maxMessageSize ?? 65_536)
                continue
            }
            guard let kind = MediaKind(rawValue: answered.kind), let ours = offer.media.first(where: { $0.mid == answered.mid && $0.kind == answered.kind }) else {
                throw NegotiationError("the answer has a section (mid \(answered.mid), \(answered.kind)) the offer did not have")
            }
            guard let codec = answered.codecs.first, let offered = ours.codecs.first(where: { $0.payloadType == codec.payloadType && $0.isCodec(codec.name, clockRate: codec.clockRate) }) else {
                throw NegotiationError("the answer chose a codec for \(answered.kind) that was not offered: \(answered.codecs.map { "\($0.payloadType) \($0.name)" })")
            }
            for answeredCodec in answered.codecs where answeredCodec.isCodec("H264", clockRate: 90_000) {
                guard H264FormatParameters(fmtp: answeredCodec.parameters)?.packetizationMode == 1 else {
                    throw NegotiationError("the answer lists H.264 payload type \(answeredCodec.payloadType) with \(answeredCodec.parameters ?? "no fmtp"); callend speaks packetization mode 1 only")
                }
            }
            /// What both sides take of an offered codec the answer lists.
            func agree(_ offered: JSEPDescription.Codec, _ codec: JSEPDescription.Codec) -> JSEPDescription.Codec {
                var agreed = offered
                agreed.feedback = offered.feedback.filter(codec.feedback.contains)
                agreed.rtxPayloadType = codec.rtxPayloadType == offered.rtxPayloadType ? offered.rtxPayloadType : nil
                agreed.redPayloadType = codec.redPayloadType == offered.redPayloadType ? offered.redPayloadType : nil
                agreed.ulpfecPayloadType = codec.ulpfecPayloadType == offered.ulpfecPayloadType ? offered.ulpfecPayloadType : nil
                agreed.redRTXPayloadType = codec.redRTXPayloadType == offered.redRTXPayloadType ? offered.redRTXPayloadType : nil
                if kind == .video && (agreed.redPayloadType == nil || agreed.ulpfecPayloadType == nil) {
                    (agreed.redPayloadType, agreed.ulpfecPayloadType, agreed.redRTXPayloadType) = (nil, nil, nil)
                }
                return agreed
            }
            // This side sends the answer's first codec; the answerer sends the offer's most
            // preferred codec the answer lists (RFC 3264 §6.1): Chromium answers callend's
            // 42e01f, 42001f offer with 42001f first and sends 42e01f.
            let agreed = agree(offered, codec)
            let peerSends = ours.codecs.lazy.compactMap { offered in
                answered.codecs.first { $0.payloadType == offered.payloadType && $0.isCodec(offered.name, clockRate: offered.clockRate) }.map { agree(offered, $0) }
            }.first ?? agreed
            let direction = JSEPDescription.Direction(sends: ours.direction.sends && answered.direction.receives,
                                                      receives: ours.direction.receives && answered.direction.sends)
            let extensions = answered.extensions.filter { e in ours.extensions.contains(e) }
            var made = stream(kind, agreed, direction: direction, local: local, remote: answered, extensions: extensions, mid: answered.mid)
            if peerSends != agreed { made.receivedCodec = peerSends }
            streams.append(made)
        }
        guard !streams.isEmpty else { throw NegotiationError("the answer declined every media section") }
        let role: DTLSSession.Role
        switch answer.transport.setup {
        case .active: role = .server
        case .passive: role = .client
        case .actpass: throw NegotiationError("the answer says a=setup:actpass; an answer must choose active or passive (RFC 5763 §5)")
        }
        return NegotiatedCall(streams: streams, remoteTransport: answer.transport, dtlsRole: role, data: data)
    }

    /// The offered codec of `kind` callend speaks, in the order of `video` (its preference), with
    /// the feedback both know. Of the H.264 payload types, packetization mode 1 only, constrained
    /// baseline first, then any profile whose streams a constrained baseline one is valid in;
    /// answered at callend's own level (RFC 6184 §8.2.2).
    static func choose(_ kind: MediaKind, from offered: [JSEPDescription.Codec], video: [VideoCodec] = [.vp8]) -> JSEPDescription.Codec? {
        let found: JSEPDescription.Codec?
        if kind == .audio {
            found = offered.first { $0.isCodec(opus.name, clockRate: opus.clockRate) && $0.channels == 2 }
        } else {
            found = video.lazy.compactMap { preferred -> JSEPDescription.Codec? in
                guard preferred == .h264 else { return offered.first { $0.isCodec(vp8.name, clockRate: vp8.clockRate) } }
                let usable = offered.compactMap { codec -> (JSEPDescription.Codec, H264FormatParameters)? in
                    guard codec.isCodec("H264", clockRate: 90_000), let parameters = H264FormatParameters(fmtp: codec.parameters),
                          parameters.packetizationMode == 1, parameters.profileLevelID.carriesConstrainedBaseline else { return nil }
                    return (codec, parameters)
                }
                guard let (codec, parameters) = usable.first(where: { $0.1.profileLevelID.profile == .constrainedBaseline }) ?? usable.first else { return nil }
                var answered = codec
                answered.parameters = parameters.answer(localLevel: h264Level).fmtp
                return answered
            }.first
        }
        guard var codec = found else { return nil }
        codec.feedback = codec.feedback.filter { supportedFeedback[kind]?.contains($0) ?? false }
        if kind == .audio {
            (codec.rtxPayloadType, codec.ulpfecPayloadType, codec.redRTXPayloadType) = (nil, nil, nil)
        } else if codec.redPayloadType == nil || codec.ulpfecPayloadType == nil {
            // Video's RED is only for ULPFEC: both, or neither.
            (codec.redPayloadType, codec.ulpfecPayloadType, codec.redRTXPayloadType) = (nil, nil, nil)
        }
        return codec
    }

    private static func stream(_ kind: MediaKind, _ codec: JSEPDescription.Codec, direction: JSEPDescription.Direction, local: LocalMedia,
                               remote: JSEPDescription.Media, extensions: [JSEPDescription.HeaderExtension], mid: String) -> NegotiatedCall.Stream {
        NegotiatedCall.Stream(kind: kind, codec: codec, sends: direction.sends, receives: direction.receives,
                              localSSRC: kind == .video ? local.videoSSRC : local.audioSSRC,
                              localRTXSSRC: kind == .video && codec.rtxPayloadType != nil ? local.rtxSSRC : nil,
                              remoteSSRC: remote.ssrc, transportSequenceExtensionID: extensions.first { $0.uri == transportCC.uri }?.id,
                              midExtensionID: extensions.first { $0.uri == Self.mid.uri }?.id, mid: mid)
    }
}
