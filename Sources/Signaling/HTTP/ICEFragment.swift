/// A trickle-ICE SDP fragment (RFC 8840 §9, `application/trickle-ice-sdpfrag`), the body of a
/// WHIP/WHEP PATCH (RFC 9725 §4.3): the ICE credentials the candidates belong to, and candidates
/// under the first bundled media section. New credentials in it are an ICE restart.
public struct ICEFragment: Sendable, Equatable {
    public var ufrag: String
    public var password: String
    public var mid: String
    /// "candidate:..." lines.
    public var candidates: [String]
    public var endOfCandidates: Bool

    public static let contentType = "application/trickle-ice-sdpfrag"

    public init(ufrag: String, password: String, mid: String = "0", candidates: [String] = [], endOfCandidates: Bool = false) {
        self.ufrag = ufrag
        self.password = password
        self.mid = mid
        self.candidates = candidates
        self.endOfCandidates = endOfCandidates
    }

    public struct Malformed: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    public static let maxLength = 64 * 1024

    /// Reads a fragment: the credentials (session or media level), the mid, the candidates.
    public init(parsing text: String) throws(Malformed) {
        guard text.utf8.count <= Self.maxLength else { throw Malformed(description: "an ICE fragment over \(Self.maxLength) bytes") }
        var ufrag: String?, password: String?, mid: String?
        var candidates: [String] = []
        var end = false
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            guard line.hasPrefix("a=") else { continue }
            let attribute = line.dropFirst(2)
            if attribute.hasPrefix("ice-ufrag:") { ufrag = String(attribute.dropFirst(10)) }
            else if attribute.hasPrefix("ice-pwd:") { password = String(attribute.dropFirst(8)) }
            else if attribute.hasPrefix("mid:") { mid = mid ?? String(attribute.dropFirst(4)) }
            else if attribute.hasPrefix("candidate:") { candidates.append(String(attribute)) }
            else if attribute == "end-of-candidates" { end = true }
        }
        guard let ufrag, !ufrag.isEmpty, let password, !password.isEmpty else {
            throw Malformed(description: "an ICE fragment without a=ice-ufrag and a=ice-pwd")
        }
        self.init(ufrag: ufrag, password: password, mid: mid ?? "0", candidates: candidates, endOfCandidates: end)
    }

    public var serialized: String {
        var lines = ["a=ice-ufrag:\(ufrag)", "a=ice-pwd:\(password)", "m=audio 9 UDP/TLS/RTP/SAVPF 0", "a=mid:\(mid)"]
        lines += candidates.map { $0.hasPrefix("candidate:") ? "a=" + $0 : "a=candidate:" + $0 }
        if endOfCandidates { lines.append("a=end-of-candidates") }
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
