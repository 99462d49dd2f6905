import Foundation
import Platform
import RTPTransport
import Synchronization

/// The media of one call: a UDP socket per media kind that both sends and receives (symmetric
/// RTP, RTCP multiplexed), a `MediaSender` and a `MediaReceiver` sharing them, and this side's own
/// SRTP key (each side encrypts with its own key and decrypts with the peer's, as SDES-SRTP does).
public final class CallMedia: @unchecked Sendable {  // sockets and keys are immutable; the sender/receiver pair is set once under `parts`
    public let videoSocket: UDPSocket
    public let audioSocket: UDPSocket
    public let ssrcs: (video: UInt32, rtx: UInt32, audio: UInt32)
    public let cname = "callend-\(UInt32.random(in: 1...UInt32.max))"
    let srtpKey: [UInt8]?
    static let profile = SRTPProfile.aes128CmSha1_80
    private let parts = Mutex<(MediaSender?, MediaReceiver?)>((nil, nil))

    public init(listenHost: String = "0.0.0.0", srtp: Bool = true) throws {
        videoSocket = try UDPSocket(bindHost: listenHost, port: 0)
        audioSocket = try UDPSocket(bindHost: listenHost, port: 0)
        ssrcs = (UInt32.random(in: 1...UInt32.max), UInt32.random(in: 1...UInt32.max), UInt32.random(in: 1...UInt32.max))
        srtpKey = srtp ? (0..<Self.profile.keyMaterialLength).map { _ in UInt8.random(in: 0...255) } : nil
    }

    /// What this side offers or answers with: VP8 (RTX, NACK, PLI, FIR) and Opus on the two
    /// sockets' ports, reachable at `candidateHost`.
    public func localDescription(candidateHost: String) -> CallSessionDescription {
        let video = CallSessionDescription.Codec(name: "VP8", payloadType: MediaSenderConfiguration.videoPayloadType, clockRate: 90_000,
                                                 rtxPayloadType: MediaSenderConfiguration.rtxPayloadType, feedback: ["nack", "nack pli", "ccm fir"])
        let opus = CallSessionDescription.Codec(name: "opus", payloadType: MediaSenderConfiguration.audioPayloadType, clockRate: 48_000,
                                                channels: 2, parameters: ["useinbandfec": "1", "minptime": "10"])
        let extensions = [CallSessionDescription.HeaderExtension(id: 3, uri: TransportSequenceNumber.uri)]
        return CallSessionDescription(
            cname: cname,
            media: [.init(kind: "video", codecs: [video], ssrc: ssrcs.video, rtxSSRC: ssrcs.rtx, headerExtensions: extensions, port: videoSocket.localPort),
                    .init(kind: "audio", codecs: [opus], ssrc: ssrcs.audio, rtxSSRC: nil, headerExtensions: extensions, port: audioSocket.localPort)],
            candidates: [.init(host: candidateHost)],
            crypto: srtpKey.map { [.init(profile: Self.profile.rawValue, key: Data($0).base64EncodedString())] } ?? [])
    }

    /// Sends and receives until `duration` passes, the peer says BYE or goes silent, or `stop()`.
    /// The tracks, renderers and speaker belong to the caller and stay open afterwards.
    /// How the encoders are driven in a call: the mode, the video ceiling, and where decisions go.
    public struct Encoding: Sendable {
        public var mode: VideoEncodingMode = .auto
        public var maxVideoBitrate = 2_500_000
        public var onDecision: (@Sendable (EncodingDecision) -> Void)?
        public init() {}
    }

    public func run(_ call: NegotiatedCall, media: Call.Media, encoding: Encoding = Encoding(), duration: Duration?) throws -> (sent: SenderStatistics, received: ReceiverSummary) {
        guard let videoStream = call.streams.first(where: { $0.kind == "video" }) ?? call.streams.first else {
            throw NegotiationError("no negotiated stream")
        }
        let audioStream = call.streams.first { $0.kind == "audio" }
        var sending = MediaSenderConfiguration(destinationHost: call.remoteHost, videoPort: videoStream.remotePort)
        sending.audioPort = audioStream?.remotePort ?? videoStream.remotePort + 2
        let tracks = (video: call.streams.contains { $0.kind == "video" } ? media.videoTrack : nil, audio: audioStream == nil ? nil : media.audioTrack)
        sending.duration = duration
        sending.ssrcs = ssrcs
        sending.transportSequenceExtensionID = videoStream.kind == "video" ? videoStream.transportSequenceExtensionID : nil
        sending.encodingMode = encoding.mode
        sending.maxVideoBitrate = encoding.maxVideoBitrate
        sending.videoBitrate = min(sending.videoBitrate, encoding.maxVideoBitrate)
        sending.onDecision = encoding.onDecision
        if let srtp = call.srtp {
            sending.srtp = (srtp.profile, srtp.sendKey)
            sending.srtpReceiveKey = srtp.receiveKey
        }
        let crypto = call.srtp.map { (profile: $0.profile, keyMaterial: $0.receiveKey) }
        let streams: [StreamDescription] = call.streams.map { s in
            StreamDescription(kind: s.kind == "video" ? .video : .audio, port: s.localPort, payloadType: s.codec.payloadType,
                              encodingName: s.codec.name, clockRate: s.codec.clockRate, channels: s.codec.channels,
                              feedback: s.codec.feedback, rtcpMux: true, ssrc: s.remoteSSRC, crypto: crypto, rtxPayloadType: s.codec.rtxPayloadType)
        }
        var receiving = MediaReceiverConfiguration(description: SessionDescriptionFile(connectionAddress: call.remoteHost, streams: streams))
        receiving.duration = duration.map { $0 + .seconds(2) }
        // A peer that vanishes is noticed from RTCP silence within 4 s (reports come every second).
        receiving.idleTimeout = .seconds(4)
        receiving.srtpSendKey = call.srtp?.sendKey
        receiving.videoRenderers = media.renderers
        receiving.transportSequenceExtensionID = call.streams.first { $0.kind == "video" }?.transportSequenceExtensionID
        receiving.audioPlayout = media.audioPlayout
        let keys = call.srtp.map { UDPPairTransport.Keys(profile: $0.profile, send: $0.sendKey, receive: $0.receiveKey) }
        let transport = try UDPPairTransport(sockets: [.video: videoSocket, .audio: audioSocket],
                                             destinations: [.video: try UDPAddress(host: call.remoteHost, port: sending.videoPort),
                                                            .audio: try UDPAddress(host: call.remoteHost, port: sending.audioPort)],
                                             keys: keys.map { [.video: $0, .audio: $0] } ?? [:])
        let sender = try MediaSender(configuration: sending, transport: transport, tracks: tracks)
        let receiver = try MediaReceiver(configuration: receiving, transport: transport)
        parts.withLock { $0 = (sender, receiver) }
        // RTP to the receiver, RTCP to both (SR and BYE concern the receiver; RR, NACK, PLI and
        // FIR the sender).
        transport.startDelivering { packet in
            if packet.isRTCP { sender.handleRTCP(packet.bytes) }
            receiver.receive(packet)
        }
        let sent = Mutex<Result<SenderStatistics, any Error>?>(nil)
        let senderDone = DispatchSemaphore(value: 0)
        startThread(named: "media-sender") {
            let result = Result { try sender.run() }
            sent.withLock { $0 = result }
            senderDone.signal()
        }
        let received = try receiver.run()
        sender.stop()
        senderDone.wait()
        videoSocket.stop()
        audioSocket.stop()
        parts.withLock { $0 = (nil, nil) }
        return (try sent.withLock { $0! }.get(), received)
    }

    /// Statistics of the running call, or nil before media starts and after it ends.
    public func statistics() -> (sent: SenderStatistics, received: ReceiverSummary)? {
        guard case let (sender?, receiver?) = parts.withLock({ $0 }) else { return nil }
        return (sender.snapshot(), receiver.snapshot())
    }

    public func stop() {
        let (sender, receiver) = parts.withLock { $0 }
        sender?.stop()
        receiver?.stop()
    }

    deinit {
        videoSocket.close()
        audioSocket.close()
    }
}
