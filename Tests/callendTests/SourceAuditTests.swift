import Foundation
import Testing

/// Checks over the source tree for patterns that let outside input stop a process.
@Suite struct SourceAuditTests {
    static let sources = ModuleMapTests.repository.appendingPathComponent("Sources")

    /// Every Swift file under Sources with its lines.
    static func swiftFiles() throws -> [(path: String, lines: [Substring])] {
        let enumerator = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        var files: [(String, [Substring])] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            let text = try String(contentsOf: url, encoding: .utf8)
            files.append((url.path.replacingOccurrences(of: sources.path + "/", with: ""), text.split(separator: "\n", omittingEmptySubsequences: false)))
        }
        return files
    }

    /// The code lines (comments aside) of the files of `targets`, `edges` left out, that match
    /// `regex`, as "path:line: text".
    static func offending(_ files: [(path: String, lines: [Substring])], targets: [String], edges: [String], regex: Regex<AnyRegexOutput>) -> [String] {
        files.filter { file in targets.contains { file.path.hasPrefix($0 + "/") } && !edges.contains(file.path) }.flatMap { file in
            file.lines.enumerated().compactMap { i, line in
                let code = line.trimmingCharacters(in: .whitespaces)
                guard !code.hasPrefix("//"), line.contains(regex) else { return nil }
                return "\(file.path):\(i + 1): \(code)"
            }
        }
    }

    /// Lines that match `pattern`, as "path:line: text".
    static func matches(_ pattern: String) throws -> [String] {
        let regex = try Regex(pattern)
        return try swiftFiles().flatMap { file in
            file.lines.enumerated().compactMap { i, line in line.contains(regex) ? "\(file.path):\(i + 1): \(line.trimmingCharacters(in: .whitespaces))" : nil }
        }
    }

    /// A JSON number from the network becomes an integer through `JSONValue.integer(in:)`:
    /// `Int(x.numberValue)` traps on 1e300, -1 into an unsigned type, NaN.
    @Test func noUncheckedConversionOfAJSONNumber() throws {
        let unchecked = try Self.matches(#"\b(U?Int(8|16|32|64)?)\((?!exactly:|clamping:|truncatingIfNeeded:)[^()]*numberValue|numberValue[^\n]*\.map \{ *U?Int(8|16|32|64)?\("#)
        #expect(unchecked.isEmpty, "\(unchecked.joined(separator: "\n"))")
    }

    /// The pattern itself catches what it is for.
    @Test func thePatternCatchesTheBugItIsFor() throws {
        let regex = try Regex(#"\b(U?Int(8|16|32|64)?)\((?!exactly:|clamping:|truncatingIfNeeded:)[^()]*numberValue|numberValue[^\n]*\.map \{ *U?Int(8|16|32|64)?\("#)
        #expect(#"let asked = message.payload["status"]?.numberValue.map { Int($0) } ?? 503"#.contains(regex))
        #expect(#"log("\(Int(event["lost"]?.numberValue ?? 0)) lost")"#.contains(regex))
        #expect(!#"let n = value.integer(in: 0...9)"#.contains(regex))
        #expect(!#"guard let v = UInt64(exactly: x.numberValue ?? 0)"#.contains(regex))
    }
}

/// One clock: the library targets read time as `MediaTime` (monotonic) and the wall clock only
/// at its named edges. Another clock type in them (Swift's, Dispatch's, Foundation's, libc's)
/// fails here, as the module map does in ModuleMapTests.
@Suite struct OneClockTests {
    /// Every library target (the executables' own files and the tests' support are not held to it).
    static let targets = ["Platform", "MediaCore", "Codecs", "Devices", "RTPTransport", "Signaling", "SignalingService", "EndpointSignaling", "CallEndpoint", "Benchmarks", "ServeCommand", "CLIKit", "ICEServers", "FuzzTargets"]
    /// Where another clock is read on purpose: MediaTime's and WallClock's own file, the one
    /// semaphore wait by Duration, and log stamps. (The web page's JavaScript reads a browser's
    /// clock in a file of its own, SignalingService/Web/Page/app.js.)
    static let edges = ["Platform/Clocks.swift", "Platform/TimedWait.swift", "Platform/Log.swift"]
    static let pattern = #"\bContinuousClock\b|\bSuspendingClock\b|\bDispatchTime\b|\bDispatchWallTime\b|\bDate\(\)|\btime\(nil\)|\.now\(\) *\+|CLOCK_(MONOTONIC|REALTIME)"#

    /// The lines of `files` (path, lines) that read another clock, comments aside.
    static func offending(_ files: [(path: String, lines: [Substring])]) throws -> [String] {
        // Simple word boundaries: by Unicode's, "ContinuousClock.now" is one word.
        SourceAuditTests.offending(files, targets: targets, edges: edges, regex: try Regex(pattern).wordBoundaryKind(.simple))
    }

    @Test func theLibraryTargetsReadOneClock() throws {
        let files = try SourceAuditTests.swiftFiles()
        #expect(files.filter { f in Self.targets.contains { f.path.hasPrefix($0 + "/") } }.count >= 200, "the library targets' files were found")
        let found = try Self.offending(files)
        #expect(found.isEmpty, "another clock than MediaTime outside its edges:\n\(found.joined(separator: "\n"))")
    }

    @Test func theCheckCatchesEachOtherClock() throws {
        for line in ["let t = ContinuousClock.now", "_ = s.wait(timeout: .now() + 0.1)", "let d = Date()", "let w = DispatchTime.now()", "Int64(time(nil))"] {
            #expect(try Self.offending([("CallEndpoint/X.swift", [Substring(line)])]).count == 1, "not caught: \(line)")
        }
        #expect(try Self.offending([("CallEndpoint/X.swift", ["/// ContinuousClock in a comment", "let t = MediaTime.now"])]).isEmpty)
        #expect(try Self.offending([("Platform/TimedWait.swift", ["wait(timeout: .now() + x)"])]).isEmpty, "an edge")
    }
}

/// Nothing sleeps to wait: the library targets that make up the endpoint and the service block on
/// a queue, a semaphore, poll(2) or a device until the thing they wait for happens (or its
/// deadline). The one sleep is the pacer of a real-time source (`RealTimePacer`: a test pattern,
/// a tone, a file played at its rate), through `sleepThread`. Benchmarks is not held to it yet:
/// its schedules (change a link at 10 s) still sleep between their moments.
@Suite struct NoSleepTests {
    static let targets = ["Platform", "MediaCore", "Codecs", "Devices", "RTPTransport", "Signaling", "SignalingService", "EndpointSignaling",
                          "CallEndpoint", "ServeCommand", "CLIKit", "ICEServers", "FuzzTargets"]
    static let edges = ["Platform/NamedThread.swift", "MediaCore/Time/RealTimePacer.swift"]
    static let pattern = #"\busleep\(|\bThread\.sleep|(^|[^\w.])sleep\(|\bnanosleep\(|\bsleepThread\(|\bTask\.sleep"#

    static func offending(_ files: [(path: String, lines: [Substring])]) throws -> [String] {
        SourceAuditTests.offending(files, targets: targets, edges: edges, regex: try Regex(pattern))
    }

    @Test func theLibraryTargetsDoNotSleep() throws {
        let files = try SourceAuditTests.swiftFiles()
        #expect(files.filter { f in Self.targets.contains { f.path.hasPrefix($0 + "/") } }.count >= 200, "the library targets' files were found")
        let found = try Self.offending(files)
        #expect(found.isEmpty, "a sleep in a library target:\n\(found.joined(separator: "\n"))")
    }

    @Test func theCheckCatchesEachSleep() throws {
        for line in ["usleep(100_000)", "Thread.sleep(forTimeInterval: 0.1)", "while true { sleep(3600) }", "sleepThread(.milliseconds(20))",
                     "nanosleep(&t, nil)", "try await Task.sleep(for: .seconds(1))"] {
            #expect(try Self.offending([("Devices/X.swift", [Substring(line)])]).count == 1, "not caught: \(line)")
        }
        #expect(try Self.offending([("Devices/X.swift", ["/// usleep in a comment", "stopWake.wait(for: wait)", "func sleepless()"])]).isEmpty)
        #expect(try Self.offending([("Benchmarks/X.swift", ["usleep(1)"]), ("MediaCore/Time/RealTimePacer.swift", ["sleepThread(wait)"])]).isEmpty)
    }
}
