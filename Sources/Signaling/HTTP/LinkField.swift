import FoundationEssentials
import Glibc
import Platform

/// One link of a Link header field (RFC 8288 §3): `<target>; name=value; name="quoted"`.
/// WHIP and WHEP servers hand out ICE servers this way (RFC 9725 §4.6):
/// `<turn:turn.example.net?transport=udp>; rel="ice-server"; username="u"; credential="p"`.
public struct LinkField: Sendable, Equatable {
    public var target: String
    /// Parameters by lowercased name, unquoted (the first of a repeated name, §3.3).
    public var parameters: [String: String]

    /// Every link in the values of the Link fields of a response, in order. A malformed link is
    /// left out, not fatal: the rest may still be usable.
    public static func parse(_ values: [String]) -> [LinkField] {
        values.flatMap { value -> [LinkField] in
            var links: [LinkField] = []
            var chars = Array(value)[...]
            while true {
                // Skip to the next '<': separators, white space, or the rest of a bad link.
                guard let open = chars.firstIndex(of: "<") else { break }
                chars = chars[(open + 1)...]
                guard let close = chars.firstIndex(of: ">") else { break }
                var link = LinkField(target: String(chars[..<close]), parameters: [:])
                chars = chars[(close + 1)...]
                // Parameters until a ',' outside quotes.
                while true {
                    while let c = chars.first, c == " " || c == "\t" { chars = chars.dropFirst() }
                    guard chars.first == ";" else { break }
                    chars = chars.dropFirst()
                    while let c = chars.first, c == " " || c == "\t" { chars = chars.dropFirst() }
                    let nameEnd = chars.firstIndex { $0 == "=" || $0 == ";" || $0 == "," } ?? chars.endIndex
                    let name = String(chars[..<nameEnd]).trimmed().lowercased()
                    chars = chars[nameEnd...]
                    var parameterValue = ""
                    if chars.first == "=" {
                        chars = chars.dropFirst()
                        while let c = chars.first, c == " " || c == "\t" { chars = chars.dropFirst() }
                        if chars.first == "\"" {
                            chars = chars.dropFirst()
                            var escaped = false
                            while let c = chars.first {
                                chars = chars.dropFirst()
                                if escaped { parameterValue.append(c); escaped = false }
                                else if c == "\\" { escaped = true }
                                else if c == "\"" { break }
                                else { parameterValue.append(c) }
                            }
                        } else {
                            let end = chars.firstIndex { $0 == ";" || $0 == "," } ?? chars.endIndex
                            parameterValue = String(chars[..<end]).trimmed()
                            chars = chars[end...]
                        }
                    }
                    if !name.isEmpty && link.parameters[name] == nil { link.parameters[name] = parameterValue }
                }
                links.append(link)
            }
            return links
        }
    }

    /// The ICE servers among `links` (rel="ice-server"), as WebRTC's RTCIceServer.
    public static func iceServers(_ links: [LinkField]) -> [ICEServerInfo] {
        links.filter { $0.parameters["rel"]?.split(separator: " ").contains("ice-server") == true }.map { link in
            ICEServerInfo(urls: [link.target], username: link.parameters["username"], credential: link.parameters["credential"])
        }
    }

    /// The value of a Link field for an ICE server (what a WHIP/WHEP server sends).
    public static func serialize(_ server: ICEServerInfo) -> [String] {
        server.urls.map { url in
            var value = "<\(url)>; rel=\"ice-server\""
            if let username = server.username { value += "; username=\"\(quoted(username))\"" }
            if let credential = server.credential { value += "; credential=\"\(quoted(credential))\"; credential-type=\"password\"" }
            return value
        }
    }

    private static func quoted(_ text: String) -> String {
        text.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"")
    }
}
