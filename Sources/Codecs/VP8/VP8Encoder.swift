import MediaCore
internal import CVPX

/// Realtime VP8 encoder (libvpx). Bitrate and resolution change on a running encoder; a keyframe
/// can be forced. One owner of one libvpx context; use it from one thread at a time.
public final class VP8Encoder {
    /// RTP's VP8 clock (RFC 7741 §4.1) is also the encoder's timebase, so pts are RTP ticks.
    static let clockRate = 90_000

    public private(set) var configuration: VP8EncoderConfiguration
    private let context: UnsafeMutablePointer<vpx_codec_ctx_t>
    private var config = vpx_codec_enc_cfg_t()
    private let image: UnsafeMutablePointer<vpx_image_t>
    private var keyframeRequested = false
    private var lastPts: Int64 = -1
    private var firstTimestamp: Duration?
    /// Temporal layers: the pattern, and the slot of the next frame in it.
    public let pattern: TemporalPattern
    private var slot = 0

    public init(configuration: VP8EncoderConfiguration) throws(MediaError) {
        try configuration.validate()
        self.configuration = configuration
        pattern = TemporalPattern(layers: configuration.temporalLayers)
        context = .allocate(capacity: 1)
        context.initialize(to: vpx_codec_ctx_t())
        image = .allocate(capacity: 1)
        image.initialize(to: vpx_image_t())
        do {
            try Self.check(cvpx_vp8_enc_config_default(&config), nil, "get VP8 default configuration")
            try start(configuration)
        } catch {
            context.deallocate()
            image.deallocate()
            throw error
        }
    }

    /// Initialises the libvpx context for `c`; on failure nothing is left to destroy.
    private func start(_ c: VP8EncoderConfiguration) throws(MediaError) {
        apply(c, to: &config)
        try Self.check(cvpx_vp8_enc_init(context, &config), context, "initialise VP8 encoder")
        do {
            try Self.check(cvpx_set_cpu_used(context, Int32(c.cpuUsed)), context, "set VP8 cpu-used")
            try Self.check(cvpx_set_static_threshold(context, UInt32(c.staticThreshold)), context, "set VP8 static threshold")
            try Self.check(cvpx_set_noise_sensitivity(context, UInt32(c.noiseSensitivity)), context, "set VP8 noise sensitivity")
            try Self.check(cvpx_set_token_partitions(context, Int32(c.tokenPartitions)), context, "set VP8 token partitions")
            try Self.check(cvpx_set_max_intra_bitrate_pct(context, UInt32(c.maxIntraBitratePercent)), context, "set VP8 max intra bitrate")
        } catch {
            vpx_codec_destroy(context)
            throw error
        }
    }

    deinit {
        vpx_codec_destroy(context)
        context.deallocate()
        image.deallocate()
    }

    private func apply(_ c: VP8EncoderConfiguration, to cfg: inout vpx_codec_enc_cfg_t) {
        cfg.g_w = UInt32(c.width)
        cfg.g_h = UInt32(c.height)
        cfg.g_timebase = vpx_rational(num: 1, den: Int32(Self.clockRate))
        cfg.g_threads = UInt32(c.threads)
        cfg.g_lag_in_frames = 0
        cfg.g_pass = VPX_RC_ONE_PASS
        cfg.g_error_resilient = c.errorResilient ? vpx_codec_er_flags_t(VPX_ERROR_RESILIENT_DEFAULT) : 0
        cfg.rc_end_usage = VPX_CBR
        cfg.rc_target_bitrate = UInt32(c.targetBitrate / 1000)
        cfg.rc_min_quantizer = UInt32(c.minQuantizer)
        cfg.rc_max_quantizer = UInt32(c.maxQuantizer)
        cfg.rc_undershoot_pct = UInt32(c.undershootPercent)
        cfg.rc_overshoot_pct = UInt32(c.overshootPercent)
        cfg.rc_buf_initial_sz = UInt32(c.bufferInitialMs)
        cfg.rc_buf_optimal_sz = UInt32(c.bufferOptimalMs)
        cfg.rc_buf_sz = UInt32(c.bufferSizeMs)
        cfg.rc_dropframe_thresh = UInt32(c.dropFrameThreshold)
        cfg.kf_mode = VPX_KF_AUTO
        cfg.kf_min_dist = 0
        cfg.kf_max_dist = UInt32(c.keyframeInterval)
        applyLayers(targetBitrate: c.targetBitrate, to: &cfg)
    }

    /// The layers' rate split and cadence for libvpx's rate control (its per-layer budgets).
    private func applyLayers(targetBitrate: Int, to cfg: inout vpx_codec_enc_cfg_t) {
        guard pattern.layers > 1 else { return }
        cfg.ts_number_layers = UInt32(pattern.layers)
        cfg.ts_periodicity = UInt32(pattern.slots.count)
        let kbps = pattern.cumulativeShare.map { UInt32((Double(targetBitrate) * $0 / 1000).rounded()) }
        let decimators = (0..<pattern.layers).map { layer in UInt32(pattern.slots.count / pattern.slots.filter { $0.layer <= layer }.count) }
        withUnsafeMutableBytes(of: &cfg.ts_target_bitrate) { raw in
            for (i, v) in kbps.enumerated() { raw.storeBytes(of: v, toByteOffset: i * 4, as: UInt32.self) }
        }
        withUnsafeMutableBytes(of: &cfg.ts_rate_decimator) { raw in
            for (i, v) in decimators.enumerated() { raw.storeBytes(of: v, toByteOffset: i * 4, as: UInt32.self) }
        }
        withUnsafeMutableBytes(of: &cfg.ts_layer_id) { raw in
            for (i, s) in pattern.slots.enumerated() { raw.storeBytes(of: UInt32(s.layer), toByteOffset: i * 4, as: UInt32.self) }
        }
    }

    /// Changes the target bitrate of the running encoder; the next frame is encoded at the new rate.
    public func setTargetBitrate(_ bitsPerSecond: Int) throws(MediaError) {
        var next = configuration
        next.targetBitrate = bitsPerSecond
        try next.validate()
        var cfg = config
        cfg.rc_target_bitrate = UInt32(bitsPerSecond / 1000)
        applyLayers(targetBitrate: bitsPerSecond, to: &cfg)
        try Self.check(vpx_codec_enc_config_set(context, &cfg), context, "set VP8 bitrate \(bitsPerSecond) bit/s")
        config = cfg
        configuration = next
    }

    /// Changes the picture size: restarts libvpx's context with the rate settings in force, and
    /// the next frame is a keyframe. A restart rather than a reconfiguration because the rate
    /// controller's history belongs to the old size: after a step down under congestion it kept
    /// the old quantizer and sent frames of 8-10 kB at a 230 kbit/s target for a second.
    public func setResolution(width: Int, height: Int) throws(MediaError) {
        guard width != configuration.width || height != configuration.height else { return }
        var next = configuration
        next.width = width
        next.height = height
        try next.validate()
        vpx_codec_destroy(context)
        do {
            try start(next)
        } catch {
            // Leave a working encoder at the old size rather than a destroyed context.
            try start(configuration)
            throw error
        }
        configuration = next
        keyframeRequested = true
    }

    /// Makes the next encoded frame a keyframe (after a PLI/FIR or a camera mode change).
    public func requestKeyframe() { keyframeRequested = true }

    /// Encodes one picture. Returns the frames libvpx produced for it: usually one, none when the
    /// rate controller drops the picture. `time` is when the picture is shown, if not its own
    /// timestamp: libvpx sizes each frame from the time between pictures, so a caller that
    /// skips pictures of a source whose timestamps repeat (a looping file) must pass real times,
    /// or every picture gets one nominal interval and half the budget at half the frame rate.
    public func encode(_ frame: VideoFrame, at time: Duration? = nil, forceKeyframe: Bool = false) throws(MediaError) -> [EncodedVideoFrame] {
        guard frame.width == configuration.width, frame.height == configuration.height else {
            throw MediaError(.invalidArgument, "VP8 encode",
                             "frame is \(frame.width)x\(frame.height) but the encoder is set to \(configuration.width)x\(configuration.height); call setResolution first")
        }
        let nominal = Int64(Self.clockRate / configuration.frameRate)
        let pts = nextPts(for: time ?? frame.timestamp, nominal: nominal)
        var flags: vpx_enc_frame_flags_t = 0
        let key = forceKeyframe || keyframeRequested
        if key { flags |= cvpx_flag_force_keyframe() }
        keyframeRequested = false
        // A keyframe starts the pattern again: it is layer 0's.
        if key { slot = 0 }
        let current = pattern.slots[slot % pattern.slots.count]
        if pattern.layers > 1 {
            flags |= cvpx_layer_flags(current.refersToGolden ? 1 : 0, current.updatesLast ? 1 : 0, current.updatesGolden ? 1 : 0)
            try Self.check(cvpx_set_temporal_layer_id(context, Int32(current.layer)), context, "set VP8 temporal layer")
        }
        slot = (slot + 1) % pattern.slots.count

        let result: vpx_codec_err_t = frame.withPlanes { yp, up, vp in
            vpx_img_wrap(image, VPX_IMG_FMT_I420, UInt32(frame.width), UInt32(frame.height), 1, UnsafeMutablePointer(mutating: yp))
            image.pointee.planes.0 = UnsafeMutablePointer(mutating: yp)
            image.pointee.planes.1 = UnsafeMutablePointer(mutating: up)
            image.pointee.planes.2 = UnsafeMutablePointer(mutating: vp)
            image.pointee.stride.0 = Int32(frame.strideY)
            image.pointee.stride.1 = Int32(frame.strideU)
            image.pointee.stride.2 = Int32(frame.strideV)
            return vpx_codec_encode(context, image, pts, UInt(nominal), flags, cvpx_deadline_realtime())
        }
        try Self.check(result, context, "VP8 encode")
        var frames = drain(timestamp: frame.timestamp)
        guard pattern.layers > 1 else { return frames }
        for i in frames.indices {
            if frames[i].isKeyframe {
                // An automatic keyframe mid-pattern is layer 0's too; the pattern goes on after it.
                frames[i].temporalLayer = 0
                frames[i].layerSync = true
                slot = 1 % pattern.slots.count
            } else {
                frames[i].temporalLayer = current.layer
                frames[i].layerSync = current.layer > 0 && current.isSync
            }
        }
        return frames
    }

    private func nextPts(for timestamp: Duration, nominal: Int64) -> Int64 {
        let first = firstTimestamp ?? timestamp
        if firstTimestamp == nil { firstTimestamp = timestamp }
        let elapsed = timestamp - first
        let ticks = elapsed.components.seconds * Int64(Self.clockRate)
            + elapsed.components.attoseconds / (1_000_000_000_000_000_000 / Int64(Self.clockRate))
        // Sources without real timestamps (or with repeats) still get strictly rising pts.
        let pts = ticks > lastPts ? ticks : lastPts + nominal
        lastPts = pts
        return pts
    }

    private func drain(timestamp: Duration) -> [EncodedVideoFrame] {
        var frames: [EncodedVideoFrame] = []
        var iterator: vpx_codec_iter_t? = nil
        while let packet = vpx_codec_get_cx_data(context, &iterator) {
            guard cvpx_pkt_is_frame(packet) != 0, let buffer = cvpx_pkt_frame_buf(packet) else { continue }
            let bytes = Array(UnsafeRawBufferPointer(start: buffer, count: cvpx_pkt_frame_size(packet)))
            var quantizer: Int32 = -1
            _ = cvpx_get_last_quantizer(context, &quantizer)
            frames.append(EncodedVideoFrame(data: bytes, isKeyframe: cvpx_pkt_frame_is_key(packet) != 0,
                                            quantizer: Int(quantizer), width: configuration.width,
                                            height: configuration.height, timestamp: timestamp))
        }
        return frames
    }

    static func check(_ result: vpx_codec_err_t, _ context: UnsafeMutablePointer<vpx_codec_ctx_t>?, _ operation: String) throws(MediaError) {
        guard result != VPX_CODEC_OK else { return }
        var detail = "libvpx: \(String(cString: vpx_codec_err_to_string(result)))"
        if let context, let extra = vpx_codec_error_detail(context) {
            detail += " (\(String(cString: extra)))"
        }
        throw MediaError(result == VPX_CODEC_INVALID_PARAM ? .invalidArgument : .library, operation, detail)
    }
}
