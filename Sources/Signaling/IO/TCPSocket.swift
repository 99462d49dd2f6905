import Platform
#if canImport(Glibc)
import Glibc
#endif

/// Plain TCP socket set-up: resolve, listen, connect. Descriptors are returned to owners that
/// close them (the server's connection table, the client's session).
package enum TCPSocket {
    /// The numeric IP address of a connected socket's peer (IPv4 or IPv6), nil if unknown.
    package static func peerAddress(_ fd: Int32) -> String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let ok = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                getpeername(fd, address, &length) == 0
                    && getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0
            }
        }
        return ok ? String(decoding: host.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    }

    /// Resolves HOST:PORT for a listener or a client, IPv4 or IPv6.
    static func resolve(host: String, port: Int, passive: Bool) throws(SystemError) -> [(family: Int32, address: [UInt8])] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        hints.ai_flags = passive ? AI_PASSIVE : 0
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host.isEmpty ? nil : host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw SystemError("resolve \(host):\(port) (\(String(cString: gai_strerror(status))))", errno: EINVAL)
        }
        defer { freeaddrinfo(list) }
        var out: [(Int32, [UInt8])] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let entry = node {
            let bytes = Array(UnsafeRawBufferPointer(start: entry.pointee.ai_addr, count: Int(entry.pointee.ai_addrlen)))
            out.append((entry.pointee.ai_family, bytes))
            node = entry.pointee.ai_next
        }
        return out
    }

    package static func listen(host: String, port: Int, backlog: Int32 = 4096) throws(SystemError) -> (fd: Int32, port: Int) {
        var lastError = SystemError("listen on \(host):\(port)", errno: EADDRNOTAVAIL)
        for (family, address) in try resolve(host: host, port: port, passive: true) {
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { lastError = SystemError("create socket"); continue }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            let bound = address.withUnsafeBytes { bind(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count)) }
            guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
                lastError = SystemError("listen on \(host):\(port)")
                close(fd)
                continue
            }
            return (fd, localPort(fd))
        }
        throw lastError
    }

    /// A blocking connection with a time limit, TCP_NODELAY set. With `freshAttemptEvery`, a
    /// connection still unanswered after that long is joined by a new one (a new SYN at once)
    /// while the earlier ones keep waiting, and the first to connect wins: a path that comes
    /// back after a silent outage (an LTE stall, a blackhole) is found within that interval,
    /// where the kernel's own SYN retransmissions would wait 1, 2, then 4 s. A refusal ends
    /// the attempts on that address: the path is there, the service is not.
    package static func connect(host: String, port: Int, timeout: Duration, freshAttemptEvery: Duration? = nil) throws(SystemError) -> Int32 {
        var lastError = SystemError("connect to \(host):\(port)", errno: EHOSTUNREACH)
        for (family, address) in try resolve(host: host, port: port, passive: false) {
            let deadline = MediaTime.now + timeout
            var pending: [Int32] = []
            var nextAttempt = MediaTime.now
            defer { for fd in pending { reset(fd) } }
            attempts: while true {
                let now = MediaTime.now
                if now >= nextAttempt, now < deadline {
                    let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                    guard fd >= 0 else { lastError = SystemError("create socket"); break }
                    let result = address.withUnsafeBytes { Glibc.connect(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count)) }
                    if result != 0 && errno != EINPROGRESS {
                        lastError = SystemError("connect to \(host):\(port)")
                        close(fd)
                        break
                    }
                    pending.append(fd)
                    nextAttempt = freshAttemptEvery.map { now + $0 } ?? deadline
                }
                if pending.isEmpty { break }
                if now >= deadline {
                    lastError = SystemError("connect to \(host):\(port) (no answer within \(timeout))", errno: ETIMEDOUT)
                    break
                }
                var fds = pending.map { pollfd(fd: $0, events: Int16(POLLOUT), revents: 0) }
                let ms = Int32(max(1, ((min(deadline, nextAttempt) - MediaTime.now).inSeconds * 1000).rounded(.up)))
                guard poll(&fds, nfds_t(fds.count), ms) > 0 else { continue }
                for entry in fds where entry.revents != 0 {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(entry.fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    pending.removeAll { $0 == entry.fd }
                    if error == 0 {
                        setNoDelay(entry.fd)
                        return entry.fd
                    }
                    lastError = SystemError("connect to \(host):\(port)", errno: error)
                    close(entry.fd)
                    break attempts
                }
            }
        }
        throw lastError
    }

    /// Closes `fd` with a reset (SO_LINGER 0): a connection refused before a word frees its
    /// state on both sides at once, with no FIN_WAIT or TIME_WAIT left here.
    package static func reset(_ fd: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(fd)
    }

    package static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    static func localPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return withUnsafeBytes(of: storage) { raw in
            // sin_port and sin6_port sit at the same offset, in network byte order.
            Int(UInt16(raw[2]) << 8 | UInt16(raw[3]))
        }
    }
}
