@testable import CallEndpoint
import Codecs
@testable import Devices
import Foundation
import MediaCore
import Testing

/// What `callend devices --json` says of the kernel's encoders.
private struct ListedEncoders: Decodable { var encoders: [MemoryToMemoryEncoder.Description] }

@Suite(.serialized, .timeLimit(.minutes(2)), .enabled(if: inCallDeviceLab, "runs only inside the device lab VM (scripts/devicelab/test.sh)"))
struct MemoryToMemoryDeviceLab {
    /// The kernel's vicodec (built by scripts/devicelab/setup.sh, loaded here multiplanar as the
    /// Pi 4's bcm2835-codec is) behind the encoder interface the call path drives: the queues,
    /// buffers, formats, timestamps and keyframe handling a board's H.264 block goes through, on
    /// a codec (FWHT) this machine has. vicodec has neither the bitrate nor the keyframe control,
    /// so the keyframe asked for comes from the API's reset of the CAPTURE queue. (It codes
    /// 640x360 and up.)
    @Test func theKernelsEncoderTakesPicturesAndGivesFrames() throws {
        guard let (kernel, version) = labKernel() else { return }
        try #require(runTool("/usr/sbin/modprobe", ["-d", kernel, "-S", version, "vicodec", "multiplanar=1"]) == 0,
                     "modprobe vicodec (scripts/devicelab/setup.sh builds it)")
        defer { _ = runTool("/usr/sbin/modprobe", ["-d", kernel, "-S", version, "-r", "vicodec"]) }
        // Its encoder node, not its decoders (they take FWHT in and give pictures out).
        let found = MemoryToMemoryEncoder.devices(encoding: "FWHT")
        try #require(found.count == 1, "\(found)")
        #expect(MemoryToMemoryEncoder.devices(encoding: "H264").isEmpty)
        // `callend devices` lists it with what it encodes (the binary beside this test bundle).
        let callend = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("callend").path
        let listing = Process()
        listing.executableURL = URL(fileURLWithPath: callend)
        listing.arguments = ["devices", "--json"]
        let output = Pipe()
        listing.standardOutput = output
        try listing.run()
        let json = output.fileHandleForReading.readDataToEndOfFile()
        listing.waitUntilExit()
        let listed = try JSONDecoder().decode(ListedEncoders.self, from: json).encoders
        #expect(listed.map(\.path) == found && listed.first?.driver == "vicodec" && listed.first?.encodes == ["FWHT"], "\(listed)")
        #expect(throws: DeviceError.self) { try MemoryToMemoryEncoder(path: found[0], codedFormat: "H264", width: 640, height: 480) }
        #expect(throws: DeviceError.self) { try MemoryToMemoryEncoder(path: "/dev/video0", codedFormat: "FWHT", width: 640, height: 480) }

        let device = try MemoryToMemoryEncoder(path: found[0], codedFormat: "FWHT", width: 640, height: 480, framesPerSecond: 15, bitrate: 300_000)
        #expect(!device.hasBitrateControl && !device.hasKeyframeControl)
        let encoder: any VideoEncoder = device
        try encoder.setTargetBitrate(200_000)  // no control: the device keeps its own rate, no error
        // A still scene: a P-frame that refers to its I-frame has less to say (FWHT codes the
        // quantizer's error of the reference, about three quarters of an I-frame here).
        var pattern = TestPatternSource(width: 640, height: 480, frameRate: 15)
        var still = pattern.nextFrame(captureTime: .zero)
        var frames: [EncodedVideoFrame] = []
        func encode(_ index: Int, forceKeyframe: Bool = false) throws {
            let time = Duration.milliseconds(Int64(index) * 66)
            let out = try encoder.encode(still, at: time, forceKeyframe: forceKeyframe)
            try #require(out.count == 1, "frame \(index): \(out.count) frames")
            #expect(out[0].timestamp == time, "frame \(index): the picture's time comes back with its frame")
            frames.append(out[0])
        }
        for index in 0..<25 { try encode(index) }
        // vicodec's group of pictures is 10: an I-frame, then nine P-frames that refer to it.
        #expect(frames.map(\.isKeyframe) == (0..<25).map { $0 % 10 == 0 }, "\(frames.map(\.isKeyframe))")
        for frame in frames { #expect(Self.header(frame.data).map { $0 == (640, 480) } == true, "every frame is FWHT of the picture's size") }
        let intra = frames.filter(\.isKeyframe).map(\.data.count), predicted = frames.filter { !$0.isKeyframe }.map(\.data.count)
        #expect(predicted.max()! < intra.min()!, "P-frames \(predicted) refer to I-frames \(intra): \(frames.map(\.data.count))")

        // A keyframe asked for between groups: the CAPTURE queue's reset starts a new stream.
        encoder.requestKeyframe()
        try encode(25)
        try encode(26)
        try encode(27, forceKeyframe: true)
        #expect(frames[25...].map(\.isKeyframe) == [true, false, true])
        #expect(device.streamResets == 2)

        // A new size: both queues are set up again, the next frame is a keyframe of that size.
        // vicodec codes 640x368 for it (heights in 8s): the crop says 360 are seen.
        try encoder.setResolution(width: 640, height: 360)
        pattern = TestPatternSource(width: 640, height: 360, frameRate: 15)
        still = pattern.nextFrame(captureTime: .zero)
        try encode(28)
        try encode(29)
        #expect(frames[28...].map(\.isKeyframe) == [true, false])
        #expect(Self.header(frames[28].data).map { $0 == (640, 360) } == true && frames[28].height == 360)
        // A picture of another size than the encoder's is refused, and the encoder goes on.
        var other = TestPatternSource(width: 320, height: 240, frameRate: 15)
        #expect(throws: MediaError.self) { try encoder.encode(other.nextFrame(captureTime: .seconds(3)), at: nil, forceKeyframe: false) }
        try encode(30)
    }

    /// The width and height in an FWHT frame's header (big-endian, after two magic words and
    /// the version), nil if it is not one.
    static func header(_ data: [UInt8]) -> (Int, Int)? {
        guard data.count >= 20, data[0..<4].allSatisfy({ $0 == 0x4f }) else { return nil }
        func word(_ at: Int) -> Int { data[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        return (word(12), word(16))
    }
}
