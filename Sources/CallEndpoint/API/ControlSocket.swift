import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A local control socket (Unix domain, stream): each connection sends command lines and gets
/// one JSON reply line per command. Only this machine's users that can reach the path can
/// connect; the socket is made owner-only (0600). The path is removed on `stop()`.
public final class ControlSocket: Sendable {
    public let path: String
    private let listener: Int32
    private let stopping = Atomic<Bool>(false)
    private let clients = Mutex<Set<Int32>>([])
    /// Entered while a client's thread runs: `stop` waits on it.
    private let clientThreads = DispatchGroup()
    private let acceptDone = DispatchSemaphore(value: 0)

    /// Listens on `path` and answers each line with `handler` (called on a connection's thread).
    public init(path: String, handler: @escaping @Sendable (String) -> String) throws {
        self.path = path
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw ConfigurationError("control socket path '\(path)' is empty or longer than \(MemoryLayout.size(ofValue: address.sun_path) - 1) bytes")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        // A socket file left by a process that died is replaced; a live one is not.
        if Self.isLive(path) { throw ConfigurationError("control socket \(path) is in use by another callend") }
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ConfigurationError("control socket: socket() failed: \(String(cString: strerror(errno)))") }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o600) == 0, listen(fd, 8) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw ConfigurationError("control socket \(path): \(message)")
        }
        listener = fd
        startThread(named: "control-socket") { [self] in
            acceptLoop(handler)
            acceptDone.signal()
        }
    }

    private static func isLive(_ path: String) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = b }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    private func acceptLoop(_ handler: @escaping @Sendable (String) -> String) {
        while !stopping.load(ordering: .relaxed) {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            clients.withLock { _ = $0.insert(client) }
            clientThreads.enter()
            startThread(named: "control-client") { [self] in
                serve(client, handler)
                clients.withLock { _ = $0.remove(client) }
                close(client)
                clientThreads.leave()
            }
        }
    }

    /// Reads lines (at most 4 KiB each) and writes one reply line per command.
    private func serve(_ client: Int32, _ handler: @Sendable (String) -> String) {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopping.load(ordering: .relaxed) {
            var poller = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            pending += buffer[0..<count]
            while let newline = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[..<newline], as: UTF8.self).trimmed(newlines: true)
                pending.removeSubrange(...newline)
                guard !line.isEmpty else { continue }
                guard write(client, handler(line) + "\n") else { return }
            }
            if pending.count > 4096 {
                _ = write(client, #"{"error":"line longer than 4096 bytes","ok":false}"# + "\n")
                return
            }
        }
    }

    private func write(_ fd: Int32, _ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            bytes = bytes.dropFirst(sent)
        }
        return true
    }

    /// Stops listening, ends the connections and removes the socket file.
    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        acceptDone.wait()
        close(listener)
        unlink(path)
        clientThreads.wait()
    }

    deinit { stop() }
}
