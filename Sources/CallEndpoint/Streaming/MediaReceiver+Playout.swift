import Codecs
import MediaCore
import Devices
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import Synchronization

/// The receiver's decoding and playout threads: what the decode stage made of a frame, and
/// the audio played at the card's pace.
extension MediaReceiver {
    /// What the decode stage made of a frame (on its thread).
    func decoded(_ outcome: VideoDecodeStage.Outcome) {
        guard case .decoded(let picture, let isKeyframe, let rtpTimestamp, let budget) = outcome else {
            state.withLock { s in
                s.summary.decodeErrors += 1
                s.needKeyframe = true
            }
            loop.wake()
            return
        }
        let shownAt = clock.now
        loop.post(.videoShown(rtpTimestamp: rtpTimestamp, at: shownAt))
        let probe = configuration.measuresLatency
        let latency = probe ? TestPatternSource.captureAge(of: picture).map { Double($0.inMilliseconds) } : nil
        let wantsNumber = probe && state.withLock { $0.summary.firstFrameNumbers.count < 5 }
        let number = wantsNumber ? TestPatternSource.frameNumber(in: picture) : nil
        state.withLock { s in
            s.summary.framesDecoded += 1
            s.summary.videoBudget.merge(budget)
            let at = shownAt - started
            if let last = s.summary.lastFrameAt, at - last >= .milliseconds(300) {
                s.summary.freezes += 1
                s.summary.longestFreeze = max(s.summary.longestFreeze, at - last)
                s.summary.recentFreezes.append(at - last)
                if s.summary.recentFreezes.count > 64 { s.summary.recentFreezes.removeFirst() }
            }
            s.summary.lastFrameAt = at
            if s.summary.firstFrameAt == nil { s.summary.firstFrameAt = at }
            if isKeyframe { s.summary.keyframes += 1 }
            if let latency { s.summary.videoLatencyMs.add(latency) }
            if let number, s.summary.firstFrameNumbers.count < 5 { s.summary.firstFrameNumbers.append(number) }
            s.summary.videoWidth = picture.width
            s.summary.videoHeight = picture.height
        }
    }

    /// Pulls one block (10 ms) every block period, as a sound card would (one that was not
    /// served for a while skips what it missed rather than playing it back to back); packets are
    /// decoded as the blocks need them, whatever their duration (10 or 20 ms from callend, 20 ms
    /// from a browser). Decoding and the speaker happen outside the lock; only the jitter
    /// buffer's answer is taken under it.
    func playAudio() {
        var pacer = RealTimePacer(period: AudioBlock.period)
        // Decoded audio not played yet (interleaved), and the RTP timestamp of its first sample
        // (nil when it is concealment, which says nothing about when anything was taken).
        var pending: [Int16] = []
        var pendingTimestamp: UInt32?
        while !stopping.load(ordering: .relaxed) {
            pacer.waitForNext()
            guard let decoder = state.withLock({ $0.audioDecoder }) else { continue }
            let blockSamples = AudioBlock.frames * decoder.channels
            var rebuffering = false
            while pending.count < blockSamples {
                // When this block's audio is played: after what is pending.
                let at = clock.now - started + .microseconds(Int64(pending.count / decoder.channels) * 1_000_000 / Int64(AudioFrame.sampleRate))
                let (playout, timestamp, frameSamples, wait) = state.withLock { s in
                    (s.audioBuffer.nextPlayout(at: at), s.audioBuffer.lastPlayedTimestamp, s.audioBuffer.frameSamples, s.audioBuffer.lastWait)
                }
                let samples: [Int16]?
                switch playout {
                case .buffering: samples = nil
                case .decode(let payload):
                    let decodeStart = MediaTime.now
                    samples = try? decoder.decode(payload)
                    let took = MediaTime.now - decodeStart
                    let device = speaker?.playoutDelay ?? .zero
                    state.withLock { s in
                        s.summary.audioDecoded += 1
                        if let wait { s.summary.audioBudget.add(.jitterBuffer, wait) }
                        s.summary.audioBudget.add(.decode, took)
                        s.summary.audioBudget.add(.playout, device)
                    }
                case .decodeFEC(let next): samples = try? decoder.decodeFEC(from: next, samplesPerChannel: frameSamples)
                case .conceal: samples = try? decoder.decodeLoss(samplesPerChannel: frameSamples)
                }
                if case .buffering = playout { rebuffering = true; break }
                guard let samples, !samples.isEmpty else { continue }
                if pending.isEmpty {
                    if case .conceal = playout { pendingTimestamp = nil } else { pendingTimestamp = timestamp }
                }
                pending += samples
            }
            if pending.isEmpty { continue }
            // Short of a block only when the stream paused: what is left goes out padded.
            if rebuffering && pending.count < blockSamples { pending += [Int16](repeating: 0, count: blockSamples - pending.count) }
            let block = Array(pending[..<blockSamples])
            pending.removeFirst(blockSamples)
            let played = pendingTimestamp
            pendingTimestamp = pendingTimestamp.map { $0 &+ UInt32(AudioBlock.frames) }
            speaker?.play(block)
            // Heard once what waits in the device ahead of it has played.
            let heard = clock.now + (speaker?.playoutDelay ?? .zero)
            if let played { loop.post(.audioPlayed(rtpTimestamp: played, at: heard)) }
            if configuration.measuresLatency {
                let mono = stride(from: 0, to: block.count, by: decoder.channels).map { block[$0] }
                state.withLock { s in s.summary.audioLatencyMs.add(contentsOf: s.audioLatency.played(mono, at: heard.sinceOrigin)) }
            }
        }
    }
}
