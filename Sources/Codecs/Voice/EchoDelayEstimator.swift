/// How long after the speaker plays something the microphone hears it, found from the two
/// signals themselves: their loudness envelopes (2 ms steps) are cross-correlated over the last
/// 0.8 s, every 100 ms, for every lag up to 500 ms. webrtc-audio-processing's echo canceller needs this delay
/// to within its filter's reach; its own delay-agnostic correction only starts after 15 s of
/// audio, and a sound card's reported buffering misses what lies outside it (a second card, a
/// Bluetooth speaker, a network hop). Pure: fed in call order, reads no clock.
struct EchoDelayEstimator {
    /// Samples per envelope step: 2 ms at 48 kHz.
    static let step = 96
    static let maxLag = 250  // steps: 500 ms
    static let window = 400  // steps: 0.8 s
    /// The first estimates run on what there is, from 0.4 s on.
    static let minimumWindow = 200
    /// A peak this strong (normalised correlation) and this far above the correlation at lags
    /// well away from it counts.
    static let threshold = 0.5

    private var far: [Double] = []
    private var near: [Double] = []
    /// Steps dropped from the front of each (absolute step i of far is far[i - farDropped]).
    private var farDropped = 0
    private var nearDropped = 0
    private var farPartial = (sum: 0.0, count: 0)
    private var nearPartial = (sum: 0.0, count: 0)
    private var sinceEstimate = 0
    private var restarted = false
    /// The delay found last, in steps; nil until one is found.
    private(set) var lagSteps: Int?
    private(set) var confidence = 0.0

    var delayMilliseconds: Int? { lagSteps.map { $0 * Self.step * 1000 / 48_000 } }
    var lagSamples: Int? { lagSteps.map { $0 * Self.step } }

    mutating func render(_ mono: ArraySlice<Int16>) { Self.append(mono, to: &far, &farPartial) }

    /// A sound card's stream restarted (an underrun played silence the far end never had, an
    /// overrun lost what the microphone heard): the lag has moved by an unknown amount. The
    /// microphone's history goes, so the next estimate (from 0.4 s on) sees only the new lag,
    /// and takes it however small the move.
    mutating func restart() {
        nearDropped += near.count
        near.removeAll(keepingCapacity: true)
        sinceEstimate = 0
        restarted = true
    }

    mutating func capture(_ mono: ArraySlice<Int16>) {
        let before = near.count
        Self.append(mono, to: &near, &nearPartial)
        sinceEstimate += near.count - before
        // The far end keeps maxLag more history than the window (trimmed in batches).
        let keepFar = Self.window + Self.maxLag + 50
        if far.count > keepFar * 2 { farDropped += far.count - keepFar; far.removeFirst(far.count - keepFar) }
        if near.count > Self.window * 2 { nearDropped += near.count - Self.window; near.removeFirst(near.count - Self.window) }
        if sinceEstimate >= 50, near.count >= Self.minimumWindow {  // every 100 ms
            sinceEstimate = 0
            estimate()
        }
    }

    private static func append(_ samples: ArraySlice<Int16>, to envelope: inout [Double], _ partial: inout (sum: Double, count: Int)) {
        // While loops over raw pointers, locals for the running step: this runs for every
        // sample both ways, and a debug build's range iterators and tuple accesses cost more
        // than the arithmetic (the device lab's emulated VM runs the debug build).
        var (sum, count) = partial
        samples.withUnsafeBufferPointer { buffer in
            var i = 0
            while i < buffer.count {
                let value = Double(buffer[i])
                sum += value * value
                count += 1
                if count == step {
                    envelope.append((sum / Double(step)).squareRoot())
                    (sum, count) = (0, 0)
                }
                i += 1
            }
        }
        partial = (sum, count)
    }

    /// The normalised correlation of `near` with the window of `far` starting at `first - lag`,
    /// for every lag whose window lies inside `far` (the others stay 0). Lag by lag the far window
    /// slides one step back: its sum and sum of squares follow by one step in and one out, only the
    /// dot product is a loop. While loops over raw pointers: the device lab's emulated VM runs the
    /// debug build, where this loop (25 million multiply-adds a second, on the capture thread) with
    /// range iterators cost more than the echo canceller itself and the VM fell behind the card.
    private static func correlate(far: UnsafeBufferPointer<Double>, near: UnsafeBufferPointer<Double>, first: Int, nearEnergy: Double,
                                  into values: inout [Double]) {
        let n = near.count
        var windowStart = -1, windowSum = 0.0, windowSquares = 0.0
        var lag = 0
        while lag < values.count {
            defer { lag += 1 }
            let start = first - lag
            guard start + n <= far.count else { continue }
            guard start >= 0 else { break }
            var sum = 0.0, squares = 0.0
            if windowStart == start + 1 {
                let enter = far[start], leave = far[start + n]
                sum = windowSum + enter - leave
                squares = windowSquares + enter * enter - leave * leave
            } else {
                var i = 0
                while i < n { let x = far[start + i]; sum += x; squares += x * x; i += 1 }
            }
            (windowStart, windowSum, windowSquares) = (start, sum, squares)
            var dot = 0.0, i = 0
            while i < n { dot += far[start + i] * near[i]; i += 1 }
            let energy = squares - sum * sum / Double(n)
            guard energy > 1e-9 * max(1, squares) else { continue }
            values[lag] = dot / (energy * nearEnergy).squareRoot()
        }
    }

    /// The lag whose correlation of envelope changes (each minus its window mean) is highest.
    private mutating func estimate() {
        let n = min(Self.window, near.count)
        let nearWindow = near.suffix(n)
        // The window is near's absolute steps [end - n, end); at lag L its echo came from far's
        // absolute steps [end - n - L, end - L).
        let end = nearDropped + near.count
        let nearMean = nearWindow.reduce(0, +) / Double(n)
        let nearCentered = nearWindow.map { $0 - nearMean }
        let nearEnergy = nearCentered.reduce(0) { $0 + $1 * $1 }
        guard nearEnergy > 0 else { return }
        var best = (lag: 0, value: -1.0)
        var values = [Double](repeating: 0, count: Self.maxLag + 1)
        // Since the near window is centred, the far window's mean drops out of the dot product;
        // its centred energy comes from running sums.
        let first = end - n - farDropped  // far's index of the window at lag 0
        far.withUnsafeBufferPointer { farBuffer in
            nearCentered.withUnsafeBufferPointer { nearBuffer in
                Self.correlate(far: farBuffer, near: nearBuffer, first: first, nearEnergy: nearEnergy, into: &values)
            }
        }
        for (lag, value) in values.enumerated() where value > best.value { best = (lag, value) }
        guard best.value >= Self.threshold else { return }
        // A clear peak: the best lag 20 ms or more away from it is well below.
        let away = values.enumerated().filter { abs($0.offset - best.lag) >= 10 }.map(\.element).max() ?? 0
        guard best.value - away >= 0.15 else { return }
        // A room's reflections make a plateau after the direct path: the echo starts at the
        // earliest lag that comes close to the best.
        if let first = values.firstIndex(where: { $0 >= best.value * 0.9 }), first < best.lag {
            best = (first, values[first])
        }
        // Wobbles are not news: each change of the delay makes the canceller realign, and its
        // (extended) filter reaches well past 24 ms either way. A sound card's buffer fill
        // wanders by about that much; a new route or a restarted stream moves it further.
        if let current = lagSteps, abs(current - best.lag) < 12, !restarted { return }
        restarted = false
        lagSteps = best.lag
        confidence = best.value
    }
}
