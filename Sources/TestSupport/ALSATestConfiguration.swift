import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// alsa-lib's `file` PCM plugin over the `null` PCM gives real capture and playback through
/// snd_pcm_* without a sound card (DESIGN.md). Two parameterised PCMs, loaded through
/// ALSA_CONFIG_PATH before alsa-lib first reads its configuration in this process.
public enum ALSATestConfiguration {
    public static let path = FileManager.default.temporaryDirectory.appendingPathComponent("callend-asound-\(getpid()).conf").path

    public static let ready: Bool = {
        let text = """
            pcm.callend_test_in {
              @args [ FILE ]
              @args.FILE { type string }
              type file
              slave.pcm "null"
              file "/dev/null"
              infile $FILE
              format "raw"
            }
            pcm.callend_test_out {
              @args [ FILE ]
              @args.FILE { type string }
              type file
              slave.pcm "null"
              file $FILE
              format "raw"
            }

            """
        guard (try? text.write(toFile: path, atomically: true, encoding: .utf8)) != nil else { return false }
        setenv("ALSA_CONFIG_PATH", "/usr/share/alsa/alsa.conf:\(path)", 1)
        // alsa-lib may read the file again on any later open, so it goes when the process ends.
        atexit { _ = unlink(ALSATestConfiguration.path) }
        return true
    }()
}

public final class ScratchFolder {
    public let path = FileManager.default.temporaryDirectory.appendingPathComponent("callend-alsa-\(UUID().uuidString)").path
    public init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

public func littleEndianBytes(_ samples: [Int16]) -> [UInt8] {
    samples.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] }
}

