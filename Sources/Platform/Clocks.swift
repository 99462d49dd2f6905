#if canImport(Glibc)
import Glibc
#endif

/// A point on the monotonic clock (CLOCK_MONOTONIC, the clock V4L2 drivers stamp frames with),
/// in microseconds: the one time type below the API. Media pieces take it as `now` and read no
/// clock; shells read a `MediaClock`. Differences are `Duration`s.
public struct MediaTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var microseconds: Int64

    public init(microseconds: Int64) { self.microseconds = microseconds }

    /// The point `elapsed` after the clock's origin.
    public init(_ elapsed: Duration) {
        microseconds = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
    }

    public static let zero = MediaTime(microseconds: 0)

    /// Now on the monotonic clock: for shells (threads, sockets, devices) that take time where
    /// it passes; pieces that can be tested take `now` instead.
    public static var now: MediaTime { MonotonicClock().now }

    /// Since the clock's origin.
    public var sinceOrigin: Duration { .microseconds(microseconds) }
    public var seconds: Double { Double(microseconds) / 1_000_000 }

    public static func < (a: MediaTime, b: MediaTime) -> Bool { a.microseconds < b.microseconds }
    public static func + (t: MediaTime, d: Duration) -> MediaTime { MediaTime(microseconds: t.microseconds + MediaTime(d).microseconds) }
    public static func - (t: MediaTime, d: Duration) -> MediaTime { MediaTime(microseconds: t.microseconds - MediaTime(d).microseconds) }
    public static func - (a: MediaTime, b: MediaTime) -> Duration { .microseconds(a.microseconds - b.microseconds) }
    public static func += (t: inout MediaTime, d: Duration) { t = t + d }

    public var description: String { seconds.fixed(6) + " s" }
}

/// Where shells read the time: the monotonic clock, or a test's virtual one.
public protocol MediaClock: Sendable {
    var now: MediaTime { get }
}

/// CLOCK_MONOTONIC: the clock V4L2 drivers stamp frames with, so synthetic, file and camera
/// frames carry comparable capture times, and the media path's one clock.
public struct MonotonicClock: MediaClock {
    public init() {}
    public var now: MediaTime { MediaTime(Self.now) }

    /// Since the clock's origin (boot), as a Duration.
    public static var now: Duration {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }
}

/// The wall clock, at the edges that need it: RTCP's NTP timestamps (RFC 3550 §4), file ages,
/// file names, log stamps; the kernel's receive stamps (SO_TIMESTAMPNS) are on it too. Nothing
/// measures a duration with it (it jumps when the time is set), except a packet's age in the
/// kernel, which is checked for that.
public enum WallClock {
    /// Now, as the kernel gives it (seconds and nanoseconds since 1970-01-01 UTC).
    public static var now: timespec {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return ts
    }

    /// Seconds since 1970-01-01 UTC, with the fraction.
    public static var unixSeconds: Double {
        let ts = now
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
