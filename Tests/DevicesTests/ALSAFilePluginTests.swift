import Foundation
import Testing
@testable import Devices
import TestSupport

@Suite(.serialized) struct ALSAFilePluginTests {
    init() { #expect(ALSATestConfiguration.ready) }

    @Test(arguments: [1, 2])
    func playbackWritesExactSamples(channels: Int) throws {
        let dir = try ScratchFolder()
        let file = dir.path + "/out.raw"
        var samples: [Int16] = []
        for i in 0..<(4800 * channels) { samples.append(Int16(truncatingIfNeeded: i &* 7919)) }
        do {
            let pcm = try ALSAPCM(name: "callend_test_out:FILE=\(file)", direction: .playback, configuration: .init(channels: channels))
            #expect(pcm.sampleRate == 48_000 && pcm.channels == channels)
            #expect(pcm.periodFrames == 480 && pcm.bufferFrames == 1920, "10 ms periods, four of them")
            for chunk in stride(from: 0, to: samples.count, by: 960 * channels) {
                try pcm.write(Array(samples[chunk..<min(samples.count, chunk + 960 * channels)]))
            }
            pcm.drain()
        }
        let written = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        #expect(written == littleEndianBytes(samples))
    }

    @Test func captureReadsExactSamples() throws {
        let dir = try ScratchFolder()
        let file = dir.path + "/in.raw"
        let samples = (0..<9600).map { Int16(truncatingIfNeeded: ($0 * 31) ^ 0x5a5a) }
        try Data(littleEndianBytes(samples)).write(to: URL(fileURLWithPath: file))
        let pcm = try ALSAPCM(name: "callend_test_in:FILE=\(file)", direction: .capture)
        var captured: [Int16] = []
        for _ in 0..<10 { captured += try pcm.read(frames: 960) }
        #expect(captured == samples)
        #expect(pcm.xruns == 0)
    }

    @Test func unknownPCMsAndImpossibleSettingsAreReadableErrors() throws {
        do {
            _ = try ALSAPCM(name: "hw:CARD=NoSuchCard,DEV=0", direction: .capture)
            Issue.record("a missing card opened")
        } catch {
            #expect(error.description.contains("hw:CARD=NoSuchCard,DEV=0"))
            #expect(error.description.contains("callend devices") || error.description.contains("No such"), "\(error)")
        }
        let dir = try ScratchFolder()
        do {
            var configuration = ALSAPCM.Configuration(channels: 1)
            configuration.sampleRate = 0
            _ = try ALSAPCM(name: "callend_test_out:FILE=\(dir.path)/x.raw", direction: .playback, configuration: configuration)
            Issue.record("0 Hz accepted")
        } catch {
            #expect(error.description.contains("Hz"), "\(error)")
        }
    }

    @Test func listingNamesCardsByIDNotIndex() {
        // This machine has no sound card: the list is empty, and listing must not fail. On a machine
        // with cards (the device lab) every entry uses the stable CARD=<id> form.
        for device in ALSADeviceList.devices() {
            #expect(device.hardwareName == "hw:CARD=\(device.cardID),DEV=\(device.device)")
            #expect(device.plugName.hasPrefix("plughw:CARD="))
        }
    }
}
