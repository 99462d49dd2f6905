import Devices
import Dispatch
import FoundationEssentials
import Glibc
import RTPTransport

/// A rung of the ladder: what the encoder is fed.
public struct VideoMode: Sendable, Equatable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public var frameRate: Int

    public init(width: Int, height: Int, frameRate: Int) {
        self.width = width
        self.height = height
        self.frameRate = frameRate
    }

    public var description: String { "\(width)x\(height)@\(frameRate)" }

    /// The video bitrate this mode needs to look right in VP8 realtime (0.08 bit per pixel).
    public var neededBitrate: Int { max(60_000, width * height * frameRate * 8 / 100) }
}

/// The modes the automatic encoding mode moves between, best first.
public struct ModeLadder: Sendable, Equatable {
    public var rungs: [VideoMode]
    /// True when the rungs are camera modes to switch to; false when frames are scaled instead.
    public var usesCameraModes: Bool

    public static let standard = [VideoMode(width: 1280, height: 720, frameRate: 30), VideoMode(width: 960, height: 540, frameRate: 30),
                                  VideoMode(width: 640, height: 480, frameRate: 30), VideoMode(width: 480, height: 360, frameRate: 30),
                                  VideoMode(width: 320, height: 240, frameRate: 30), VideoMode(width: 320, height: 240, frameRate: 15)]

    /// The standard rungs a camera really offers (same size, at least the rate), plus its
    /// smallest mode as the floor. A camera that offers only one mode gets a scaled ladder.
    public static func forCamera(_ modes: [CameraMode], native: VideoMode) -> ModeLadder {
        var rungs = standard.filter { rung in
            rung.width <= native.width && rung.height <= native.height
                && modes.contains { $0.width == rung.width && $0.height == rung.height && $0.frameRate.value + 0.5 >= Double(rung.frameRate) }
        }
        if !rungs.contains(native) && !rungs.contains(where: { $0.width * $0.height > native.width * native.height }) {
            rungs.insert(native, at: 0)
        }
        guard rungs.count >= 2 else { return forScaling(native: native) }
        return ModeLadder(rungs: rungs, usesCameraModes: true)
    }

    /// For sources that cannot change mode (the pattern, files, a fixed camera): the native mode
    /// and the standard rungs below it, made by scaling and dropping frames.
    public static func forScaling(native: VideoMode) -> ModeLadder {
        var rungs = [native]
        for rung in standard where rung.width * rung.height < native.width * native.height && rung.width <= native.width && rung.height <= native.height {
            rungs.append(VideoMode(width: rung.width, height: rung.height, frameRate: min(rung.frameRate, native.frameRate)))
        }
        return ModeLadder(rungs: rungs, usesCameraModes: false)
    }
}

/// One change the encoding controller made, as a structured log line.
public struct EncodingDecision: Sendable, Codable, Equatable {
    /// Seconds since the media session started.
    public var time: Double
    /// delay, loss, probe, increase, start (the bandwidth estimator's causes), cpu or qp (the
    /// encoder's own reports) or cap (manual limit).
    public var cause: String
    public var estimateKbps: Int
    /// What changed: video-bitrate, audio-bitrate, audio-packet, fec or mode.
    public var change: String
    public var from: String
    public var to: String

    public var line: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return "encoding: " + ((try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}")
    }
}

/// Turns the bandwidth estimate into encoder settings: the audio bitrate and FEC first (audio
/// is small and matters most), the VP8 target from what is left, and the mode from the ladder
/// with hysteresis: down when the video target has stayed below 70 % of what the current mode
/// needs for `downHold` (at once below 50 %: a capacity drop), never sooner than `downDwell`
/// after the last change; up only when the target has covered 110 % of the next mode's need
/// for `upDwell`. The encoder's reports step the mode down too: when encoding takes more than
/// `cpuLimit` of the frame interval (cause cpu; a small board cannot keep up), or the quantizer
/// stays at `quantizerLimit` or above (cause qp; the rate is too low for the picture size),
/// both over `reportWindow`; the mode then stays at or below the new rung for `cpuCeiling` or
/// `quantizerCeiling` (a qp ceiling lifts early once the target has grown by half), so the
/// bitrate rule does not step straight back up. Pure: time is passed in.
public struct EncodingController: Sendable {
    public let ladder: ModeLadder
    public var maxVideoBitrate: Int
    public var downDwell: Duration = .seconds(1)
    /// How long a target merely below the mode's need (not far below) must last: the estimate
    /// dips for a moment after every probe and at the start.
    public var downHold: Duration = .milliseconds(700)
    public var upDwell: Duration = .seconds(3)
    public var reportWindow: Duration = .seconds(2)
    public var cpuLimit = 0.8
    public var cpuCeiling: Duration = .seconds(30)
    /// Near VP8's maximum quantizer in callend's encoder settings (56).
    public var quantizerLimit = 54.0
    public var quantizerCeiling: Duration = .seconds(20)
    public private(set) var rung = 0
    public private(set) var videoBitrate: Int
    public private(set) var audioBitrate = 32_000
    public private(set) var fecLossPercent = 0
    /// Audio per Opus packet: 10 ms where the path is wide and clean (the latency of a packet's
    /// audio waiting for the packet to fill), 20 ms where it is thin (half the packets' headers:
    /// 24 kbit/s less) or lossy (a lost packet, and the FEC or RED that rebuilds it, covers
    /// twice the audio per header).
    public private(set) var audioPacket = Duration.milliseconds(10)
    static let shortPacketAbove = 600_000
    static let longPacketBelow = 400_000
    public private(set) var decisions: [EncodingDecision] = []
    private var lastModeChange: Duration?
    private var upSince: Duration?
    private var downSince: Duration?
    /// The cut (delay, loss, probe...) behind the current hold: the latest one that was not the
    /// estimator's small increase.
    private var downCause: String?
    private var loggedVideoBitrate: Int
    /// The encoder's reports since the last mode change: time, quantizer, share of the interval.
    private var reports: [(time: Duration, quantizer: Int?, load: Double)] = []
    /// The best rung allowed until a time, after a cpu or qp step down; a qp one also ends when
    /// the video target has grown by half since (the rate, not the picture, was the problem).
    private var ceiling: (rung: Int, until: Duration, liftAbove: Int?)?
    private var lastEstimate = 0
    /// The last time the loss called for FEC: it stays on for `fecHold` after, so a loss rate
    /// near the threshold (or a loss window reset by a cut) does not turn it on and off every
    /// update (a soak at 5 % loss logged 20 such flips a second).
    private var lastLossy: Duration?
    static let fecHold: Duration = .seconds(5)
    /// Audio's packet headers on the wire, bit/s (about 60 bytes a packet with SRTP, UDP and
    /// IP: 24 kbit/s at 50 packets a second, 48 at 100).
    var audioHeaderBitrate: Int { 24_000 * 20 / Int(audioPacket / .milliseconds(1)) }
    /// Earlier packets each audio packet carries again (RED, RFC 2198: one when negotiated):
    /// their bits are audio's too. Without counting them the call sent 5 % over a 600 kbit/s
    /// bottleneck, and its queue stood at 60-70 ms p95 where it had been under 40.
    public var audioRedundancy = 0
    /// FEC packets sent per video packet (ULPFEC): the encoder's share is the video's divided by
    /// one plus this, so that media and its FEC together fit the estimate.
    public var videoProtection = 0.0

    public init(ladder: ModeLadder, maxVideoBitrate: Int, startBitrate: Int) {
        self.ladder = ladder
        self.maxVideoBitrate = maxVideoBitrate
        videoBitrate = min(maxVideoBitrate, startBitrate)
        loggedVideoBitrate = videoBitrate
        if startBitrate < Self.shortPacketAbove { audioPacket = .milliseconds(20) }
        // Start on the best rung the start rate allows.
        while rung < ladder.rungs.count - 1 && Double(videoBitrate) < 0.7 * Double(ladder.rungs[rung].neededBitrate) { rung += 1 }
    }

    public var mode: VideoMode { ladder.rungs[rung] }

    /// Applies an estimate (bits per second) and the loss the estimator sees; returns what changed.
    @discardableResult
    public mutating func update(estimate: Int, lossFraction: Double, cause: String, now: Duration) -> [EncodingDecision] {
        var made: [EncodingDecision] = []
        lastEstimate = estimate
        func record(_ change: String, _ from: String, _ to: String, cause: String = cause) {
            made.append(EncodingDecision(time: now.inSeconds, cause: cause,
                                         estimateKbps: estimate / 1000, change: change, from: from, to: to))
        }
        let audio = estimate < 150_000 ? 16_000 : estimate < 300_000 ? 24_000 : 32_000
        if audio != audioBitrate {
            record("audio-bitrate", "\(audioBitrate / 1000)k", "\(audio / 1000)k")
            audioBitrate = audio
        }
        var fec = lossFraction > 0.01 ? min(30, Int((lossFraction * 100).rounded(.up))) : 0
        if fec > 0 {
            lastLossy = now
        } else if fecLossPercent > 0, let lastLossy, now - lastLossy < Self.fecHold {
            fec = fecLossPercent
        }
        if (fec == 0) != (fecLossPercent == 0) { record("fec", "\(fecLossPercent)%", "\(fec)%") }
        fecLossPercent = fec
        let packet: Duration = fec > 0 || estimate < Self.longPacketBelow ? .milliseconds(20)
            : estimate >= Self.shortPacketAbove ? .milliseconds(10) : audioPacket
        if packet != audioPacket {
            record("audio-packet", "\(Int(audioPacket / .milliseconds(1)))ms", "\(Int(packet / .milliseconds(1)))ms")
            audioPacket = packet
        }
        // The estimate covers everything sent, audio included (it goes through the pacer with
        // transport-wide sequence numbers): audio's share is its bitrate plus its packets' headers
        // (`audioHeaderBitrate`). RTP/SRTP headers
        // take about 5 % of a video stream.
        let video = max(30_000, min(maxVideoBitrate, Int(Double(estimate - audio * (1 + audioRedundancy) - audioHeaderBitrate) * 0.95 / (1 + videoProtection))))
        if video != videoBitrate {
            let step = abs(Double(video - loggedVideoBitrate)) / Double(loggedVideoBitrate)
            // The estimator's small increases and FEC's steps (every few seconds under loss)
            // are logged only when they add up.
            if !["increase", "fec"].contains(cause) || step >= 0.25 {
                record("video-bitrate", "\(loggedVideoBitrate / 1000)k", "\(video / 1000)k")
                loggedVideoBitrate = video
            }
            videoBitrate = video
        }
        let sinceChange = lastModeChange.map { now - $0 } ?? .seconds(3600)
        var target = rung
        while target < ladder.rungs.count - 1 && Double(video) < 0.7 * Double(ladder.rungs[target].neededBitrate) { target += 1 }
        if target > rung {
            upSince = nil
            let since = downSince ?? now
            downSince = since
            // A step taken after the hold is for the cut that began it, not for the small
            // increase that happens to come when the hold ends.
            if downCause == nil || cause != "increase" { downCause = cause }
            let farBelow = Double(video) < 0.5 * Double(ladder.rungs[rung].neededBitrate)
            if sinceChange >= downDwell && (farBelow || now - since >= downHold) {
                downSince = nil
                record("mode", ladder.rungs[rung].description, ladder.rungs[target].description, cause: downCause ?? cause)
                downCause = nil
                rung = target
                lastModeChange = now
            }
        } else if rung > 0 && Double(video) >= 1.1 * Double(ladder.rungs[rung - 1].neededBitrate)
                    && (ceiling.map({ now >= $0.until || rung - 1 >= $0.rung || video > $0.liftAbove ?? .max }) ?? true) {
            downSince = nil
            downCause = nil
            let since = upSince ?? now
            upSince = since
            if now - since >= upDwell && sinceChange >= upDwell {
                record("mode", ladder.rungs[rung].description, ladder.rungs[rung - 1].description)
                rung -= 1
                lastModeChange = now
                upSince = nil
            }
        } else {
            upSince = nil
            downSince = nil
            downCause = nil
        }
        keep(made)
        return made
    }

    /// One encoded picture: its quantizer (nil when libvpx dropped it) and how long encoding it
    /// took against the mode's frame interval. Returns the mode change it caused, if any.
    @discardableResult
    public mutating func encoderReport(quantizer: Int?, encodeTime: Duration, now: Duration) -> [EncodingDecision] {
        let interval = Duration.microseconds(1_000_000 / Int64(max(1, mode.frameRate)))
        reports.append((now, quantizer, encodeTime / interval))
        reports.removeAll { $0.time < now - reportWindow }
        guard let first = reports.first?.time, now - first >= reportWindow * 9 / 10, rung < ladder.rungs.count - 1,
              lastModeChange.map({ now - $0 >= downDwell }) ?? true else { return [] }
        let load = reports.map(\.load).reduce(0, +) / Double(reports.count)
        let quantizers = reports.compactMap(\.quantizer)
        let quantizer = quantizers.isEmpty ? 0 : Double(quantizers.reduce(0, +)) / Double(quantizers.count)
        let cause: String
        let hold: Duration
        if load > cpuLimit {
            (cause, hold) = ("cpu", cpuCeiling)
        } else if quantizer >= quantizerLimit {
            (cause, hold) = ("qp", quantizerCeiling)
        } else {
            return []
        }
        let decision = EncodingDecision(time: now.inSeconds, cause: cause, estimateKbps: lastEstimate / 1000, change: "mode",
                                        from: ladder.rungs[rung].description, to: ladder.rungs[rung + 1].description)
        rung += 1
        lastModeChange = now
        ceiling = (rung, now + hold, cause == "qp" ? videoBitrate * 3 / 2 : nil)
        upSince = nil
        downSince = nil
        keep([decision])
        return [decision]
    }

    /// Records decisions; a mode change starts the encoder's reports afresh (they were about the
    /// old mode).
    private mutating func keep(_ made: [EncodingDecision]) {
        decisions += made
        if decisions.count > 500 { decisions.removeFirst(decisions.count - 500) }
        if made.contains(where: { $0.change == "mode" }) { reports = [] }
    }
}
