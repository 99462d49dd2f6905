import Foundation
import Platform
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic time since a stream started, and wall-clock NTP timestamps for RTCP.
struct StreamClock: Sendable {
    let origin = ContinuousClock.now

    var now: Duration { ContinuousClock.now - origin }

    var ntpNow: UInt64 { NTPTimeNow() }
}

import RTPTransport

func NTPTimeNow() -> UInt64 {
    NTPTime.timestamp(unixSeconds: Date().timeIntervalSince1970)
}


import Devices
import Codecs
import MediaCore

/// Reads the frame counter the synthetic test pattern writes into its pictures.
enum TestPatternReader {
    static func frameNumber(in frame: VideoFrame) -> Int? { TestPatternSource.frameNumber(in: frame) }
}
