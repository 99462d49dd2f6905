/// Splits a TCP byte stream into newline-terminated lines (NDJSON framing), however the bytes
/// arrive: one at a time or many lines in one read. A line longer than the limit is an error
/// as soon as the limit is passed, without buffering the rest of it.
public struct LineFramer: Sendable {
    public let maxLineLength: Int
    private var buffer: [UInt8] = []

    public init(maxLineLength: Int = SignalingMessage.maxLineLength) {
        self.maxLineLength = maxLineLength
    }

    public struct LineTooLong: Error, Equatable {}

    /// Appends bytes and returns the complete lines they finish (newline and a trailing CR removed).
    public mutating func append(_ bytes: some Collection<UInt8>) throws(LineTooLong) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        var start = bytes.startIndex
        while let newline = bytes[start...].firstIndex(of: 0x0a) {
            var line = buffer
            line.append(contentsOf: bytes[start..<newline])
            buffer.removeAll(keepingCapacity: true)
            if line.last == 0x0d { line.removeLast() }
            guard line.count <= maxLineLength else { throw LineTooLong() }
            if !line.isEmpty { lines.append(line) }
            start = bytes.index(after: newline)
        }
        buffer.append(contentsOf: bytes[start...])
        guard buffer.count <= maxLineLength else { throw LineTooLong() }
        return lines
    }

    /// Bytes held for an unfinished line.
    public var pendingCount: Int { buffer.count }
}
