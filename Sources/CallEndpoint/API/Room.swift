import Dispatch
import EndpointSignaling
import FoundationEssentials
import Glibc
import Platform
import Signaling
import Synchronization

public enum TrackKind: String, Sendable, Codable { case video, audio }

/// What happens in a room, in the order it happens.
public enum RoomEvent: Sendable, Equatable {
    /// Joined the room (again, after a reconnect, when `rejoined`).
    case connected(participant: String, rejoined: Bool)
    case participantJoined(String)
    case participantLeft(String, reason: String)
    /// The first picture or sound of the peer's track was decoded.
    case trackSubscribed(participant: String, kind: TrackKind)
    /// The signaling connection dropped; media goes on while the client reconnects.
    case reconnecting(attempt: Int, reason: String)
    /// One second of the call: bitrates, frame rate, sizes, loss, RTT.
    case stats(CallStatus)
    /// This side's camera went away (black pictures are sent until it is back) or came back.
    case camera(CameraDeviceEvent)
    /// The peer says something of its video source (RTCP SDES NOTE: "camera lost"), or stopped
    /// saying it (nil: its camera is back).
    case peerVideoNote(participant: String, note: String?)
    /// The call is over.
    case disconnected(reason: String)

    /// The room event a signaling event means, if any.
    init?(_ event: SignalingEvent) {
        switch event {
        case .joined(let me, _, let again): self = .connected(participant: me, rejoined: again)
        case .peerJoined(let who, _): self = .participantJoined(who)
        case .peerLeft(let who, let reason): self = .participantLeft(who, reason: reason)
        case .reconnecting(let attempt, _, let reason): self = .reconnecting(attempt: attempt, reason: reason)
        default: return nil
        }
    }
}

public protocol RoomDelegate: AnyObject, Sendable {
    func room(_ room: Room, didReceive event: RoomEvent)
}

/// A joined room: the call runs on its own thread; events arrive through `events` (an async
/// sequence) and the delegate; `perform` switches camera, microphone or speaker, mutes and
/// reports while the call goes on.
///
///     let room = try Room.connect(options: options, server: ("10.0.0.1", 7000),
///                                 media: Call.Media(videoTrack: LocalVideoTrack(source: camera), audioTrack: mic))
///     for await event in room.events { ... }
public final class Room: Sendable {
    public let call: Call
    public let events: AsyncStream<RoomEvent>
    private let continuation: AsyncStream<RoomEvent>.Continuation
    private let result = Mutex<Result<CallSummary, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    private init(call: Call) {
        self.call = call
        (events, continuation) = AsyncStream.makeStream(of: RoomEvent.self, bufferingPolicy: .bufferingNewest(1000))
    }

    /// Joins and starts the call on its own thread.
    public static func connect(options: ConnectOptions, server: (host: String, port: Int), media: Call.Media? = nil, duration: Duration? = nil,
                               delegate: (any RoomDelegate)? = nil,
                               log: @escaping @Sendable (LogMessage) -> Void = { _ in }) throws -> Room {
        let call = try Call(options: options, server: server, media: media, duration: duration, log: log)
        let room = Room(call: call)
        call.onEvent = { [weak room, weak delegate] event in
            guard let room else { return }
            room.continuation.yield(event)
            delegate?.room(room, didReceive: event)
            if case .disconnected = event { room.continuation.finish() }
        }
        startThread(named: "room") {
            let outcome = Result { try call.run() }
            room.result.withLock { $0 = outcome }
            if case .failure(let error) = outcome {
                call.onEvent?(.disconnected(reason: "\(error)"))
            }
            room.done.signal()
        }
        return room
    }

    /// Leaves: says bye and stops media.
    public func disconnect() { call.stop() }

    /// Waits for the call to end (blocking) and returns its summary.
    public func wait() throws -> CallSummary {
        done.wait()
        done.signal()
        return try result.withLock { $0! }.get()
    }

    /// Runs one control command (see `ControlCommand`) and returns its one-line JSON reply.
    public func perform(_ line: String) -> String { call.perform(line) }

    public var localVideoTrack: LocalVideoTrack? { call.media.videoTrack }
    public var localAudioTrack: LocalAudioTrack? { call.media.audioTrack }
}
