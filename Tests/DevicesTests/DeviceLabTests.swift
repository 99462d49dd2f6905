import Foundation
import Testing
import TestSupport
@testable import Devices

/// Tests against real kernel drivers: they run inside the device lab VM (scripts/devicelab), where
/// vivid is /dev/video0 and snd-aloop is the card "Loopback". Elsewhere they are skipped, and the
/// skip is reported as such.
let inDeviceLab = ProcessInfo.processInfo.environment["CALLEND_DEVICELAB"] == "1"

@Suite(.serialized, .enabled(if: inDeviceLab, "runs only inside the device lab VM (scripts/devicelab/test.sh)"))
struct DeviceLabTests {
    @Test func vividIsListedWithItsModes() throws {
        let camera = try #require(try CameraDevices.describe(path: "/dev/video0"))
        #expect(camera.driver == "vivid")
        let modes = camera.modes
        #expect(modes.contains(CameraMode(fourCC: "YUYV", width: 640, height: 480, frameRate: FrameRate(frames: 25))))
        #expect(modes.contains(CameraMode(fourCC: "NV12", width: 1280, height: 720, frameRate: FrameRate(frames: 10))))
        #expect(!camera.formats.contains { $0.fourCC == "MJPG" }, "vivid has no MJPEG")
        do {
            _ = try camera.nearestMode(width: 640, height: 480, frameRate: FrameRate(frames: 120), fourCC: "YUYV")
            Issue.record("120 fps accepted")
        } catch {
            #expect(error.description.contains("Supported modes: YUYV"))
        }
    }

    @Test func loopbackCardIsListedByItsStableName() {
        let devices = ALSADeviceList.devices()
        #expect(devices.contains { $0.hardwareName == "hw:CARD=Loopback,DEV=0" && $0.capture != nil && $0.playback != nil })
    }

    /// Plays a known sequence into the loopback card's device 0 and captures it from device 1:
    /// the same samples must come out, in order.
    @Test func loopbackCaptureReceivesExactlyWhatWasPlayed() throws {
        var rng = SeededGenerator(seed: 77)
        let played = (0..<48_000).map { _ in Int16.random(in: -20_000...20_000, using: &rng) | 1 }
        let capture = try ALSAPCM(name: "hw:CARD=Loopback,DEV=1", direction: .capture)
        let done = DispatchSemaphore(value: 0)
        let writeError = LockedBox<DeviceError?>(nil)
        // The playback PCM lives on the writer thread, its only user.
        let writer = Thread {
            do throws(DeviceError) {
                let playback = try ALSAPCM(name: "hw:CARD=Loopback,DEV=0", direction: .playback)
                for start in stride(from: 0, to: played.count, by: 960) { try playback.write(Array(played[start..<(start + 960)])) }
                try playback.write([Int16](repeating: 0, count: 48_000 / 2))
            } catch { writeError.set(error) }
            done.signal()
        }
        writer.start()
        var captured: [Int16] = []
        while captured.count < 48_000 * 2 { captured += try capture.read(frames: 960) }
        done.wait()
        #expect(writeError.get() == nil)
        let start = try #require(captured.firstIndex { $0 != 0 }, "nothing came through the loopback")
        #expect(start + played.count <= captured.count)
        #expect(Array(captured[start..<min(captured.count, start + played.count)]) == played, "samples differ after offset \(start)")
    }

    /// A reader that stalls longer than the 40 ms buffer meets an overrun; the PCM recovers and
    /// reading goes on.
    @Test func captureRecoversFromAnOverrun() throws {
        let capture = try ALSAPCM(name: "hw:CARD=Loopback,DEV=1", direction: .capture)
        let feeding = LockedBox(true)
        let writer = Thread {
            guard let playback = try? ALSAPCM(name: "hw:CARD=Loopback,DEV=0", direction: .playback) else { return }
            while feeding.get() { try? playback.write([Int16](repeating: 1000, count: 480)) }
        }
        writer.start()
        _ = try capture.read(frames: 480)
        usleep(300_000)
        var after: [Int16] = []
        for _ in 0..<20 { after += try capture.read(frames: 480) }
        feeding.set(false)
        #expect(capture.xruns >= 1, "the stall caused no overrun")
        #expect(after.count == 9600)
    }
}

final class LockedBox<T: Sendable>: @unchecked Sendable {  // a value guarded by an NSLock, for test threads
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
    func set(_ new: T) { lock.lock(); value = new; lock.unlock() }
}
