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
