/// A STUN or TURN server as the service hands it to a participant, in the shape of WebRTC's
/// RTCIceServer: URLs, and for TURN a username and credential.
public struct ICEServerInfo: Sendable, Equatable {
    public var urls: [String]
    public var username: String?
    public var credential: String?

    public init(urls: [String], username: String? = nil, credential: String? = nil) {
        self.urls = urls
        self.username = username
        self.credential = credential
    }

    var json: JSONValue {
        var object: [String: JSONValue] = ["urls": .array(urls.map(JSONValue.string))]
        if let username { object["username"] = .string(username) }
        if let credential { object["credential"] = .string(credential) }
        return .object(object)
    }

    init?(json: JSONValue) {
        guard case .array(let list)? = json["urls"] else { return nil }
        urls = list.compactMap(\.stringValue)
        guard !urls.isEmpty else { return nil }
        username = json["username"]?.stringValue
        credential = json["credential"]?.stringValue
    }
}
