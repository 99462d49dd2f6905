import Foundation
import Platform
import Testing

/// A burst of buffers freed between buffers still in use (an outage's backlog, drained) stays
/// resident in malloc's arenas until `releaseFreeMemory` hands it back.
struct FreeMemoryTests {
    static func residentKiB() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0
    }

    @Test func freedMemoryBetweenLiveBuffersGoesBackToTheKernel() {
        var kept: [[UInt8]] = []
        var burst: [[UInt8]] = []
        for i in 0..<6000 {
            burst.append([UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 16 * 1024))
            kept.append([UInt8](repeating: 1, count: 64))
        }
        burst = []
        let before = Self.residentKiB()
        releaseFreeMemory()
        let after = Self.residentKiB()
        #expect(before - after > 40 * 1024, "RSS \(before) KiB before, \(after) KiB after")
        #expect(kept.count == 6000)
    }
}
