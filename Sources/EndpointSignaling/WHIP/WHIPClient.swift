import FoundationEssentials
import Glibc
import Platform
import Signaling

/// A session a WHIP (RFC 9725) or WHEP server created for this client: where it lives (the
/// `Location` of the 201), its entity tag, the server's SDP answer, and the ICE servers its Link
/// fields gave.
public struct WHIPResource: Sendable, Equatable {
    public var location: HTTPURL
    public var etag: String?
    public var answer: String
    public var iceServers: [ICEServerInfo]
    /// The endpoint that answered, after redirects.
    public var endpoint: HTTPURL

    public init(location: HTTPURL, etag: String?, answer: String, iceServers: [ICEServerInfo], endpoint: HTTPURL) {
        self.location = location
        self.etag = etag
        self.answer = answer
        self.iceServers = iceServers
        self.endpoint = endpoint
    }
}

/// A refusal or failure of a WHIP/WHEP request, in words a person can act on; `status` is the
/// HTTP status when there was one.
public struct WHIPError: Error, Equatable, Sendable, CustomStringConvertible {
    public let status: Int?
    public let description: String
    /// Seconds from a 429's or 503's Retry-After.
    public let retryAfter: Int?

    public init(status: Int?, _ description: String, retryAfter: Int? = nil) {
        self.status = status
        self.description = description
        self.retryAfter = retryAfter
    }

    /// 405 and 501 to a PATCH: the server does not take trickle or restarts (RFC 9725 §4.3.1).
    public var isUnsupported: Bool { status == 405 || status == 501 }
}

/// The client side of WHIP (RFC 9725) and WHEP: POST of an SDP offer to the endpoint (307/308
/// followed), PATCH of trickle-ICE fragments and ICE restarts to the session, DELETE at the end.
/// The bearer token goes in the Authorization field of every request, and only to the URL's own
/// host: a redirect to another host drops it, so a redirect cannot leak the credential.
public final class WHIPClient: Sendable {
    public let endpoint: HTTPURL
    /// "WHIP" or "WHEP", for the messages.
    public let protocolName: String
    private let bearerToken: String?
    private let http: HTTPClient
    public static let maxRedirects = 5

    public init(endpoint: HTTPURL, bearerToken: String?, http: HTTPClient, protocolName: String = "WHIP") {
        self.endpoint = endpoint
        self.bearerToken = bearerToken
        self.http = http
        self.protocolName = protocolName
    }

    private func authorization(for url: HTTPURL) -> [(name: String, value: String)] {
        guard let bearerToken, url.host.lowercased() == endpoint.host.lowercased(), url.port == endpoint.port else { return [] }
        return [("Authorization", "Bearer \(bearerToken)")]
    }

    private func send(_ request: HTTPRequest) throws(WHIPError) -> HTTPResponseMessage {
        do { return try http.send(request) } catch { throw WHIPError(status: nil, error.description) }
    }

    /// POSTs the offer; returns the session the server made. Redirects (307, 308) are followed
    /// with the same offer, at most `maxRedirects` times.
    public func post(offer: String) throws(WHIPError) -> WHIPResource {
        var url = endpoint
        for _ in 0...Self.maxRedirects {
            let request = HTTPRequest(method: "POST", url: url,
                                      fields: [("Content-Type", "application/sdp"), ("Accept", "application/sdp")] + authorization(for: url),
                                      body: Array(offer.utf8))
            let response = try send(request)
            switch response.status {
            case 201:
                guard let location = response.field("Location"), !location.isEmpty else {
                    throw WHIPError(status: 201, "the \(protocolName) server at \(url) answered 201 without a Location: the session could be neither changed nor ended")
                }
                let resource: HTTPURL
                do { resource = try url.resolving(location) } catch { throw WHIPError(status: 201, "the \(protocolName) server's Location: \(error.description)") }
                let type = response.field("Content-Type")?.lowercased() ?? ""
                let answer = response.text
                guard type.hasPrefix("application/sdp") || (type.isEmpty && answer.hasPrefix("v=0")) else {
                    // The server made a session this client cannot use: it is ended at once.
                    try? delete(WHIPResource(location: resource, etag: nil, answer: "", iceServers: [], endpoint: url))
                    throw WHIPError(status: 201, "the \(protocolName) server at \(url) answered with \(type.isEmpty ? "no Content-Type" : type), not application/sdp")
                }
                return WHIPResource(location: resource, etag: response.field("ETag"), answer: answer,
                                    iceServers: LinkField.iceServers(LinkField.parse(response.fields(named: "Link"))), endpoint: url)
            case 301, 302, 303, 307, 308:
                // RFC 9725 §4.5: 307 and 308 keep the method and body; the others would turn the
                // POST into a GET, which is no way to send an offer.
                guard response.status == 307 || response.status == 308 else {
                    throw WHIPError(status: response.status, "the \(protocolName) server at \(url) redirects with \(response.status), which would drop the offer; only 307 and 308 are followed")
                }
                guard let location = response.field("Location") else {
                    throw WHIPError(status: response.status, "the \(protocolName) server at \(url) redirects (\(response.status)) without a Location")
                }
                do { url = try url.resolving(location) } catch { throw WHIPError(status: response.status, "a redirect from \(url): \(error.description)") }
            default:
                throw refusal(response, of: "POST of the offer to", url)
            }
        }
        throw WHIPError(status: nil, "the \(protocolName) server redirected more than \(Self.maxRedirects) times (last to \(url))")
    }

    /// PATCHes an ICE fragment to the session (RFC 9725 §4.3): trickled candidates under the
    /// session's entity tag, or (`restart`) new credentials under `If-Match: "*"`, which the
    /// server answers with its own new credentials and candidates and a new entity tag.
    /// Returns the server's fragment, nil when it answered 204.
    public func patch(_ resource: inout WHIPResource, fragment: ICEFragment, restart: Bool) throws(WHIPError) -> ICEFragment? {
        var fields: [(name: String, value: String)] = [("Content-Type", ICEFragment.contentType)] + authorization(for: resource.location)
        if restart { fields.append(("If-Match", "\"*\"")) } else if let etag = resource.etag { fields.append(("If-Match", etag)) }
        let response = try send(HTTPRequest(method: "PATCH", url: resource.location, fields: fields, body: Array(fragment.serialized.utf8)))
        switch response.status {
        case 204:
            if let etag = response.field("ETag") { resource.etag = etag }
            return nil
        case 200:
            if let etag = response.field("ETag") { resource.etag = etag }
            guard !response.body.isEmpty else { return nil }
            do { return try ICEFragment(parsing: response.text) } catch {
                throw WHIPError(status: 200, "the \(protocolName) server's answer to a PATCH: \(error.description)")
            }
        default:
            throw refusal(response, of: restart ? "ICE restart (PATCH) of" : "PATCH of candidates to", resource.location)
        }
    }

    /// Ends the session (RFC 9725 §4.2). A session the server no longer knows (404) is ended too.
    public func delete(_ resource: WHIPResource) throws(WHIPError) {
        let response = try send(HTTPRequest(method: "DELETE", url: resource.location, fields: authorization(for: resource.location)))
        guard (200..<300).contains(response.status) || response.status == 404 else {
            throw refusal(response, of: "DELETE of", resource.location)
        }
    }

    /// The error for a status that is not what the request wanted, saying what the server meant.
    func refusal(_ response: HTTPResponseMessage, of what: String, _ url: HTTPURL) -> WHIPError {
        let status = response.status
        // Delay-seconds (RFC 9110 §10.2.3); a date or a number out of reason is not repeated.
        let retryAfter = response.field("Retry-After").flatMap { Int($0.trimmed()) }.flatMap { (0...86_400).contains($0) ? $0 : nil }
        let meaning: String = switch status {
        case 400: "the server found the request malformed"
        case 401: "the server refused the bearer token (401 Unauthorized): give the right one"
        case 403: "the token does not allow this (403 Forbidden)"
        case 404: "nothing there (404 Not Found): check the URL"
        case 405: "the server does not allow this method there (405)"
        case 409: "a conflict (409): the server already has a session for it, or the stream is taken"
        case 412: "the session changed under us (412 Precondition Failed: the entity tag no longer matches)"
        case 413: "the offer is too large for the server (413)"
        case 415: "the server does not take this content type (415 Unsupported Media Type)"
        case 422: "the server cannot use the description (422 Unprocessable Content)"
        case 429: "too many requests (429)" + (retryAfter.map { ": the server asks to retry after \($0) s" } ?? "")
        case 501: "the server does not implement this (501)"
        case 503: "the server is unavailable (503)" + (retryAfter.map { ": retry after \($0) s" } ?? "")
        case 500...599: "the server failed (\(status) \(response.reason))"
        default: "an unexpected \(status) \(response.reason)"
        }
        var message = "\(protocolName) \(what) \(url): \(meaning)"
        // What the server said, if it said it in text: one line, printable, short.
        let type = response.field("Content-Type")?.lowercased() ?? ""
        if !response.body.isEmpty, type.isEmpty || type.hasPrefix("text/") || type.contains("json") {
            let said = String(response.text.prefix(300)).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            let clean = String(said.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }.map(Character.init)).trimmed()
            if !clean.isEmpty { message += " (the server says: \(clean.prefix(200)))" }
        }
        return WHIPError(status: status, message, retryAfter: retryAfter)
    }
}
