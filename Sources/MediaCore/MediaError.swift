/// Every failure of media handling (codecs, containers, pixel conversion): what was attempted, on
/// what, and what the library or the input said, so the person reading a log line can act on it.
public struct MediaError: Error, CustomStringConvertible, Equatable, Sendable {
    public enum Kind: Sendable, Equatable {
        /// A parameter the caller chose is outside what the codec supports.
        case invalidArgument
        /// The codec library reported a failure.
        case library
        /// Input bytes (a packet, a file) are malformed, truncated or corrupt.
        case invalidData
        /// A file could not be opened, read or written.
        case io
    }

    public let kind: Kind
    /// What was being attempted, e.g. "VP8 decode" or "open Y4M file /tmp/x.y4m".
    public let operation: String
    /// What went wrong, in words, including the library's own message where there is one.
    public let detail: String

    public init(_ kind: Kind, _ operation: String, _ detail: String) {
        self.kind = kind
        self.operation = operation
        self.detail = detail
    }

    public var description: String { "\(operation): \(detail)" }
}
