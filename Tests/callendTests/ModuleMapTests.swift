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

/// Every module a target's sources import that is a target of this package is one of the
/// target's declared dependencies: SwiftPM lets a target import what a dependency of a
/// dependency brings, so an undeclared import builds today and breaks when the chain changes.
@Suite struct DeclaredImportTests {
    /// Target → the package's modules its sources import (`import X`, `@testable import X`,
    /// `internal import X`, `@_implementationOnly import X`).
    static func imports(of target: String, in sources: URL, among modules: Set<String>) throws -> Set<String> {
        let pattern = try Regex(#"^(?:@\w+\s+)?(?:internal\s+|public\s+|private\s+)?import\s+(\w+)"#).anchorsMatchLineEndings()
        var found: Set<String> = []
        let directory = sources.appendingPathComponent(target)
        guard let walk = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { return [] }
        for case let file as URL in walk where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: pattern) {
                let module = String(match.output[1].substring ?? "")
                if modules.contains(module) && module != target { found.insert(module) }
            }
        }
        return found
    }

    @Test func everyImportOfAPackageModuleIsDeclared() throws {
        let manifest = try String(contentsOf: ModuleMapTests.repository.appendingPathComponent("Package.swift"), encoding: .utf8)
        let package = try ModuleMapTests.packageTargets(manifest)
        let sources = ModuleMapTests.repository.appendingPathComponent("Sources")
        var checked = 0
        for (target, declared) in package.sorted(by: { $0.key < $1.key }) {
            let used = try Self.imports(of: target, in: sources, among: Set(package.keys))
            checked += used.count
            #expect(used.subtracting(declared).isEmpty, "\(target) imports \(used.subtracting(declared).sorted()) without declaring them in Package.swift")
        }
        #expect(checked >= 55, "found \(checked) imports of package modules")
    }

    /// The scan itself: an undeclared import is found, a comment or a string is not.
    @Test func theScanFindsAnUndeclaredImport() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("imports-\(getpid())")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("A/Sub"), withIntermediateDirectories: true)
        try "import B\n@testable import C\n// import D\nlet s = \"import D\"\n".write(to: folder.appendingPathComponent("A/Sub/x.swift"), atomically: true, encoding: .utf8)
        #expect(try Self.imports(of: "A", in: folder, among: ["A", "B", "C", "D"]) == ["B", "C"])
    }
}
