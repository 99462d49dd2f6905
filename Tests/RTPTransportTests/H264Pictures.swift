import MediaCore

/// H.264 access units whose syntax holds what a receiver reads without decoding
/// (`H264Syntax`): a baseline SPS with a 4-bit frame_num, a PPS, and slices that start at
/// macroblock 0 with their frame_num, written bit by bit; the rest of each slice is filler.
enum H264Pictures {
    /// profile 66, constraint flags, level 3.0; seq_parameter_set_id 0 ("1"),
    /// log2_max_frame_num_minus4 0 ("1"), then the rest.
    static let sps: [UInt8] = [0x67, 0x42, 0xc0, 0x1e, 0xf0, 0x22]
    static let pps: [UInt8] = [0x68, 0xce, 0x38, 0x80]

    /// A slice: first_mb_in_slice 0, slice_type 0, pic_parameter_set_id 0 (each "1"), then
    /// frame_num in 4 bits; NRI 3 for a reference picture, 0 for one no picture refers to.
    static func slice(frameNumber: Int, reference: Bool = true, idr: Bool = false, size: Int, fill: UInt8) -> [UInt8] {
        let header: UInt8 = (reference ? 0x60 : 0) | (idr ? H264NALUnit.idrSlice : H264NALUnit.nonIDRSlice)
        return [header, 0xe1 | UInt8(frameNumber & 15) << 1] + [UInt8](repeating: fill, count: max(0, size - 2))
    }

    /// Picture `n` of a stream with an IDR every `keyframeEvery`, every picture a reference:
    /// its NAL units, frame_num counting from the last IDR.
    static func units(_ n: Int, keyframeEvery: Int = 1000, size: Int = 230, keyframeSize: Int = 250) -> [[UInt8]] {
        let fill = UInt8(16 + n % 200)
        if n % keyframeEvery == 0 { return [sps, pps, slice(frameNumber: 0, idr: true, size: keyframeSize, fill: fill)] }
        return [slice(frameNumber: n % keyframeEvery, size: size, fill: fill)]
    }
}
