/// Parses `WxH` into a size.
public func parseSize(_ text: String) throws(UsageError) -> (width: Int, height: Int) {
    let parts = text.lowercased().split(separator: "x")
    guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), (16...7680).contains(w), (16...4320).contains(h) else {
        throw UsageError(description: "'\(text)' is not a size WIDTHxHEIGHT between 16x16 and 7680x4320")
    }
    return (w, h)
}
