import Foundation
import Testing
@testable import FuzzTargets

/// The fuzz targets' seed corpora and every input a fuzzing run found a crash with
/// (Corpus/TARGET/crash-*: each one a bug that was fixed) run through the targets in every
/// test run: a regression fails here, without libFuzzer.
@Suite struct FuzzCorpusTests {
    static var corpus: URL { Bundle.module.resourceURL!.appendingPathComponent("Corpus") }

    @Test(arguments: FuzzTarget.allCases)
    func theCorpusRunsWithoutACrash(target: FuzzTarget) throws {
        let folder = Self.corpus.appendingPathComponent(target.rawValue)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(names.count >= 3, "seeds for \(target.rawValue)")
        for name in names {
            target.run([UInt8](try Data(contentsOf: folder.appendingPathComponent(name))))
        }
    }

    @Test func chunksSplitByLengthPrefix() {
        #expect(FuzzTarget.chunks([0, 2, 7, 8, 0, 1, 9]).map(Array.init) == [[7, 8], [9]])
        #expect(FuzzTarget.chunks([0, 5, 1]).map(Array.init) == [[1]])
        #expect(FuzzTarget.chunks([3]).map(Array.init) == [[3]])
    }
}
