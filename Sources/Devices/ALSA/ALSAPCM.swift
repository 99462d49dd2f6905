internal import CALSA
#if canImport(Glibc)
import Glibc
#endif

/// A PCM opened for 48 kHz signed 16-bit interleaved audio through alsa-lib. Names are ALSA PCM
/// names: `default`, `plughw:CARD=Loopback,DEV=0` (the plug layer converts rate and channels when
/// the hardware cannot), `hw:...` (no conversion), or any PCM from an ALSA configuration.
/// Period and buffer sizes are chosen for low latency (10 ms periods, four of them). Over- and
/// underruns are recovered (and counted); a device that disappears is reported as `deviceLost`.
/// Owns its `snd_pcm_t` and closes it in deinit; use it from one thread at a time.
public final class ALSAPCM {
    public enum Direction: Sendable { case capture, playback }

    public struct Configuration: Sendable {
        public var sampleRate = 48_000
        public var channels = 1
        /// Frames per period: 480 = 10 ms at 48 kHz.
        public var periodFrames = 480
        public var periods = 4
        public init(channels: Int = 1) { self.channels = channels }
    }

    public let name: String
    public let direction: Direction
    public let sampleRate: Int
    public let channels: Int
    public let periodFrames: Int
    public let bufferFrames: Int
    public private(set) var xruns = 0
    private let pcm: OpaquePointer

    public init(name: String, direction: Direction, configuration: Configuration = Configuration()) throws(DeviceError) {
        let operation = "open ALSA \(direction == .capture ? "capture" : "playback") PCM '\(name)'"
        var handle: OpaquePointer?
        let stream = direction == .capture ? SND_PCM_STREAM_CAPTURE : SND_PCM_STREAM_PLAYBACK
        let opened = snd_pcm_open(&handle, name, stream, 0)
        guard opened == 0, let handle else { throw Self.error(operation, opened) }
        do {
            (sampleRate, periodFrames, bufferFrames) = try Self.configure(handle, configuration, operation)
        } catch {
            snd_pcm_close(handle)
            throw error
        }
        self.pcm = handle
        self.name = name
        self.direction = direction
        self.channels = configuration.channels
    }

    deinit { snd_pcm_close(pcm) }

    private static func configure(_ pcm: OpaquePointer, _ c: Configuration, _ operation: String) throws(DeviceError) -> (Int, Int, Int) {
        var hw: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&hw) == 0, let hw else { throw DeviceError(operation: operation, detail: "out of memory") }
        defer { snd_pcm_hw_params_free(hw) }
        var rate = UInt32(c.sampleRate)
        var period = snd_pcm_uframes_t(c.periodFrames)
        var buffer = snd_pcm_uframes_t(c.periodFrames * c.periods)
        var dir: Int32 = 0
        try check(snd_pcm_hw_params_any(pcm, hw), operation, "no configuration")
        try check(snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), operation, "interleaved access refused")
        try check(snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE), operation,
                  "16-bit signed little-endian samples refused; use a plughw: or default PCM for conversion")
        try check(snd_pcm_hw_params_set_channels(pcm, hw, UInt32(c.channels)), operation,
                  "\(c.channels) channel(s) refused; use plughw: for channel conversion")
        try check(snd_pcm_hw_params_set_rate_near(pcm, hw, &rate, &dir), operation, "no sample rate near \(c.sampleRate) Hz")
        guard Int(rate) == c.sampleRate else {
            throw DeviceError(operation: operation, detail: "the device runs at \(rate) Hz, not \(c.sampleRate); open it as plughw:... to resample")
        }
        try check(snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir), operation, "period size refused")
        try check(snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer), operation, "buffer size refused")
        try check(snd_pcm_hw_params(pcm, hw), operation, "hardware parameters refused")
        return (Int(rate), Int(period), Int(buffer))
    }

    private static func check(_ result: Int32, _ operation: String, _ what: String) throws(DeviceError) {
        guard result >= 0 else { throw error(operation, result, what) }
    }

    static func error(_ operation: String, _ code: Int32, _ what: String? = nil) -> DeviceError {
        let text = String(cString: snd_strerror(code))
        switch -code {
        case EBUSY: return DeviceError(operation: operation, detail: "\(text): the device is in use by another program")
        case ENOENT, ENODEV: return DeviceError(operation: operation, detail: "\(text): no such device (list them with 'callend devices')")
        case EACCES, EPERM: return DeviceError(operation: operation, detail: "\(text): permission denied (is the user in the 'audio' group?)")
        default: return DeviceError(operation: operation, detail: what.map { "\($0) (\(text))" } ?? text)
        }
    }

    /// True for errors that mean the device went away (unplugged, driver unloaded).
    public static func isDeviceLost(_ error: DeviceError) -> Bool { error.detail.hasPrefix("device lost") }

    /// Reads exactly `frames` frames (blocking), recovering from overruns.
    public func read(frames: Int) throws(DeviceError) -> [Int16] {
        precondition(direction == .capture, "read needs a capture PCM")
        var samples = [Int16](repeating: 0, count: frames * channels)
        try transfer(frames: frames, "read from '\(name)'") { done, remaining in
            samples.withUnsafeMutableBufferPointer { snd_pcm_readi(pcm, $0.baseAddress! + done * channels, snd_pcm_uframes_t(remaining)) }
        }
        return samples
    }

    /// Writes all samples (blocking), recovering from underruns.
    public func write(_ samples: [Int16]) throws(DeviceError) {
        precondition(direction == .playback, "write needs a playback PCM")
        try transfer(frames: samples.count / channels, "write to '\(name)'") { done, remaining in
            samples.withUnsafeBufferPointer { snd_pcm_writei(pcm, $0.baseAddress! + done * channels, snd_pcm_uframes_t(remaining)) }
        }
    }

    /// Moves `frames` frames with `call(done, remaining)` (snd_pcm_readi/writei), which returns the
    /// frames moved or a negative error; xruns are recovered and the transfer goes on.
    private func transfer(frames: Int, _ operation: String, _ call: (Int, Int) -> Int) throws(DeviceError) {
        var done = 0
        while done < frames {
            let moved = call(done, frames - done)
            if moved >= 0 {
                done += moved
            } else {
                try recover(Int32(moved), operation)
            }
        }
    }

    /// Waits until everything written has been played.
    public func drain() { snd_pcm_drain(pcm) }

    private func recover(_ code: Int32, _ operation: String) throws(DeviceError) {
        switch -code {
        case EINTR: return
        case EPIPE, ESTRPIPE:
            // Overrun (capture) or underrun (playback): count it and restart the stream (snd_pcm_recover).
            xruns += 1
            let recovered = snd_pcm_recover(pcm, code, 1)
            guard recovered >= 0 else { throw Self.error(operation, recovered) }
            if direction == .capture { snd_pcm_start(pcm) }
        case ENODEV, EBADFD, EIO:
            throw DeviceError(operation: operation, detail: "device lost: \(String(cString: snd_strerror(code)))")
        default:
            throw Self.error(operation, code)
        }
    }
}
