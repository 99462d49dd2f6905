/// A `Duration` as the plain numbers rates, timestamps and logs need: the one place these
/// conversions live (six copies of them had grown in five modules).
extension Duration {
    /// Seconds, with the fraction.
    public var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    /// Whole milliseconds, rounded toward zero.
    public var inMilliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
    /// Whole microseconds, rounded toward zero.
    public var inMicroseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }
}
