import MediaCore
/// Stamps outgoing packets at the moment they leave: the MID header extension (RFC 8843) on each
/// stream until the peer's first report on it shows it was matched, and the transport-wide
/// sequence number (transport-cc) that the congestion controller's feedback refers to.
struct PacketStamper: Sendable {
    let transportSequenceID: UInt8?
    let midID: UInt8?
    /// MID per media SSRC; RTX packets carry their media stream's.
    let mids: [UInt32: String]
    let rtx: (ssrc: UInt32, media: UInt32)?
    private var acknowledged: Set<UInt32> = []
    private var nextSequence: UInt16 = 0

    init(transportSequenceID: UInt8?, midID: UInt8?, mids: [UInt32: String], rtx: (ssrc: UInt32, media: UInt32)?) {
        (self.transportSequenceID, self.midID, self.mids, self.rtx) = (transportSequenceID, midID, mids, rtx)
    }

    /// The peer reported on `ssrc`: its packets no longer carry the MID.
    mutating func acknowledge(_ ssrc: UInt32) { acknowledged.insert(ssrc) }

    /// Sets the packet's header extensions; returns the transport-wide number it got, if any.
    mutating func stamp(_ packet: inout RTPPacket) -> UInt16? {
        let media = packet.ssrc == rtx?.ssrc ? rtx!.media : packet.ssrc
        var elements: [HeaderExtensionElement] = []
        var sequence: UInt16?
        if let id = transportSequenceID {
            sequence = nextSequence
            elements.append(HeaderExtensionElement(id: id, data: TransportSequenceNumber.encode(nextSequence)))
            nextSequence &+= 1
        }
        if let id = midID, !acknowledged.contains(media), let mid = mids[media] {
            elements.append(HeaderExtensionElement(id: id, data: Array(mid.utf8)))
        }
        if !elements.isEmpty { packet.setHeaderExtensionElements(elements) }
        return sequence
    }
}
