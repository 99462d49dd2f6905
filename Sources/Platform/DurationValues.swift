import Glibc

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

extension Double {
    /// `fixed`, with a plus sign before a number that does not show a minus (printf's "%+.Nf").
    public func signedFixed(_ digits: Int) -> String {
        let text = fixed(digits)
        return text.hasPrefix("-") ? text : "+" + text
    }

    /// The number to `digits` significant digits, trailing zeros dropped: printf's "%.Ng" for
    /// numbers from 1e-4 up to 10^digits (a frame rate, say); outside that, `fixed` to as many
    /// digits as the number needs.
    public func significant(_ digits: Int) -> String {
        guard isFinite, self != 0 else { return isFinite ? "0" : "\(self)" }
        let exponent = Int(log10(abs(self)).rounded(.down))
        var text = fixed(max(0, digits - 1 - exponent))
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        return text
    }
}

extension BinaryInteger {
    /// The number in at least `width` digits, zeros in front (a sign goes before them).
    public func zeroPadded(_ width: Int) -> String {
        (self < 0 ? "-" : "") + String(self.magnitude).leftPadded(to: width, with: "0")
    }
}

extension String {
    /// The text at least `width` characters wide, `pad` in front (printf's "%5s").
    public func leftPadded(to width: Int, with pad: Character = " ") -> String {
        String(repeating: pad, count: max(0, width - count)) + self
    }
}
