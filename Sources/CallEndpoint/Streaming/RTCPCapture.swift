import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// A debugging aid: with CALLEND_RTCP_CAPTURE=DIR in the environment, a call writes the first
/// `limit` RTCP packets it receives, decrypted, to DIR/rtcp-NNNN.bin (one compound packet a
/// file). This is how the transport-cc test vectors from Chromium were taken (scripts/browser/
/// capture-rtcp.sh); it stays off unless asked for, and writes at most `limit` small files.
final class RTCPCapture: Sendable {
    let directory: String
    let limit: Int
    private let count = Atomic<Int>(0)

    init?(environment: [String: String] = ProcessInfo.processInfo.environment, limit: Int = 300) {
        guard let directory = environment["CALLEND_RTCP_CAPTURE"], !directory.isEmpty else { return nil }
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.directory = directory
        self.limit = limit
    }

    func keep(_ packet: [UInt8]) {
        let n = count.add(1, ordering: .relaxed).newValue
        guard n <= limit else { return }
        _ = FileManager.default.createFile(atPath: directory + "/rtcp-\(n.zeroPadded(4)).bin", contents: Data(packet))
    }
}
