/// SDP (RFC 8866) as its lines: the session part and the media sections, each line a type letter
/// and a value, kept in order. It knows the grammar of lines, not what attributes mean;
/// `JSEPDescription` reads the WebRTC meaning on top. Lines of types it does not know are kept.
public struct SDPMessage: Sendable, Equatable {
    public struct Line: Sendable, Equatable {
        public var type: Character
        public var value: String
        public init(_ type: Character, _ value: String) {
            self.type = type
            self.value = value
        }
    }

    /// One `m=` line and what follows it up to the next.
    public struct MediaSection: Sendable, Equatable {
        public var kind: String
        public var port: Int
        public var proto: String
        public var formats: [String]
        public var lines: [Line]

        public init(kind: String, port: Int, proto: String, formats: [String], lines: [Line] = []) {
            self.kind = kind
            self.port = port
            self.proto = proto
            self.formats = formats
            self.lines = lines
        }

        /// Values of `a=name:value` lines, in order.
        public func attributes(_ name: String) -> [String] { SDPMessage.attributes(name, in: lines) }
        public func attribute(_ name: String) -> String? { attributes(name).first }
        /// Whether a property attribute (`a=name`, no value) or a valued one is present.
        public func has(_ name: String) -> Bool { SDPMessage.has(name, in: lines) }
    }

    public var session: [Line]
    public var media: [MediaSection]

    public init(session: [Line], media: [MediaSection]) {
        self.session = session
        self.media = media
    }

    public func attributes(_ name: String) -> [String] { Self.attributes(name, in: session) }
    public func attribute(_ name: String) -> String? { attributes(name).first }
    public func has(_ name: String) -> Bool { Self.has(name, in: session) }

    static func attributes(_ name: String, in lines: [Line]) -> [String] {
        lines.compactMap { line in
            guard line.type == "a" else { return nil }
            if line.value == name { return "" }
            guard line.value.hasPrefix(name), line.value.dropFirst(name.count).first == ":" else { return nil }
            return String(line.value.dropFirst(name.count + 1))
        }
    }

    static func has(_ name: String, in lines: [Line]) -> Bool {
        lines.contains { $0.type == "a" && ($0.value == name || ($0.value.hasPrefix(name) && $0.value.dropFirst(name.count).first == ":")) }
    }

    /// The longest text taken: a session description is a few kilobytes; a browser's offer with
    /// every codec is about 6 KB.
    public static let maximumLength = 64 * 1024

    /// Lines end in CRLF (LF alone is accepted); `v=0` comes first; each line is `x=value` with a
    /// lower-case letter. Empty lines are skipped.
    public init(parsing text: String) throws(ParseError) {
        guard text.utf8.count <= Self.maximumLength else { throw ParseError("SDP", "longer than \(Self.maximumLength) bytes") }
        var session: [Line] = []
        var media: [MediaSection] = []
        var sawVersion = false
        for raw in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            var line = Substring(raw)
            if line.hasSuffix("\r") { line = line.dropLast() }
            if line.isEmpty { continue }
            guard line.count >= 2, let type = line.first, type.isASCII, type.isLowercase, line.dropFirst().first == "=" else {
                throw ParseError("SDP", "not a line of the form x=value: '\(line.prefix(60))'")
            }
            let value = String(line.dropFirst(2))
            if !sawVersion {
                guard type == "v", value == "0" else { throw ParseError("SDP", "the first line must be v=0") }
                sawVersion = true
            }
            if type == "m" {
                let fields = value.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count >= 3, let port = Int(fields[1].split(separator: "/").first ?? ""), (0...65535).contains(port) else {
                    throw ParseError("SDP", "m= line needs MEDIA PORT PROTO [FORMATS]: '\(value.prefix(60))'")
                }
                media.append(MediaSection(kind: String(fields[0]), port: port, proto: String(fields[2]), formats: fields.dropFirst(3).map(String.init)))
            } else if media.isEmpty {
                session.append(Line(type, value))
            } else {
                media[media.count - 1].lines.append(Line(type, value))
            }
        }
        guard sawVersion else { throw ParseError("SDP", "empty") }
        self.init(session: session, media: media)
    }

    /// The text, CRLF after every line (RFC 8866 §5).
    public var text: String {
        var out = ""
        for line in session { out += "\(line.type)=\(line.value)\r\n" }
        for m in media {
            out += "m=\(m.kind) \(m.port) \(m.proto)" + (m.formats.isEmpty ? "" : " " + m.formats.joined(separator: " ")) + "\r\n"
            for line in m.lines { out += "\(line.type)=\(line.value)\r\n" }
        }
        return out
    }
}
