import Codecs
import MediaCore
import Dispatch
import Platform
import RTPTransport
import Synchronization

/// Decodes complete frames (VP8 or H.264) and hands the pictures to the renderers on a thread of its own,
/// so that neither a slow decoder nor a slow renderer (a file on an SD card, a snapshot, a
/// test's pixel statistics) holds up the network thread, the receiver's lock or audio playout.
/// What it does when it falls behind is `DecodeBacklog`'s policy: skip, never queue up delay.
final class VideoDecodeStage: @unchecked Sendable {  // the decoder and renderers are used on the stage's thread only; the backlog is behind a lock
    /// What became of one frame, told to the receiver on the stage's thread.
    enum Outcome {
        /// `budget`: the frame's receive hops (jitter buffer, playout: the wait here, decode).
        case decoded(VideoFrame, isKeyframe: Bool, rtpTimestamp: UInt32, budget: LatencyBudget)
        case failed
    }

    private let backlog = Mutex(DecodeBacklog())
    private let wake = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let clock: MonotonicClock
    private let renderers: [any VideoRenderer]
    private let decoder: DecoderBox
    /// How long each frame waits after it is complete before it is decoded and shown (µs): lip
    /// sync holding the picture for later sound.
    private let hold = Atomic<Int64>(0)

    var holdTime: Duration {
        get { .microseconds(hold.load(ordering: .relaxed)) }
        set { hold.store(max(0, newValue.inMicroseconds), ordering: .relaxed) }
    }

    init(renderers: [any VideoRenderer], clock: MonotonicClock, format: VideoPayloadFormat = .vp8) throws {
        self.renderers = renderers
        self.clock = clock
        decoder = DecoderBox(try format.makeDecoder())
    }

    /// Starts the stage's thread; `report` runs on it for every frame decoded or refused.
    func start(report: @escaping @Sendable (Outcome) -> Void) {
        let (renderers, box) = (renderers, decoder)
        startThread(named: "video-decode") { [self] in
            while !stopping.load(ordering: .relaxed) || backlog.withLock({ $0.count > 0 }) {
                let held = holdTime
                // The oldest frame is due once it has waited the hold (at once when stopping).
                if held > .zero, !stopping.load(ordering: .relaxed), let queued = backlog.withLock({ $0.oldestQueuedAt }) {
                    let early = queued + held - clock.now.sinceOrigin
                    if early > .zero {
                        wake.wait(for: early)
                        continue
                    }
                }
                guard let item = backlog.withLock({ $0.pop(now: clock.now.sinceOrigin - held) }) else {
                    if stopping.load(ordering: .relaxed) { break }
                    // Until frames are submitted, or stop() (both signal).
                    wake.wait()
                    continue
                }
                let frame = item.frame
                var budget = LatencyBudget()
                budget.add(.jitterBuffer, item.queuedAt - frame.completedAt)
                budget.add(.playout, clock.now.sinceOrigin - item.queuedAt)
                for renderer in renderers { renderer.renderEncoded(frame.data, rtpTimestamp: frame.rtpTimestamp, isKeyframe: frame.isKeyframe) }
                do {
                    let decodeStart = MediaTime.now
                    guard let picture = try box.decoder.decode(frame.data, timestamp: .zero) else { continue }
                    budget.add(.decode, MediaTime.now - decodeStart)
                    report(.decoded(picture, isKeyframe: frame.isKeyframe, rtpTimestamp: frame.rtpTimestamp, budget: budget))
                    if item.render { for renderer in renderers { renderer.render(picture) } }
                } catch {
                    report(.failed)
                }
            }
            finished.signal()
        }
    }

    /// Queues frames the jitter buffer released (called on the network thread).
    func submit(_ frames: [VideoJitterBuffer.Frame]) {
        guard !frames.isEmpty else { return }
        let now = clock.now.sinceOrigin
        backlog.withLock { b in for frame in frames { b.push(frame, now: now) } }
        wake.signal()
    }

    /// Whether frames were skipped for lack of a keyframe; clears the request.
    func takeKeyframeRequest() -> Bool {
        backlog.withLock { b in
            defer { b.clearKeyframeRequest() }
            return b.keyframeNeeded
        }
    }

    var counts: (skipped: Int, notRendered: Int) { backlog.withLock { ($0.framesSkipped, $0.picturesNotRendered) } }

    /// Decodes what is still queued, then ends the thread; waits for it unless told not to (a
    /// receiver's deinit may run on the stage's own thread, which cannot wait for itself).
    func stop(wait: Bool = true) {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        wake.signal()
        if wait { finished.wait() }
    }
}

/// Hands the decoder to the stage's thread, which alone uses it from then on.
private final class DecoderBox: @unchecked Sendable {  // used by the stage's thread only, once started
    let decoder: any VideoDecoder
    init(_ decoder: any VideoDecoder) { self.decoder = decoder }
}
