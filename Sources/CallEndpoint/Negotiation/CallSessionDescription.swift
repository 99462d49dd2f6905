import Foundation
import RTPTransport

/// What one endpoint offers or answers for a call, exchanged as JSON in the signaling `payload`
/// of `offer` and `answer` messages (docs/signaling.md). Per media kind: the codecs with payload
/// types and clock rates, the SSRCs, RTCP feedback, header extensions; then the UDP candidates and
/// the SRTP keying. `sdp(...)` writes the same description as SDP for GStreamer/ffmpeg/VLC.
public struct CallSessionDescription: Sendable, Equatable, Codable {
    public struct Codec: Sendable, Equatable, Codable {
        public var name: String
        public var payloadType: UInt8
        public var clockRate: Int
        public var channels: Int?
        /// RFC 4588 retransmission payload type for this codec, if offered.
        public var rtxPayloadType: UInt8?
        /// RTCP feedback (RFC 4585): "nack", "nack pli", "ccm fir", "transport-cc".
        public var feedback: [String]
        public var parameters: [String: String]

        public init(name: String, payloadType: UInt8, clockRate: Int, channels: Int? = nil, rtxPayloadType: UInt8? = nil,
                    feedback: [String] = [], parameters: [String: String] = [:]) {
            self.name = name
            self.payloadType = payloadType
            self.clockRate = clockRate
            self.channels = channels
            self.rtxPayloadType = rtxPayloadType
            self.feedback = feedback
            self.parameters = parameters
        }
    }

    public struct HeaderExtension: Sendable, Equatable, Codable {
        public var id: UInt8
        public var uri: String
        public init(id: UInt8, uri: String) {
            self.id = id
            self.uri = uri
        }
    }

    public struct Media: Sendable, Equatable, Codable {
        public var kind: String
        /// In order of preference.
        public var codecs: [Codec]
        public var ssrc: UInt32
        public var rtxSSRC: UInt32?
        public var headerExtensions: [HeaderExtension]
        /// The UDP port this endpoint receives this media on (RTCP multiplexed, RFC 5761).
        public var port: Int
    }

    public struct Candidate: Sendable, Equatable, Codable {
        public var host: String
        public init(host: String) { self.host = host }
    }

    public struct Crypto: Sendable, Equatable, Codable {
        /// An SRTPProfile raw value.
        public var profile: String
        /// Master key and salt, base64 (the sender's key: each side encrypts with its own).
        public var key: String
    }

    public var version = 1
    public var cname: String
    public var media: [Media]
    public var candidates: [Candidate]
    public var crypto: [Crypto]

    public init(cname: String, media: [Media], candidates: [Candidate], crypto: [Crypto]) {
        self.cname = cname
        self.media = media
        self.candidates = candidates
        self.crypto = crypto
    }

    public func media(_ kind: String) -> Media? { media.first { $0.kind == kind } }

    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(self)
    }

    public init(json: Data) throws(NegotiationError) {
        do {
            self = try JSONDecoder().decode(CallSessionDescription.self, from: json)
        } catch {
            throw NegotiationError("the session description is not valid JSON of the expected shape: \(error)")
        }
        guard version == 1 else { throw NegotiationError("session description version \(version); this endpoint speaks version 1") }
        for m in media {
            guard (1...65535).contains(m.port) else { throw NegotiationError("\(m.kind): port \(m.port) is not 1 ... 65535") }
            guard !m.codecs.isEmpty else { throw NegotiationError("\(m.kind): no codec offered") }
            for codec in m.codecs where codec.payloadType >= 128 || (64...95).contains(codec.payloadType) {
                // 64-95 would collide with RTCP packet types when multiplexed (RFC 5761 §4).
                throw NegotiationError("\(m.kind): payload type \(codec.payloadType) is not allowed with RTP/RTCP multiplexing")
            }
        }
        guard !candidates.isEmpty else { throw NegotiationError("no UDP candidate to send media to") }
        for c in crypto where SRTPProfile(rawValue: c.profile) == nil || Data(base64Encoded: c.key)?.count != SRTPProfile(rawValue: c.profile)?.keyMaterialLength {
            throw NegotiationError("SRTP keying \(c.profile) is unknown or its key has the wrong length")
        }
    }
}

public struct NegotiationError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The result of offer/answer for one call: what each side sends.
public struct NegotiatedCall: Sendable, Equatable {
    public struct Stream: Sendable, Equatable {
        public var kind: String
        public var codec: CallSessionDescription.Codec
        public var localSSRC: UInt32
        public var remoteSSRC: UInt32
        public var remoteRTXSSRC: UInt32?
        public var localPort: Int
        public var remotePort: Int
        public var transportSequenceExtensionID: UInt8?
    }

    public var streams: [Stream]
    public var remoteHost: String
    public var srtp: (profile: SRTPProfile, sendKey: [UInt8], receiveKey: [UInt8])?

    public static func == (a: NegotiatedCall, b: NegotiatedCall) -> Bool {
        a.streams == b.streams && a.remoteHost == b.remoteHost && a.srtp?.profile == b.srtp?.profile
            && a.srtp?.sendKey == b.srtp?.sendKey && a.srtp?.receiveKey == b.srtp?.receiveKey
    }
}

public enum OfferAnswer {
    /// The answerer's description: for each media kind of the offer, the first offered codec the
    /// answerer supports (keeping the offerer's payload type, so both sides use one number), the
    /// feedback both support, the header extensions both know, and the first SRTP profile both have.
    public static func answer(_ offer: CallSessionDescription, local: CallSessionDescription) throws(NegotiationError) -> CallSessionDescription {
        var media: [CallSessionDescription.Media] = []
        for offered in offer.media {
            guard var mine = local.media(offered.kind) else { continue }
            guard let codec = offered.codecs.first(where: { o in mine.codecs.contains { $0.name.lowercased() == o.name.lowercased() && $0.clockRate == o.clockRate } }),
                  let supported = mine.codecs.first(where: { $0.name.lowercased() == codec.name.lowercased() }) else {
                throw NegotiationError("\(offered.kind): no common codec (offered \(offered.codecs.map(\.name).joined(separator: ", ")), supported \(mine.codecs.map(\.name).joined(separator: ", ")))")
            }
            var chosen = codec
            chosen.feedback = codec.feedback.filter(supported.feedback.contains)
            chosen.rtxPayloadType = supported.rtxPayloadType == nil ? nil : codec.rtxPayloadType
            mine.codecs = [chosen]
            mine.headerExtensions = offered.headerExtensions.filter { e in mine.headerExtensions.contains { $0.uri == e.uri } }
            media.append(mine)
        }
        guard !media.isEmpty else { throw NegotiationError("the offer has no media kind this endpoint can receive") }
        var crypto: [CallSessionDescription.Crypto] = []
        // No silent downgrade: an endpoint with SRTP keys requires SRTP (ConnectOptions.srtpEnabled).
        if offer.crypto.isEmpty && !local.crypto.isEmpty {
            throw NegotiationError("the offer has no SRTP keying and this endpoint requires SRTP")
        }
        if !offer.crypto.isEmpty && !local.crypto.isEmpty {
            guard let profile = offer.crypto.first(where: { o in local.crypto.contains { $0.profile == o.profile } })?.profile,
                  let mine = local.crypto.first(where: { $0.profile == profile }) else {
                throw NegotiationError("no common SRTP profile (offered \(offer.crypto.map(\.profile).joined(separator: ", ")))")
            }
            crypto = [mine]
        }
        return CallSessionDescription(cname: local.cname, media: media, candidates: local.candidates, crypto: crypto)
    }

    /// What this side sends and receives once both descriptions are known.
    public static func negotiate(local: CallSessionDescription, remote: CallSessionDescription) throws(NegotiationError) -> NegotiatedCall {
        var streams: [NegotiatedCall.Stream] = []
        for theirs in remote.media {
            guard let mine = local.media(theirs.kind), let codec = theirs.codecs.first,
                  mine.codecs.contains(where: { $0.name.lowercased() == codec.name.lowercased() }) else { continue }
            let twcc = theirs.headerExtensions.first { $0.uri == TransportSequenceNumber.uri }?.id
            streams.append(.init(kind: theirs.kind, codec: codec, localSSRC: mine.ssrc, remoteSSRC: theirs.ssrc, remoteRTXSSRC: theirs.rtxSSRC,
                                 localPort: mine.port, remotePort: theirs.port, transportSequenceExtensionID: twcc))
        }
        guard !streams.isEmpty else { throw NegotiationError("no media in common") }
        guard let host = remote.candidates.first?.host else { throw NegotiationError("the remote side gave no candidate") }
        var srtp: (SRTPProfile, [UInt8], [UInt8])?
        guard remote.crypto.isEmpty == local.crypto.isEmpty else {
            throw NegotiationError(local.crypto.isEmpty ? "the peer requires SRTP and this side has it turned off"
                                                        : "the peer answered without SRTP; refusing to fall back to unencrypted media")
        }
        if let theirs = remote.crypto.first {
            guard let mine = local.crypto.first(where: { $0.profile == theirs.profile }), let profile = SRTPProfile(rawValue: theirs.profile),
                  let send = Data(base64Encoded: mine.key), let receive = Data(base64Encoded: theirs.key) else {
                throw NegotiationError("SRTP: the remote profile \(theirs.profile) is not one this side offered")
            }
            srtp = (profile, [UInt8](send), [UInt8](receive))
        }
        return NegotiatedCall(streams: streams, remoteHost: host, srtp: srtp)
    }
}
