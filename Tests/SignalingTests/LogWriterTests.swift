import Foundation
import Platform
import Testing

struct LogWriterTests {
    let noon = Date(timeIntervalSince1970: 1_796_126_400.25)  // 2026-12-01T12:00:00.250Z

    @Test func linesCarryTheTimeAndTheLevelAndTheThresholdFilters() {
        let writer = LogWriter(program: "callend serve", threshold: .info, environment: [:])
        #expect(!writer.toJournal)
        #expect(writer.format("joined room r", at: noon) == "2026-12-01T12:00:00.250Z callend serve: joined room r")
        #expect(writer.format(.warning("redis: gone"), at: noon) == "2026-12-01T12:00:00.250Z callend serve: warning: redis: gone")
        #expect(writer.format(.debug("detail"), at: noon) == nil, "below the threshold")
        let quiet = LogWriter(program: "callend join", threshold: .warning, environment: [:])
        #expect(quiet.format("info", at: noon) == nil && quiet.format(.error("e"), at: noon) != nil)
        #expect(LogMessage.Level(name: "debug") == .debug && LogMessage.Level(name: "loud") == nil)
        #expect(LogMessage.Level.allCases.allSatisfy { LogMessage.Level(name: $0.name) == $0 })
    }

    /// Under systemd (JOURNAL_STREAM names standard error's device and inode) the line has the
    /// priority prefix journald reads, and no time of its own; a variable inherited by a process
    /// whose standard error is elsewhere is ignored.
    @Test func theJournalGetsPriorities() {
        var status = stat()
        #expect(fstat(2, &status) == 0)
        let mine = "\(status.st_dev):\(status.st_ino)"
        let journal = LogWriter(program: "callend join", environment: ["JOURNAL_STREAM": mine])
        #expect(journal.toJournal)
        #expect(journal.format(.warning("ice: cannot restart"), at: noon) == "<4>callend join: ice: cannot restart")
        #expect(journal.format("media back", at: noon) == "<6>callend join: media back")
        #expect(journal.format(.error("accept"), at: noon) == "<3>callend join: accept")
        for other in ["\(status.st_dev):\(status.st_ino &+ 1)", "garbage", "1:2:3"] {
            #expect(!LogWriter(program: "x", environment: ["JOURNAL_STREAM": other]).toJournal, "\(other)")
        }
    }
}

/// An outside value in a log line cannot make a line of its own: a peer identity
/// "x\n<3>forged" made a journald entry at priority 3.
struct LogEscapingTests {
    @Test func controlCharactersAreEscapedInEveryLine() {
        var status = stat()
        #expect(fstat(2, &status) == 0)
        let journal = LogWriter(program: "callend serve", environment: ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"])
        let line = journal.format(LogMessage(.info, "signaling: peer x\n<3>forged joined"))
        #expect(line == "<6>callend serve: signaling: peer x\\n<3>forged joined")
        #expect(line.map { !$0.contains("\n") } == true)
        let terminal = LogWriter(program: "callend join", environment: [:])
        let escaped = terminal.format("a\u{1b}[31mred\r\tb\u{0}c\u{7f}\u{9b}d\u{2028}é✓")!
        #expect(escaped.hasSuffix("a\\x1b[31mred\\r\\tb\\x00c\\x7f\\x9bd\\u{2028}é✓"), "\(escaped)")
        #expect(LogWriter.escapingControlCharacters("plain text, ünïcode") == "plain text, ünïcode")
    }
}

/// Platform's stand-ins for what FoundationEssentials lacks (the service links no Foundation).
struct StringHelperTests {
    @Test func trimmedDropsSpacesAndTabsAndWithNewlinesTheLineEnds() {
        #expect(" \t Bearer x \t".trimmed() == "Bearer x")
        #expect("a b".trimmed() == "a b" && "".trimmed() == "" && " \t ".trimmed() == "")
        #expect("secret\r\n".trimmed() == "secret\r\n", "line ends stay without newlines: true")
        #expect("\n secret \r\n".trimmed(newlines: true) == "secret")
        #expect("x, y"[...].split(separator: ",").map { $0.trimmed() } == ["x", "y"])
    }

    @Test func fixedRoundsToTheDigitsAsPrintfDoes() {
        let cases: [(Double, Int)] = [(0.05, 1), (-2.56, 1), (3.14159, 2), (9.999, 2), (12.0, 0), (0.0, 3), (1234.5678, 3), (7.1, 1)]
        for (value, digits) in cases {
            #expect(value.fixed(digits) == String(format: "%.\(digits)f", value), "\(value) to \(digits) digits")
        }
        #expect((-0.04).fixed(1) == "0.0", "no negative zero")
        #expect(Double.infinity.fixed(1) == "inf")
        #expect(1e20.fixed(1) == "1e+20" && (-3e30).fixed(0) == "-3e+30", "past Int64 the exact short form, no trap")
        #expect(9.2e16.fixed(1) == "92000000000000000.0", "below it, every digit")
    }

    @Test func signedFixedAndSignificantAsPrintfDoes() {
        for value in [12.4, -3.6, 0.0, 1234.4] {
            #expect(value.signedFixed(0) == String(format: "%+.0f", value), "\(value)")
        }
        for value in [29.97, 7.5, 0.5, 15.0, 59.94, 119.88, 0.001234, 123.4] {
            #expect(value.significant(3) == String(format: "%.3g", value), "\(value)")
        }
        #expect("ab".leftPadded(to: 4) == "  ab" && "abcde".leftPadded(to: 4) == "abcde")
    }

    @Test func zeroPaddedFillsToTheWidthAndKeepsTheSign() {
        #expect(7.zeroPadded(3) == "007" && 1234.zeroPadded(2) == "1234" && Int32(0).zeroPadded(2) == "00")
        #expect((-5).zeroPadded(3) == "-005" && Int64.min.zeroPadded(1) == "-9223372036854775808")
    }
}
