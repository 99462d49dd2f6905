internal import CV4L2
import FoundationEssentials
import MediaCore
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// A video encoder in the kernel: a V4L2 memory-to-memory device driven through the stateful
/// encoder API (the Raspberry Pi 4's `bcm2835-codec` at /dev/video11 encodes H.264 this way;
/// the kernel's `vicodec` encodes FWHT through the same queues). Raw I420 pictures go into its
/// OUTPUT queue, coded frames come out of its CAPTURE queue, both multiplanar with one plane and
/// memory-mapped. One picture is in flight at a time; `encodePicture` waits for the frame it gives.
///
/// Steering, through the device's controls where it has them:
/// - the rate: V4L2_CID_MPEG_VIDEO_BITRATE (`setBitrate` says whether it took);
/// - a keyframe: V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME, else the API's own reset: the CAPTURE
///   queue stopped and started again, after which the encoder starts a new stream;
/// - a new size: both queues stopped, their buffers freed and the formats set anew.
public final class MemoryToMemoryEncoder {
    /// One coded frame as the device gave it.
    public struct Frame: Sendable, Equatable {
        public var data: [UInt8]
        public var isKeyframe: Bool
        public var width: Int
        public var height: Int
        /// The picture's capture time (the device copies it from the picture's buffer).
        public var timestamp: Duration
    }

    public let path: String
    /// The coded format's FourCC, as the CAPTURE queue names it ("H264", "FWHT").
    public let codedFormat: String
    public private(set) var width: Int
    public private(set) var height: Int
    public let hasBitrateControl: Bool
    public let hasKeyframeControl: Bool
    /// Keyframes made by stopping and starting the CAPTURE queue (no keyframe control).
    public private(set) var streamResets = 0

    private let fd: Int32
    private let codedFourCC: UInt32
    private let framesPerSecond: Int
    private var stride = 0
    private var codedWidth = 0
    private var codedHeight = 0
    private var rawSize = 0
    private var codedSize = 0
    private var rawBuffers: [(base: UnsafeMutableRawPointer, length: Int)] = []
    private var codedBuffers: [(base: UnsafeMutableRawPointer, length: Int)] = []
    private var freeRaw: [Int] = []
    private var keyframeWanted = false
    private var streaming = false

    private static let outputType = cv4l2_buf_type_output_mplane()
    private static let captureType = cv4l2_buf_type_capture_mplane()

    /// Opens the encoder at `path` for `codedFormat` ("H264"), pictures of `width`x`height`.
    public init(path: String, codedFormat: String, width: Int, height: Int, framesPerSecond: Int = 30, bitrate: Int? = nil) throws(DeviceError) {
        guard let fourCC = PixelFormat.fourCC(codedFormat) else {
            throw DeviceError(operation: "open encoder \(path)", detail: "\(codedFormat) is not a FourCC")
        }
        let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw DeviceError(operation: "open encoder \(path)", errno: errno) }
        var capability = v4l2_capability()
        guard cv4l2_m2m_querycap(fd, &capability) == 0 else {
            let code = errno
            close(fd)
            throw DeviceError(operation: "query \(path)", errno: code)
        }
        let caps = capability.capabilities & cv4l2_cap_device_caps() != 0 ? capability.device_caps : capability.capabilities
        guard caps & cv4l2_cap_m2m_mplane() != 0, caps & cv4l2_cap_streaming() != 0 else {
            close(fd)
            throw DeviceError(operation: "open encoder \(path)", detail: "not a multiplanar memory-to-memory device with streaming")
        }
        guard Self.formats(fd, Self.captureType).contains(fourCC) else {
            close(fd)
            throw DeviceError(operation: "open encoder \(path)", detail: "it does not encode \(codedFormat)")
        }
        guard Self.formats(fd, Self.outputType).contains(cv4l2_pix_fmt_yuv420()) else {
            close(fd)
            throw DeviceError(operation: "open encoder \(path)", detail: "it does not take YU12 (I420) pictures")
        }
        self.fd = fd
        self.path = path
        self.codedFormat = codedFormat
        self.codedFourCC = fourCC
        self.width = width
        self.height = height
        self.framesPerSecond = framesPerSecond
        hasBitrateControl = cv4l2_m2m_has_control(fd, cv4l2_cid_video_bitrate()) != 0
        hasKeyframeControl = cv4l2_m2m_has_control(fd, cv4l2_cid_force_key_frame()) != 0
        do {
            try configure()
            if let bitrate { _ = try setBitrate(bitrate) }
        } catch {
            release()
            close(fd)
            throw error
        }
    }

    deinit {
        release()
        close(fd)
    }

    /// A memory-to-memory encoder on this machine: what `callend devices` lists.
    public struct Description: Codable, Sendable, Equatable {
        public var path: String
        public var card: String
        public var driver: String
        /// The coded formats it gives (its CAPTURE queue's FourCCs), such as H264 or FWHT.
        public var encodes: [String]
    }

    /// The multiplanar memory-to-memory devices under /dev that encode I420 pictures (YU12 on
    /// their OUTPUT queue) into a compressed format: a board's H.264 block, the kernel's vicodec.
    public static func list(directory: String = "/dev") -> [Description] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("video") }.sorted { $0.count != $1.count ? $0.count < $1.count : $0 < $1 }.compactMap { name in
            let path = directory + "/" + name
            let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var capability = v4l2_capability()
            guard cv4l2_m2m_querycap(fd, &capability) == 0, capability.device_caps & cv4l2_cap_m2m_mplane() != 0 else { return nil }
            let raw = formats(fd, outputType)
            guard raw.contains(cv4l2_pix_fmt_yuv420()) else { return nil }
            // What it gives that it does not take: a scaler or converter gives none.
            let coded = formats(fd, captureType).filter { !raw.contains($0) }.map(CameraDevices.fourCC)
            guard !coded.isEmpty else { return nil }
            return Description(path: path, card: CameraDevices.text(capability.card), driver: CameraDevices.text(capability.driver), encodes: coded)
        }
    }

    /// The memory-to-memory devices on this machine that encode `codedFormat` from I420.
    public static func devices(encoding codedFormat: String) -> [String] {
        list().filter { $0.encodes.contains(codedFormat) }.map(\.path)
    }

    /// Sets the encoder's bitrate control; false when it has none (the rate is then the device's).
    @discardableResult
    public func setBitrate(_ bitsPerSecond: Int) throws(DeviceError) -> Bool {
        guard hasBitrateControl else { return false }
        guard cv4l2_m2m_set_control(fd, cv4l2_cid_video_bitrate(), Int32(clamping: bitsPerSecond)) == 0 else {
            throw DeviceError(operation: "set the bitrate of \(path) to \(bitsPerSecond)", errno: errno)
        }
        return true
    }

    /// The next picture is coded as a keyframe.
    public func requestKeyframe() { keyframeWanted = true }

    /// A new picture size: both queues are stopped and set up again; the next frame is a keyframe.
    public func setSize(width: Int, height: Int) throws(DeviceError) {
        guard width != self.width || height != self.height else { return }
        release()
        self.width = width
        self.height = height
        try configure()
    }

    /// Encodes one picture (scaled by the caller to the encoder's size) and returns the frames the
    /// device gave for it: one, or none while it holds pictures back.
    public func encodePicture(_ picture: VideoFrame, forceKeyframe: Bool = false) throws(DeviceError) -> [Frame] {
        guard picture.width == width, picture.height == height else {
            throw DeviceError(operation: "encode on \(path)", detail: "a \(picture.width)x\(picture.height) picture for a \(width)x\(height) encoder")
        }
        if forceKeyframe || keyframeWanted {
            keyframeWanted = false
            try startKeyframe()
        }
        try reclaimRaw(wait: freeRaw.isEmpty)
        guard let index = freeRaw.popLast() else {
            throw DeviceError(operation: "encode on \(path)", detail: "the device kept every picture buffer for 2 s")
        }
        copy(picture, into: rawBuffers[index].base)
        let micros = Int(picture.timestamp / .microseconds(1))
        guard cv4l2_m2m_queue(fd, Self.outputType, UInt32(index), UInt32(rawSize), micros / 1_000_000, micros % 1_000_000) == 0 else {
            let code = errno
            freeRaw.append(index)
            throw DeviceError(operation: "queue a picture on \(path)", errno: code)
        }
        var frames: [Frame] = []
        // The frame for this picture; then whatever else is ready.
        var wait = true
        while let frame = try dequeueCoded(waitMs: wait ? 2000 : 0) {
            frames.append(frame)
            wait = false
        }
        return frames
    }

    // MARK: Queues

    private func configure() throws(DeviceError) {
        var w: UInt32 = 0, h: UInt32 = 0, lineBytes: UInt32 = 0, size: UInt32 = 0
        // The coded side first, as the API orders it; then the raw side at the coded size.
        guard cv4l2_m2m_set_format(fd, Self.captureType, UInt32(width), UInt32(height), codedFourCC, UInt32(width * height * 3 / 2 + 4096), &w, &h, &lineBytes, &size) == 1 else {
            throw DeviceError(operation: "set \(codedFormat) \(width)x\(height) on \(path)", errno: errno)
        }
        codedSize = Int(size)
        guard cv4l2_m2m_set_format(fd, Self.outputType, UInt32(width), UInt32(height), cv4l2_pix_fmt_yuv420(), 0, &w, &h, &lineBytes, &size) == 1 else {
            throw DeviceError(operation: "set YU12 \(width)x\(height) pictures on \(path)", errno: errno)
        }
        // A device may code a larger, aligned size (a height of 16s, a smallest width): the picture
        // goes top left, its last row and column repeated into the margin, and the crop says
        // which part is seen.
        guard Int(w) >= width, Int(h) >= height, Int(lineBytes) >= Int(w), Int(size) >= Int(lineBytes) * Int(h) * 3 / 2 else {
            throw DeviceError(operation: "set YU12 \(width)x\(height) pictures on \(path)", detail: "the device offers \(w)x\(h), \(lineBytes) bytes a line, \(size) bytes")
        }
        codedWidth = Int(w)
        codedHeight = Int(h)
        stride = Int(lineBytes)
        rawSize = Int(size)
        if codedWidth != width || codedHeight != height, cv4l2_m2m_set_crop(fd, UInt32(width), UInt32(height)) != 0 {
            throw DeviceError(operation: "show \(width)x\(height) of the \(w)x\(h) pictures of \(path)", errno: errno)
        }
        _ = cv4l2_m2m_frame_rate(fd, 1, UInt32(framesPerSecond))
        rawBuffers = try mapBuffers(Self.outputType, count: 2)
        codedBuffers = try mapBuffers(Self.captureType, count: 4)
        freeRaw = Array(rawBuffers.indices)
        for index in codedBuffers.indices {
            guard cv4l2_m2m_queue(fd, Self.captureType, UInt32(index), 0, 0, 0) == 0 else {
                throw DeviceError(operation: "queue a frame buffer on \(path)", errno: errno)
            }
        }
        for type in [Self.outputType, Self.captureType] where cv4l2_m2m_stream(fd, type, 1) != 0 {
            throw DeviceError(operation: "start streaming on \(path)", errno: errno)
        }
        streaming = true
    }

    private func mapBuffers(_ type: UInt32, count: UInt32) throws(DeviceError) -> [(base: UnsafeMutableRawPointer, length: Int)] {
        var granted: UInt32 = 0
        guard cv4l2_m2m_request_buffers(fd, type, count, &granted) == 0, granted > 0 else {
            throw DeviceError(operation: "request buffers on \(path)", errno: errno)
        }
        var out: [(base: UnsafeMutableRawPointer, length: Int)] = []
        for index in 0..<granted {
            var offset: UInt32 = 0, length: UInt32 = 0
            guard cv4l2_m2m_query_buffer(fd, type, index, &offset, &length) == 0 else {
                throw DeviceError(operation: "query buffer \(index) on \(path)", errno: errno)
            }
            let base = mmap(nil, Int(length), PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset))
            guard let base, base != MAP_FAILED else { throw DeviceError(operation: "map buffer \(index) of \(path)", errno: errno) }
            out.append((base, Int(length)))
            // Mapped now, so that release() unmaps what was mapped even if a later one fails.
            if type == Self.outputType { rawBuffers = out } else { codedBuffers = out }
        }
        return out
    }

    private func release() {
        if streaming {
            for type in [Self.outputType, Self.captureType] { _ = cv4l2_m2m_stream(fd, type, 0) }
            streaming = false
        }
        for buffer in rawBuffers + codedBuffers { munmap(buffer.base, buffer.length) }
        rawBuffers = []
        codedBuffers = []
        freeRaw = []
        var granted: UInt32 = 0
        for type in [Self.outputType, Self.captureType] { _ = cv4l2_m2m_request_buffers(fd, type, 0, &granted) }
    }

    /// A keyframe next: the control, else a reset of the CAPTURE queue (the stateful encoder
    /// API's way to start a stream that refers to nothing before it).
    private func startKeyframe() throws(DeviceError) {
        if hasKeyframeControl {
            guard cv4l2_m2m_set_control(fd, cv4l2_cid_force_key_frame(), 1) == 0 else {
                throw DeviceError(operation: "force a keyframe on \(path)", errno: errno)
            }
            return
        }
        guard cv4l2_m2m_stream(fd, Self.captureType, 0) == 0 else { throw DeviceError(operation: "stop the frames of \(path)", errno: errno) }
        for index in codedBuffers.indices where cv4l2_m2m_queue(fd, Self.captureType, UInt32(index), 0, 0, 0) != 0 {
            throw DeviceError(operation: "queue a frame buffer on \(path)", errno: errno)
        }
        guard cv4l2_m2m_stream(fd, Self.captureType, 1) == 0 else { throw DeviceError(operation: "restart the frames of \(path)", errno: errno) }
        streamResets += 1
    }

    /// Takes back the picture buffers the device is done with; with `wait`, waits for one.
    private func reclaimRaw(wait: Bool) throws(DeviceError) {
        var deadline = wait ? MediaTime.now + .seconds(2) : MediaTime.now
        while true {
            var index: UInt32 = 0, used: UInt32 = 0, flags: UInt32 = 0
            var seconds = 0, micros = 0
            if cv4l2_m2m_dequeue(fd, Self.outputType, &index, &used, &seconds, &micros, &flags) == 0 {
                freeRaw.append(Int(index))
                deadline = MediaTime.now
                continue
            }
            guard errno == EAGAIN else { throw DeviceError(operation: "take back a picture from \(path)", errno: errno) }
            let left = deadline - MediaTime.now
            if left <= .zero { return }
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&pfd, 1, Int32(max(1, left.inMilliseconds)))
        }
    }

    private func dequeueCoded(waitMs: Int32) throws(DeviceError) -> Frame? {
        if waitMs > 0 {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, waitMs)
        }
        var index: UInt32 = 0, used: UInt32 = 0, flags: UInt32 = 0
        var seconds = 0, micros = 0
        guard cv4l2_m2m_dequeue(fd, Self.captureType, &index, &used, &seconds, &micros, &flags) == 0 else {
            if errno == EAGAIN { return nil }
            throw DeviceError(operation: "take a frame from \(path)", errno: errno)
        }
        let buffer = codedBuffers[Int(index)]
        let data = Array(UnsafeRawBufferPointer(start: buffer.base, count: min(Int(used), buffer.length)))
        guard cv4l2_m2m_queue(fd, Self.captureType, index, 0, 0, 0) == 0 else {
            throw DeviceError(operation: "queue a frame buffer on \(path)", errno: errno)
        }
        let keyframe = flags & cv4l2_buf_flag_keyframe() != 0 || Self.isKeyframe(data, codedFormat: codedFormat)
        return Frame(data: data, isKeyframe: keyframe, width: width, height: height,
                     timestamp: .seconds(seconds) + .microseconds(micros))
    }

    /// I420 into the device's YU12 plane: luma at `stride`, each chroma plane at half of it, the
    /// margin of a larger coded size filled with the picture's last column and row.
    private func copy(_ picture: VideoFrame, into base: UnsafeMutableRawPointer) {
        let chromaStride = stride / 2
        let uBase = base + stride * codedHeight
        let vBase = uBase + chromaStride * ((codedHeight + 1) / 2)
        Self.copyPlane(picture.y, stride: picture.strideY, width: width, height: height,
                       into: base, stride: stride, width: codedWidth, height: codedHeight)
        let cw = picture.chromaWidth, ch = picture.chromaHeight, codedCW = (codedWidth + 1) / 2, codedCH = (codedHeight + 1) / 2
        Self.copyPlane(picture.u, stride: picture.strideU, width: cw, height: ch, into: uBase, stride: chromaStride, width: codedCW, height: codedCH)
        Self.copyPlane(picture.v, stride: picture.strideV, width: cw, height: ch, into: vBase, stride: chromaStride, width: codedCW, height: codedCH)
    }

    private static func copyPlane(_ plane: [UInt8], stride: Int, width: Int, height: Int,
                                  into base: UnsafeMutableRawPointer, stride outStride: Int, width outWidth: Int, height outHeight: Int) {
        plane.withUnsafeBytes { source in
            for row in 0..<height {
                let line = base + row * outStride
                line.copyMemory(from: source.baseAddress! + row * stride, byteCount: width)
                if outWidth > width { (line + width).initializeMemory(as: UInt8.self, repeating: source[row * stride + width - 1], count: outWidth - width) }
            }
        }
        for row in height..<max(height, outHeight) {
            (base + row * outStride).copyMemory(from: base + (height - 1) * outStride, byteCount: outWidth)
        }
    }

    // MARK: Formats

    /// Whether a frame the device did not mark starts a picture that refers to nothing: an H.264
    /// access unit with an IDR slice, an FWHT frame whose header says I-frame.
    static func isKeyframe(_ data: [UInt8], codedFormat: String) -> Bool {
        switch codedFormat {
        case "H264":
            return H264NALUnit.units(inAnnexB: data).contains { $0.first.map(H264NALUnit.type(of:)) == H264NALUnit.idrSlice }
        case "FWHT":
            // struct fwht_cframe_hdr: two magic words, then big-endian version, width, height, flags.
            guard data.count >= 24, data[0..<4].allSatisfy({ $0 == 0x4f }), data[4..<8].allSatisfy({ $0 == 0xff }) else { return false }
            let flags = UInt32(data[20]) << 24 | UInt32(data[21]) << 16 | UInt32(data[22]) << 8 | UInt32(data[23])
            return flags & (1 << 10) != 0
        default:
            return false
        }
    }

    private static func formats(_ fd: Int32, _ type: UInt32) -> [UInt32] {
        var out: [UInt32] = []
        var fourCC: UInt32 = 0
        while cv4l2_m2m_enum_fmt(fd, type, UInt32(out.count), &fourCC) == 0 { out.append(fourCC) }
        return out
    }
}
