import FoundationEssentials
import Glibc

/// A message relayed between participants of one room. The server fills `from`; `to` names one
/// participant, or nil for everyone else in the room. `id` lets the sender match the server's
/// `ack` and lets a receiver drop a copy re-sent after a reconnect.
public struct RelayMessage: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case offer, answer, candidate, bye
    }

    public var kind: Kind
    public var id: String
    public var from: String?
    public var to: String?
    public var payload: JSONValue

    public init(kind: Kind, id: String, from: String? = nil, to: String? = nil, payload: JSONValue = .object([:])) {
        self.kind = kind
        self.id = id
        self.from = from
        self.to = to
        self.payload = payload
    }
}

/// Every message of the protocol (docs/signaling.md). One JSON object per line, UTF-8.
public enum SignalingMessage: Sendable, Equatable {
    case join(room: String, token: String, rejoin: Bool)
    case joined(room: String, participant: String, peers: [String], iceServers: [ICEServerInfo] = [])
    case peerJoined(participant: String, rejoin: Bool)
    case peerLeft(participant: String, reason: String)
    case relay(RelayMessage)
    case ack(id: String)
    case ping(id: Int?)
    case pong(id: Int?)
    case error(code: SignalingErrorCode, message: String, id: String?)
    /// The service's renewal of a joined participant's credential, before the one it joined with
    /// expires: the client rejoins with it after a reconnect (server to client only). TURN
    /// credentials that live as long come with it.
    case token(token: String, expires: Int64, iceServers: [ICEServerInfo] = [])

    public static let maxLineLength = 64 * 1024
    public static let maxDepth = 32
    static let maxIDLength = 128

    // MARK: Parsing

    /// Parses one line (without its newline). Unknown fields are ignored; an unknown `type` is
    /// `unknown_type`; anything else wrong is `bad_json`, `too_deep` or `bad_message`.
    public init(parsing line: some Collection<UInt8>) throws(SignalingProtocolError) {
        guard line.count <= Self.maxLineLength else {
            throw SignalingProtocolError(.lineTooLong, "line of \(line.count) bytes; the limit is \(Self.maxLineLength)")
        }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: line, maxDepth: Self.maxDepth)
        } catch {
            if error.reason.hasPrefix("nested deeper") { throw SignalingProtocolError(.tooDeep, "JSON nested deeper than \(Self.maxDepth) levels") }
            throw SignalingProtocolError(.badJSON, "not a JSON text this protocol takes: \(error)")
        }
        guard case .object = value else { throw SignalingProtocolError(.badMessage, "a message is a JSON object") }
        guard let type = value["type"]?.stringValue else {
            throw SignalingProtocolError(.badMessage, "missing string field \"type\"")
        }
        func string(_ key: String, max: Int = 4096) throws(SignalingProtocolError) -> String {
            guard let text = value[key]?.stringValue, !text.isEmpty, text.utf8.count <= max else {
                throw SignalingProtocolError(.badMessage, "\(type): field \"\(key)\" must be a non-empty string of at most \(max) bytes")
            }
            return text
        }
        func optionalString(_ key: String, max: Int = 4096) throws(SignalingProtocolError) -> String? {
            guard let field = value[key], field != .null else { return nil }
            return try string(key, max: max)
        }
        func optionalInt(_ key: String) -> Int? { value[key]?.integer(in: -999_999_999_999_999...999_999_999_999_999) }
        switch type {
        case "join":
            self = .join(room: try string("room", max: 256), token: try string("token", max: 8192),
                         rejoin: value["rejoin"]?.boolValue ?? false)
        case "joined":
            guard case .array(let list)? = value["peers"] else {
                throw SignalingProtocolError(.badMessage, "joined: field \"peers\" must be an array")
            }
            var servers: [ICEServerInfo] = []
            if case .array(let given)? = value["iceServers"] { servers = given.compactMap(ICEServerInfo.init(json:)) }
            self = .joined(room: try string("room"), participant: try string("participant"),
                           peers: list.compactMap(\.stringValue), iceServers: servers)
        case "peer-joined":
            self = .peerJoined(participant: try string("participant"), rejoin: value["rejoin"]?.boolValue ?? false)
        case "peer-left":
            self = .peerLeft(participant: try string("participant"), reason: value["reason"]?.stringValue ?? "left")
        case "offer", "answer", "candidate", "bye":
            self = .relay(RelayMessage(kind: RelayMessage.Kind(rawValue: type)!, id: try string("id", max: Self.maxIDLength),
                                       from: try optionalString("from", max: 256), to: try optionalString("to", max: 256),
                                       payload: value["payload"] ?? .object([:])))
        case "ack":
            self = .ack(id: try string("id", max: Self.maxIDLength))
        case "ping":
            self = .ping(id: optionalInt("id"))
        case "pong":
            self = .pong(id: optionalInt("id"))
        case "error":
            guard let code = SignalingErrorCode(rawValue: try string("code")) else {
                throw SignalingProtocolError(.badMessage, "error: unknown code \(value["code"]?.stringValue ?? "")")
            }
            self = .error(code: code, message: value["message"]?.stringValue ?? "", id: value["id"]?.stringValue)
        case "token":
            guard let expires = value["expires"]?.integer(in: 0...TokenClaims.latestTime) else {
                throw SignalingProtocolError(.badMessage, "token: field \"expires\" must be an integer (Unix seconds) within 0 ... \(TokenClaims.latestTime)")
            }
            var servers: [ICEServerInfo] = []
            if case .array(let given)? = value["iceServers"] { servers = given.compactMap(ICEServerInfo.init(json:)) }
            self = .token(token: try string("token", max: 8192), expires: expires, iceServers: servers)
        default:
            throw SignalingProtocolError(.unknownType, "unknown message type \"\(type.prefix(64))\"")
        }
    }

    // MARK: Serializing

    public var json: JSONValue {
        var object: [String: JSONValue]
        switch self {
        case .join(let room, let token, let rejoin):
            object = ["type": .string("join"), "room": .string(room), "token": .string(token)]
            if rejoin { object["rejoin"] = .bool(true) }
        case .joined(let room, let participant, let peers, let servers):
            object = ["type": .string("joined"), "room": .string(room), "participant": .string(participant),
                      "peers": .array(peers.map(JSONValue.string))]
            if !servers.isEmpty { object["iceServers"] = .array(servers.map(\.json)) }
        case .peerJoined(let participant, let rejoin):
            object = ["type": .string("peer-joined"), "participant": .string(participant)]
            if rejoin { object["rejoin"] = .bool(true) }
        case .peerLeft(let participant, let reason):
            object = ["type": .string("peer-left"), "participant": .string(participant), "reason": .string(reason)]
        case .relay(let m):
            object = ["type": .string(m.kind.rawValue), "id": .string(m.id), "payload": m.payload]
            if let from = m.from { object["from"] = .string(from) }
            if let to = m.to { object["to"] = .string(to) }
        case .ack(let id):
            object = ["type": .string("ack"), "id": .string(id)]
        case .ping(let id):
            object = ["type": .string("ping")]
            if let id { object["id"] = .number(Double(id)) }
        case .pong(let id):
            object = ["type": .string("pong")]
            if let id { object["id"] = .number(Double(id)) }
        case .error(let code, let message, let id):
            object = ["type": .string("error"), "code": .string(code.rawValue), "message": .string(message)]
            if let id { object["id"] = .string(id) }
        case .token(let token, let expires, let servers):
            object = ["type": .string("token"), "token": .string(token), "expires": .number(Double(expires))]
            if !servers.isEmpty { object["iceServers"] = .array(servers.map(\.json)) }
        }
        return .object(object)
    }

    /// The message as one line of UTF-8 JSON with its terminating newline.
    public func serialized() -> [UInt8] {
        var line = json.serialized
        line.append(0x0a)
        return line
    }
}
