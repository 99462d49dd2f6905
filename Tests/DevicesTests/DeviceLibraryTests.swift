import Platform
import Foundation
import Testing
@testable import Devices

@Suite struct DeviceLibraryTests {
    @Test func alsaLibraryIsLinked() {
        #expect(DeviceLibraries.alsaVersion.hasPrefix("1."))
    }

    /// A node that is not a video device, or no node at all, fails with what was tried and why.
    @Test func nonVideoDevicesGiveReadableErrors() {
        do {
            _ = try CameraDevices.describe(path: "/dev/null")
            Issue.record("/dev/null described as a camera")
        } catch {
            #expect(error.errno == Errno(ENOTTY))
            #expect(error.description.contains("/dev/null") && error.description.contains("not a V4L2 device"), "\(error)")
        }
        do {
            _ = try CameraDevices.describe(path: "/dev/video-does-not-exist")
            Issue.record("a missing node opened")
        } catch {
            #expect(error.errno == Errno(ENOENT))
            #expect(error.description.contains("No such file"))
        }
    }

    @Test func listingWithoutCamerasIsEmptyNotAnError() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("callend-dev-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(CameraDevices.list(directory: dir).devices.isEmpty)
        // A node named like a camera that is not one is reported as a problem, not a crash.
        #expect(FileManager.default.createFile(atPath: dir + "/video0", contents: Data()))
        let listed = CameraDevices.list(directory: dir)
        #expect(listed.devices.isEmpty && listed.problems.count == 1)
    }
}

/// A camera as a UVC webcam describes itself: MJPEG at every size, YUYV only at small sizes or low rates.
let webcam = CaptureDevice(path: "/dev/video0", stableName: "/dev/v4l/by-id/usb-Cam-video-index0", driver: "uvcvideo", card: "Cam",
                           busInfo: "usb-0000:00:14.0-1", formats: [
    CameraFormat(fourCC: "MJPG", description: "Motion-JPEG", compressed: true, emulated: false, sizes: [
        CameraFrameSize(width: 1280, height: 720, frameRates: [FrameRate(frames: 30), FrameRate(frames: 15)]),
        CameraFrameSize(width: 640, height: 480, frameRates: [FrameRate(frames: 30), FrameRate(frames: 15)]),
    ]),
    CameraFormat(fourCC: "YUYV", description: "YUYV 4:2:2", compressed: false, emulated: false, sizes: [
        CameraFrameSize(width: 640, height: 480, frameRates: [FrameRate(frames: 30)]),
        CameraFrameSize(width: 1280, height: 720, frameRates: [FrameRate(frames: 10)]),
    ]),
    CameraFormat(fourCC: "RGB3", description: "RGB3", compressed: false, emulated: true, sizes: [
        CameraFrameSize(width: 640, height: 480, frameRates: [FrameRate(frames: 30)]),
    ]),
])

@Suite struct CameraModeTests {
    @Test func nearestModeMatchesSizeThenRateThenFormat() throws {
        #expect(try webcam.nearestMode(width: 1280, height: 720, frameRate: FrameRate(frames: 30)) == CameraMode(fourCC: "MJPG", width: 1280, height: 720, frameRate: FrameRate(frames: 30)))
        #expect(try webcam.nearestMode(width: 640, height: 480, frameRate: FrameRate(frames: 30)).fourCC != "RGB3", "emulated formats come last")
        #expect(try webcam.nearestMode(width: 1280, height: 720, frameRate: FrameRate(frames: 10), fourCC: "YUYV").frameRate == FrameRate(frames: 10))
        // 960x540 is nearer 640x480 in pixels, but 1280x720 covers it without scaling up.
        #expect(try webcam.nearestMode(width: 960, height: 540, frameRate: FrameRate(frames: 25)) == CameraMode(fourCC: "MJPG", width: 1280, height: 720, frameRate: FrameRate(frames: 30)))
        #expect(try webcam.nearestMode(width: 1920, height: 1080, frameRate: FrameRate(frames: 30)).width == 1280, "the largest, within a factor of two")
        #expect(try webcam.nearestMode(width: 640, height: 480, frameRate: nil).frameRate == FrameRate(frames: 30), "no rate asked: the fastest")
    }

    @Test func impossibleRequestsListWhatTheCameraCanDo() {
        for (w, h, rate, format) in [(3840, 2160, 30, nil), (640, 480, 120, nil), (640, 480, 30, "H264")] as [(Int, Int, Int, String?)] {
            do {
                _ = try webcam.nearestMode(width: w, height: h, frameRate: FrameRate(frames: rate), fourCC: format)
                Issue.record("\(w)x\(h)@\(rate) \(format ?? "") accepted")
            } catch {
                #expect(error.description.contains("Supported modes: MJPG 640x480@30,15 1280x720@30,15; YUYV 640x480@30 1280x720@10; RGB3 640x480@30"), "\(error)")
            }
        }
    }

    @Test func describesRoundTripThroughJSON() throws {
        let data = try JSONEncoder().encode(webcam)
        #expect(try JSONDecoder().decode(CaptureDevice.self, from: data) == webcam)
        #expect(FrameRate(frames: 30000, per: 1001).description == "30")
        // A listing written before cameras had controls reads as a camera without any.
        var old = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        old["controls"] = nil
        let reread = try JSONDecoder().decode(CaptureDevice.self, from: try JSONSerialization.data(withJSONObject: old))
        #expect(reread == webcam && reread.controls.isEmpty)
        // A camera that encodes: its H.264 is sent as it comes, and its encoder controls are found by id.
        var encoding = webcam
        encoding.formats.append(CameraFormat(fourCC: "H264", description: "H.264", compressed: true, emulated: false, sizes: [
            CameraFrameSize(width: 1280, height: 720, frameRates: [FrameRate(frames: 30)])]))
        encoding.controls = [CameraControl(id: 0x0099_09cf, name: "Video Bitrate", type: 1, minimum: 64_000, maximum: 8_000_000, defaultValue: 2_000_000)]
        #expect(!webcam.deliversEncodedVideo && encoding.deliversEncodedVideo)
        #expect(encoding.bitrateControl?.name == "Video Bitrate" && encoding.keyframeControl == nil)
        #expect(try encoding.nearestMode(width: 1280, height: 720, frameRate: FrameRate(frames: 30), fourCC: "H264").fourCC == "H264")
        #expect(try encoding.nearestMode(width: 1280, height: 720, frameRate: FrameRate(frames: 30)).fourCC == "MJPG", "H.264 only when asked")
    }
}

@Suite struct CameraControlTests {
    @Test func settingAControlOnANonCameraIsAnError() {
        #expect(throws: DeviceError.self) { try CameraDevices.setControl(path: "/dev/null", named: "Brightness", to: 1) }
    }
}
