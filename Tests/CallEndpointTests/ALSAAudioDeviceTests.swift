import Codecs
import Foundation
import MediaCore
import Testing
import TestSupport
@testable import CallEndpoint

@Suite(.serialized) struct ALSAAudioDeviceTests {
    init() { #expect(ALSATestConfiguration.ready) }

    /// The echo canceller's reference is what the speaker plays, all of it: the blocks of
    /// silence a playback stream starts with (its cushion) too. Played through alsa-lib's file
    /// plugin, the file holds exactly the 10 ms blocks the processor was given. (Left out, the
    /// echo lagged the reference by the cushion, which grows after underruns.)
    @Test func theCancellersReferenceIsEverythingTheSpeakerPlays() throws {
        let dir = try ScratchFolder()
        let out = dir.path + "/speaker.raw"
        var processing = VoiceProcessing()
        (processing.noiseSuppression, processing.gainControl, processing.highPass) = (0, false, false)
        var rendered = 0
        do {
            let device = try ALSAAudioDevice {
                $0.capturePCM = nil
                $0.playbackPCM = "callend_test_out:FILE=\(out)"
                $0.mode = .voice(processing)
            }
            let tone = (0..<AudioBlock.frames * 2).map { Int16(6000 * sin(Double($0 / 2) * 0.1)) }
            try device.startPlayout()
            for _ in 0..<20 { device.play(tone) }
            #expect(eventually(5) { (device.voiceStats?.renderedChunks ?? 0) >= 25 }, "the blocks and the silence after them went to the speaker")
            device.stopPlayout()
            rendered = device.voiceStats?.renderedChunks ?? 0
            #expect(device.playbackCushion >= 1, "the stream started with a cushion")
        }  // the device goes: the file plugin writes out what its PCM holds
        // Once its playback thread has let go of it too, which may be a moment later: with four
        // tests at a time the file was read 4 blocks short, every time, before it was whole.
        let blockBytes = AudioBlock.frames * 2 * MemoryLayout<Int16>.size
        eventually(10) { fileSize(out) >= rendered * blockBytes }
        #expect(fileSize(out) == rendered * blockBytes, "the file holds \(fileSize(out) / blockBytes) blocks, the reference \(rendered)")
    }
}
