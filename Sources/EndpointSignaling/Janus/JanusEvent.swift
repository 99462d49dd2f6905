import Signaling

/// An event Janus sends about a handle while its media runs (from the session's long poll), read
/// once here so that what Janus (or whatever answers in its place) puts in one never reaches the
/// media side unchecked: numbers become integers only through checked conversions.
public enum JanusEvent: Sendable, Equatable {
    /// The PeerConnection is up (ICE and DTLS).
    case webRTCUp
    /// Janus started or stopped receiving our `kind` ("audio", "video").
    case media(kind: String, receiving: Bool)
    /// Janus saw losses: `uplink` from Janus's side (it lost what we sent), with a count when it gave one.
    case slowLink(uplink: Bool, lost: Int?)
    /// A trickled candidate of Janus's, or nil for the end of its candidates.
    case trickle(candidate: String?)
    /// Janus hung up, detached, timed out or lost the session, with its reason.
    case ended(reason: String)
    /// The VideoRoom was destroyed.
    case roomDestroyed
    /// A publisher left the room or stopped publishing.
    case publisherLeft(feed: UInt64)
    /// Anything else (acks, events for other requests, what this version of Janus adds).
    case other

    public init(_ event: JSONValue) {
        let kind = event["janus"]?.stringValue ?? ""
        switch kind {
        case "webrtcup": self = .webRTCUp
        case "media":
            self = .media(kind: event["type"]?.stringValue ?? "media", receiving: event["receiving"]?.boolValue == true)
        case "slowlink":
            self = .slowLink(uplink: event["uplink"]?.boolValue == true, lost: event["lost"]?.integer(in: 0...Int.max))
        case "trickle":
            guard let candidate = event["candidate"] else { self = .other; return }
            if candidate["completed"]?.boolValue == true {
                self = .trickle(candidate: nil)
            } else if let line = candidate["candidate"]?.stringValue {
                self = .trickle(candidate: line)
            } else {
                self = .other
            }
        case "hangup", "detached", "lost", "timeout":
            self = .ended(reason: event["reason"]?.stringValue ?? kind)
        case "event":
            let data = event["plugindata"]?["data"] ?? .null
            if data["videoroom"]?.stringValue == "destroyed" {
                self = .roomDestroyed
            } else if let gone = JanusClient.id(data["unpublished"]) ?? JanusClient.id(data["leaving"]) {
                self = .publisherLeft(feed: gone)
            } else {
                self = .other
            }
        default: self = .other
        }
    }
}
