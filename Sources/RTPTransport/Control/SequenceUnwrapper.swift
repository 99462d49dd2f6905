/// Turns 16-bit RTP sequence numbers into a 64-bit count that keeps increasing across wraps
/// (RFC 3550 §A.1): a number within half the space ahead of the last one is ahead, otherwise behind.
public struct SequenceUnwrapper: Sendable {
    private var last: Int64?

    public init() {}

    public mutating func unwrap(_ sequence: UInt16) -> Int64 {
        guard let last else {
            self.last = Int64(sequence)
            return Int64(sequence)
        }
        let delta = Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: last)))
        let value = last + delta
        if value > last { self.last = value }
        return value
    }
}
