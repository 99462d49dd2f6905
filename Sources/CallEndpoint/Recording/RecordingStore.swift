import Platform
import MediaCore
import FoundationEssentials
import Glibc
import Synchronization

/// Where and how much a call records (`join --record-dir`).
public struct RecordingOptions: Sendable {
    public var directory: String
    /// The most the directory's recordings may hold, in bytes, the segment being written
    /// included: the oldest segments go first to make room.
    public var quotaBytes: Int64?
    /// Segments older than this are deleted.
    public var keep: Duration?
    /// A new segment starts at the first keyframe after this long (one is asked for).
    public var segmentLength: Duration = .seconds(60)
    /// Written to the file a cluster at a time: what a kill can lose.
    public var clusterMilliseconds = 800

    public init(directory: String) { self.directory = directory }
}

/// The segments in a recording directory, written and old, and the quota and age limits over
/// them. Both directions of a call share one store. Names sort by age:
/// callend-YYYYMMDDTHHMMSS.mmmZ-<direction>.webm.
final class RecordingStore: Sendable {
    let options: RecordingOptions
    private struct Segment { var path: String; var bytes: Int64; var modified: Int64 }
    private struct State {
        var closed: [Segment] = []  // oldest first
        var active: [String: Int64] = [:]  // path -> bytes reserved
        var deleted = 0
        var quotaBytes: Int64?
    }
    private let state = Mutex(State())
    static let prefix = "callend-"

    init(_ options: RecordingOptions) throws(RecordingError) {
        self.options = options
        var info = stat()
        if stat(options.directory, &info) != 0 {
            guard mkdir(options.directory, 0o750) == 0 else {
                throw RecordingError("cannot create the recording directory \(options.directory): \(String(cString: strerror(errno)))")
            }
        } else if info.st_mode & S_IFMT != S_IFDIR {
            throw RecordingError("the recording directory \(options.directory) is not a directory")
        }
        guard access(options.directory, W_OK | X_OK) == 0 else {
            throw RecordingError("cannot write in the recording directory \(options.directory): \(String(cString: strerror(errno)))")
        }
        if let why = WebMFile.unavailableReason() { throw RecordingError("WebM recording needs libavformat: \(why)") }
        let found = Self.segments(in: options.directory)
        state.withLock { $0.closed = found; $0.quotaBytes = options.quotaBytes }
        expire()
    }

    private static func segments(in directory: String) -> [Segment] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var found: [Segment] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.hasPrefix(prefix), name.hasSuffix(".webm") else { continue }
            let path = directory + "/" + name
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            found.append(Segment(path: path, bytes: Int64(info.st_size), modified: Int64(info.st_mtim.tv_sec)))
        }
        return found.sorted { $0.path < $1.path }
    }

    /// A new segment's path, named by the time now (UTC, milliseconds).
    func newPath(direction: String) -> String {
        let ts = WallClock.now
        var t = ts.tv_sec, parts = tm()
        gmtime_r(&t, &parts)
        let stamp = (Int(parts.tm_year) + 1900).zeroPadded(4) + (Int(parts.tm_mon) + 1).zeroPadded(2) + Int(parts.tm_mday).zeroPadded(2) + "T"
            + Int(parts.tm_hour).zeroPadded(2) + Int(parts.tm_min).zeroPadded(2) + Int(parts.tm_sec).zeroPadded(2) + "." + (ts.tv_nsec / 1_000_000).zeroPadded(3) + "Z"
        var path = "\(options.directory)/\(Self.prefix)\(stamp)-\(direction).webm"
        var n = 2
        while access(path, F_OK) == 0 {
            path = "\(options.directory)/\(Self.prefix)\(stamp)-\(direction)-\(n).webm"
            n += 1
        }
        return path
    }

    /// The quota now (`options.quotaBytes` until a reload replaces it).
    var quotaBytes: Int64? {
        get { state.withLock { $0.quotaBytes } }
        set { state.withLock { $0.quotaBytes = newValue } }
    }

    /// Makes room for `bytes` more in the segment at `path` (deleting the oldest closed segments
    /// as the quota needs); false when even then it would not fit.
    func reserve(_ bytes: Int64, for path: String) -> Bool {
        let victims: [String]
        let fits: Bool
        (victims, fits) = state.withLock { s -> ([String], Bool) in
            let wanted = (s.active[path] ?? 0) + bytes
            guard let quota = s.quotaBytes else {
                s.active[path] = wanted
                return ([], true)
            }
            var total = s.closed.reduce(0) { $0 + $1.bytes } + s.active.values.reduce(0, +) - (s.active[path] ?? 0) + wanted
            var gone: [String] = []
            while total > quota, !s.closed.isEmpty {
                let oldest = s.closed.removeFirst()
                total -= oldest.bytes
                gone.append(oldest.path)
            }
            s.deleted += gone.count
            guard total <= quota else { return (gone, false) }
            s.active[path] = wanted
            return (gone, true)
        }
        for victim in victims { unlink(victim) }
        return fits
    }

    /// The segment at `path` was closed with `bytes` in it (or removed, when nil).
    func closed(_ path: String, bytes: Int64?) {
        state.withLock { s in
            s.active[path] = nil
            if let bytes { s.closed.append(Segment(path: path, bytes: bytes, modified: Int64(WallClock.unixSeconds))) }
        }
        expire()
    }

    /// Deletes closed segments older than `keep`.
    func expire() {
        guard let keep = options.keep else { return }
        let cutoff = Int64(WallClock.unixSeconds) - keep.components.seconds
        let victims = state.withLock { s -> [String] in
            let old = s.closed.filter { $0.modified < cutoff }.map(\.path)
            s.closed.removeAll { $0.modified < cutoff }
            s.deleted += old.count
            return old
        }
        for victim in victims { unlink(victim) }
    }

    /// What the directory's segments hold, those being written counted by what they reserved.
    var heldBytes: Int64 { state.withLock { s in s.closed.reduce(0) { $0 + $1.bytes } + s.active.values.reduce(0, +) } }

    /// Segments deleted for the quota or their age.
    var deletedCount: Int { state.withLock { $0.deleted } }
}

public struct RecordingError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
