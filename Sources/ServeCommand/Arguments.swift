/// A usage error: the message goes to standard error and the exit code is 2, as getopt tools do.
public struct UsageError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// The words after the command, consumed flag by flag; whatever is left at the end is an error.
public struct Arguments {
    private var words: [String]

    public init(_ words: [String]) { self.words = words }

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
        return true
    }

    /// The value of `--name VALUE` or `--name=VALUE`, if given.
    public mutating func value(_ name: String) throws(UsageError) -> String? {
        if let index = words.firstIndex(where: { $0.hasPrefix(name + "=") }) {
            let value = String(words[index].dropFirst(name.count + 1))
            words.remove(at: index)
            return value
        }
        guard let index = words.firstIndex(of: name) else { return nil }
        guard index + 1 < words.count else { throw UsageError(description: "\(name) needs a value") }
        let value = words[index + 1]
        words.removeSubrange(index...(index + 1))
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
        if command.isEmpty { throw UsageError(description: "\(kind) '\(first)'; see 'callend --help'") }
        throw UsageError(description: "\(kind) '\(first)' for '\(command)'; see 'callend \(command) --help'")
    }
}
