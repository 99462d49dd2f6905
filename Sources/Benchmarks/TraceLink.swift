/// A recorded cellular link's capacity: the format of the public traces of the mahimahi project
/// (its traces/README; the traces were recorded with Saturator, Winstein et al., NSDI 2013). One
/// line per delivery opportunity, the time in milliseconds from the trace's start at which one
/// MTU-sized packet may leave the bottleneck queue; several opportunities in one millisecond are
/// that many lines with the same time. The trace repeats with its last time as its period.
public struct CapacityTrace: Sendable, Equatable {
    /// Opportunity times, ms, nondecreasing; the last is the period (> 0).
    public let times: [Int64]
    /// Bytes each opportunity lets through: a 1500-byte IP packet and a TUN device's 4-byte
    /// header, as the traces were replayed.
    public static let opportunityBytes = 1504

    public var period: Int64 { times.last! }

    public struct Malformed: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    public init(times: [Int64]) throws(Malformed) {
        guard let last = times.last else { throw Malformed(description: "a trace has at least one delivery opportunity") }
        guard last > 0 else { throw Malformed(description: "a trace lasts longer than 0 ms") }
        for (a, b) in zip(times, times.dropFirst()) where b < a {
            throw Malformed(description: "times go back from \(a) to \(b) ms: a trace's times never decrease")
        }
        guard times.first! >= 0 else { throw Malformed(description: "a time before the trace's start: \(times.first!) ms") }
        self.times = times
    }

    /// Reads a trace file's text: one whole number of milliseconds per line.
    public init(parsing text: String) throws(Malformed) {
        var times: [Int64] = []
        times.reserveCapacity(text.utf8.count / 6)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        for (i, raw) in lines.enumerated() {
            let line = i + 1
            let field = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            if field.isEmpty {
                // The newline that ends the last line leaves one empty piece; any other is an error.
                guard i == lines.count - 1 else { throw Malformed(description: "line \(line) is empty") }
                continue
            }
            guard field.utf8.count <= 12, field.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let ms = Int64(field) else {
                throw Malformed(description: "line \(line) is not a whole number of milliseconds: \(field.prefix(20))")
            }
            times.append(ms)
        }
        try self.init(times: times)
    }

    /// A constant capacity (for checks): one opportunity every `every` ms.
    public static func constant(everyMilliseconds every: Int64) -> CapacityTrace {
        try! CapacityTrace(times: [every])  // one positive time: always valid
    }

    /// The capacity of each whole second from the trace's start, in bits per second, for
    /// `seconds` seconds (the trace repeated as it is replayed).
    public func capacityPerSecond(seconds: Int) -> [Double] {
        var counts = [Int](repeating: 0, count: seconds)
        var repetition: Int64 = 0
        outer: while true {
            for t in times {
                let at = repetition * period + t
                let second = Int(at / 1000)
                guard second < seconds else { break outer }
                counts[second] += 1
            }
            repetition += 1
        }
        return counts.map { Double($0 * Self.opportunityBytes * 8) }
    }

    /// Opportunities from `from` ms after the trace's start up to (not including) `to`, the
    /// trace repeated.
    public func opportunities(from: Int64, to: Int64) -> Int {
        func before(_ ms: Int64) -> Int {
            // Opportunities at times < ms.
            guard ms > 0 else { return 0 }
            let (repetitions, rest) = (ms / period, ms % period)
            var (low, high) = (0, times.count)
            while low < high {
                let mid = (low + high) / 2
                if times[mid] < rest { low = mid + 1 } else { high = mid }
            }
            // Repetition k's times are k x period + t, its last on the next one's start: with
            // no rest, that last one (at ms) is not before ms.
            let atPeriod = rest == 0 ? times.reversed().prefix { $0 == period }.count : 0
            return Int(repetitions) * times.count + low - atPeriod
        }
        return max(0, before(to) - before(from))
    }

    /// The mean capacity over one period, bit/s.
    public var meanBitrate: Double { Double(times.count * Self.opportunityBytes * 8) * 1000 / Double(period) }
}

/// One direction of an emulated cellular link: a drop-tail queue of `queueLimit` packets drained
/// at the trace's delivery opportunities (an opportunity moves up to `opportunityBytes` of the
/// queue's head, a packet that does not fit taking the rest from the next; one the queue does not
/// use is lost, as a radio scheduler's slot is), then a fixed `delay` before delivery. Pure: the
/// caller passes the time (µs on its clock), so the same model serves the TUN relay and tests.
public struct TraceLink<Packet> {
    public let trace: CapacityTrace
    public let queueLimit: Int
    /// One-way delay after the bottleneck, µs.
    public let delay: Int64
    /// The link's start on the caller's clock, µs: the trace's time 0.
    public let start: Int64

    private var queue: [(packet: Packet, size: Int, arrived: Int64)] = []
    private var head = 0
    /// Bytes of the head packet already carried by earlier opportunities.
    private var headCarried = 0
    /// The next opportunity: its index in the trace and its repetition.
    private var index = 0
    private var repetition: Int64 = 0

    public struct Counters: Sendable, Equatable {
        public var arrived = 0
        public var dropped = 0
        public var delivered = 0
        public var deliveredBytes = 0
        /// Opportunities that went by, and those with nothing to carry.
        public var opportunities = 0
        public var idleOpportunities = 0
    }
    public private(set) var counters = Counters()

    public init(trace: CapacityTrace, queueLimit: Int = 150, delay: Int64 = 30_000, start: Int64) {
        self.trace = trace
        self.queueLimit = queueLimit
        self.delay = delay
        self.start = start
    }

    public var queued: Int { queue.count - head }

    /// When the next opportunity comes, µs.
    public var nextOpportunity: Int64 { start + (repetition * trace.period + trace.times[index]) * 1000 }

    /// A packet of `size` bytes arrives at the queue at `now`; false when the queue is full
    /// (drop-tail: the packet is lost).
    @discardableResult
    public mutating func arrive(_ packet: Packet, size: Int, at now: Int64) -> Bool {
        counters.arrived += 1
        guard queued < queueLimit else {
            counters.dropped += 1
            return false
        }
        queue.append((packet, min(size, CapacityTrace.opportunityBytes), now))
        return true
    }

    public struct Departure {
        public var packet: Packet
        /// When it is delivered: its last opportunity plus the delay, µs.
        public var at: Int64
        /// How long it waited in the queue, µs.
        public var waited: Int64
    }

    /// The packets the opportunities up to `now` carried, in order.
    public mutating func departures(until now: Int64) -> [Departure] {
        var out: [Departure] = []
        while nextOpportunity <= now {
            let at = nextOpportunity
            counters.opportunities += 1
            var room = CapacityTrace.opportunityBytes
            // Only what had arrived by the opportunity's time rides it.
            if head == queue.count || queue[head].arrived > at { counters.idleOpportunities += 1 }
            while room > 0, head < queue.count, queue[head].arrived <= at {
                let left = queue[head].size - headCarried
                if left > room {
                    headCarried += room
                    room = 0
                } else {
                    room -= left
                    headCarried = 0
                    counters.delivered += 1
                    counters.deliveredBytes += queue[head].size
                    out.append(Departure(packet: queue[head].packet, at: at + delay, waited: at - queue[head].arrived))
                    head += 1
                }
            }
            index += 1
            if index == trace.times.count {
                index = 0
                repetition += 1
            }
        }
        if head > 1024 && head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return out
    }
}
