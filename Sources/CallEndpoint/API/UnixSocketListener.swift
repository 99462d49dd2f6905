import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Synchronization

/// A Unix domain stream socket at a path, owner-only (0600): each connection is served on a
/// thread of its own by `serve` (given the client and this listener), which returns when the client goes or `isStopping` says so.
/// A socket file left by a process that died is replaced; a live one, or a path that is not a
/// socket, is refused. The path is
/// removed on `stop()`, which waits for every connection's thread.
final class UnixSocketListener: Sendable {
    let path: String
    private let listener: Int32
    private let stopping = Atomic<Bool>(false)
    /// Entered while a client's thread runs: `stop` waits on it.
    private let clientThreads = DispatchGroup()
    private let acceptDone = DispatchSemaphore(value: 0)

    var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// `what` names the socket in errors ("control socket", "data socket").
    init(path: String, what: String, serve: @escaping @Sendable (Int32, UnixSocketListener) -> Void) throws {
        self.path = path
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw ConfigurationError("\(what) path '\(path)' is empty or longer than \(MemoryLayout.size(ofValue: address.sun_path) - 1) bytes")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        // Only a socket is replaced (one left by a process that died): anything else at the path
        // is someone's file, and a typo or a hostile --control must not delete it.
        var status = stat()
        if lstat(path, &status) == 0, status.st_mode & S_IFMT != S_IFSOCK {
            throw ConfigurationError("\(what) \(path) exists and is not a socket; give a path where nothing is, or remove it yourself")
        }
        if Self.isLive(path) { throw ConfigurationError("\(what) \(path) is in use by another callend") }
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ConfigurationError("\(what): socket() failed: \(String(cString: strerror(errno)))") }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o600) == 0, listen(fd, 8) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw ConfigurationError("\(what) \(path): \(message)")
        }
        listener = fd
        startThread(named: what) { [self] in
            acceptLoop(serve)
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

    private func acceptLoop(_ serve: @escaping @Sendable (Int32, UnixSocketListener) -> Void) {
        while !isStopping {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            clientThreads.enter()
            startThread(named: "socket-client") { [self] in
                serve(client, self)
                close(client)
                clientThreads.leave()
            }
        }
    }

    /// Waits up to 100 ms for `fd` to be readable; false when it is not (yet).
    func readable(_ fd: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, 100) > 0
    }

    /// Writes all of `bytes`; false when the client has gone.
    static func write(_ fd: Int32, _ bytes: some Collection<UInt8>) -> Bool {
        var rest = Array(bytes)[...]
        while !rest.isEmpty {
            let sent = rest.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return false }
            rest = rest.dropFirst(sent)
        }
        return true
    }

    /// Stops listening, waits for the connections' threads and removes the socket file.
    func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        acceptDone.wait()
        close(listener)
        unlink(path)
        clientThreads.wait()
    }

    deinit { stop() }
}
