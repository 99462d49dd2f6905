@_spi(_Unicode) import Swift

/// The one form in which identities are kept and compared: in seats, in Redis keys and scripts
/// (which compare bytes), in relay targets and in logs. Unicode lets one name be written in
/// several byte sequences ("é" as one scalar or as "e" and a combining accent); Swift's `==`
/// finds those equal and Redis does not, so a seat taken under one form could be taken back,
/// or missed, under another. Every name is put in Normalization Form C (UAX #15) where it comes
/// in, and compared as bytes after that.
public enum CanonicalName {
    /// `name` in NFC.
    public static func of(_ name: String) -> String {
        // The standard library's own NFC (its normalization tables); a name already in NFC,
        // as nearly every one is, comes back as it was.
        String(decoding: name._nfcCodeUnits, as: UTF8.self)
    }

    /// Whether `name` has control characters (C0, DEL, C1): no name has a use for them.
    public static func hasControlCharacters(_ name: String) -> Bool {
        name.unicodeScalars.contains { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }
    }
}
