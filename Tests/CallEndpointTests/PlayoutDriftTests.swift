import Foundation
import Testing
@testable import CallEndpoint

/// The sender's clock and the sound card's drift apart; playout follows the card without drops,
/// silence or clicks.
struct PlayoutDriftTests {
    /// Ten simulated minutes of a 440 Hz tone whose blocks arrive every 20 ms of the sender's
    /// clock while the card takes a block every 20 ms of its own, `ppm` apart.
    func play(ppm: Double, minutes: Double = 10) -> (queue: PlayoutQueue, biggestStep: Int, blocks: Int, meanRatio: Double, levels: ClosedRange<Double>) {
        var queue = PlayoutQueue()
        let producerPeriod = 20_000.0 * (1 - ppm / 1e6)  // µs; a positive ppm: the sender runs fast
        let consumerPeriod = 20_000.0
        var nextProduce = 0.0, nextConsume = 5_000.0
        var phase = 0.0
        let step = 2 * Double.pi * 440 / 48_000
        var last: Int16?
        var biggestStep = 0
        var blocks = 0
        var ratios = 0.0, counted = 0
        var lowest = Double.infinity, highest = -Double.infinity
        let end = minutes * 60e6
        while nextConsume < end {
            if nextProduce <= nextConsume {
                var block = [Int16](repeating: 0, count: AudioBlock.frames * 2)
                for i in 0..<AudioBlock.frames {
                    let v = Int16(10_000 * sin(phase))
                    block[2 * i] = v
                    block[2 * i + 1] = v
                    phase += step
                }
                queue.append(block)
                nextProduce += producerPeriod
            } else {
                let out = queue.next()
                blocks += 1
                // Past the start-up fill, every sample follows the last smoothly.
                if queue.ratio != 1 || blocks > 10 {
                    for i in stride(from: 0, to: out.count, by: 2) {
                        if let last { biggestStep = max(biggestStep, abs(Int(out[i]) - Int(last))) }
                        last = out[i]
                    }
                } else {
                    last = out.last
                }
                if nextConsume > end / 2 {
                    ratios += queue.ratio
                    counted += 1
                    lowest = min(lowest, queue.level)
                    highest = max(highest, queue.level)
                }
                nextConsume += consumerPeriod
            }
        }
        return (queue, biggestStep, blocks, ratios / Double(counted), lowest...highest)
    }

    @Test(arguments: [300.0, -300.0, 1000.0, -1000.0])
    func playoutFollowsTheCardsClock(ppm: Double) {
        let (queue, biggestStep, blocks, meanRatio, levels) = play(ppm: ppm)
        #expect(blocks == 30_000)
        #expect(queue.droppedFrames == 0, "dropped \(queue.droppedFrames) frames")
        // The first blocks are silence while the queue fills to its target; nothing after that.
        #expect(queue.silentFrames == 0, "\(queue.silentFrames) frames of silence")
        // 440 Hz at amplitude 10000 moves at most 576 per sample; a drop or a gap would jump.
        #expect(biggestStep < 700, "a click: \(biggestStep)")
        // The rate found is the drift (over the second five minutes, within a few of the
        // resampler's 21 ppm steps), and the queue holds its fill: latency neither grows nor shrinks.
        #expect(abs(meanRatio - (1 + ppm / 1e6)) < 50e-6, "mean ratio \(meanRatio)")
        let target = Double(PlayoutQueue.target)
        #expect(levels.lowerBound > target - Double(AudioBlock.frames) && levels.upperBound < target + Double(AudioBlock.frames),
                "fill \(levels) frames against a target of \(target)")
    }

    /// A burst the rate cannot absorb (audio held up by an outage, then delivered at once) is cut
    /// back to the target: latency does not stay high.
    @Test func aBurstAfterAnOutageIsCutToTheTarget() {
        var queue = PlayoutQueue()
        for _ in 0..<40 { queue.append([Int16](repeating: 1, count: AudioBlock.frames * 2)) }
        #expect(queue.frames < PlayoutQueue.limit && queue.frames >= PlayoutQueue.target)
        #expect(queue.droppedFrames > 0)
    }
}
