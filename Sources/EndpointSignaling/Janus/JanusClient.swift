import FoundationEssentials
import Platform
import Signaling

/// A refusal or failure of a Janus API request, in words a person can act on; `code` is Janus's
/// error code (its core's, or the plugin's) when Janus said one.
public struct JanusError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Int?
    public let description: String

    public init(code: Int?, _ description: String) {
        self.code = code
        self.description = description
    }
}

/// What Janus answered a message to a plugin handle with: an acknowledgement (the plugin's answer
/// comes later as an event carrying the same transaction) or the plugin's answer at once.
public enum JanusReply: Sendable, Equatable {
    case ack
    case data(JSONValue)
}

/// The client side of Janus's HTTP API (its `janus.transport.http`): sessions, plugin handles,
/// messages to a plugin with their transactions, trickled candidates, keep-alives, and the long
/// poll that brings a session's events. Requests carry the API secret when there is one. Blocking;
/// usable from any thread.
public final class JanusClient: Sendable {
    /// The API's root, e.g. `http://127.0.0.1:8088/janus`.
    public let endpoint: HTTPURL
    private let apiSecret: String?
    private let http: HTTPClient
    /// For the long poll, which Janus holds up to 30 s when there is nothing to say.
    private let poller: HTTPClient

    public init(endpoint: HTTPURL, apiSecret: String? = nil, caFile: String? = nil) throws(TLSError) {
        self.endpoint = endpoint
        self.apiSecret = apiSecret
        http = try HTTPClient(caFile: caFile, timeout: .seconds(10))
        poller = try HTTPClient(caFile: caFile, timeout: .seconds(40))
    }

    /// A new transaction identifier.
    public static func transaction() -> String { String(UInt64.random(in: 1...UInt64.max), radix: 36) }

    private func url(_ path: [UInt64], query: String = "") throws(JanusError) -> HTTPURL {
        let base = endpoint.target.split(separator: "?").first.map(String.init) ?? endpoint.target
        let trimmed = base.hasSuffix("/") ? String(base.dropLast()) : base
        let target = ([trimmed] + path.map(String.init)).joined(separator: "/") + query
        do { return try endpoint.resolving(target) } catch { throw JanusError(code: nil, "the Janus URL \(endpoint): \(error.description)") }
    }

    /// POSTs one request (`janus` = verb) to the root, a session or a handle, and returns Janus's
    /// reply; an `error` reply is thrown with its code and reason.
    @discardableResult
    func post(_ verb: String, to path: [UInt64], fields: [String: JSONValue] = [:], transaction: String = JanusClient.transaction()) throws(JanusError) -> JSONValue {
        var object = fields
        object["janus"] = .string(verb)
        object["transaction"] = .string(transaction)
        if let apiSecret { object["apisecret"] = .string(apiSecret) }
        let body = JSONValue.object(object).serialized
        let target = try url(path)
        let response: HTTPResponseMessage
        do {
            response = try http.send(HTTPRequest(method: "POST", url: target, fields: [("Content-Type", "application/json")], body: body))
        } catch {
            throw JanusError(code: nil, "Janus '\(verb)': \(error.description)")
        }
        return try Self.reply(response, to: "'\(verb)' at \(target)")
    }

    /// Janus's JSON reply in an HTTP response, or the error it stands for.
    static func reply(_ response: HTTPResponseMessage, to what: String) throws(JanusError) -> JSONValue {
        guard response.status == 200 else {
            throw JanusError(code: nil, "Janus \(what): HTTP \(response.status) \(response.reason)\(response.status == 404 ? ": is the URL Janus's API root (such as http://HOST:8088/janus)?" : "")")
        }
        guard let value = try? JSONValue(parsing: response.body) else {
            throw JanusError(code: nil, "Janus \(what): the reply is not JSON")
        }
        if value["janus"]?.stringValue == "error" {
            let code: Int? = value["error"]?["code"]?.integer()
            let reason = value["error"]?["reason"]?.stringValue ?? "no reason given"
            throw JanusError(code: code, "Janus refused \(what): \(reason)\(code.map { " (error \($0)\(Self.meaning(of: $0)))" } ?? "")")
        }
        return value
    }

    private static func meaning(of code: Int) -> String {
        switch code {
        case 403: ": the API secret or token is missing or wrong"
        case 458: ": no such session (it timed out, or Janus restarted)"
        case 459: ": no such handle"
        case 460: ": no such plugin"
        default: ""
        }
    }

    /// A Janus id (sessions, handles, feeds): a whole number 1 ... 2^53, which JSON carries exactly.
    public static func id(_ value: JSONValue?) -> UInt64? { value?.integer(in: 1...9_007_199_254_740_992) }

    private static func id(in reply: JSONValue, of what: String) throws(JanusError) -> UInt64 {
        guard let number = id(reply["data"]?["id"]) else {
            throw JanusError(code: nil, "Janus answered '\(what)' without an id")
        }
        return number
    }

    /// A new session.
    public func createSession() throws(JanusError) -> UInt64 {
        try Self.id(in: try post("create", to: []), of: "create")
    }

    /// A handle on `plugin` (e.g. `janus.plugin.videoroom`) in the session.
    public func attach(session: UInt64, plugin: String) throws(JanusError) -> UInt64 {
        try Self.id(in: try post("attach", to: [session], fields: ["plugin": .string(plugin)]), of: "attach")
    }

    /// Sends `body` (and a JSEP offer or answer) to the handle's plugin. A plugin's error in a
    /// synchronous answer (`error_code`) is thrown.
    public func message(session: UInt64, handle: UInt64, body: JSONValue, jsep: JSONValue? = nil, transaction: String = JanusClient.transaction()) throws(JanusError) -> JanusReply {
        var fields: [String: JSONValue] = ["body": body]
        if let jsep { fields["jsep"] = jsep }
        let reply = try post("message", to: [session, handle], fields: fields, transaction: transaction)
        if reply["janus"]?.stringValue == "ack" { return .ack }
        let data = reply["plugindata"]?["data"] ?? .null
        try Self.checkPlugin(data, request: body["request"]?.stringValue ?? "message")
        return .data(data)
    }

    /// A plugin's answer that reports an error, thrown.
    public static func checkPlugin(_ data: JSONValue, request: String) throws(JanusError) {
        if let field = data["error_code"] {
            let code: Int? = field.integer()
            throw JanusError(code: code, "Janus's plugin refused '\(request)': \(data["error"]?.stringValue ?? "no reason given") (error \(code.map(String.init) ?? "not a number"))")
        }
    }

    /// Trickles candidates (SDP `candidate:` lines, with or without `a=`) for the section `mid`;
    /// `completed` says gathering is done.
    public func trickle(session: UInt64, handle: UInt64, candidates: [String], mid: String = "0", completed: Bool = false) throws(JanusError) {
        var items: [JSONValue] = candidates.map { line in
            let text = line.hasPrefix("a=") ? String(line.dropFirst(2)) : line
            return .object(["candidate": .string(text), "sdpMid": .string(mid), "sdpMLineIndex": .number(0)])
        }
        if completed { items.append(.object(["completed": .bool(true)])) }
        guard !items.isEmpty else { return }
        try post("trickle", to: [session, handle], fields: ["candidates": .array(items)])
    }

    /// Keeps a session alive (Janus ends one that says nothing for its session timeout, 60 s by default).
    public func keepalive(session: UInt64) throws(JanusError) {
        try post("keepalive", to: [session])
    }

    public func detach(session: UInt64, handle: UInt64) throws(JanusError) {
        try post("detach", to: [session, handle])
    }

    public func destroy(session: UInt64) throws(JanusError) {
        try post("destroy", to: [session])
    }

    /// The session's next events (a long poll: Janus answers at once when it has some, or with a
    /// keep-alive after up to 30 s). At most `max` per poll.
    public func events(session: UInt64, max: Int = 10) throws(JanusError) -> [JSONValue] {
        var query = "?maxev=\(max)&rid=\(UInt32.random(in: 0...UInt32.max))"
        if let apiSecret { query += "&apisecret=" + Self.percentEncoded(apiSecret) }
        let target = try url([session], query: query)
        let response: HTTPResponseMessage
        do { response = try poller.send(HTTPRequest(method: "GET", url: target)) } catch {
            throw JanusError(code: nil, "Janus's event poll: \(error.description)")
        }
        let reply = try Self.reply(response, to: "the event poll of session \(session)")
        let events: [JSONValue]
        if case .array(let list) = reply { events = list } else { events = [reply] }
        return events.filter { $0["janus"]?.stringValue != "keepalive" }
    }

    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.append(Character(Unicode.Scalar(byte)))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
