import Signaling

/// What a join presents for a seat: the credential it holds, and how long renewals of a seat it
/// takes may live.
public struct SeatClaim: Sendable, Equatable {
    public enum Credential: Sendable, Equatable {
        /// A token from whoever mints them; `holder` is its SHA-256, so only that very token can
        /// take back a seat it holds while the seat is live.
        case token(holder: [UInt8])
        /// A renewal the service minted for the seat named `seat`.
        case renewal(seat: String)
    }
    public var room: String
    public var identity: String
    public var credential: Credential
    /// Seconds each renewal of a new seat lives: what the token granted from when it was
    /// presented, at most the service's maximum. A renewal taking back its seat keeps the seat's.
    public var grant: Int64

    public init(room: String, identity: String, credential: Credential, grant: Int64) {
        (self.room, self.identity, self.credential, self.grant) = (room, identity, credential, grant)
    }
}

/// The service's answer to a claim.
public enum SeatOutcome: Sendable, Equatable {
    /// How the seat stood before this join.
    public enum Previous: String, Sendable {
        /// Nobody held it: a new participant.
        case none
        /// Its connection was lost within the grace: the participant came back.
        case lost
        /// A live connection held it, with this very credential: that connection is replaced.
        case live
    }
    /// Seated; `seat` names the seat in renewals, `grant` is how long each lives, `holder` is the
    /// SHA-256 of the token that holds it (a renewal does not change it).
    case seated(seat: String, grant: Int64, holder: [UInt8], previous: Previous)
    case full
    /// A renewal that names no seat held now or within the grace.
    case renewalRefused
    /// A live seat held with another credential.
    case taken
}

/// The seats of one service's rooms when the service has them to itself (no `--redis`; with
/// it, the same rules run as the directory's Lua scripts). A seat belongs to an identity in a
/// room from its join until `grace` after its connection is lost: within that time only the
/// token that took it or one of its renewals takes it back, and it counts toward the room's
/// limit. Pure: time and the new seat's name are passed in.
public struct SeatTable: Sendable {
    struct Seat: Sendable {
        var id: String
        var holder: [UInt8]
        var grant: Int64
        /// When its connection was lost; nil while one holds it.
        var lostAt: Duration?
    }

    public var grace: Duration
    private var rooms: [String: [String: Seat]] = [:]

    public init(grace: Duration) { self.grace = grace }

    /// Seats held or within their grace in `room`.
    public func count(in room: String) -> Int { rooms[room]?.count ?? 0 }

    public var isEmpty: Bool { rooms.isEmpty }

    public mutating func take(_ claim: SeatClaim, now: Duration, maxParticipants: Int, newSeatID: String) -> SeatOutcome {
        _ = expire(room: claim.room, now: now)
        let existing = rooms[claim.room]?[claim.identity]
        switch claim.credential {
        case .renewal(let seat):
            guard var held = existing, held.id == seat else { return .renewalRefused }
            let previous: SeatOutcome.Previous = held.lostAt == nil ? .live : .lost
            held.lostAt = nil
            rooms[claim.room]![claim.identity] = held
            return .seated(seat: held.id, grant: held.grant, holder: held.holder, previous: previous)
        case .token(let holder):
            if var held = existing {
                if held.lostAt == nil {
                    // A live seat goes only to the token that holds it (its client, reconnected
                    // before the old connection timed out).
                    guard Crypto.constantTimeEquals(held.holder, holder) else { return .taken }
                    held.grant = claim.grant
                    rooms[claim.room]![claim.identity] = held
                    return .seated(seat: held.id, grant: held.grant, holder: holder, previous: .live)
                }
                // Within the grace any valid token of the identity takes the seat back; one that
                // is not the holder's makes it a new seat, and the old one's renewals stop working.
                if !Crypto.constantTimeEquals(held.holder, holder) { held.id = newSeatID }
                held.holder = holder
                held.grant = claim.grant
                held.lostAt = nil
                rooms[claim.room]![claim.identity] = held
                return .seated(seat: held.id, grant: held.grant, holder: holder, previous: .lost)
            }
            guard count(in: claim.room) < maxParticipants else { return .full }
            rooms[claim.room, default: [:]][claim.identity] = Seat(id: newSeatID, holder: holder, grant: claim.grant)
            return .seated(seat: newSeatID, grant: claim.grant, holder: holder, previous: .none)
        }
    }

    /// The seat's connection is gone: the grace starts.
    public mutating func lose(room: String, identity: String, now: Duration) {
        guard rooms[room]?[identity] != nil else { return }
        rooms[room]![identity]!.lostAt = now
    }

    /// Lets go of every seat whose grace is over; returns them.
    @discardableResult
    public mutating func expire(now: Duration) -> [(room: String, identity: String)] {
        var gone: [(String, String)] = []
        for room in Array(rooms.keys) { gone += expire(room: room, now: now).map { (room, $0) } }
        return gone
    }

    private mutating func expire(room: String, now: Duration) -> [String] {
        guard let seats = rooms[room] else { return [] }
        let gone = seats.filter { $0.value.lostAt.map { now - $0 > grace } ?? false }.map(\.key)
        guard !gone.isEmpty else { return [] }
        for identity in gone { rooms[room]![identity] = nil }
        if rooms[room]!.isEmpty { rooms[room] = nil }
        return gone
    }
}
