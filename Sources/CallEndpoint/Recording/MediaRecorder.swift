import Platform
import Codecs
import Glibc
import MediaCore
import Synchronization

/// Records one direction of a call (what this endpoint sends, or what it receives) as it was
/// encoded into WebM segments: each starts on a video keyframe, a new one after the segment
/// length (asking the encoder, or the peer, for a keyframe) or when the picture's size changes.
/// Audio before a segment's first keyframe is not kept. Times come from the RTP timestamps
/// (received) or capture stamps (sent), anchored to the segment's start.
public final class MediaRecorder: VideoRenderer, @unchecked Sendable {  // `state` holds the file and is used under its lock
    public enum Stamp: Sendable {
        case rtp(UInt32, clockRate: Int)
        case captured(MediaTime)
    }

    let direction: String
    private let store: RecordingStore
    private let log: @Sendable (String) -> Void
    /// A track's first stamp in the segment and when (since the segment began) it came.
    private struct Anchor { var stamp: Stamp; var milliseconds: Int64 }
    private struct State {
        var file: WebMFile?
        var started = MediaTime.zero
        var anchors: [WebMFile.Track: Anchor] = [:]
        var last: [WebMFile.Track: Int64] = [:]
        var keyframeAskedAt: MediaTime?
        var wantsKeyframe = false
        var segments = 0
        var failed = false
    }
    private let state = Mutex(State())
    private let clock = MonotonicClock()
    /// A segment's largest share of the quota: the rest holds what came before.
    static let quotaShare: Int64 = 4
    /// Container overhead reserved per frame (block and cluster headers) and per file (header, trailer).
    static let frameOverhead: Int64 = 64, fileOverhead: Int64 = 4096

    init(store: RecordingStore, direction: String, log: @escaping @Sendable (String) -> Void) {
        self.store = store
        self.direction = direction
        self.log = log
    }

    public func render(_ frame: VideoFrame) {}

    public func renderEncoded(_ data: [UInt8], rtpTimestamp: UInt32, isKeyframe: Bool) {
        video(data, stamp: .rtp(rtpTimestamp, clockRate: 90_000), isKeyframe: isKeyframe)
    }

    public func finish() {
        state.withLock { s in closeFile(&s) }
    }

    /// Whether a keyframe is wanted to start a segment; clears it.
    func takeKeyframeRequest() -> Bool { state.withLock { s in defer { s.wantsKeyframe = false }; return s.wantsKeyframe } }

    var segmentsWritten: Int { state.withLock { $0.segments } }

    /// True while this direction is not being written (no room in the quota or on the disk, a write

    /// that failed) until its next segment starts.

    var failing: Bool { state.withLock { $0.failed } }

    func video(_ data: [UInt8], stamp: Stamp, isKeyframe: Bool) {
        guard !data.isEmpty else { return }
        let now = clock.now
        state.withLock { s in
            let size = isKeyframe ? (try? VP8FrameHeader(parsing: data)).flatMap { h in h.width.flatMap { w in h.height.map { (w, $0) } } } : nil
            if let file = s.file {
                let age = now - s.started
                let sizeChanged = size.map { $0 != (file.width, file.height) } ?? false
                let tooBig = store.quotaBytes.map { file.size >= $0 / Self.quotaShare } ?? false
                let due = age >= store.options.segmentLength || tooBig
                if isKeyframe, due || sizeChanged {
                    closeFile(&s)
                } else if due, s.keyframeAskedAt.map({ now - $0 >= .seconds(1) }) ?? true {
                    s.keyframeAskedAt = now
                    s.wantsKeyframe = true
                }
            }
            if s.file == nil {
                guard isKeyframe, let (width, height) = size else {
                    if s.keyframeAskedAt.map({ now - $0 >= .seconds(1) }) ?? true {
                        s.keyframeAskedAt = now
                        s.wantsKeyframe = true
                    }
                    return
                }
                openFile(&s, width: width, height: height, at: now)
            }
            write(&s, .video, data, stamp: stamp, keyframe: isKeyframe, now: now)
        }
    }

    func audio(_ payload: [UInt8], stamp: Stamp) {
        guard !payload.isEmpty else { return }
        let now = clock.now
        state.withLock { s in
            guard s.file != nil else { return }
            write(&s, .audio, payload, stamp: stamp, keyframe: true, now: now)
        }
    }

    private func openFile(_ s: inout State, width: Int, height: Int, at now: MediaTime) {
        let path = store.newPath(direction: direction)
        guard store.reserve(Self.fileOverhead, for: path) else {
            if !s.failed { log("recording: the quota has no room for a new \(direction) segment; recording resumes when it has") }
            s.failed = true
            store.closed(path, bytes: nil)
            return
        }
        do {
            s.file = try WebMFile(path: path, width: width, height: height, audioChannels: 2, clusterMilliseconds: store.options.clusterMilliseconds)
            s.started = now
            s.anchors = [:]
            s.last = [:]
            s.keyframeAskedAt = nil
            s.segments += 1
            s.failed = false
        } catch {
            store.closed(path, bytes: nil)
            if !s.failed { log("recording: \(error)") }
            s.failed = true
        }
    }

    private func closeFile(_ s: inout State) {
        guard let file = s.file else { return }
        s.file = nil
        do { try file.close() } catch { log("recording: \(error)") }
        store.closed(file.path, bytes: file.size)
    }

    private func write(_ s: inout State, _ track: WebMFile.Track, _ data: [UInt8], stamp: Stamp, keyframe: Bool, now: MediaTime) {
        guard let file = s.file else { return }
        let anchor = s.anchors[track] ?? Anchor(stamp: stamp, milliseconds: max(0, (now - s.started).inMilliseconds))
        s.anchors[track] = anchor
        var ms = anchor.milliseconds
        switch (stamp, anchor.stamp) {
        case (.captured(let t), .captured(let first)): ms += (t - first).inMilliseconds
        case (.rtp(let ts, let rate), .rtp(let first, _)): ms += Int64(Int32(bitPattern: ts &- first)) * 1000 / Int64(rate)
        default: break
        }
        ms = max(ms, 0)
        if let last = s.last[track], ms <= last {
            // A late or repeated audio packet is dropped; a picture moves up behind the last one.
            guard track == .video else { return }
            ms = last + 1
        }
        guard store.reserve(Int64(data.count) + Self.frameOverhead, for: file.path) else {
            // Even the oldest segments gone, this one fills the quota: it ends here.
            closeFile(&s)
            if !s.failed { log("recording: the \(direction) segment filled the quota; a new one starts at the next keyframe") }
            s.failed = true
            return
        }
        do {
            try file.write(track, data, milliseconds: ms, keyframe: keyframe)
            s.last[track] = ms
        } catch {
            if !s.failed { log("recording: \(error); the segment is closed and a new one starts at the next keyframe") }
            s.failed = true
            closeFile(&s)
        }
    }
}

/// A call's recording: what it sends and what it receives, in one directory.
public final class CallRecording: Sendable {
    public let options: RecordingOptions
    let sent: MediaRecorder
    let received: MediaRecorder
    private let store: RecordingStore

    /// Checks the directory (made when missing) and that WebM can be written; throws why not.
    public init(_ options: RecordingOptions, log: @escaping @Sendable (String) -> Void) throws(RecordingError) {
        self.options = options
        store = try RecordingStore(options)
        sent = MediaRecorder(store: store, direction: "sent", log: log)
        received = MediaRecorder(store: store, direction: "received", log: log)
    }

    /// The most the directory may hold from now on (a reloaded config file's `record-quota`):
    /// the next segment's room is made under it.
    public var quotaBytes: Int64? {
        get { store.quotaBytes }
        set { store.quotaBytes = newValue }
    }

    public func finish() {
        sent.finish()
        received.finish()
    }

    /// The state of the recording for an operator (`join --metrics`): what its segments hold, the
    /// room left on the directory's filesystem, and whether a direction is not being written.
    public struct Health: Sendable, Equatable {
        public var heldBytes: Int64
        public var freeBytes: Int64?
        public var failing: Bool
    }

    public var health: Health {
        var info = statvfs()
        let free = statvfs(options.directory, &info) == 0 ? Int64(clamping: UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize)).partialValue) : nil
        return Health(heldBytes: store.heldBytes, freeBytes: free, failing: sent.failing || received.failing)
    }

    /// Segments started in each direction, and those deleted for the quota or age.
    public var counts: (sent: Int, received: Int, deleted: Int) { (sent.segmentsWritten, received.segmentsWritten, store.deletedCount) }
}
