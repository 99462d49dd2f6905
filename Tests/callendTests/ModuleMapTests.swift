import Foundation
import Testing

/// The module map in docs/architecture.md names every target of Package.swift (test targets
/// aside) with exactly the dependencies Package.swift gives it, so the map cannot go stale.
@Suite struct ModuleMapTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Target name → dependencies, from Package.swift's `.target`, `.executableTarget` and
    /// `.systemLibrary` entries.
    static func packageTargets(_ manifest: String) throws -> [String: Set<String>] {
        let entry = try Regex(#"\.(target|executableTarget|systemLibrary)\(name: "([^"]+)"(?:, dependencies: \[([^\]]*)\])?"#)
        var targets: [String: Set<String>] = [:]
        for match in manifest.matches(of: entry) {
            guard let name = match.output[2].substring.map(String.init) else { continue }
            let list = match.output[3].substring.map(String.init) ?? ""
            targets[name] = Set(list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }.filter { !$0.isEmpty })
        }
        return targets
    }

    /// Module → dependencies, from the table's rows ("| `Name` | A, B | ... |").
    static func mapTargets(_ document: String) -> [String: Set<String>] {
        var targets: [String: Set<String>] = [:]
        for line in document.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4 else { continue }
            let name = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            targets[name] = Set(cells[2].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
        return targets
    }

    @Test func theMapMatchesPackageSwift() throws {
        let manifest = try String(contentsOf: Self.repository.appendingPathComponent("Package.swift"), encoding: .utf8)
        let document = try String(contentsOf: Self.repository.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let package = try Self.packageTargets(manifest), map = Self.mapTargets(document)
        #expect(package.count >= 20, "parsed \(package.count) targets from Package.swift")
        #expect(Set(map.keys) == Set(package.keys), "in Package.swift only: \(Set(package.keys).subtracting(map.keys).sorted()); in the map only: \(Set(map.keys).subtracting(package.keys).sorted())")
        for (name, dependencies) in package.sorted(by: { $0.key < $1.key }) {
            #expect(map[name] == dependencies, "\(name): Package.swift says \(dependencies.sorted()), the map \(map[name].map { $0.sorted() } ?? [])")
        }
    }

    /// The parser itself: a target added to Package.swift but not to the map is caught.
    @Test func aTargetMissingFromTheMapIsCaught() throws {
        let manifest = #".target(name: "A", dependencies: ["B", "C"]), .systemLibrary(name: "B", pkgConfig: "b"), .executableTarget(name: "D", dependencies: ["A"])"#
        let package = try Self.packageTargets(manifest)
        #expect(package == ["A": ["B", "C"], "B": [], "D": ["A"]])
        let map = Self.mapTargets("| module | depends on | what |\n| --- | --- | --- |\n| `A` | B | x |\n| `B` | | y |\n")
        #expect(map == ["A": ["B"], "B": []])
        #expect(map != package)
    }
}
