import FoundationEssentials
import Glibc
internal import CLinux

/// One line for the log and its severity. A string literal or interpolation is `.info`;
/// `.warning("...")`, `.error("...")` and `.debug("...")` say otherwise.
public struct LogMessage: Sendable, Equatable, CustomStringConvertible, ExpressibleByStringInterpolation {
    /// Syslog's priorities (RFC 5424), which journald keeps.
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case error = 3, warning = 4, info = 6, debug = 7

        public init?(name: String) {
            switch name {
            case "error": self = .error
            case "warning": self = .warning
            case "info": self = .info
            case "debug": self = .debug
            default: return nil
            }
        }

        public var name: String {
            switch self {
            case .error: "error"
            case .warning: "warning"
            case .info: "info"
            case .debug: "debug"
            }
        }

        /// More severe is smaller, as in syslog: `.error < .info`.
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    public var level: Level
    public var text: String

    public init(_ level: Level, _ text: String) {
        self.level = level
        self.text = text
    }

    public init(stringLiteral value: String) { self.init(.info, value) }
    public init(stringInterpolation: DefaultStringInterpolation) { self.init(.info, String(stringInterpolation: stringInterpolation)) }

    public static func error(_ text: String) -> LogMessage { LogMessage(.error, text) }
    public static func warning(_ text: String) -> LogMessage { LogMessage(.warning, text) }
    public static func debug(_ text: String) -> LogMessage { LogMessage(.debug, text) }

    public var description: String { text }
}

/// Writes log lines to standard error the way whoever reads them wants them: under systemd, whose
/// journal stamps each line itself, with the `<N>` priority prefix journald reads (so
/// `journalctl -p warning` finds the warnings); elsewhere (a terminal, a file, a container's
/// log) with the time in UTC and the level.
public struct LogWriter: Sendable {
    public let program: String
    /// Lines less severe than this are not written.
    public var threshold: LogMessage.Level
    public let toJournal: Bool

    public init(program: String, threshold: LogMessage.Level = .info, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.program = program
        self.threshold = threshold
        toJournal = Self.standardErrorIsJournal(environment)
    }

    /// The line as written, or nil when it is below the threshold. Control characters in the
    /// text are written escaped: log lines carry outside values (identities, reasons, request
    /// lines), and a newline in one would start a line of its own, which journald would read
    /// with whatever `<N>` priority followed it (a terminal, whatever escape sequence).
    public func format(_ message: LogMessage, at date: Date = Date()) -> String? {
        guard message.level <= threshold else { return nil }
        let text = Self.escapingControlCharacters(message.text)
        if toJournal { return "<\(message.level.rawValue)>\(program): \(text)" }
        let level = message.level == .info ? "" : "\(message.level.name): "
        return "\(Self.timestamp(date)) \(program): \(level)\(text)"
    }

    /// `text` with every C0 and C1 control character (and DEL) written as `\n`, `\r`, `\t` or
    /// `\xHH` / `\u{HHHH}`, and the backslash of such an escape doubled where the text had one.
    public static func escapingControlCharacters(_ text: String) -> String {
        func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029 }
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard isControl(scalar) else { out.append(scalar); continue }
            let escaped: String = switch scalar {
            case "\n": "\\n"
            case "\r": "\\r"
            case "\t": "\\t"
            default: scalar.value < 0x100 ? "\\x" + String(scalar.value, radix: 16).leftPadded(2) : "\\u{" + String(scalar.value, radix: 16) + "}"
            }
            out.append(contentsOf: escaped.unicodeScalars)
        }
        return String(out)
    }

    public func write(_ message: LogMessage) {
        guard let line = format(message) else { return }
        Self.writeStandardError(line + "\n")
    }

    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return "\((parts.tm_year + 1900).zeroPadded(4))-\((parts.tm_mon + 1).zeroPadded(2))-\(parts.tm_mday.zeroPadded(2))T"
            + "\(parts.tm_hour.zeroPadded(2)):\(parts.tm_min.zeroPadded(2)):\(parts.tm_sec.zeroPadded(2)).\((milliseconds % 1000).zeroPadded(3))Z"
    }

    /// Writes all of `text` to standard error (one write for a line, so lines of threads do not mix).
    public static func writeStandardError(_ text: String) { write(text, to: 2) }

    /// Writes all of `text` to standard output at once, after what `print` buffered there (a
    /// status line rewritten in place with a carriage return needs it out now).
    public static func writeStandardOutput(_ text: String) {
        _ = clinux_flush_stdout()
        write(text, to: 1)
    }

    private static func write(_ text: String, to descriptor: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            bytes = bytes.dropFirst(n)
        }
    }

    /// systemd sets JOURNAL_STREAM to the device and inode of the stream it connected standard
    /// error to (systemd.exec(5)); a child that inherited the variable but has its standard
    /// error elsewhere does not match.
    public static func standardErrorIsJournal(_ environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
