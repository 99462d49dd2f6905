/// Complete frames waiting for a decoder that runs apart from the network thread, and what to
/// do when it falls behind. Pure: time is passed in.
///
/// A real-time receiver must never let a slow decoder or renderer turn into latency: frames that
/// queue up are pictures the viewer sees later and later, and a picture of a new camera mode
/// waits behind every old one. But frames cannot simply be dropped from the front: each inter
/// frame builds on the one before (RFC 6386 §9.7). So:
///
/// - When the oldest waiting frame has waited longer than `maximumWait`, everything before the
///   newest waiting keyframe is dropped; with no keyframe waiting, everything is dropped, inter
///   frames are refused until one comes, and `keyframeNeeded` asks the caller for a PLI.
/// - A decoded picture is worth rendering when nothing newer is waiting or it is still fresh
///   (waited less than `renderWait`): a renderer slower than the frame rate then costs rendered
///   pictures, not delay, while a burst of frames released together after a retransmission is
///   still rendered in full.
public struct DecodeBacklog: Sendable {
    public struct Item: Sendable {
        public var frame: VideoJitterBuffer.Frame
        /// Render the picture once decoded (false: decode only, to keep the reference chain).
        public var render: Bool
        /// When the frame was complete and queued.
        public var queuedAt: Duration = .zero
    }

    public var maximumWait: Duration
    public var renderWait: Duration
    private var waiting: [(frame: VideoJitterBuffer.Frame, queuedAt: Duration)] = []
    private var awaitingKeyframe = false

    public private(set) var keyframeNeeded = false
    /// Frames dropped undecoded because the decoder fell behind.
    public private(set) var framesSkipped = 0
    /// Frames decoded but not rendered because a newer one was waiting.
    public private(set) var picturesNotRendered = 0

    public init(maximumWait: Duration = .milliseconds(500), renderWait: Duration = .milliseconds(100)) {
        self.maximumWait = maximumWait
        self.renderWait = renderWait
    }

    public var count: Int { waiting.count }

    public mutating func clearKeyframeRequest() { keyframeNeeded = false }

    public mutating func push(_ frame: VideoJitterBuffer.Frame, now: Duration) {
        if awaitingKeyframe {
            guard frame.isKeyframe else {
                framesSkipped += 1
                return
            }
            awaitingKeyframe = false
        }
        waiting.append((frame, now))
    }

    /// When the oldest waiting frame was queued.
    public var oldestQueuedAt: Duration? { waiting.first?.queuedAt }

    /// The next frame to decode, or nil when none is waiting. A frame held back on purpose (lip
    /// sync) is not late: pass `now` less the hold.
    public mutating func pop(now: Duration) -> Item? {
        if let oldest = waiting.first, now - oldest.queuedAt > maximumWait {
            if let keyframe = waiting.lastIndex(where: { $0.frame.isKeyframe }) {
                framesSkipped += keyframe
                waiting.removeFirst(keyframe)
            } else {
                framesSkipped += waiting.count
                waiting.removeAll()
                awaitingKeyframe = true
                keyframeNeeded = true
            }
        }
        guard !waiting.isEmpty else { return nil }
        let next = waiting.removeFirst()
        let render = waiting.isEmpty || now - next.queuedAt < renderWait
        if !render { picturesNotRendered += 1 }
        return Item(frame: next.frame, render: render, queuedAt: next.queuedAt)
    }
}
