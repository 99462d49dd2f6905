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
            _ = try V4L2Capability.query(path: "/dev/null")
            Issue.record("/dev/null answered VIDIOC_QUERYCAP")
        } catch {
            #expect(error.errno == ENOTTY)
            #expect(error.description.contains("/dev/null") && error.description.contains("VIDIOC_QUERYCAP"))
        }
        do {
            _ = try V4L2Capability.query(path: "/dev/video-does-not-exist")
            Issue.record("a missing node opened")
        } catch {
            #expect(error.errno == ENOENT)
            #expect(error.description.contains("No such file"))
        }
    }
}
