/// Splits encoded VP8 frames into RTP payloads (RFC 7741 §4): each payload starts with a
/// descriptor carrying a 15-bit PictureID; the first has S = 1 and PID = 0; the frame's last
/// packet gets the RTP marker bit. Payloads are balanced: a frame needing n packets is cut into
/// n nearly equal parts rather than n - 1 full ones and a stub.
public struct VP8Packetizer: Sendable {
    /// A full media packet's payload: what fits a 1500-byte path with headers, SRTP and the
    /// extensions to spare. The pacer pads probes with packets this size, and the estimator
    /// reckons a packet's time on the link from it.
    public static let defaultMaxPayloadSize = 1200
    public let maxPayloadSize: Int
    public private(set) var pictureID: UInt16
    /// The TL0PICIDX of the last layer-0 frame (RFC 7741 §4.2), once frames carry layers.
    public private(set) var tl0PictureIndex: UInt8

    public init(maxPayloadSize: Int = defaultMaxPayloadSize, initialPictureID: UInt16 = 0) {
        precondition(maxPayloadSize > 8, "room for a descriptor and data")
        self.maxPayloadSize = maxPayloadSize
        self.pictureID = initialPictureID & 0x7fff
        self.tl0PictureIndex = UInt8(truncatingIfNeeded: initialPictureID)
    }

    /// Payloads for one frame; the caller sets the marker on the last RTP packet. A frame of an
    /// encoder with temporal layers carries its layer (TID), whether it is a layer sync (Y) and
    /// the index of the last layer-0 frame (TL0PICIDX, counted here, so a peer sent only some
    /// layers still sees its layer-0 frames numbered in a row).
    public mutating func packetize(_ frame: [UInt8], layer: (id: Int, sync: Bool)? = nil) -> [[UInt8]] {
        guard !frame.isEmpty else { return [] }
        var descriptor = VP8PayloadDescriptor(startOfPartition: true, partitionIndex: 0, pictureID: pictureID)
        pictureID = (pictureID &+ 1) & 0x7fff
        if let layer {
            if layer.id == 0 { tl0PictureIndex &+= 1 }
            descriptor.tl0PictureIndex = tl0PictureIndex
            descriptor.temporalLayer = UInt8(clamping: layer.id)
            descriptor.layerSync = layer.sync
        }
        let room = maxPayloadSize - descriptor.serializedSize
        let count = (frame.count + room - 1) / room
        let base = frame.count / count, extra = frame.count % count
        var payloads: [[UInt8]] = []
        var offset = 0
        for index in 0..<count {
            let size = base + (index < extra ? 1 : 0)
            var payload: [UInt8] = []
            payload.reserveCapacity(descriptor.serializedSize + size)
            descriptor.serialize(into: &payload)
            payload += frame[offset..<(offset + size)]
            payloads.append(payload)
            offset += size
            descriptor.startOfPartition = false
        }
        return payloads
    }
}

/// What one VP8 RTP payload carries, for reassembly.
public struct VP8PayloadFragment: Sendable, Equatable {
    public var descriptor: VP8PayloadDescriptor
    public var data: [UInt8]

    /// True for the first packet of a frame: start of partition 0 (RFC 7741 §4.5).
    public var isFrameStart: Bool { descriptor.startOfPartition && descriptor.partitionIndex == 0 }

    /// On the first packet of a frame: the VP8 frame tag's inverse key-frame bit (RFC 7741 §4.3,
    /// RFC 6386 §9.1) is 0 for a keyframe.
    public var isKeyframeStart: Bool { isFrameStart && (data.first.map { $0 & 0x01 == 0 } ?? false) }

    public init(parsing payload: [UInt8]) throws(ParseError) {
        let (descriptor, size) = try VP8PayloadDescriptor.parse(payload)
        self.descriptor = descriptor
        self.data = Array(payload[size...])
    }
}
