import Foundation
import Platform
import Synchronization
import Testing
@testable import CallEndpoint

/// Sinks that sources call many times a second must not get deeper with every call. A closure
/// kept as a `Mutex`'s own value came back from each `withLock` wrapped in more reabstraction
/// thunks: a test pattern's sink went 8 frames deep at the first picture and 128 at the 200th,
/// and a long call's capture threads crept towards a stack overflow (5 MB of stack after 15 min).
struct CallbackDepthTests {
    static func depth() -> Int { Thread.callStackReturnAddresses.count }

    @Test func aLockedCallbackStaysAsDeepAsItWas() {
        let depths = Mutex<[Int]>([])
        let callback = LockedCallback<Int> { _ in depths.withLock { $0.append(Self.depth()) } }
        for i in 0..<10_000 { callback(i) }
        let seen = depths.withLock { $0 }
        #expect(seen.count == 10_000 && seen.first == seen.last, "depth \(seen.first ?? 0) then \(seen.last ?? 0)")
        callback.set(nil)
        #expect(!callback(1) && !callback.isSet)
    }

    /// The camera source's sink and the synthetic microphone's, as a call uses them.
    @Test func sourcesCallTheirSinksAtAConstantDepth() throws {
        let video = Mutex<[Int]>([]), audio = Mutex<[Int]>([])
        let camera = try CameraSource(.pattern(width: 16, height: 16, frameRate: 120))
        camera.start { output in
            if case .frame = output { video.withLock { $0.append(Self.depth()) } }
        }
        let microphone = try SyntheticAudioDevice(source: .tone)
        try microphone.startCapture { _ in audio.withLock { $0.append(Self.depth()) } }
        let deadline = ContinuousClock.now + .seconds(30)
        while (video.withLock { $0.count } < 200 || audio.withLock { $0.count } < 50) && ContinuousClock.now < deadline {
            usleep(20_000)
        }
        camera.stop()
        microphone.stopCapture()
        for (name, depths) in [("camera", video.withLock { $0 }), ("microphone", audio.withLock { $0 })] {
            #expect(depths.count >= 50, "\(name): \(depths.count) calls")
            #expect(depths.first == depths.last, "\(name): depth \(depths.first ?? 0) at first, \(depths.last ?? 0) after \(depths.count) calls")
        }
    }
}
