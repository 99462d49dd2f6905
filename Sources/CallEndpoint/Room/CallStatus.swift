/// One second of a running call, for the live status line and the JSON stats lines.
public struct CallStatus: Sendable, Codable, Equatable {
    public var seconds: Double
    public var participant: String
    public var sentVideoKbps: Double
    public var sentAudioKbps: Double
    public var receivedFps: Double
    public var framesDecoded: Int
    /// Size of the video we send and of the video we receive.
    public var sentResolution: String
    public var resolution: String
    /// Fraction lost (percent) the peer reported for our video, from its receiver reports.
    public var lossPercent: Double?
    public var rttMs: Double?
    public var audioConcealed: Int
    public var latencyMs: Double?
    /// Auto mode: the bandwidth estimate, the video target and mode, and the last decision.
    public var estimateKbps: Int?
    public var videoTargetKbps: Int?
    public var mode: String?
    public var lastDecision: EncodingDecision?
    /// The ICE candidate pair media flows over ("host udp 10.0.0.2:5000 -> srflx 203.0.113.7:6000").
    public var candidatePair: String?
    /// Media packets not sent since the start: no working path (an outage), or the socket refused
    /// them (ENETUNREACH, EHOSTUNREACH, EPERM, ...). Sending goes on either way.
    public var sendErrors = 0
    /// Silences of the peer longer than 4 s since the start (the call went on through each).
    public var outages = 0
    /// ICE restarts since the start (after long outages and local address changes).
    public var iceRestarts = 0
    /// Lip sync: how much later the peer's picture is shown than its sound (ms, from its sender
    /// reports; positive: picture late), and what is held back to cancel it.
    public var avOffsetMs: Double?
    /// Capture-to-playout of the sound in this interval (ms), where the peer's audio carries the
    /// synthetic tone's timing marks; `latencyMs` is the same for the picture.
    public var audioLatencyMs: Double?
    /// Pictures that came 300 ms or more after the one before, since the start.
    public var freezes = 0
    /// The longest of those waits that ended in this interval (ms); nil when none did.
    public var longestFreezeMs: Double?
    public var videoHoldMs: Double?
    public var audioHoldMs: Double?
    /// Transport-cc feedback packets received from the peer since the start (the estimator's input).
    public var transportFeedback = 0
    /// Pictures the decoder refused since the start.
    public var decodeErrors = 0
    /// Network quality, 0-5, of what we send (the peer's reported loss, the round trip, the
    /// estimate against what our mode needs) and of what we receive (our loss, jitter, freezes,
    /// the round trip): see `NetworkQuality`.
    public var qualitySent: Double?
    public var qualityReceived: Double?
    /// Voice processing (`--voice`): the echo canceller's return loss enhancement (dB, its
    /// long-term average), the speaker-to-microphone delay it works with (ms, measured from the
    /// signals), and whether the microphone's last block had speech.
    public var echoERLEdB: Int?
    public var echoDelayMs: Int?
    public var voiceActive: Bool?
    /// Sound card streams restarted by an xrun under voice processing (each makes the echo
    /// delay be found again).
    public var echoRestarts: Int?
    /// Why this side's camera is gone, while it is (black pictures are sent meanwhile).
    public var cameraLost: String?
    /// What the peer says of its video source while it says anything (its camera is lost).
    public var peerVideoNote: String?
    /// Where audio goes ("plughw:CARD=USB,DEV=0 -> plughw:CARD=Loopback,DEV=0": microphone ->
    /// speaker) and how often the devices changed it by themselves (plug events) since the start.
    public var audioRoute: String?
    public var audioRouteChanges = 0
    /// Where each stream's latency went in this interval (ms, means per hop; `LatencyBudget`):
    /// in what we send (capture, encode, pacing) and in what we receive (network: half the round
    /// trip, jitter buffer, decode, playout). The peer's line holds the other half of each stream.
    public var sentBudgetMs: StreamBudgets?
    public var receivedBudgetMs: StreamBudgets?
    /// Pictures given to this side's video encoder since the start, and the camera's own H.264
    /// frames sent as they came (nil unless the camera is passed through).
    public var encoderCalls = 0
    public var framesPassedThrough: Int?

    public struct StreamBudgets: Sendable, Codable, Equatable {
        public var video: [String: Double]
        public var audio: [String: Double]

        /// The sum of a stream's hops (ms).
        public func total(video: Bool) -> Double { (video ? self.video : audio).values.reduce(0, +) }
    }

    /// The one-line form for a terminal.
    public var line: String {
        var parts = [seconds.fixed(1).leftPadded(to: 5) + "s " + participant,
                     "sent \(sentVideoKbps.fixed(0)) kbit/s video \(sentAudioKbps.fixed(0)) audio",
                     "sent \(sentResolution) | recv \(receivedFps.fixed(1)) fps \(resolution)"]
        if let lossPercent { parts.append("loss \(lossPercent.fixed(1)) %") }
        if let rttMs { parts.append("RTT \(rttMs.fixed(1)) ms") }
        if let latencyMs { parts.append("latency \(latencyMs.fixed(0)) ms") }
        if let estimateKbps { parts.append("estimate \(estimateKbps) kbit/s\(mode.map { " " + $0 } ?? "")") }
        if let avOffsetMs { parts.append("A/V \(avOffsetMs.signedFixed(0)) ms") }
        if let qualitySent, let qualityReceived { parts.append("quality sent \(qualitySent.fixed(1)) recv \(qualityReceived.fixed(1))") }
        if let echoDelayMs { parts.append("echo \(echoDelayMs) ms\(echoERLEdB.map { ", ERLE \($0) dB" } ?? "")") }
        if let cameraLost { parts.append("camera lost: \(cameraLost)") }
        if let peerVideoNote { parts.append("peer: \(peerVideoNote)") }
        if let candidatePair { parts.append(candidatePair) }
        if outages > 0 || sendErrors > 0 { parts.append("outages \(outages), not sent \(sendErrors)") }
        return parts.joined(separator: " | ")
    }
}

import Dispatch
import FoundationEssentials
import Glibc
import MediaCore

extension CallStatus {
    /// The status between two snapshots one interval apart.
    static func between(_ before: (sent: SenderStatistics, received: ReceiverSummary)?, _ after: (sent: SenderStatistics, received: ReceiverSummary),
                        participant: String) -> CallStatus {
        let interval = max(0.001, (after.sent.elapsed - (before?.sent.elapsed ?? .zero)).inSeconds)
        let videoBytes = after.sent.videoBytes - (before?.sent.videoBytes ?? 0)
        let audioBytes = after.sent.audioBytes - (before?.sent.audioBytes ?? 0)
        let frames = after.received.framesDecoded - (before?.received.framesDecoded ?? 0)
        let newLatencies = before.map { after.received.videoLatencyMs.subtracting($0.received.videoLatencyMs) } ?? after.received.videoLatencyMs
        let newAudio = before.map { after.received.audioLatencyMs.subtracting($0.received.audioLatencyMs) } ?? after.received.audioLatencyMs
        let rtt = after.sent.roundTripTime.map { $0.inSeconds * 1000 }
        let lost = Double(after.received.videoPacketsLost - (before?.received.videoPacketsLost ?? 0))
        let arrived = Double(after.received.videoPackets - (before?.received.videoPackets ?? 0))
        let receivedLoss = lost + arrived > 0 ? max(0, lost) / (max(0, lost) + arrived) * 100 : 0
        let sentVideo = after.sent.videoBudget.subtracting(before?.sent.videoBudget ?? LatencyBudget())
        let sentAudio = after.sent.audioBudget.subtracting(before?.sent.audioBudget ?? LatencyBudget())
        var receivedVideo = after.received.videoBudget.subtracting(before?.received.videoBudget ?? LatencyBudget())
        var receivedAudio = after.received.audioBudget.subtracting(before?.received.audioBudget ?? LatencyBudget())
        if let roundTrip = after.sent.roundTripTime {
            if receivedVideo.count(.decode) > 0 { receivedVideo.add(.network, roundTrip / 2) }
            if receivedAudio.count(.decode) > 0 { receivedAudio.add(.network, roundTrip / 2) }
        }
        var status = CallStatus(seconds: after.sent.elapsed.inSeconds, participant: participant,
                          sentVideoKbps: Double(videoBytes * 8) / interval / 1000, sentAudioKbps: Double(audioBytes * 8) / interval / 1000,
                          receivedFps: Double(frames) / interval, framesDecoded: after.received.framesDecoded,
                          sentResolution: size(after.sent.videoWidth, after.sent.videoHeight),
                          resolution: size(after.received.videoWidth, after.received.videoHeight),
                          lossPercent: after.sent.receiverLossFraction.map { $0 * 100 },
                          rttMs: after.sent.roundTripTime.map { $0.inSeconds * 1000 },
                          audioConcealed: after.received.audioConcealed,
                          latencyMs: newLatencies.percentile(0.5),
                          estimateKbps: after.sent.estimateBitrate.map { $0 / 1000 },
                          videoTargetKbps: after.sent.estimateBitrate == nil ? nil : after.sent.videoTargetBitrate / 1000,
                          mode: after.sent.mode, lastDecision: after.sent.decisions.last,
                          sendErrors: after.sent.sendErrors, outages: after.received.outages,
                          avOffsetMs: after.received.avOffsetMs.map { ($0 * 10).rounded() / 10 },
                          audioLatencyMs: newAudio.percentile(0.5), freezes: after.received.freezes,
                          longestFreezeMs: after.received.recentFreezes.suffix(max(0, after.received.freezes - (before?.received.freezes ?? 0)))
                              .max().map { ($0.inSeconds * 1000).rounded() },
                          videoHoldMs: after.received.avOffsetMs == nil ? nil : after.received.lipSyncHoldMs.video.rounded(),
                          audioHoldMs: after.received.avOffsetMs == nil ? nil : after.received.lipSyncHoldMs.audio.rounded(),
                          transportFeedback: after.sent.transportFeedbackReceived,
                          decodeErrors: after.received.decodeErrors,
                          qualitySent: NetworkQuality.score(lossPercent: (after.sent.receiverLossFraction ?? 0) * 100, rttMs: rtt,
                                                            shortfall: NetworkQuality.shortfall(estimateKbps: after.sent.estimateBitrate.map { $0 / 1000 },
                                                                                                mode: after.sent.mode)),
                          qualityReceived: NetworkQuality.score(lossPercent: receivedLoss, rttMs: rtt, jitterMs: after.received.videoJitterMs,
                                                                freezes: after.received.freezes - (before?.received.freezes ?? 0)))
        status.peerVideoNote = after.received.peerVideoNote
        status.encoderCalls = after.sent.encoderCalls
        if after.sent.framesPassedThrough > 0 { status.framesPassedThrough = after.sent.framesPassedThrough }
        if sentVideo.count(.encode) + sentAudio.count(.encode) > 0 {
            status.sentBudgetMs = StreamBudgets(video: sentVideo.meansMilliseconds, audio: sentAudio.meansMilliseconds)
        }
        if receivedVideo.count(.decode) + receivedAudio.count(.decode) > 0 {
            status.receivedBudgetMs = StreamBudgets(video: receivedVideo.meansMilliseconds, audio: receivedAudio.meansMilliseconds)
        }
        return status
    }

    private static func size(_ width: Int, _ height: Int) -> String { width == 0 ? "-" : "\(width)x\(height)" }

    /// One JSON object, for stats lines when standard output is not a terminal.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

