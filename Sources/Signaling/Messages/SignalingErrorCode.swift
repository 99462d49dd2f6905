/// The `code` of an `error` message (docs/signaling.md lists when each is sent).
public enum SignalingErrorCode: String, Sendable, CaseIterable, Codable {
    // Input that is not a message.
    case badJSON = "bad_json"
    case tooDeep = "too_deep"
    case lineTooLong = "line_too_long"
    case badMessage = "bad_message"
    case unknownType = "unknown_type"
    // Limits.
    case rateLimited = "rate_limited"
    case serverFull = "server_full"
    case addressLimit = "address_limit"
    case joinTimeout = "join_timeout"
    case keepaliveTimeout = "keepalive_timeout"
    // Room flow.
    case notJoined = "not_joined"
    case alreadyJoined = "already_joined"
    case badRoom = "bad_room"
    case roomFull = "room_full"
    case unknownPeer = "unknown_peer"
    case replaced = "replaced"
    /// The identity's seat in the room is held by a live connection with another credential:
    /// try again once it is free (its connection ends, and the grace after it passes).
    case seatTaken = "seat_taken"
    /// The room directory the service's nodes share (Redis) cannot be reached: try again.
    case unavailable = "unavailable"
    // Tokens.
    case tokenMalformed = "token_malformed"
    case tokenAlgorithm = "token_algorithm"
    case tokenSignature = "token_signature"
    case tokenExpired = "token_expired"
    case tokenNotYetValid = "token_not_yet_valid"
    case tokenRoom = "token_room"
    case tokenIssuer = "token_issuer"
    /// A claim (`exp`, `nbf`, `iat`) that is not a time between 1970 and 9999.
    case tokenClaimRange = "token_claim_range"
    /// A credential the service renewed, offered for anything but taking back its own seat while
    /// the seat is held or within the grace after its connection was lost.
    case tokenRenewal = "token_renewal"
    /// The token does not allow this: joining as a peer needs "join" in its claim `can`.
    case tokenScope = "token_scope"

    /// After these the server closes the connection.
    public var closesConnection: Bool {
        switch self {
        case .lineTooLong, .rateLimited, .serverFull, .addressLimit, .joinTimeout, .keepaliveTimeout, .replaced: true
        default: false
        }
    }

    /// A client must not retry a join that failed with these until something changes (a new token,
    /// a free seat); reconnecting at once would fail the same way.
    public var isFatalForJoin: Bool {
        switch self {
        case .badRoom, .roomFull, .tokenMalformed, .tokenAlgorithm, .tokenSignature, .tokenExpired,
             .tokenNotYetValid, .tokenRoom, .tokenIssuer, .tokenClaimRange, .tokenRenewal, .tokenScope: true
        default: false
        }
    }
}

/// A line that is not a valid message, with the error code to answer it with.
public struct SignalingProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: SignalingErrorCode
    public let message: String
    public init(_ code: SignalingErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(code.rawValue): \(message)" }
}
