import MediaCore
/// Settings of a realtime VP8 encoder. Defaults follow what realtime VP8 senders use for calls:
/// CBR, no lag, a fixed speed, error resilience, and a short rate-control buffer (a quarter of a
/// second) so the encoder follows a changing target within a few frames.
public struct VP8EncoderConfiguration: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var frameRate: Int
    /// Target bitrate in bits per second.
    public var targetBitrate: Int
    /// libvpx speed in realtime mode. Negative values (-16 ... -1) fix the speed; 0 ... 16 let the
    /// encoder adapt its speed to a time budget, which on a busy machine can end up slower.
    public var cpuUsed: Int = -6
    public var threads: Int = 1
    /// Error-resilient mode: frames do not depend on probability state of earlier frames, so a
    /// receiver recovers after loss (VPX_ERROR_RESILIENT_DEFAULT).
    public var errorResilient: Bool = true
    /// Largest distance between automatic keyframes, in frames.
    public var keyframeInterval: Int = 3000
    public var minQuantizer: Int = 2
    public var maxQuantizer: Int = 56
    public var undershootPercent: Int = 100
    public var overshootPercent: Int = 15
    /// Rate-control buffer model, in milliseconds of data at the target rate. libvpx keeps the
    /// buffer's level in bits when the target changes, so after a rise the buffer looks short by
    /// (optimal level x the rise) and the encoder undershoots until it has refilled it; after a
    /// fall it looks full and the encoder overshoots. With the 500/600/1000 ms usual for calls a
    /// rise from 0.76 to 1.97 Mbit/s took 1.2 s to reach 90 % (2.4 s to 95 %); with these, 0.4 s.
    public var bufferInitialMs: Int = 100
    public var bufferOptimalMs: Int = 120
    public var bufferSizeMs: Int = 250
    /// Buffer fullness (percent) below which the encoder may drop frames; 0 never drops.
    public var dropFrameThreshold: Int = 0
    public var staticThreshold: Int = 1
    public var noiseSensitivity: Int = 0
    /// log2 of the number of DCT token partitions (0 ... 3).
    public var tokenPartitions: Int = 0
    /// Largest keyframe as a percentage of an average frame at the target rate; 0 is no limit.
    /// A call that changes mode under congestion caps it, so the keyframe does not flood the
    /// bottleneck it is trying to fit.
    public var maxIntraBitratePercent: Int = 0
    /// VP8 temporal layers (1, 2 or 3): with more than one, frames of the upper layers refer only
    /// to lower ones, so a peer on a thin link can be sent the lower layers alone (a lower frame
    /// rate) while one encode serves everyone. See `TemporalPattern`.
    public var temporalLayers: Int = 1

    public init(width: Int, height: Int, frameRate: Int = 30, targetBitrate: Int = 1_000_000) {
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.targetBitrate = targetBitrate
    }

    /// The same settings as `vpxenc` arguments, so a bench can run libvpx's own tool side by side.
    public var vpxencArguments: [String] {
        [
            "--codec=vp8", "--rt", "--cpu-used=\(cpuUsed)", "--threads=\(threads)",
            "--end-usage=cbr", "--target-bitrate=\(targetBitrate / 1000)", "--lag-in-frames=0",
            "--error-resilient=\(errorResilient ? 1 : 0)", "--kf-max-dist=\(keyframeInterval)",
            "--min-q=\(minQuantizer)", "--max-q=\(maxQuantizer)",
            "--undershoot-pct=\(undershootPercent)", "--overshoot-pct=\(overshootPercent)",
            "--buf-initial-sz=\(bufferInitialMs)", "--buf-optimal-sz=\(bufferOptimalMs)", "--buf-sz=\(bufferSizeMs)",
            "--drop-frame=\(dropFrameThreshold)", "--static-thresh=\(staticThreshold)",
            "--noise-sensitivity=\(noiseSensitivity)", "--token-parts=\(tokenPartitions)",
            "--max-intra-rate=\(maxIntraBitratePercent)",
        ]
    }

    func validate() throws(MediaError) {
        func fail(_ detail: String) -> MediaError { MediaError(.invalidArgument, "configure VP8 encoder", detail) }
        guard (2...16384).contains(width), (2...16384).contains(height) else {
            throw fail("size \(width)x\(height); supported: 2 ... 16384 in each dimension")
        }
        guard (1...240).contains(frameRate) else { throw fail("frame rate \(frameRate); supported: 1 ... 240") }
        guard (10_000...100_000_000).contains(targetBitrate) else {
            throw fail("target bitrate \(targetBitrate) bit/s; supported: 10000 ... 100000000")
        }
        guard (-16...16).contains(cpuUsed) else { throw fail("cpu-used \(cpuUsed); supported: -16 ... 16") }
        guard (1...64).contains(threads) else { throw fail("threads \(threads); supported: 1 ... 64") }
        guard (0...63).contains(minQuantizer), (minQuantizer...63).contains(maxQuantizer) else {
            throw fail("quantizer range \(minQuantizer) ... \(maxQuantizer); supported: 0 ≤ min ≤ max ≤ 63")
        }
        guard (0...3).contains(tokenPartitions) else { throw fail("token partitions \(tokenPartitions); supported: 0 ... 3") }
        guard maxIntraBitratePercent >= 0 else { throw fail("max intra bitrate \(maxIntraBitratePercent) %; must be ≥ 0 (0: no limit)") }
        guard (1...3).contains(temporalLayers) else { throw fail("temporal layers \(temporalLayers); supported: 1 ... 3") }
        guard keyframeInterval >= 1 else { throw fail("keyframe interval \(keyframeInterval); must be ≥ 1") }
    }
}

/// One compressed VP8 frame as the encoder produced it.
public struct EncodedVideoFrame: Sendable, Equatable {
    public var data: [UInt8]
    public var isKeyframe: Bool
    /// Quantizer of the frame on libvpx's 0 ... 63 scale (higher is coarser).
    public var quantizer: Int
    public var width: Int
    public var height: Int
    /// Capture time of the picture this frame encodes.
    public var timestamp: Duration
    /// The frame's temporal layer (0 without layers; a keyframe is always 0), and whether it is
    /// a layer sync: it refers only to layer 0, so a peer can start taking its layer with it.
    public var temporalLayer: Int = 0
    public var layerSync: Bool = false

    public init(data: [UInt8], isKeyframe: Bool, quantizer: Int, width: Int, height: Int, timestamp: Duration,
                temporalLayer: Int = 0, layerSync: Bool = false) {
        self.data = data
        self.isKeyframe = isKeyframe
        self.quantizer = quantizer
        self.width = width
        self.height = height
        self.timestamp = timestamp
        self.temporalLayer = temporalLayer
        self.layerSync = layerSync
    }
}

/// How frames take turns in the temporal layers, and what each may refer to (RFC 7741 §4.2's TID
/// and Y). Every layer refers only to layers below it or to itself through a buffer no lower
/// layer reads, so the frames of layers 0 ... k decode without any above k:
/// - two layers, period 2: L0 (refers to and updates LAST), L1 (refers to LAST, updates nothing);
/// - three layers, period 4: L0, L2 (refers to LAST), L1 (refers to LAST, updates GOLDEN),
///   L2 (refers to LAST and GOLDEN).
/// The bitrate goes 60/40 (two) and 40/20/40 (three), as libwebrtc splits it.
public struct TemporalPattern: Sendable, Equatable {
    public struct Slot: Sendable, Equatable {
        public var layer: Int
        public var refersToGolden: Bool
        public var updatesLast: Bool
        public var updatesGolden: Bool
        /// Refers to layer 0 alone.
        public var isSync: Bool { !refersToGolden }
    }
    public let layers: Int
    public let slots: [Slot]
    /// The share of the bitrate layers 0 ... k take together, for each k.
    public let cumulativeShare: [Double]

    public init(layers: Int) {
        self.layers = layers
        switch layers {
        case 2:
            slots = [Slot(layer: 0, refersToGolden: false, updatesLast: true, updatesGolden: false),
                     Slot(layer: 1, refersToGolden: false, updatesLast: false, updatesGolden: false)]
            cumulativeShare = [0.6, 1]
        case 3:
            slots = [Slot(layer: 0, refersToGolden: false, updatesLast: true, updatesGolden: false),
                     Slot(layer: 2, refersToGolden: false, updatesLast: false, updatesGolden: false),
                     Slot(layer: 1, refersToGolden: false, updatesLast: false, updatesGolden: true),
                     Slot(layer: 2, refersToGolden: true, updatesLast: false, updatesGolden: false)]
            cumulativeShare = [0.4, 0.6, 1]
        default:
            slots = [Slot(layer: 0, refersToGolden: true, updatesLast: true, updatesGolden: true)]
            cumulativeShare = [1]
        }
    }

    /// The frame rate of layers 0 ... k together, as a fraction of the full rate.
    public func rateFraction(upTo layer: Int) -> Double {
        Double(slots.filter { $0.layer <= layer }.count) / Double(slots.count)
    }
}
