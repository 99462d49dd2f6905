import Codecs
import MediaCore
import Foundation
import RTPTransport
import Signaling
import SignalingService

/// Every parser the network or a user feeds, as one entry point each: libFuzzer drives them
/// through `callend-fuzz` (scripts/fuzz.sh), and the test suite replays the seed corpora and every
/// crash found (Tests/FuzzCorpus) through the same functions. A target may reject its input in
/// any way it likes; what it must not do is crash, hang or grow without bound.
public enum FuzzTarget: String, CaseIterable, Sendable {
    case rtp, rtcp, vp8, h264, opus, red, sdp, signaling, jwt, claims, websocket, http, whip, y4m, ivf, wav, dcep, extremes, session

    public func run(_ bytes: [UInt8]) {
        switch self {
        case .rtp:
            guard let packet = try? RTPPacket(parsing: bytes) else { return }
            if let elements = try? packet.headerExtensionElements() {
                for e in elements {
                    _ = TransportSequenceNumber.decode(e.data)
                    _ = AbsoluteSendTime.decode(e.data)
                }
            }
            _ = packet.serialized()
        case .rtcp:
            guard let packets = try? RTCPPacket.parseCompound(bytes) else { return }
            for case .transportFeedback(let feedback) in packets { _ = try? feedback.arrivals() }
        case .vp8:
            // A run of RTP packets, each behind a 2-byte length, into the jitter buffer that
            // depacketizes VP8 (its payload descriptor included) and assembles pictures.
            var buffer = VideoJitterBuffer()
            var now = Duration.zero
            for chunk in Self.chunks(bytes) {
                if let packet = try? RTPPacket(parsing: Array(chunk)) {
                    _ = try? VP8PayloadDescriptor.parse(packet.payload)
                    _ = buffer.insert(packet, arrival: now)
                }
                now += .milliseconds(5)
                _ = buffer.popFrames(now: now)
            }
            _ = buffer.popFrames(now: now + .seconds(5))
        case .h264:
            // A run of RTP packets, each behind a 2-byte length, rebuilt into access units
            // (pictures end at the marker). What comes out whole must survive packetizing again.
            // The same packets go through the jitter buffer, which finds H.264 frames itself.
            var depacketizer = H264Depacketizer()
            var picture: [(sequence: UInt16, payload: [UInt8])] = []
            let packets = Self.chunks(bytes).compactMap { try? RTPPacket(parsing: Array($0)) }
            var buffer = VideoJitterBuffer(format: .h264)
            for (index, packet) in packets.enumerated() {
                _ = buffer.insert(packet, arrival: .milliseconds(5 * index))
                _ = buffer.popFrames(now: .milliseconds(5 * index))
                picture.append((packet.sequenceNumber, packet.payload))
                guard packet.marker || index == packets.count - 1 else { continue }
                let accessUnit = depacketizer.accessUnit(from: picture)
                picture = []
                let units = accessUnit.units.filter { H264NALUnit.type(of: $0[0]) != H264NALUnit.accessUnitDelimiter }
                var packetizer = H264Packetizer(maxPayloadSize: 300)
                let payloads = packetizer.packetize(units: units.map { $0[...] })
                var again = H264Depacketizer()
                let rebuilt = again.accessUnit(from: payloads.enumerated().map { (UInt16($0.offset), $0.element) })
                precondition(rebuilt.units == units, "an H.264 access unit does not survive packetizing again")
            }
            _ = buffer.popFrames(now: .seconds(60))
        case .opus:
            _ = try? OpusPayload.validate(bytes)
        case .red:
            // What parses must write back to the same bytes' meaning.
            guard let red = try? REDPayload(parsing: bytes) else { return }
            precondition((try? REDPayload(parsing: red.serialized())) == red, "RED does not survive a round trip")
        case .dcep:
            // A data channel's OPEN or ACK from the peer (RFC 8832): what parses writes back to
            // the same meaning.
            guard let message = DCEPMessage(parsing: bytes) else { return }
            precondition(DCEPMessage(parsing: message.serialized()) == message, "DCEP does not survive a round trip")
        case .sdp:
            let text = String(decoding: bytes, as: UTF8.self)
            _ = try? SDPMessage(parsing: text)
            _ = try? JSEPDescription(type: .offer, sdp: text)
            if let answer = try? JSEPDescription(type: .answer, sdp: text) { _ = answer.sdp }
        case .signaling:
            var framer = LineFramer()
            guard let lines = try? framer.append(bytes) else { return }
            for line in lines {
                if let message = try? SignalingMessage(parsing: line) { _ = message.serialized() }
            }
        case .jwt:
            _ = try? Self.verifier.verify(String(decoding: bytes, as: UTF8.self), room: "lab", now: 1_800_000_000)
        case .claims:
            // The input is a token's payload, signed with the fuzz key so that it gets past the
            // signature to the claims: their ranges, then (when it is accepted) a join and the
            // renewals' lifetime arithmetic, at the edges of time.
            let token = TokenIssuer(secret: Self.secret).sign(payload: bytes)
            let core = SignalingServerCore(verifier: Self.verifier) { "seat" }
            let now: Int64 = 1_800_000_000
            _ = core.connectionOpened(1, now: .seconds(1))
            let join = SignalingMessage.join(room: "lab", token: token, rejoin: false).serialized().dropLast()
            _ = core.received(Array(join), from: 1, now: .seconds(1), wallClock: now)
            for wall in [now + 1, now + 86_400, now + 30 * 86_400, TokenClaims.latestTime] {
                for case .send(_, .token(let renewed, _, _)) in core.tick(now: .seconds(2), wallClock: wall) {
                    _ = core.connectionClosed(1, now: .seconds(3))
                    _ = core.connectionOpened(2, now: .seconds(3))
                    let again = SignalingMessage.join(room: "lab", token: renewed, rejoin: true).serialized().dropLast()
                    _ = core.received(Array(again), from: 2, now: .seconds(3), wallClock: wall)
                }
            }
        case .websocket:
            var reader = WebSocketReader(maxMessageLength: 4096, maxFragments: 64)
            for chunk in Self.chunks(bytes) { guard (try? reader.append(chunk)) != nil else { return } }
        case .http:
            var reader = HTTPRequestHead.Reader()
            _ = try? reader.append(bytes)
        case .whip:
            // A WHIP/WHEP server's response in pieces, its Link fields, and its body as an ICE fragment.
            var reader = HTTPResponseReader(maxBodyLength: 64 * 1024)
            for chunk in Self.chunks(bytes) {
                let read: HTTPResponseMessage?
                do { read = try reader.append(chunk) } catch { return }
                if let response = read {
                    _ = LinkField.iceServers(LinkField.parse(response.fields(named: "Link")))
                    _ = try? ICEFragment(parsing: response.text)
                    return
                }
            }
            _ = try? reader.finish()
        case .extremes:
            ExtremeMessages.run(bytes)
        case .session:
            HostileSession.run(bytes)
        case .y4m:
            Self.withFile(bytes) { path in
                guard let reader = try? Y4MReader(path: path) else { return }
                for _ in 0..<16 { guard (try? reader.readFrame()) != nil else { break } }
            }
        case .ivf:
            Self.withFile(bytes) { path in
                guard let reader = try? IVFReader(path: path) else { return }
                for _ in 0..<64 { guard case .some(.some) = try? reader.readFrame() else { break } }
            }
        case .wav:
            Self.withFile(bytes) { path in
                guard let reader = try? WAVReader(path: path) else { return }
                for _ in 0..<64 { guard reader.read(samplesPerChannel: 480) != nil else { break } }
            }
        }
    }

    static let secret = try! TokenSecret(Array("fuzzing-secret-of-thirty-two-bytes!!".utf8))  // 36 bytes: above the minimum
    static let verifier = TokenVerifier(secret: secret)

    /// Pieces of `bytes`, each behind a 2-byte big-endian length (the rest when it runs short).
    static func chunks(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var i = 0
        while i < bytes.count && out.count < 256 {
            guard i + 2 <= bytes.count else { out.append(bytes[i...]); break }
            let n = Int(bytes[i]) << 8 | Int(bytes[i + 1])
            let end = min(bytes.count, i + 2 + n)
            out.append(bytes[(i + 2)..<end])
            i = end
        }
        return out
    }

    /// The file readers take paths: the input goes to one file in /dev/shm, rewritten each run.
    static func withFile(_ bytes: [UInt8], _ body: (String) -> Void) {
        let path = "/dev/shm/callend-fuzz-\(getpid())"
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { return }
        body(path)
    }
}
