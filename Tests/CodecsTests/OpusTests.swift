import Foundation
import Testing
@testable import Codecs
@testable import MediaCore

/// Signals and measures for the Opus round trips.
enum AudioSignal {
    static func tone(frequency: Double, seconds: Double, amplitude: Double = 0.5) -> [Int16] {
        let count = Int(seconds * Double(AudioFrame.sampleRate))
        return (0..<count).map { i in
            Int16(amplitude * 32767 * sin(2 * .pi * frequency * Double(i) / Double(AudioFrame.sampleRate)))
        }
    }

    /// Voiced speech stand-in: a glottal pulse train with a gliding pitch, shaped by three formant
    /// resonators that move between vowels, under a syllable-rate envelope with pauses.
    static func speechLike(seconds: Double) -> [Int16] {
        let rate = Double(AudioFrame.sampleRate)
        let count = Int(seconds * rate)
        let vowels: [[Double]] = [[730, 1090, 2440], [270, 2290, 3010], [300, 870, 2240], [530, 1840, 2480]]
        var out = [Double](repeating: 0, count: count)
        var phase = 0.0
        var state = [[Double]](repeating: [0, 0], count: 3)
        for i in 0..<count {
            let t = Double(i) / rate
            let pitch = 120 + 40 * sin(2 * .pi * 0.7 * t)
            phase += pitch / rate
            var excitation = 0.0
            if phase >= 1 { phase -= 1; excitation = 1 }
            let syllable = Int(t * 4)
            let formants = vowels[syllable % vowels.count]
            var sample = 0.0
            for (k, f) in formants.enumerated() {
                // Two-pole resonator at formant f with 80 Hz bandwidth.
                let r = exp(-.pi * 80 / rate)
                let a1 = 2 * r * cos(2 * .pi * f / rate), a2 = -r * r
                let y = excitation * (1 - r) + a1 * state[k][0] + a2 * state[k][1]
                state[k][1] = state[k][0]
                state[k][0] = y
                sample += y / Double(k + 1)
            }
            let envelope = syllable % 5 == 4 ? 0 : pow(sin(.pi * (t * 4 - Double(syllable))), 2)
            out[i] = sample * envelope
        }
        // Normalise to a peak of half full scale, as a speaking voice near a microphone.
        let peak = out.map(abs).max() ?? 1
        return out.map { Int16($0 / peak * 16_000) }
    }

    /// Normalised cross-correlation of two equal-length signals (1 = identical shape).
    static func correlation(_ a: ArraySlice<Int16>, _ b: ArraySlice<Int16>) -> Double {
        var ab = 0.0, aa = 0.0, bb = 0.0
        for (x, y) in zip(a, b) {
            ab += Double(x) * Double(y)
            aa += Double(x) * Double(x)
            bb += Double(y) * Double(y)
        }
        return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0
    }

    static func snr(signal: ArraySlice<Int16>, decoded: ArraySlice<Int16>) -> Double {
        var s = 0.0, n = 0.0
        for (x, y) in zip(signal, decoded) {
            s += Double(x) * Double(x)
            n += (Double(x) - Double(y)) * (Double(x) - Double(y))
        }
        return 10 * log10(s / max(n, 1))
    }
}

/// Encodes and decodes a mono signal frame by frame; returns the decoded signal shifted back by
/// the encoder's lookahead so that it lines up with the input.
func opusRoundTrip(_ signal: [Int16], encoder: OpusEncoder, frameSize: Int = 960) throws -> (decoded: [Int16], packets: [[UInt8]]) {
    let decoder = try OpusDecoder(channels: 1)
    var decoded: [Int16] = []
    var packets: [[UInt8]] = []
    var start = 0
    while start + frameSize <= signal.count {
        let packet = try encoder.encode(Array(signal[start..<(start + frameSize)]))
        packets.append(packet)
        decoded += try decoder.decode(packet)
        start += frameSize
    }
    return (Array(decoded.dropFirst(encoder.lookahead)), packets)
}

@Suite struct OpusTests {
    @Test func toneSurvivesRoundTrip() throws {
        let signal = AudioSignal.tone(frequency: 440, seconds: 2)
        let encoder = try OpusEncoder(channels: 1, application: .audio, bitrate: 64_000)
        let (decoded, _) = try opusRoundTrip(signal, encoder: encoder)
        let n = decoded.count - 4800
        // Skip the first 100 ms while the codec settles.
        let correlation = AudioSignal.correlation(signal[4800..<n], decoded[4800..<n])
        let snr = AudioSignal.snr(signal: signal[4800..<n], decoded: decoded[4800..<n])
        #expect(correlation > 0.99, "tone correlation \(correlation)")
        #expect(snr > 30, "tone SNR \(snr) dB")
    }

    @Test func speechLikeSignalSurvivesRoundTrip() throws {
        let signal = AudioSignal.speechLike(seconds: 3)
        let encoder = try OpusEncoder(channels: 1, application: .voip, bitrate: 32_000)
        let (decoded, _) = try opusRoundTrip(signal, encoder: encoder)
        let n = decoded.count - 4800
        let correlation = AudioSignal.correlation(signal[4800..<n], decoded[4800..<n])
        #expect(correlation > 0.8, "speech-like correlation \(correlation)")
        // Without the lookahead alignment the same comparison falls apart.
        let misaligned = AudioSignal.correlation(signal[4800..<n], decoded[4900..<(n + 100)])
        #expect(misaligned < correlation - 0.2, "misaligned correlation \(misaligned)")
    }

    @Test(arguments: [480, 960, 1920, 2880])
    func everyFrameDurationEncodes(frameSize: Int) throws {
        let encoder = try OpusEncoder(channels: 2, application: .audio, bitrate: 96_000)
        let decoder = try OpusDecoder(channels: 2)
        let stereo = AudioSignal.tone(frequency: 1000, seconds: Double(frameSize) / 48_000).flatMap { [$0, $0 / 2] }
        let packet = try encoder.encode(stereo)
        let decoded = try decoder.decode(packet)
        #expect(decoded.count == frameSize * 2)
        #expect(decoder.lastPacketDuration == frameSize)
    }

    @Test func invalidFrameSizesAndParametersAreErrors() throws {
        let encoder = try OpusEncoder(channels: 1)
        #expect(throws: MediaError.self) { try encoder.encode([Int16](repeating: 0, count: 1000)) }
        #expect(throws: MediaError.self) { try encoder.setBitrate(100) }
        #expect(throws: MediaError.self) { try encoder.setComplexity(11) }
        #expect(throws: MediaError.self) { try encoder.setInbandFEC(enabled: true, expectedLossPercent: 101) }
        #expect(throws: MediaError.self) { try OpusEncoder(channels: 3) }
        #expect(throws: MediaError.self) { try OpusDecoder(channels: 0) }
    }

    @Test func bitrateChangesAtRuntime() throws {
        let signal = AudioSignal.speechLike(seconds: 2)
        let encoder = try OpusEncoder(channels: 1, application: .voip, bitrate: 64_000)
        try encoder.setVBR(enabled: false)
        let high = try opusRoundTrip(signal, encoder: encoder).packets
        try encoder.setBitrate(12_000)
        #expect(encoder.bitrate == 12_000)
        let low = try opusRoundTrip(signal, encoder: encoder).packets
        let highMean = Double(high.map(\.count).reduce(0, +)) / Double(high.count)
        let lowMean = Double(low.map(\.count).reduce(0, +)) / Double(low.count)
        // CBR at 20 ms: 64 kbit/s is 160 bytes a packet, 12 kbit/s is 30.
        #expect(abs(highMean - 160) < 10, "mean packet at 64 kbit/s: \(highMean)")
        #expect(abs(lowMean - 30) < 5, "mean packet at 12 kbit/s: \(lowMean)")
    }

    @Test func lostPacketIsRecoveredFromFECBetterThanConcealment() throws {
        let signal = AudioSignal.speechLike(seconds: 2)
        let encoder = try OpusEncoder(channels: 1, application: .voip, bitrate: 32_000)
        try encoder.setInbandFEC(enabled: true, expectedLossPercent: 20)
        let frame = 960
        var packets: [[UInt8]] = []
        for start in stride(from: 0, to: signal.count - frame + 1, by: frame) {
            packets.append(try encoder.encode(Array(signal[start..<(start + frame)])))
        }
        // Reference: everything received.
        let full = try OpusDecoder(channels: 1)
        let reference = try packets.flatMap { try full.decode($0) }

        // Drop every 10th packet (voiced frames), once recovered from FEC, once concealed.
        var fecCorrelations: [Double] = [], plcCorrelations: [Double] = []
        let withFEC = try OpusDecoder(channels: 1), withPLC = try OpusDecoder(channels: 1)
        for (index, packet) in packets.enumerated() {
            if index % 10 == 5 && index + 1 < packets.count {
                let recovered = try withFEC.decodeFEC(from: packets[index + 1], samplesPerChannel: frame)
                let concealed = try withPLC.decodeLoss(samplesPerChannel: frame)
                #expect(recovered.count == frame && concealed.count == frame)
                let expected = reference[(index * frame)..<((index + 1) * frame)]
                if expected.contains(where: { abs(Int($0)) > 4000 }) {
                    fecCorrelations.append(AudioSignal.correlation(expected, recovered[...]))
                    plcCorrelations.append(AudioSignal.correlation(expected, concealed[...]))
                }
            } else {
                _ = try withFEC.decode(packet)
                _ = try withPLC.decode(packet)
            }
        }
        let fec = fecCorrelations.reduce(0, +) / Double(fecCorrelations.count)
        let plc = plcCorrelations.reduce(0, +) / Double(plcCorrelations.count)
        #expect(fecCorrelations.count >= 4)
        #expect(fec > 0.9, "FEC-recovered frames correlate \(fec) with the received decode")
        #expect(fec > plc + 0.1, "FEC \(fec) should beat concealment \(plc)")
    }

    @Test func dtxSendsTinyPacketsDuringSilence() throws {
        let encoder = try OpusEncoder(channels: 1, application: .voip, bitrate: 24_000)
        try encoder.setDTX(enabled: true)
        let silence = [Int16](repeating: 0, count: 960)
        let packets = try (0..<50).map { _ in try encoder.encode(silence) }
        let dtx = packets.suffix(30).filter(OpusEncoder.isDTXPacket).count
        #expect(dtx >= 25, "DTX packets in the last 30 silent frames: \(dtx)")
        // A decoder plays DTX packets (and the gaps between them) as comfort noise, not errors.
        let decoder = try OpusDecoder(channels: 1)
        for packet in packets { _ = try decoder.decode(packet) }
    }

    /// A packet's duration read from its table of contents, as the jitter buffer counts it.
    @Test func aPacketSaysHowLongItIs() throws {
        let encoder = try OpusEncoder(channels: 2, application: .voip, bitrate: 32_000)
        for frames in [480, 960, 1920] {
            let packet = try encoder.encode([Int16](repeating: 100, count: frames * 2))
            #expect(OpusDecoder.samplesPerChannel(in: packet) == frames)
        }
        #expect(OpusDecoder.samplesPerChannel(in: []) == nil)
        #expect(OpusDecoder.samplesPerChannel(in: [0x03, 0x00]) == nil, "code 3 with no frames")
        #expect(OpusDecoder.samplesPerChannel(in: [0x1b, 0x3f]) == nil, "63 frames of 60 ms: over 120 ms")
    }

    @Test func decoderRejectsMalformedPackets() throws {
        let decoder = try OpusDecoder(channels: 1)
        #expect(throws: MediaError.self) { try decoder.decode([]) }
        // TOC code 3 (arbitrary frame count) with a frame count of zero is invalid (RFC 6716 §3.2.5).
        #expect(throws: MediaError.self) { try decoder.decode([0x03, 0x00]) }
        // Code 3 asking for 63 frames of 60 ms is over the 120 ms limit.
        #expect(throws: MediaError.self) { try decoder.decode([0x1b, 0x3f]) }
        #expect(throws: MediaError.self) { try decoder.decodeLoss(samplesPerChannel: 100) }
        // Seeded random packets: errors or audio, never a crash.
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<2000 {
            let packet = (0..<Int.random(in: 1...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if let samples = try? decoder.decode(packet) { #expect(samples.count <= 5760) }
        }
    }
}
