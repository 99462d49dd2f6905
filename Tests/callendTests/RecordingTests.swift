import Foundation
import Testing
import TestSupport

/// Runs ffprobe or ffmpeg; standard output and error together.
private func tool(_ name: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/\(name)")
    process.arguments = arguments
    let out = Pipe()
    (process.standardOutput, process.standardError) = (out, out)
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

/// One recorded segment as ffprobe and ffmpeg see it.
private struct Segment {
    let path: String
    let started: Date  // from its name: callend-YYYYMMDDTHHMMSS.mmmZ-...
    let videoPackets: [(seconds: Double, key: Bool)]
    let audioPackets: Int
    let decodeErrors: String

    init(_ path: String) throws {
        self.path = path
        started = try Self.start(of: path)
        videoPackets = try tool("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time,flags", "-of", "csv=p=0", path])
            .split(separator: "\n").compactMap { line in
                let fields = line.split(separator: ",")
                return fields.count == 2 ? Double(fields[0]).map { ($0, fields[1].hasPrefix("K")) } : nil
            }
        audioPackets = try tool("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "packet=pts_time", "-of", "csv=p=0", path])
            .split(separator: "\n").count
        // The pictures keep their capture times (variable frame rate, frames 17-65 ms apart): the
        // decoded frames keep the file's millisecond time base, or ffmpeg's 1/30 s one would
        // count two close frames as one tick and complain of its own output.
        decodeErrors = try tool("ffmpeg", ["-v", "error", "-i", path, "-enc_time_base", "-1", "-f", "null", "-"])
    }

    var lastVideo: Double { videoPackets.last?.seconds ?? 0 }

    /// When a segment began, from its name: callend-YYYYMMDDTHHMMSS.mmmZ-...
    static func start(of path: String) throws -> Date {
        let name = URL(fileURLWithPath: path).lastPathComponent
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "UTC")
        format.dateFormat = "yyyyMMdd'T'HHmmss.SSS"
        return try #require(format.date(from: String(name.dropFirst("callend-".count).prefix(19))), "a segment's name: \(name)")
    }
}

/// The timecodes (ms) of a WebM file's clusters, read from its EBML: the Segment's children
/// (the Segment itself of unknown size, as a live writer leaves it), each Cluster's Timecode.
private func clusterTimes(_ path: String) throws -> [Int] {
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var at = 0
    // An EBML variable-length integer: its length from the first byte's leading zeros.
    func vint(keepMarker: Bool) -> (value: Int, unknown: Bool)? {
        guard at < bytes.count, bytes[at] != 0 else { return nil }
        let length = bytes[at].leadingZeroBitCount + 1
        guard at + length <= bytes.count else { return nil }
        var value = Int(keepMarker ? bytes[at] : bytes[at] & (0xFF >> length))
        var allOnes = value == (0xFF >> length)
        for i in 1..<length {
            value = value << 8 | Int(bytes[at + i])
            allOnes = allOnes && bytes[at + i] == 0xFF
        }
        at += length
        return (value, allOnes)
    }
    var times: [Int] = []
    while let id = vint(keepMarker: true), let size = vint(keepMarker: false) {
        switch id.value {
        case 0x1853_8067: continue  // Segment: its children follow
        case 0x1F43_B675:  // Cluster: its Timecode is its first child
            let end = at + size.value
            if let child = vint(keepMarker: true), child.value == 0xE7, let length = vint(keepMarker: false), at + length.value <= bytes.count {
                times.append(bytes[at..<at + length.value].reduce(0) { $0 << 8 | Int($1) })
            }
            at = end
        default:
            guard !size.unknown else { return times }
            at += size.value
        }
    }
    return times
}

private func segments(in directory: String, _ direction: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix("-\(direction).webm") }.sorted().map { directory + "/" + $0 }
}

@Suite(.serialized) struct RecordingTests {
    /// Both ends record both directions in 5 s WebM segments; then the service and both
    /// endpoints are killed with SIGKILL at once (a power cut, a container stopped hard). Every
    /// segment starts on a keyframe and decodes without an error; every closed one holds its
    /// five seconds; the last one holds what was sent and received up to a second before the kill.
    @Test func segmentsOfBothDirectionsSurviveAKillOfEveryProcess() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let folders = [try ScratchFolder(), try ScratchFolder()]
        let directories = folders.map { $0.path + "/recordings" }
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--no-stdin", "--duration", "120", "--record-segment", "5"]
        let a = try launchJoined(["join", "rec", "--token", try token("a", secret, room: "rec"), "--record-dir", directories[0]] + common)
        defer { terminate(a.process) }
        let b = try launchJoined(["join", "rec", "--token", try token("b", secret, room: "rec"), "--record-dir", directories[1]] + common)
        defer { terminate(b.process) }
        // Until each side is two and a half seconds into its third segment of each direction.
        let deadline = Date().addingTimeInterval(60)
        func ready() throws -> Bool {
            for directory in directories {
                for direction in ["sent", "received"] {
                    let names = try segments(in: directory, direction)
                    if try names.count < 3 || Date().timeIntervalSince(Segment.start(of: names[2])) < 2.5 { return false }
                }
            }
            return true
        }
        while try !ready() {
            #expect(Date() < deadline, "no third segment of 2.5 s within 60 s: \(directories.map { (try? FileManager.default.contentsOfDirectory(atPath: $0)) ?? [] })")
            guard Date() < deadline else { return }
            usleep(50_000)
        }
        let killedAt = Date()
        for process in [a.process, b.process, server] { kill(process.processIdentifier, SIGKILL) }
        for process in [a.process, b.process, server] { process.waitUntilExit() }

        var longestCluster = 0
        defer { print("recording: the longest cluster of all segments: \(longestCluster) ms") }
        for directory in directories {
            for direction in ["sent", "received"] {
                let all = try segments(in: directory, direction).map(Segment.init)
                #expect(all.count >= 3, "\(directory) \(direction): \(all.map(\.path))")
                for (index, segment) in all.enumerated() {
                    let name = URL(fileURLWithPath: segment.path).lastPathComponent
                    #expect(segment.decodeErrors.isEmpty, "\(name): \(segment.decodeErrors)")
                    #expect(segment.videoPackets.first?.key == true, "\(name) starts on a keyframe")
                    // A cluster reaches the file whole: what a kill can lose is the longest one.
                    let clusters = try clusterTimes(segment.path)
                    let longest = zip(clusters, clusters.dropFirst()).map { $1 - $0 }.max() ?? 0
                    #expect(clusters.count >= 2 && longest <= 1000, "\(name): clusters at \(clusters) ms")
                    longestCluster = max(longestCluster, longest)
                    // Opus comes every 10 or 20 ms: at least 40 packets a second of video.
                    #expect(Double(segment.audioPackets) >= 40 * segment.lastVideo, "\(name): \(segment.audioPackets) audio packets in \(segment.lastVideo) s")
                    if index < all.count - 1 {
                        #expect(segment.lastVideo >= 4.5 && segment.lastVideo <= 6.5, "\(name) holds \(segment.lastVideo) s of 5")
                        #expect(segment.videoPackets.count >= 50, "\(name): \(segment.videoPackets.count) pictures")
                    } else {
                        let lost = killedAt.timeIntervalSince(segment.started) - segment.lastVideo
                        print("recording: \(direction) at \(URL(fileURLWithPath: directory).deletingLastPathComponent().lastPathComponent): the last segment holds \(segment.lastVideo) s, \(String(format: "%.2f", lost)) s before the kill lost")
                        #expect(lost <= 1.0, "\(name) lost \(lost) s before the kill")
                    }
                }
            }
        }
    }

    /// A quota of 1 MiB on a call that fills it in seconds: the directory never holds more,
    /// the oldest segments go, and recording goes on in new ones.
    @Test func aQuotaIsNeverExceeded() throws {
        let secret = try SecretFile()
        let (server, port) = try startServe(secret)
        defer { terminate(server) }
        let folder = try ScratchFolder()
        let directory = folder.path + "/recordings"
        let quota = 1 << 20
        let common = ["--server", "127.0.0.1:\(port)", "--video-size", "320x240", "--no-stdin", "--duration", "20"]
        let a = try launchJoined(["join", "q", "--token", try token("a", secret, room: "q"), "--record-dir", directory, "--record-segment", "5",
                                  "--record-quota", "1M"] + common)
        defer { terminate(a.process) }
        let b = try launchJoined(["join", "q", "--token", try token("b", secret, room: "q")] + common)
        defer { terminate(b.process) }
        var largest = 0, seen = Set<String>()
        func measure() throws {
            var total = 0
            for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
                seen.insert(name)
                total += (try? FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size] as? Int) ?? 0
            }
            largest = max(largest, total)
        }
        while a.process.isRunning {
            try measure()
            usleep(20_000)
        }
        try measure()
        b.process.waitUntilExit()
        let left = try FileManager.default.contentsOfDirectory(atPath: directory)
        print("recording: quota 1 MiB: at most \(largest) bytes in the directory; \(seen.count) segments written, \(left.count) left")
        #expect(a.process.terminationStatus == 0, "\(a.log.text)")
        #expect(largest <= quota, "the directory held \(largest) bytes over a quota of \(quota)")
        #expect(largest >= quota / 2, "the quota was never approached (\(largest) bytes): the test proves nothing")
        #expect(seen.count > left.count && left.count >= 1, "segments written \(seen.sorted()), left \(left.sorted())")
        // What is left is the newest and plays.
        for name in left {
            #expect(try Segment(directory + "/" + name).decodeErrors.isEmpty, "\(name)")
        }
        #expect(left.sorted().last == seen.sorted().last, "the newest segment is kept")
    }

    @Test func badRecordingOptions() throws {
        let cases: [([String], String)] = [
            (["--record-quota", "1G"], "give --record-dir"),
            (["--record-dir", "/tmp/x", "--record-quota", "10k"], "--record-quota takes a size of at least 1 MiB"),
            (["--record-dir", "/tmp/x", "--record-quota", "lots"], "--record-quota takes a size"),
            (["--record-dir", "/tmp/x", "--record-keep", "0"], "--record-keep takes a positive duration"),
            (["--record-dir", "/tmp/x", "--record-keep", "4000d"], "up to 3650d"),
            (["--record-dir", "/tmp/x", "--record-segment", "2"], "--record-segment"),
        ]
        for (arguments, message) in cases {
            let result = try runCallend(["join", "lab", "--token", "t"] + arguments)
            #expect(result.status == 2, "\(arguments) exited \(result.status)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        // A directory that cannot be made, or a file in its place, fails before joining.
        let folder = try ScratchFolder()
        let file = folder.path + "/file"
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        for (directory, message) in [(folder.path + "/no/such", "cannot create the recording directory"), (file, "is not a directory")] {
            let result = try runCallend(["join", "lab", "--token", "t", "--server", "127.0.0.1:9", "--record-dir", directory])
            #expect(result.status == 1 && result.stderr.contains(message), "\(directory): \(result.status) \(result.stderr)")
        }
    }
}
