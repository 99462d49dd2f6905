import FoundationEssentials
import Glibc

/// Any JSON value: the session descriptions and candidates signaling relays without reading them.
public enum JSONValue: Sendable, Equatable, Codable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            // Integers up to 2^53 are exact in a Double (Janus's ids reach it): written as integers.
            if value.rounded() == value, abs(value) <= 9_007_199_254_740_992 { try container.encode(Int64(value)) } else { try container.encode(value) }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number as it came, for arithmetic in floating point only. A number from the network
    /// becomes an integer through `integer(in:)`, never `Int(_:)`: 1e300 or -1 would trap there.
    public var numberValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The number as a whole number of type `T` within `range`; nil for anything else (a
    /// fraction, a value out of `T` or out of `range`, not a number at all). -0 is 0.
    public func integer<T: FixedWidthInteger>(in range: ClosedRange<T> = T.min...T.max) -> T? {
        guard case .number(let value) = self, let whole = T(exactly: value), range.contains(whole) else { return nil }
        return whole
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }
}
