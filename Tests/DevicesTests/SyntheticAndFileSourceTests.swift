import Platform
import Codecs
import MediaCore
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Devices

@Suite struct SyntheticSourceTests {
    /// Frame numbers and capture times written into the pattern survive VP8 at a modest bitrate.
    @Test func stampsSurviveVP8() throws {
        var source = TestPatternSource(width: 320, height: 240, frameRate: 30)
        let encoder = try VP8Encoder(configuration: VP8EncoderConfiguration(width: 320, height: 240, targetBitrate: 300_000))
        let decoder = try VP8Decoder()
        let base = Duration.seconds(86_400 * 3) + .milliseconds(123)
        for index in 0..<60 {
            let captured = base + .milliseconds(33 * index)
            for encoded in try encoder.encode(source.nextFrame(captureTime: captured)) {
                let picture = try #require(try decoder.decode(encoded.data))
                #expect(TestPatternSource.frameNumber(in: picture) == index)
                #expect(TestPatternSource.captureTime(in: picture) == .milliseconds((259_200_123 + 33 * Int64(index)) & 0xffff_ffff))
            }
        }
    }

    /// The stamps also survive the sender's scaling to a lower mode and VP8 at that mode's rate
    /// (before, a 640x480 pattern sent as 640x360 read back no capture time at all, so a call's
    /// latency figure left out every second spent in a lower mode); a picture without marks reads
    /// back nothing.
    @Test(arguments: [(640, 480, 640, 360, 500_000), (640, 480, 320, 240, 250_000), (1280, 720, 640, 480, 600_000), (1280, 720, 960, 540, 1_000_000)])
    func stampsSurviveScalingToALowerMode(width: Int, height: Int, toWidth: Int, toHeight: Int, bitrate: Int) throws {
        var source = TestPatternSource(width: width, height: height, frameRate: 30)
        let encoder = try VP8Encoder(configuration: VP8EncoderConfiguration(width: toWidth, height: toHeight, targetBitrate: bitrate))
        let decoder = try VP8Decoder()
        let base = Duration.seconds(1000)
        var read = 0
        for index in 0..<30 {
            let captured = base + .milliseconds(33 * index)
            let frame = try source.nextFrame(captureTime: captured).scaled(width: toWidth, height: toHeight)
            for encoded in try encoder.encode(frame) {
                let picture = try #require(try decoder.decode(encoded.data))
                if let stamp = TestPatternSource.captureTime(in: picture) {
                    #expect(stamp == captured, "frame \(index)")
                    #expect(TestPatternSource.frameNumber(in: picture) == index)
                    read += 1
                }
            }
        }
        #expect(read >= 28, "\(read) of 30 read back")
        var plain = VideoFrame(width: toWidth, height: toHeight, timestamp: .zero)
        plain.withMutablePlanes { y, _, _ in for i in 0..<(toWidth * toHeight) { y[i] = UInt8(16 + i % 200) } }
        #expect(TestPatternSource.captureTime(in: plain) == nil)
    }

    /// Latency read from marks as audio is played: 50 ms, then, after the player paused 200 ms
    /// to rebuffer, 250 ms (counted as one continuous stretch, the pause was lost and the marks
    /// after it read 50 ms; after a few pauses, readings wrapped to 800-980 ms).
    @Test func audioLatencyFollowsAPauseInPlayout() {
        var source = MarkedToneSource()
        var meter = AudioLatencyMeter()
        let start = Duration.seconds(1000) + .milliseconds(700)
        var readings: [Double] = []
        for index in 0..<300 {
            let captured = start + .milliseconds(20 * index)
            let samples = source.next(samplesPerChannel: 960, captureTime: captured)
            readings += meter.played(samples, at: captured + .milliseconds(index < 150 ? 50 : 250))
        }
        #expect(readings.count >= 5, "\(readings)")
        let before = readings.prefix(3), after = readings.dropFirst(3)
        #expect(before.allSatisfy { abs($0 - 50) < 5 } && after.allSatisfy { abs($0 - 250) < 5 }, "\(readings)")
    }

    /// Timing marks at whole seconds of the capture clock are found again after Opus.
    @Test func audioTimingMarksSurviveOpus() throws {
        var source = MarkedToneSource()
        let encoder = try OpusEncoder(channels: 1, application: .voip, bitrate: 24_000)
        let decoder = try OpusDecoder(channels: 1)
        let start = Duration.seconds(1000) + .milliseconds(700)
        var decoded: [Int16] = []
        for index in 0..<150 {
            let samples = source.next(samplesPerChannel: 960, captureTime: start + .milliseconds(20 * index))
            decoded += try decoder.decode(try encoder.encode(samples))
        }
        let aligned = Array(decoded.dropFirst(encoder.lookahead))
        let marks = TimingMarks.detectMarks(aligned)
        // Marks at 1001, 1002, 1003 s: 300, 1300 and 2300 ms into the 3 s of audio.
        #expect(marks.count == 3, "\(marks)")
        for (mark, expected) in zip(marks, [300, 1300, 2300]) {
            let error = mark - .milliseconds(expected)
            #expect(error > .milliseconds(-5) && error < .milliseconds(5), "\(mark) vs \(expected) ms")
        }
        var plain = ToneSource()
        #expect(TimingMarks.detectMarks(plain.next(samplesPerChannel: 48_000)).isEmpty, "a plain tone has no marks")
    }
}

@Suite struct FileSourceTests {
    @Test func y4mFileIsPacedAndLoops() throws {
        let dir = try ScratchFolder()
        let path = dir.path + "/clip.y4m"
        let writer = try Y4MWriter(path: path, width: 32, height: 32, frameRate: 30)
        for i in 0..<5 { try writer.write(VideoFrame(width: 32, height: 32, luma: UInt8(i * 40))) }
        try writer.close()
        let paced = try Y4MFileSource(path: path, paced: true, loop: true)
        let start = ContinuousClock.now
        var lumas: [UInt8] = []
        for _ in 0..<10 { lumas.append(try #require(try paced.nextFrame()).y[0]) }
        #expect(ContinuousClock.now - start >= .milliseconds(9 * 33 - 5), "ten frames at 30 fps take at least 0.3 s")
        #expect(lumas == [0, 40, 80, 120, 160, 0, 40, 80, 120, 160])
        let unpaced = try Y4MFileSource(path: path, paced: false)
        var count = 0
        while try unpaced.nextFrame() != nil { count += 1 }
        #expect(count == 5)
    }

    /// A clip read with `stamped` carries each picture's capture time and number in the pattern's
    /// marks, read back as the pattern's are (what `join --measure-latency` measures a clip with).
    @Test func aStampedClipCarriesItsCaptureTimes() throws {
        let dir = try ScratchFolder()
        let path = dir.path + "/clip.y4m"
        let writer = try Y4MWriter(path: path, width: 320, height: 240, frameRate: 30)
        for i in 0..<3 { try writer.write(VideoFrame(width: 320, height: 240, luma: UInt8(60 + i * 20))) }
        try writer.close()
        let capturer = try FileCapturer(path: path, loop: true, stamped: true)
        let frames = Mutex<[VideoFrame]>([])
        let five = DispatchSemaphore(value: 0)
        capturer.start { output in
            guard case .frame(let frame) = output else { return }
            if frames.withLock({ $0.append(frame); return $0.count }) == 5 { five.signal() }
        }
        #expect(five.wait(timeout: .now() + 10) == .success)
        capturer.stop()
        for (index, frame) in frames.withLock({ $0 }).prefix(5).enumerated() {
            #expect(TestPatternSource.frameNumber(in: frame) == index)
            let age = try #require(TestPatternSource.captureAge(of: frame))
            #expect(age < .seconds(10) && TestPatternSource.captureTime(in: frame) == .milliseconds(frame.timestamp.inMilliseconds & 0xffff_ffff))
        }
        #expect(TestPatternSource.captureTime(in: VideoFrame(width: 320, height: 240, luma: 60)) == nil, "an unstamped picture has none")
    }

    @Test func wavFileIsPacedAndPadded() throws {
        let dir = try ScratchFolder()
        let path = dir.path + "/tone.wav"
        let writer = try WAVWriter(path: path, channels: 1)
        var tone = ToneSource()
        try writer.write(tone.next(samplesPerChannel: 48_000 / 10 + 100))
        try writer.close()
        let source = try WAVFileSource(path: path)
        let start = ContinuousClock.now
        var chunks: [[Int16]] = []
        while let chunk = source.next(samplesPerChannel: 960) { chunks.append(chunk) }
        #expect(chunks.count == 6 && chunks.allSatisfy { $0.count == 960 })
        #expect(chunks.last!.suffix(860).allSatisfy { $0 == 0 }, "the last frame is padded with silence")
        #expect(ContinuousClock.now - start >= .milliseconds(5 * 20 - 5))
    }
}

@Suite struct RealTimePacerTests {
    /// Periods come at start + n x period; a caller a period late gets the next one at once.
    @Test func periodsAreDueOnAFixedGrid() {
        var pacer = RealTimePacer(period: .milliseconds(20))
        let t0 = MediaTime.now
        #expect(pacer.delay(now: t0) == .zero)
        #expect(pacer.delay(now: t0 + .milliseconds(5)) == .milliseconds(15))
        #expect(pacer.delay(now: t0 + .milliseconds(45)) == .zero, "the third period was due at 40 ms")
        #expect(pacer.delay(now: t0 + .milliseconds(46)) == .milliseconds(14))
        #expect(pacer.skipped == 0)
    }

    /// A caller that was not scheduled for a second skips the periods it missed instead of
    /// taking 50 of them back to back (which a busy machine never catches up from).
    @Test func aStalledCallerSkipsWhatItMissed() {
        var pacer = RealTimePacer(period: .milliseconds(20))
        let t0 = MediaTime.now
        _ = pacer.delay(now: t0)
        let late = t0 + .milliseconds(1005)
        #expect(pacer.delay(now: late) == .zero)
        #expect(pacer.delay(now: late) > .milliseconds(10), "the next period is on the grid after now, not due at once")
        #expect(pacer.skipped == 49)
    }
}
