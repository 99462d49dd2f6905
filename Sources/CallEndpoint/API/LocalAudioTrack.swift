import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Synchronization

/// A published audio track: a device's capture that can be muted (silence is sent, so the peer's
/// playout keeps its rhythm) and unmuted.
public final class LocalAudioTrack: Sendable {
    public let device: any AudioDevice
    private let enabled = Atomic<Bool>(true)
    private let sinks = TrackSinks<[Int16]>()

    public init(device: any AudioDevice) { self.device = device }

    /// Delivers the captured blocks to `sink` too; capture starts with the first. Returns the
    /// key for `removeSink`.
    func addSink(_ sink: @escaping @Sendable ([Int16]) -> Void) throws -> Int {
        let (key, first) = sinks.add(sink)
        if first {
            do { try device.startCapture { [sinks] block in sinks.deliver(block) } } catch {
                _ = sinks.remove(key)
                throw error
            }
        }
        return key
    }

    /// Stops delivering to one sink; with the last gone the device's blocks go nowhere (it keeps
    /// capturing for the next session of a call).
    func removeSink(_ key: Int) {
        if sinks.remove(key) { try? device.startCapture { _ in } }
    }

    public var isEnabled: Bool {
        get { enabled.load(ordering: .relaxed) }
        set { enabled.store(newValue, ordering: .relaxed) }
    }
}
