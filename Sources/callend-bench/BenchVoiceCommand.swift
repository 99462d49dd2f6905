import Codecs
import Foundation
import MediaCore
import CLIKit

let benchVoiceHelp = """
    usage: callend bench voice --far F.wav --mic M.wav --out O.wav [--parts aec,ns,agc,hpf] [--echo-suppression 0|1|2]

    Runs join --voice's processing (webrtc-audio-processing through callend's VoiceProcessor, with
    its echo delay measured from the signals) over files, as a call feeds it: each 20 ms, the
    block of F that goes to the speaker, then the block of M the microphone took. Writes the
    processed microphone to O (48 kHz mono) and prints one JSON line of the processor's figures.
    F and M are 48 kHz WAV (mono or stereo, mixed to mono). scripts/echo/bench.sh uses it to
    measure echo cancellation and noise suppression beside GStreamer's webrtcdsp.

      --parts L   what runs: aec (echo cancellation), ns (noise suppression), agc (gain control),
                  hpf (high-pass filter); default all four, as --voice
      --echo-suppression N  0 low, 1 moderate (default, as --voice), 2 high
    """

func runBenchVoice(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(benchVoiceHelp); return }
    let far = try args.value("--far"), mic = try args.value("--mic"), out = try args.value("--out")
    let parts = try args.value("--parts") ?? "aec,ns,agc,hpf"
    let suppression = try args.integer("--echo-suppression", in: 0...2)
    try args.finish(command: "bench voice")
    guard let far, let mic, let out else { throw UsageError(description: "bench voice needs --far F.wav, --mic M.wav and --out O.wav") }
    var options = VoiceProcessing()
    let chosen = Set(parts.split(separator: ",").map(String.init))
    let known: Set = ["aec", "ns", "agc", "hpf"]
    guard !chosen.isEmpty, chosen.isSubset(of: known) else {
        throw UsageError(description: "--parts takes a list of aec, ns, agc, hpf, not '\(parts)'")
    }
    options.echoCancellation = chosen.contains("aec")
    if let suppression { options.echoSuppression = suppression }
    options.noiseSuppression = chosen.contains("ns") ? 3 : 0
    options.gainControl = chosen.contains("agc")
    options.highPass = chosen.contains("hpf")
    let processor = try VoiceProcessor(options)
    func open(_ path: String) throws -> WAVReader {
        let reader = try WAVReader(path: path)
        guard reader.sampleRate == AudioFrame.sampleRate, (1...2).contains(reader.channels) else {
            throw UsageError(description: "\(path): \(reader.sampleRate) Hz, \(reader.channels) channels; bench voice takes 48000 Hz mono or stereo")
        }
        return reader
    }
    let farReader = try open(far), micReader = try open(mic)
    let writer = try WAVWriter(path: out, channels: 1)
    let block = AudioFrame.sampleRate / 50
    var blocks = 0
    while let near = micReader.read(samplesPerChannel: block), near.count == block * micReader.channels {
        var speaker = farReader.read(samplesPerChannel: block) ?? []
        if speaker.count < block * farReader.channels { speaker += [Int16](repeating: 0, count: block * farReader.channels - speaker.count) }
        processor.render(speaker, channels: farReader.channels)
        try writer.write(processor.process(VoiceProcessor.mix(near, channels: micReader.channels), delay: .milliseconds(50)))
        blocks += 1
    }
    try writer.close()
    let stats = processor.stats
    func json(_ value: Int?) -> String { value.map(String.init) ?? "null" }
    print(#"{"seconds":\#(Double(blocks) / 50),"measuredDelayMs":\#(json(stats.measuredDelayMilliseconds)),"libraryDelayMs":\#(json(stats.delayMilliseconds)),"# +
          #""erleDb":\#(json(stats.erleDB)),"erlDb":\#(json(stats.erlDB)),"errors":\#(stats.errors)}"#)
}
