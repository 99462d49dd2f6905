/// Source description (RFC 3550 §6.5), PT = 202: chunks of an SSRC followed by items
/// | type | length | text |, ended by a zero byte and padded to 32 bits.
public struct SourceDescription: Sendable, Equatable {
    public struct Item: Sendable, Equatable {
        public var type: UInt8
        public var text: [UInt8]
        public static let cname: UInt8 = 1
        /// A transient notice on the source's state (RFC 3550 §6.5.7): "camera lost".
        public static let note: UInt8 = 7

        public init(type: UInt8, text: [UInt8]) {
            self.type = type
            self.text = text
        }
    }

    public struct Chunk: Sendable, Equatable {
        public var ssrc: UInt32
        public var items: [Item]

        public init(ssrc: UInt32, items: [Item]) {
            self.ssrc = ssrc
            self.items = items
        }

        var size: Int {
            let raw = 4 + items.reduce(0) { $0 + 2 + $1.text.count } + 1
            return (raw + 3) / 4 * 4
        }
    }

    public var chunks: [Chunk]

    public init(chunks: [Chunk]) { self.chunks = chunks }

    /// The usual SDES: one chunk with a CNAME, and a NOTE while the source has one.
    public init(ssrc: UInt32, cname: String, note: String? = nil) {
        var items = [Item(type: Item.cname, text: Array(cname.utf8.prefix(255)))]
        if let note { items.append(Item(type: Item.note, text: Array(note.utf8.prefix(255)))) }
        chunks = [Chunk(ssrc: ssrc, items: items)]
    }

    /// The NOTE of `ssrc`'s chunk: nil when the chunk has none (the notice is over), absent
    /// (outer nil) when the packet has no chunk for it.
    public func note(of ssrc: UInt32) -> String?? {
        guard let chunk = chunks.first(where: { $0.ssrc == ssrc }) else { return nil }
        return .some(chunk.items.first { $0.type == Item.note }.map { String(decoding: $0.text, as: UTF8.self) })
    }

    public var cname: String? {
        guard let text = chunks.first?.items.first(where: { $0.type == Item.cname })?.text else { return nil }
        return String(decoding: text, as: UTF8.self)
    }

    init(parsing body: [UInt8], header: RTCPHeader) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        chunks = []
        for _ in 0..<header.count {
            guard let ssrc = reader.readUInt32() else { throw ParseError("RTCP SDES", "chunk truncated before its SSRC") }
            var items: [Item] = []
            while true {
                guard let type = reader.readUInt8() else { throw ParseError("RTCP SDES", "chunk without its terminating zero") }
                if type == 0 {
                    // Skip to the next 32-bit boundary.
                    let pad = (4 - (reader.offset % 4)) % 4
                    guard reader.skip(min(pad, reader.remaining)) else { throw ParseError("RTCP SDES", "padding truncated") }
                    break
                }
                guard let length = reader.readUInt8(), let text = reader.readBytes(Int(length)) else {
                    throw ParseError("RTCP SDES", "item \(type) runs past the packet")
                }
                items.append(Item(type: type, text: text))
            }
            chunks.append(Chunk(ssrc: ssrc, items: items))
        }
    }

    var serializedSize: Int { RTCPHeader.size + chunks.reduce(0) { $0 + $1.size } }

    func serialize(into out: inout [UInt8]) {
        RTCPHeader(count: UInt8(chunks.count), packetType: RTCPHeader.sourceDescription, size: serializedSize).serialize(into: &out)
        for chunk in chunks {
            let start = out.count
            out.writeUInt32(chunk.ssrc)
            for item in chunk.items {
                out.append(item.type)
                out.append(UInt8(item.text.count))
                out += item.text
            }
            out.append(0)
            while (out.count - start) % 4 != 0 { out.append(0) }
        }
    }
}

/// Goodbye (RFC 3550 §6.6), PT = 203: the sources leaving and an optional reason.
public struct Goodbye: Sendable, Equatable {
    public var sources: [UInt32]
    public var reason: String?

    public init(sources: [UInt32], reason: String? = nil) {
        self.sources = sources
        self.reason = reason
    }

    init(parsing body: [UInt8], header: RTCPHeader) throws(ParseError) {
        var reader = ByteReader(body, offset: RTCPHeader.size)
        sources = []
        for _ in 0..<header.count {
            guard let ssrc = reader.readUInt32() else { throw ParseError("RTCP BYE", "source list truncated") }
            sources.append(ssrc)
        }
        if let length = reader.readUInt8() {
            guard let text = reader.readBytes(Int(length)) else { throw ParseError("RTCP BYE", "reason runs past the packet") }
            reason = String(decoding: text, as: UTF8.self)
        } else {
            reason = nil
        }
    }

    var serializedSize: Int {
        let reasonBytes = reason.map { 1 + min($0.utf8.count, 255) } ?? 0
        return (RTCPHeader.size + 4 * sources.count + reasonBytes + 3) / 4 * 4
    }

    func serialize(into out: inout [UInt8]) {
        let start = out.count
        RTCPHeader(count: UInt8(sources.count), packetType: RTCPHeader.goodbye, size: serializedSize).serialize(into: &out)
        for ssrc in sources { out.writeUInt32(ssrc) }
        if let reason {
            let text = Array(reason.utf8.prefix(255))
            out.append(UInt8(text.count))
            out += text
        }
        while (out.count - start) % 4 != 0 { out.append(0) }
    }
}
