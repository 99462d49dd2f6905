import FoundationEssentials
import Glibc

/// A command's options from a file (`join --config /etc/callend/join/roof.conf`, `serve --config
/// /etc/callend/serve.conf`): one option per line as `name = value`, the name as on the command
/// line without its dashes; a flag as its bare name (or `name = true`; `name = false` leaves it
/// out); an option that repeats on the command line repeats as lines; `#` starts a comment line;
/// a value in double quotes keeps its spaces. An option given on the command line replaces every
/// line of that name (the command line wins).
///
/// Secrets never appear in the file itself: a token, a secret or a credential is named by its
/// file (`token-file = ...`), and a file named so must not be readable by every user of the
/// machine (a mode such as 0640 or 0600): such a file is refused with the command to fix it.
public struct ConfigFile: Sendable {
    public struct Entry: Sendable, Equatable {
        public let name: String
        /// Nil for a flag.
        public let value: String?
        public let line: Int
    }

    public let path: String
    public let entries: [Entry]

    /// Options whose value is a file holding a secret: the file must not be world-readable.
    public static let secretFileOptions: Set<String> = [
        "token-file", "secret-file", "turn-secret-file", "turn-credential-file", "api-secret-file", "bearer-token-file",
        "redis-password-file", "tls-key",
    ]
    /// Options that carry a secret inline: refused in a file (they belong in a secret file).
    static let inlineSecretOptions: [String: String] = ["token": "token-file"]
    /// A config file is a page of options, not data: anything larger is a mistake.
    static let maxBytes = 64 * 1024

    /// Reads and checks the file at `path`: its syntax, no inline secret, and the modes of the
    /// secret files it names.
    public init(path: String) throws(UsageError) {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw UsageError(description: "--config \(path): \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw UsageError(description: "--config \(path) is not a regular file") }
        guard status.st_size <= Self.maxBytes else {
            throw UsageError(description: "--config \(path) is \(status.st_size) bytes: a config file holds at most \(Self.maxBytes)")
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw UsageError(description: "cannot read --config \(path) (readable UTF-8 text expected)")
        }
        try self.init(path: path, text: text)
        for entry in entries where Self.secretFileOptions.contains(entry.name) {
            try Self.checkSecretFile(entry.value ?? "", option: entry.name, where: "\(path) line \(entry.line)")
        }
    }

    /// Parses `text` (tests; `init(path:)` reads the file and checks the secret files too).
    public init(path: String, text: String) throws(UsageError) {
        self.path = path
        var entries: [Entry] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = raw.trimmed(newlines: true)
            if line.isEmpty || line.hasPrefix("#") { continue }
            func refuse(_ what: String) -> UsageError { UsageError(description: "\(path) line \(number): \(what)") }
            let name: String, value: String?
            if let equals = line.firstIndex(of: "=") {
                name = String(line[..<equals]).trimmed(newlines: false)
                var text = String(line[line.index(after: equals)...]).trimmed(newlines: false)
                if text.hasPrefix("\"") {
                    guard text.count >= 2, text.hasSuffix("\"") else { throw refuse("a quoted value must end with its quote") }
                    text = String(text.dropFirst().dropLast())
                    guard !text.contains("\"") else { throw refuse("a quoted value cannot hold a quote") }
                } else if text.isEmpty {
                    throw refuse("'\(name)' has no value (write the option's value after '=', or leave the line out)")
                }
                value = text
            } else {
                name = line
                value = nil
            }
            guard let first = name.unicodeScalars.first, ("a"..."z").contains(first),
                  name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }) else {
                throw refuse("\(String(reflecting: name)) is not an option name (lowercase letters, digits and dashes, as on the command line without '--')")
            }
            if name == "config" { throw refuse("a config file cannot name another") }
            if let file = Self.inlineSecretOptions[name] {
                throw refuse("a secret is not written into a config file: name its file with '\(file) = PATH' (mode 0600 or 0640)")
            }
            switch value {
            case "true": entries.append(Entry(name: name, value: nil, line: number))
            case "false": continue
            default: entries.append(Entry(name: name, value: value, line: number))
            }
        }
        self.entries = entries
    }

    /// Refuses a secret file that every user of the machine can read (or one that is missing).
    public static func checkSecretFile(_ file: String, option: String, where place: String) throws(UsageError) {
        var status = stat()
        guard stat(file, &status) == 0 else {
            throw UsageError(description: "\(place): \(option) \(file): \(String(cString: strerror(errno)))")
        }
        if status.st_mode & S_IROTH != 0 {
            let mode = String(status.st_mode & 0o777, radix: 8)
            throw UsageError(description: "\(place): \(option) \(file) is readable by every user (mode 0\(mode)): "
                             + "a secret file is for its owner (and group) only: chmod o-rwx \(file)")
        }
    }
}

extension Arguments {
    /// Takes `--config F` (if given) and adds the file's options that the command line did not
    /// give. Returns the file, for `--check` to show where each setting came from.
    public mutating func applyConfig() throws(UsageError) -> ConfigFile? {
        guard let path = try value("--config") else { return nil }
        let file = try ConfigFile(path: path)
        var words: [String] = []
        for entry in file.entries where !contains("--" + entry.name) {
            words.append("--" + entry.name)
            origins["--" + entry.name, default: []].append("\(path) line \(entry.line)")
            if let value = entry.value {
                words.append(value)
                configValues[value] = (entry.name, "\(path) line \(entry.line)")
            }
        }
        append(words)
        return file
    }
}

/// The settings a command runs with, for `--check`: every option it took, in the order it took
/// them, with where each came from (the command line or a line of the config file) and a
/// secret's value masked.
public func effectiveSettings(_ args: Arguments) -> [String] {
    args.taken.filter { $0.name != "--check" }.map { option in
        let name = String(option.name.dropFirst(2))
        let shown = ConfigFile.inlineSecretOptions[name] != nil ? "********" : option.value.map { $0.contains(" ") ? "\"\($0)\"" : $0 }
        return (shown.map { "\(name) = \($0)" } ?? name) + "    # " + (option.origin ?? "command line")
    }
}

/// `--check`: the command line and its config file parsed and checked, nothing started: says so
/// and lists the settings on standard output.
public func printCheckedSettings(command: String, _ args: Arguments, subject: String) {
    print("callend \(command): settings OK (\(subject)); nothing was started")
    for line in effectiveSettings(args) { print("  " + line) }
}

/// The help's paragraph on --config and --check (join and serve): `file` the usual config path,
/// `column` where the descriptions start, `more` lines of the command's own.
public func configHelp(file: String, column: Int, more: [String] = []) -> String {
    let pad = String(repeating: " ", count: column)
    func option(_ name: String, _ lines: [String]) -> [String] {
        ["  " + name + String(repeating: " ", count: max(1, column - 2 - name.count)) + lines[0]] + lines.dropFirst().map { pad + $0 }
    }
    return (option("--config F", [
        "options from F, such as \(file): one per line as",
        "'name = value' (the name without '--'; a flag alone on its line; a repeatable",
        "option on several lines; '#' comment lines; \"quotes\" keep spaces). An option",
        "on the command line replaces the file's lines of that name. Secrets stay in",
        "their own files ('token-file = PATH'): one every user can read is refused",
    ] + more) + option("--check", [
        "check the command line and F, print the settings and where each came",
        "from (secrets masked), and exit (0: valid) without starting anything",
    ])).joined(separator: "\n")
}
