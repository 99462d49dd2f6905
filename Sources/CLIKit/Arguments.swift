/// A usage error: the message goes to standard error and the exit code is 2, as getopt tools do.
public struct UsageError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// The words after the command, consumed flag by flag; whatever is left at the end is an error.
public struct Arguments: Sendable {
    private var words: [String]
    /// Every option taken so far, in order, with its value (nil for a flag): what `--check`
    /// shows.
    public private(set) var taken: [(name: String, value: String?, origin: String?)] = []
    /// Where the options that came from a config file were written ("F line N"), in the order
    /// of their lines (a repeatable option's values are taken in that order).
    var origins: [String: [String]] = [:]
    /// The values a config file gave, by value, for the error when a flag was given one.
    var configValues: [String: (option: String, origin: String)] = [:]

    public init(_ words: [String]) { self.words = words }

    /// True if `--name` (or `--name=VALUE`) is still among the words.
    func contains(_ name: String) -> Bool { words.contains { $0 == name || $0.hasPrefix(name + "=") } }

    mutating func append(_ more: [String]) { words += more }

    /// The config line of the option `name` taken now (nil: from the command line).
    private mutating func takeOrigin(_ name: String) -> String? {
        guard var lines = origins[name], !lines.isEmpty else { return nil }
        let first = lines.removeFirst()
        origins[name] = lines
        return first
    }

    public var isEmpty: Bool { words.isEmpty }

    /// Removes and returns the first word if it is not a flag (a subcommand or operand).
    public mutating func popOperand() -> String? {
        guard let first = words.first, !first.hasPrefix("-") else { return nil }
        words.removeFirst()
        return first
    }

    /// True if `--name` was given (and removes it).
    public mutating func flag(_ name: String) -> Bool {
        guard let index = words.firstIndex(of: name) else { return false }
        words.remove(at: index)
        taken.append((name, nil, takeOrigin(name)))
        return true
    }

    /// The value of `--name VALUE` or `--name=VALUE`, if given.
    public mutating func value(_ name: String) throws(UsageError) -> String? {
        if let index = words.firstIndex(where: { $0.hasPrefix(name + "=") }) {
            let value = String(words[index].dropFirst(name.count + 1))
            words.remove(at: index)
            taken.append((name, value, takeOrigin(name)))
            return value
        }
        guard let index = words.firstIndex(of: name) else { return nil }
        guard index + 1 < words.count, origins[name] == nil || !words[index + 1].hasPrefix("--") else {
            if let origin = origins[name]?.first { throw UsageError(description: "\(origin): '\(name.dropFirst(2))' needs a value ('\(name.dropFirst(2)) = VALUE')") }
            throw UsageError(description: "\(name) needs a value")
        }
        let value = words[index + 1]
        words.removeSubrange(index...(index + 1))
        taken.append((name, value, takeOrigin(name)))
        return value
    }

    /// Every value of a repeatable `--name VALUE`, in order.
    public mutating func values(_ name: String) throws(UsageError) -> [String] {
        var all: [String] = []
        while let value = try value(name) { all.append(value) }
        return all
    }

    public mutating func integer(_ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let text = try value(name) else { return nil }
        guard let number = Int(text), range.contains(number) else {
            throw UsageError(description: "\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return number
    }

    /// Fails on anything not consumed: an unknown flag or a stray word.
    public func finish(command: String) throws(UsageError) {
        guard let first = words.first else { return }
        let kind = first.hasPrefix("-") ? "unknown option" : "unexpected argument"
        if let given = configValues[first] {
            throw UsageError(description: "\(given.origin): '\(given.option)' takes no value: write it alone (or '\(given.option) = true')")
        }
        if let origin = origins[first]?.first { throw UsageError(description: "\(origin): unknown option '\(first.dropFirst(2))' for '\(command)'; see 'callend \(command) --help'") }
        if command.isEmpty { throw UsageError(description: "\(kind) '\(first)'; see 'callend --help'") }
        throw UsageError(description: "\(kind) '\(first)' for '\(command)'; see 'callend \(command) --help'")
    }
}
