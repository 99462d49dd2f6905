// callend-fuzz: the fuzz targets of `FuzzTargets` behind one executable.
//
//   callend-fuzz TARGET [libFuzzer options] [CORPUS_DIR...]   built by scripts/fuzz.sh with
//                                                             -sanitize=fuzzer,address: fuzzes
//   callend-fuzz TARGET FILE_OR_DIR...                        a plain build: runs each input
//                                                             once (corpus and crash replay)
import FuzzTargets
import Foundation

let usage = "usage: callend-fuzz TARGET [INPUT...]; targets: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))"
var arguments = CommandLine.arguments
guard arguments.count >= 2, let target = FuzzTarget(rawValue: arguments[1]) else {
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(2)
}
arguments.remove(at: 1)

#if CALLEND_FUZZING
nonisolated(unsafe) var chosen = target
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32
var argc = Int32(arguments.count)
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = UnsafeMutablePointer.allocate(capacity: arguments.count + 1)
for (i, a) in arguments.enumerated() { argv![i] = strdup(a) }
argv![arguments.count] = nil
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    chosen.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
})
#else
var inputs: [String] = []
for path in arguments.dropFirst() {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        FileHandle.standardError.write(Data("callend-fuzz: no such file: \(path)\n".utf8))
        exit(2)
    }
    if isDirectory.boolValue {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        inputs += names.sorted().map { path + "/" + $0 }
    } else {
        inputs.append(path)
    }
}
for input in inputs {
    guard let data = FileManager.default.contents(atPath: input) else { continue }
    target.run([UInt8](data))
}
print("callend-fuzz: \(target.rawValue): \(inputs.count) inputs ran")
#endif
