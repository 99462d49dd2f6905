import Foundation
import Testing
import TestSupport
@testable import Devices

/// Tests against real kernel drivers: they run inside the device lab VM (scripts/devicelab), where
/// vivid is /dev/video0 and snd-aloop is the card "Loopback". Elsewhere they are skipped, and the
/// skip is reported as such.
let inDeviceLab = ProcessInfo.processInfo.environment["CALLEND_DEVICELAB"] == "1"

/// One camera and one sound card: the lab's suites must not run at the same time, so they are
/// nested in one serialized suite.
@Suite(.serialized, .timeLimit(.minutes(1)), .enabled(if: inDeviceLab, "runs only inside the device lab VM (scripts/devicelab/test.sh)"))
struct DeviceLab {}

extension DeviceLab {
@Suite struct DeviceLabTests {
    @Test func controlsAreFoundByName() {
        #expect(throws: DeviceError.self) { try CameraDevices.setControl(path: "/dev/video0", named: "No Such Control", to: 1) }
    }

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

}

final class LockedBox<T: Sendable>: @unchecked Sendable {  // a value guarded by an NSLock, for test threads
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
    func set(_ new: T) { lock.lock(); value = new; lock.unlock() }
}

/// Collects camera events from the capture thread.
final class CameraLog: Sendable {
    private let events = LockedBox<[CameraEvent]>([])
    var handler: @Sendable (CameraEvent) -> Void { { [events] event in events.set(events.get() + [event]) } }
    var all: [CameraEvent] { events.get() }
    var frames: [VideoFrame] { all.compactMap { if case .frame(let f, _) = $0 { return f }; return nil } }

    func wait(seconds: Double, until predicate: ([CameraEvent]) -> Bool) -> Bool {
        eventually(seconds) { predicate(all) }
    }
}

import MediaCore

extension DeviceLab {
@Suite struct CameraCaptureLabTests {
    func measuredRate(_ frames: [VideoFrame]) -> Double {
        let stamps = frames.map(\.timestamp)
        let span = (stamps.last! - stamps.first!)
        return Double(stamps.count - 1) / (Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18)
    }

    @Test(arguments: [CameraMode(fourCC: "YUYV", width: 640, height: 480, frameRate: FrameRate(frames: 25)),
                      CameraMode(fourCC: "NV12", width: 1280, height: 720, frameRate: FrameRate(frames: 10)),
                      CameraMode(fourCC: "RGB3", width: 640, height: 360, frameRate: FrameRate(frames: 15))])
    func capturesAtTheRequestedModeAndRate(mode: CameraMode) throws {
        let camera = try V4L2Camera(path: "/dev/video0", mode: mode)
        let log = CameraLog()
        camera.start(handler: log.handler)
        let enough = log.wait(seconds: 10) { events in events.filter { if case .frame = $0 { return true }; return false }.count >= 16 }
        camera.stop()
        #expect(enough, "events: \(log.all.count)")
        let frames = log.frames
        #expect(camera.currentMode.frameRate == mode.frameRate)
        #expect(frames.allSatisfy { $0.width == mode.width && $0.height == mode.height })
        #expect(zip(frames, frames.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp }, "timestamps rise")
        let rate = measuredRate(Array(frames.dropFirst()))
        #expect(abs(rate - mode.frameRate.value) / mode.frameRate.value < 0.1, "\(mode): measured \(rate) fps")
        // vivid draws a colour bar test pattern: the picture is not flat.
        #expect(Set(frames.last!.y.prefix(mode.width)).count > 4)
    }

    @Test func switchesModeWhileCapturing() throws {
        let camera = try V4L2Camera(path: "/dev/video0", mode: CameraMode(fourCC: "YUYV", width: 640, height: 480, frameRate: FrameRate(frames: 25)))
        let log = CameraLog()
        camera.start(handler: log.handler)
        #expect(log.wait(seconds: 10) { _ in log.frames.count >= 5 })
        let target = CameraMode(fourCC: "NV12", width: 1280, height: 720, frameRate: FrameRate(frames: 10))
        camera.switchMode(target)
        #expect(log.wait(seconds: 10) { _ in log.frames.contains { $0.width == 1280 } && log.frames.filter { $0.width == 1280 }.count >= 5 })
        camera.stop()
        let changes = log.all.compactMap { if case .modeChanged(let m) = $0 { return m }; return nil }
        #expect(changes.last == target && changes.count == 2)
        let large = log.frames.filter { $0.width == 1280 }
        #expect(abs(measuredRate(large) - 10) < 1.5, "after the switch: \(measuredRate(large)) fps")
    }

    @Test func unplugIsReportedAndCaptureResumes() throws {
        let camera = try V4L2Camera(path: "/dev/video0", mode: CameraMode(fourCC: "YUYV", width: 320, height: 180, frameRate: FrameRate(frames: 30)))
        camera.reopenInterval = .milliseconds(200)
        let log = CameraLog()
        camera.start(handler: log.handler)
        #expect(log.wait(seconds: 10) { _ in log.frames.count >= 5 })
        // vivid's "Disconnect" button control behaves like pulling a USB cable.
        try CameraDevices.setControl(path: "/dev/video0", named: "Disconnect", to: 1)
        #expect(log.wait(seconds: 10) { events in events.contains { if case .deviceLost = $0 { return true }; return false } })
        let framesAtLoss = log.frames.count
        #expect(log.wait(seconds: 20) { _ in log.frames.count >= framesAtLoss + 5 }, "capture resumed after reopening: \(log.all.suffix(3))")
        camera.stop()
    }
}
}

extension DeviceLab {
@Suite struct DeviceProblemLabTests {
    @Test func aBusyCameraSaysSo() throws {
        let first = try V4L2Camera(path: "/dev/video0", mode: CameraMode(fourCC: "YUYV", width: 640, height: 480, frameRate: FrameRate(frames: 25)))
        defer { first.stop() }
        do {
            _ = try V4L2Camera(path: "/dev/video0", mode: CameraMode(fourCC: "NV12", width: 1280, height: 720, frameRate: FrameRate(frames: 10)))
            Issue.record("a second capture of a streaming camera started")
        } catch {
            #expect(error.description.contains("busy"), "\(error)")
        }
    }

    /// Unbinding the loopback card's driver while a capture runs is device loss, not a hang or an
    /// xrun. The unbind runs on another thread: the kernel disconnects the card at once (waking
    /// readers with ENODEV) but finishes removing it only when every handle is closed.
    @Test func aVanishingSoundCardIsDeviceLoss() throws {
        var capture: ALSAPCM? = try ALSAPCM(name: "hw:CARD=Loopback,DEV=1", direction: .capture)
        _ = try capture?.read(frames: 480)
        let removed = DispatchSemaphore(value: 0)
        Thread {
            try? "snd_aloop.0".write(toFile: "/sys/bus/platform/drivers/snd_aloop/unbind", atomically: false, encoding: .utf8)
            removed.signal()
        }.start()
        var lost: DeviceError?
        do {
            for _ in 0..<200 { _ = try capture?.read(frames: 480) }
        } catch {
            lost = error
        }
        capture = nil
        #expect(removed.wait(timeout: .now() + 10) == .success, "the card was not released after close")
        try? "snd_aloop.0".write(toFile: "/sys/bus/platform/drivers/snd_aloop/bind", atomically: false, encoding: .utf8)
        let error = try #require(lost, "reads went on after the card was removed")
        #expect(ALSAPCM.isDeviceLost(error), "\(error)")
    }
}
}

extension DeviceLab {
/// `callend devices --doctor` against the lab's real drivers (its run as a user outside the
/// video and audio groups is in scripts/devicelab/test.sh).
@Suite struct DoctorLabTests {
    /// Every YUYV mode of vivid's is run and its rate measured (all of its formats callend converts
    /// take half a minute in the emulated VM; `callend devices --doctor` runs them all); the small ones (which the
    /// emulated CPU keeps up with) deliver what they promise, within a fifth (the lab emulates its
    /// CPU: a busy moment drops a frame of a short run); every Loopback device runs.
    @Test func measuresEveryModeAndRunsEverySoundDevice() throws {
        let report = DeviceDoctor.run(seconds: 0.3, formats: ["YUYV"])
        let vivid = try #require(report.cameras.first { $0.path == "/dev/video0" }, "\(report.cameras.map(\.path))")
        #expect(vivid.status == .ok, "\(vivid)")
        #expect(vivid.modes.count >= 6 && vivid.modes.allSatisfy { $0.mode.hasPrefix("YUYV ") }, "\(vivid.modes)")
        for mode in vivid.modes { #expect(mode.error == nil && mode.measuredFps != nil, "\(mode)") }
        #expect(vivid.modes.contains { $0.mode.hasPrefix("YUYV 640x480@") }, "\(vivid.modes.map(\.mode))")
        #expect(!vivid.unusedFormats.isEmpty && !vivid.unusedFormats.contains("YUYV") && !vivid.unusedFormats.contains("NV12"), "\(vivid.unusedFormats)")
        let small = vivid.modes.filter { mode in
            let size = mode.mode.split(separator: " ")[1].split(separator: "@")[0].split(separator: "x").compactMap { Int($0) }
            return size.count == 2 && size[0] * size[1] <= 640 * 480
        }
        #expect(small.count >= 3, "\(vivid.modes.map(\.mode))")
        for mode in small {
            let fps = try #require(mode.measuredFps, "\(mode)")
            #expect(abs(fps - mode.requestedFps) <= 0.2 * mode.requestedFps, "\(mode.mode): measured \(fps) fps")
        }
        print("devicelab: doctor: " + vivid.modes.map { "\($0.mode) \($0.measuredFps.map { String(format: "%.1f", $0) } ?? "-") fps" }.joined(separator: ", ")
              + "; " + report.audio.map { "\($0.name) \($0.direction) \($0.status.rawValue) \($0.xruns ?? -1) xruns" }.joined(separator: ", "))
        let loopback = report.audio.filter { $0.card == "Loopback" }
        #expect(loopback.count == 4 && loopback.allSatisfy { $0.status == .ok && $0.xruns != nil && $0.seconds >= 0.2 }, "\(loopback)")
    }

    /// A camera streaming elsewhere and a sound device with every substream taken are busy, held
    /// by this process (found through /proc).
    @Test func busyDevicesNameWhoHoldsThem() throws {
        let camera = try V4L2Camera(path: "/dev/video0", mode: CameraMode(fourCC: "YUYV", width: 640, height: 480, frameRate: FrameRate(frames: 25)))
        defer { camera.stop() }
        // The lab's snd-aloop has two substreams a device.
        let first = try ALSAPCM(name: "hw:CARD=Loopback,DEV=0", direction: .playback)
        let second = try ALSAPCM(name: "hw:CARD=Loopback,DEV=0", direction: .playback)
        let report = DeviceDoctor.run(seconds: 0.2, cameras: ["/dev/video0"], formats: ["YUYV"])
        withExtendedLifetime((first, second)) {}
        let me = Int(getpid())
        let vivid = try #require(report.cameras.first)
        #expect(vivid.status == .busy && vivid.holders.contains { $0.pid == me }, "\(vivid)")
        let held = report.audio.first { $0.name == "plughw:CARD=Loopback,DEV=0" && $0.direction == "playback" }
        #expect(held?.status == .busy, "\(report.audio)")
        #expect(held?.holders.contains { $0.pid == me } == true, "\(report.audio)")
        #expect(!report.healthy)
    }
}
}
