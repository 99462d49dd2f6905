import Foundation
import Testing

/// deploy/prometheus/callend-alerts.yml: promtool finds the rules valid, its unit tests
/// (callend-alerts.test.yml) pass, and a rule that says the opposite is caught by them.
@Suite struct PrometheusRulesTests {
    static let folder = ServiceUnitTests.repository.appendingPathComponent("deploy/prometheus")
    static let promtool = "/usr/bin/promtool"

    /// promtool with `arguments` in `directory`: its exit status and everything it said.
    static func promtool(_ arguments: [String], in directory: URL = folder) throws -> (Int32, String) {
        try runTool(promtool, arguments, in: directory)
    }

    @Test func theAlertRulesAreValidAndPassTheirTests() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.promtool), "promtool (Debian's prometheus package) is missing: scripts/install-deps.sh")
        let (checked, checkSaid) = try Self.promtool(["check", "rules", "callend-alerts.yml"])
        #expect(checked == 0 && checkSaid.contains("SUCCESS: 8 rules found"), "\(checkSaid)")
        let (tested, testSaid) = try Self.promtool(["test", "rules", "callend-alerts.test.yml"])
        #expect(tested == 0 && testSaid.contains("SUCCESS"), "\(testSaid)")
    }

    /// The tests can fail: with the no-peer alert's hold at 20 minutes, the test expecting it at
    /// minute 15 fails.
    @Test func theRuleTestsCatchARuleThatChanged() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.promtool), "promtool (Debian's prometheus package) is missing")
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("callend-rules-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: copy) }
        let rules = try String(contentsOf: Self.folder.appendingPathComponent("callend-alerts.yml"), encoding: .utf8)
        let changed = rules.replacingOccurrences(of: "expr: callend_call_up == 0\n        for: 10m", with: "expr: callend_call_up == 0\n        for: 20m")
        #expect(changed != rules)
        try changed.write(to: copy.appendingPathComponent("callend-alerts.yml"), atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(at: Self.folder.appendingPathComponent("callend-alerts.test.yml"), to: copy.appendingPathComponent("callend-alerts.test.yml"))
        let (tested, said) = try Self.promtool(["test", "rules", "callend-alerts.test.yml"], in: copy)
        #expect(tested != 0 && said.contains("CallendNoPeer"), "\(said)")
    }

    /// Every endpoint metric the rules read is one `join --metrics` serves (JoinMetricsTests
    /// scrapes a call with a recording and checks these names in it).
    static func endpointMetrics() throws -> Set<String> {
        let file = try String(contentsOf: folder.appendingPathComponent("callend-alerts.yml"), encoding: .utf8)
        let rules = file.split(separator: "\n").filter { $0.contains("expr:") }.joined(separator: "\n")
        let pattern = try NSRegularExpression(pattern: "callend_call_[a-z_]+")
        let range = NSRange(rules.startIndex..., in: rules)
        return Set(pattern.matches(in: rules, range: range).compactMap { Range($0.range, in: rules).map { String(rules[$0]) } })
    }
}
