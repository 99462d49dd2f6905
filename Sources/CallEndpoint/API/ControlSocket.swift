import FoundationEssentials
import Glibc
import Platform

/// A local control socket (Unix domain, stream): each connection sends command lines and gets
/// one JSON reply line per command. Only this machine's users that can reach the path can
/// connect; the socket is made owner-only (0600). The path is removed on `stop()`.
public final class ControlSocket: Sendable {
    public var path: String { listener.path }
    private let listener: UnixSocketListener

    /// Listens on `path` and answers each line with `handler` (called on a connection's thread).
    public init(path: String, handler: @escaping @Sendable (String) -> String) throws {
        listener = try UnixSocketListener(path: path, what: "control socket") { client, listener in Self.serve(client, listener, handler) }
    }

    /// Reads lines (at most 4 KiB each) and writes one reply line per command.
    private static func serve(_ client: Int32, _ listener: UnixSocketListener, _ handler: @Sendable (String) -> String) {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !listener.isStopping {
            guard listener.readable(client) else { continue }
            let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            pending += buffer[0..<count]
            while let newline = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[..<newline], as: UTF8.self).trimmed(newlines: true)
                pending.removeSubrange(...newline)
                guard !line.isEmpty else { continue }
                guard UnixSocketListener.write(client, Array((handler(line) + "\n").utf8)) else { return }
            }
            if pending.count > 4096 {
                _ = UnixSocketListener.write(client, Array((#"{"error":"line longer than 4096 bytes","ok":false}"# + "\n").utf8))
                return
            }
        }
    }

    /// Stops listening, ends the connections and removes the socket file.
    public func stop() { listener.stop() }

    deinit { stop() }
}
