import Signaling

/// Work the service's core hands the room directory (`serve --redis`). The core never waits for
/// Redis: it returns a request as an action, the directory does it on its own thread, and the
/// answer comes back to the core, tagged with the request's id, on the loop thread.
public struct DirectoryRequest: Sendable, Equatable {
    public enum Work: Sendable, Equatable {
        /// Takes a seat under the rules of `SeatTable`, for every node at once.
        case join(SeatClaim, maxParticipants: Int, newSeatID: String)
        /// The seat's connection on this node is gone: its grace starts, and the others are told.
        case leave(room: String, identity: String, reason: String)
        /// A relay message for the room's members on other nodes (`to` nil: all of them).
        case relay(room: String, from: String, to: String?, line: String)
        /// Renews this node's seats (room → its seats here), putting back any Redis lost.
        case refresh(seats: [String: [SeatRecord]])
    }
    public var id: UInt64
    public var work: Work

    public init(id: UInt64, work: Work) {
        self.id = id
        self.work = work
    }
}

/// What a node knows of a seat it holds: enough to put it back in a Redis that lost it.
public struct SeatRecord: Sendable, Equatable {
    public var identity: String
    public var seat: String
    public var holder: [UInt8]
    public var grant: Int64
    public init(identity: String, seat: String, holder: [UInt8], grant: Int64) {
        (self.identity, self.seat, self.holder, self.grant) = (identity, seat, holder, grant)
    }
}

/// A seat of a room, for answers that list some.
public struct RoomSeat: Sendable, Equatable, Hashable {
    public var room: String
    public var identity: String
    public init(room: String, identity: String) { (self.room, self.identity) = (room, identity) }
}

public enum DirectoryAnswer: Sendable, Equatable {
    /// `peers`: the room's other participants with a live connection, on any node.
    case joined(SeatOutcome, peers: [String])
    case left
    /// How many participants on other nodes the message reached.
    case relayed(Int)
    /// Seats another node holds now.
    case refreshed(lost: [RoomSeat])
    /// Redis could not be used; the text (with Redis's address) is for the log, never for clients.
    case failed(String)
}
