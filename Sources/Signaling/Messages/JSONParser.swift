/// Why a text is not JSON this project takes, and where.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let offset: Int
    public let reason: String
    public var description: String { "\(reason) at byte \(offset)" }
}

extension JSONValue {
    /// The deepest nesting of arrays and objects taken by default (`SignalingMessage.maxDepth`).
    public static let defaultMaxDepth = 32

    /// Reads a JSON text (RFC 8259) strictly, as one value: UTF-8 only, no control characters in
    /// strings, no lone surrogates, numbers in JSON's grammar that a Double holds (1e400 is
    /// refused, not read as infinity), nothing after the value but white space, nesting no
    /// deeper than `maxDepth`, and **no key twice in an object**: parsers disagree on which of
    /// two values wins (the first here, the last in a browser), so a message that means one thing
    /// to the service and another to its reader is refused instead.
    public init(parsing bytes: some Collection<UInt8>, maxDepth: Int = JSONValue.defaultMaxDepth) throws(JSONParseError) {
        let array = bytes as? [UInt8] ?? Array(bytes)
        var parser = JSONParser(bytes: array, maxDepth: maxDepth)
        self = try parser.parseDocument()
    }
}

/// Recursive descent over the bytes, its depth bounded by `maxDepth` (so its stack is too).
struct JSONParser {
    let bytes: [UInt8]
    let maxDepth: Int
    var at = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")

    func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: at, reason: reason) }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        let value = try parseValue(depth: 0)
        skipSpace()
        guard at == bytes.count else { throw fail("text after the JSON value") }
        return value
    }

    mutating func skipSpace() {
        while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0a || bytes[at] == 0x0d || bytes[at] == 0x09 { at += 1 }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        skipSpace()
        guard at < bytes.count else { throw fail("the text ends where a value should be") }
        switch bytes[at] {
        case UInt8(ascii: "{"):
            guard depth < maxDepth else { throw fail("nested deeper than \(maxDepth) levels") }
            return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["):
            guard depth < maxDepth else { throw fail("nested deeper than \(maxDepth) levels") }
            return try parseArray(depth: depth + 1)
        case Self.quote: return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("not the start of a JSON value")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard at + count <= bytes.count else { throw fail("not a JSON value") }
        for i in 0..<count where bytes[at + i] != word.utf8Start[i] { throw fail("not a JSON value") }
        at += count
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        at += 1  // {
        var object: [String: JSONValue] = [:]
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
            at += 1
            return .object(object)
        }
        while true {
            skipSpace()
            guard at < bytes.count, bytes[at] == Self.quote else { throw fail("an object's key is a string") }
            let keyAt = at
            let key = try parseString()
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { throw fail("a key is followed by ':'") }
            at += 1
            let value = try parseValue(depth: depth)
            guard object.updateValue(value, forKey: key) == nil else {
                throw JSONParseError(offset: keyAt, reason: "the key \"\(key.prefix(64))\" twice in one object")
            }
            skipSpace()
            guard at < bytes.count else { throw fail("the text ends inside an object") }
            if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
            guard bytes[at] == UInt8(ascii: "}") else { throw fail("an object's members are separated by ',' and end with '}'") }
            at += 1
            return .object(object)
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        at += 1  // [
        var items: [JSONValue] = []
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
            at += 1
            return .array(items)
        }
        while true {
            items.append(try parseValue(depth: depth))
            skipSpace()
            guard at < bytes.count else { throw fail("the text ends inside an array") }
            if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
            guard bytes[at] == UInt8(ascii: "]") else { throw fail("an array's items are separated by ',' and end with ']'") }
            at += 1
            return .array(items)
        }
    }

    /// A string from its opening quote: runs of plain bytes are taken whole (and checked as
    /// UTF-8 once), escapes one by one.
    mutating func parseString() throws(JSONParseError) -> String {
        at += 1  // "
        var out: [UInt8] = []
        while true {
            let start = at
            while at < bytes.count, bytes[at] != Self.quote, bytes[at] != Self.backslash, bytes[at] >= 0x20 { at += 1 }
            out.append(contentsOf: bytes[start..<at])
            guard at < bytes.count else { throw fail("the text ends inside a string") }
            switch bytes[at] {
            case Self.quote:
                at += 1
                guard let text = String(validating: out, as: UTF8.self) else { throw fail("a string that is not UTF-8") }
                return text
            case Self.backslash:
                at += 1
                guard at < bytes.count else { throw fail("the text ends inside an escape") }
                let escaped = bytes[at]
                at += 1
                switch escaped {
                case Self.quote, Self.backslash, UInt8(ascii: "/"): out.append(escaped)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0c)
                case UInt8(ascii: "n"): out.append(0x0a)
                case UInt8(ascii: "r"): out.append(0x0d)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xd800...0xdbff).contains(scalar) {
                        // A high surrogate is half of a pair (RFC 8259 §7): the low half must follow.
                        guard at + 1 < bytes.count, bytes[at] == Self.backslash, bytes[at + 1] == UInt8(ascii: "u") else {
                            throw fail("a lone surrogate in a string")
                        }
                        at += 2
                        let low = try hex4()
                        guard (0xdc00...0xdfff).contains(low) else { throw fail("a lone surrogate in a string") }
                        scalar = 0x10000 + ((scalar - 0xd800) << 10) + (low - 0xdc00)
                    } else if (0xdc00...0xdfff).contains(scalar) {
                        throw fail("a lone surrogate in a string")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("not a Unicode scalar") }
                    out.append(contentsOf: String(Character(unicode)).utf8)
                default: throw fail("an unknown escape in a string")
                }
            default:
                throw fail("a control character in a string (escape it)")
            }
        }
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard at + 4 <= bytes.count else { throw fail("the text ends inside a \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[at]
            let digit: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
            default: throw fail("a \\u escape takes four hex digits")
            }
            value = value << 4 | UInt32(digit)
            at += 1
        }
        return value
    }

    /// JSON's number grammar, then the Double it names; one that no finite Double holds is refused.
    mutating func parseNumber() throws(JSONParseError) -> Double {
        let start = at
        func digits() -> Int {
            let from = at
            while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") { at += 1 }
            return at - from
        }
        if bytes[at] == UInt8(ascii: "-") { at += 1 }
        guard at < bytes.count else { throw fail("a number without digits") }
        if bytes[at] == UInt8(ascii: "0") {
            at += 1
        } else {
            guard digits() > 0 else { throw fail("a number without digits") }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            guard digits() > 0 else { throw fail("a fraction without digits") }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
            at += 1
            if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard digits() > 0 else { throw fail("an exponent without digits") }
        }
        guard at - start <= 512 else { throw JSONParseError(offset: start, reason: "a number over 512 characters") }
        let text = String(decoding: bytes[start..<at], as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw JSONParseError(offset: start, reason: "the number \(text.prefix(32)) is beyond what a Double holds") }
        return value
    }
}

extension JSONValue {
    /// The value as compact JSON text (RFC 8259) in UTF-8: keys sorted, so the same value is the
    /// same bytes (signatures, tests); whole numbers up to 2^53 written as integers (Janus's ids
    /// reach it); '/' not escaped; control characters escaped, so a line never breaks inside a
    /// value. A number that is not finite, which no JSON text can carry, is written as null.
    public var serialized: [UInt8] {
        var out: [UInt8] = []
        write(into: &out)
        return out
    }

    public func write(into out: inout [UInt8]) {
        switch self {
        case .null: out += Array("null".utf8)
        case .bool(let value): out += Array((value ? "true" : "false").utf8)
        case .number(let value):
            if !value.isFinite {
                out += Array("null".utf8)
            } else if value.rounded() == value, abs(value) <= 9_007_199_254_740_992 {
                out += Array(String(Int64(value)).utf8)
            } else {
                out += Array("\(value)".utf8)
            }
        case .string(let value): Self.writeString(value, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (i, key) in object.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                object[key]!.write(into: &out)  // a key of the object's own
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ text: String, into out: inout [UInt8]) {
        out.append(JSONParser.quote)
        for byte in text.utf8 {
            switch byte {
            case JSONParser.quote: out += [JSONParser.backslash, JSONParser.quote]
            case JSONParser.backslash: out += [JSONParser.backslash, JSONParser.backslash]
            case 0x0a: out += [JSONParser.backslash, UInt8(ascii: "n")]
            case 0x0d: out += [JSONParser.backslash, UInt8(ascii: "r")]
            case 0x09: out += [JSONParser.backslash, UInt8(ascii: "t")]
            case 0..<0x20, 0x7f:
                let hex = Array("0123456789abcdef".utf8)
                out += [JSONParser.backslash, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xf)]]
            default: out.append(byte)
            }
        }
        out.append(JSONParser.quote)
    }
}
