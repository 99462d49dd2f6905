/// The few fields of H.264's syntax a receiver needs to follow pictures without decoding them
/// (ITU-T H.264 §7.3.2.1.1 and §7.3.3): where a picture starts, and the number that says
/// whether a picture follows the last one or one was lost between them.
///
/// `frame_num` counts reference pictures (modulo 2^log2_max_frame_num, set by the sequence
/// parameter set): a picture after a reference picture carries the next number, one after a
/// non-reference picture the same number (§7.4.3). So a lost reference picture shows as a gap,
/// and a lost non-reference one, which no later picture needs, does not.
public enum H264Syntax {
    /// What the start of a slice says: `first_mb_in_slice` (0 for a picture's first slice) and,
    /// when the sequence's frame-number width is known, `frame_num`.
    public struct SliceStart: Sendable, Equatable {
        public var firstMacroblock: Int
        public var frameNumber: Int?
        public init(firstMacroblock: Int, frameNumber: Int?) { (self.firstMacroblock, self.frameNumber) = (firstMacroblock, frameNumber) }
    }

    /// The width of `frame_num` in bits (log2_max_frame_num_minus4 + 4) from a sequence
    /// parameter set NAL unit (with its header byte); nil when it does not parse.
    public static func frameNumberBits(sequenceParameterSet unit: some Collection<UInt8>) -> Int? {
        var bits = RBSPReader(unit.dropFirst())
        guard let profile = bits.read(8), bits.read(16) != nil, bits.unsignedExpGolomb() != nil else { return nil }
        // The high profiles carry chroma, bit depth and scaling lists first (§7.3.2.1.1).
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(profile) {
            guard let chroma = bits.unsignedExpGolomb() else { return nil }
            if chroma == 3 { guard bits.read(1) != nil else { return nil } }
            guard bits.unsignedExpGolomb() != nil, bits.unsignedExpGolomb() != nil, bits.read(1) != nil,
                  let scalingMatrix = bits.read(1) else { return nil }
            if scalingMatrix == 1 {
                for list in 0..<(chroma == 3 ? 12 : 8) {
                    guard let present = bits.read(1) else { return nil }
                    if present == 1 { guard bits.skipScalingList(size: list < 6 ? 16 : 64) else { return nil } }
                }
            }
        }
        guard let minus4 = bits.unsignedExpGolomb(), minus4 <= 12 else { return nil }
        return minus4 + 4
    }

    /// The start of a slice NAL unit (types 1 and 5, with its header byte): its first macroblock,
    /// and its `frame_num` when `frameNumberBits` is given. Nil for anything else, or bytes
    /// that end too soon.
    public static func sliceStart(_ unit: some Collection<UInt8>, frameNumberBits: Int?) -> SliceStart? {
        guard let header = unit.first, [H264NALUnit.nonIDRSlice, H264NALUnit.idrSlice].contains(H264NALUnit.type(of: header)) else { return nil }
        var bits = RBSPReader(unit.dropFirst())
        guard let firstMacroblock = bits.unsignedExpGolomb(), bits.unsignedExpGolomb() != nil, bits.unsignedExpGolomb() != nil else { return nil }
        // colour_plane_id comes first only with separate colour planes (4:4:4 profiles), which
        // callend neither sends nor offers to receive.
        let frameNumber = frameNumberBits.flatMap { bits.read($0) }
        return SliceStart(firstMacroblock: firstMacroblock, frameNumber: frameNumber)
    }

    /// Whether a NAL unit is a reference for later pictures (nal_ref_idc != 0).
    public static func isReference(_ header: UInt8) -> Bool { header & H264NALUnit.nriMask != 0 }

    /// Bits of a NAL unit's payload with the emulation prevention bytes (00 00 03) taken out.
    struct RBSPReader {
        private var bytes: [UInt8] = []
        private var position = 0

        init(_ payload: some Collection<UInt8>) {
            // The first 64 bytes hold every field read here.
            var zeros = 0
            for byte in payload.prefix(64) {
                if zeros >= 2 && byte == 3 {
                    zeros = 0
                    continue
                }
                zeros = byte == 0 ? zeros + 1 : 0
                bytes.append(byte)
            }
        }

        mutating func read(_ count: Int) -> Int? {
            guard count <= 32, position + count <= bytes.count * 8 else { return nil }
            var value = 0
            for _ in 0..<count {
                value = value << 1 | Int(bytes[position >> 3] >> (7 - UInt8(position & 7)) & 1)
                position += 1
            }
            return value
        }

        /// ue(v) (§9.1): leading zeros, a one, and as many bits again.
        mutating func unsignedExpGolomb() -> Int? {
            var zeros = 0
            while true {
                guard let bit = read(1) else { return nil }
                if bit == 1 { break }
                zeros += 1
                if zeros > 31 { return nil }
            }
            guard let rest = read(zeros) else { return nil }
            return (1 << zeros) - 1 + rest
        }

        /// se(v) (§9.1.1): the signed value a ue(v) code maps to.
        mutating func signedExpGolomb() -> Int? {
            guard let code = unsignedExpGolomb() else { return nil }
            return code % 2 == 1 ? (code + 1) / 2 : -(code / 2)
        }

        /// scaling_list() (§7.3.2.1.1.1), read past.
        mutating func skipScalingList(size: Int) -> Bool {
            var last = 8, next = 8
            for _ in 0..<size {
                if next != 0 {
                    guard let delta = signedExpGolomb() else { return false }
                    next = (last + delta + 256) % 256
                }
                last = next == 0 ? last : next
            }
            return true
        }
    }
}
