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

extension StringProtocol {
    /// The text without the spaces and tabs around it (HTTP's optional whitespace), and with
    /// `newlines` the line ends too: Foundation's `trimmingCharacters(in:)` for the modules that
    /// link FoundationEssentials only (its CharacterSet is not there).
    public func trimmed(newlines: Bool = false) -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || (newlines && $0.isNewline) }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else { return "" }
        return String(self[first...last])
    }
}

extension Double {
    /// The number with `digits` digits after the point, rounded (String(format: "%.Nf") without
    /// Foundation).
    public func fixed(_ digits: Int) -> String {
        guard isFinite else { return "\(self)" }
        let scale = (0..<digits).reduce(1.0) { value, _ in value * 10 }
        let scaled = (abs(self) * scale).rounded()
        // Past Int64 (9.2e18 after scaling) the digits do not fit: the shortest exact form
        // instead (1e+20), which no figure this is for reaches.
        guard scaled < 9.2e18 else { return "\(self)" }
        let whole = Int64(scaled / scale), fraction = Int64(scaled) - whole * Int64(scale)
        let sign = self < 0 && scaled > 0 ? "-" : ""
        guard digits > 0 else { return sign + String(whole) }
        return sign + String(whole) + "." + fraction.zeroPadded(digits)
    }
}

extension BinaryInteger {
    /// The number in at least `width` digits, zeros in front (a sign goes before them).
    public func zeroPadded(_ width: Int) -> String {
        let digits = String(self.magnitude)
        return (self < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
