import MediaCore
import Dispatch
import FoundationEssentials
import Platform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 UDP address.
public struct UDPAddress: Sendable, Hashable, CustomStringConvertible {
    public let host: String
    public let port: Int
    let address: sockaddr_in

    public init(host: String, port: Int) throws(SystemError) {
        guard (0...65535).contains(port) else { throw SystemError("UDP address \(host):\(port): port out of range", errno: EINVAL) }
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw SystemError("resolve \(host) (\(String(cString: gai_strerror(status))); IPv4 addresses only)", errno: EINVAL)
        }
        defer { freeaddrinfo(list) }
        address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
        self.port = port
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        var inAddr = address.sin_addr
        inet_ntop(AF_INET, &inAddr, &text, socklen_t(text.count))
        self.host = String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    init(_ raw: sockaddr_in) {
        address = raw
        port = Int(UInt16(bigEndian: raw.sin_port))
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        var inAddr = raw.sin_addr
        inet_ntop(AF_INET, &inAddr, &text, socklen_t(text.count))
        host = String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String { "\(host):\(port)" }

    public static func == (a: UDPAddress, b: UDPAddress) -> Bool { a.host == b.host && a.port == b.port }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(host)
        hasher.combine(port)
    }
}

/// A UDP socket whose receiving runs on its own thread (never on the task pool). Sending may
/// happen from any thread. The descriptor is closed by `close()` or deinit.
public final class UDPSocket: @unchecked Sendable {  // fd is immutable after init; the receive thread is started once and stopped through an atomic
    public let fd: Int32
    public let localPort: Int
    private let stopping = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)
    /// Entered while the receive thread runs: `stop` waits on it.
    private let running = DispatchGroup()
    /// A pipe `stop` writes to: the receive thread waits on it beside the socket (no timeout).
    private let wake: (read: Int32, write: Int32)

    public init(bindHost: String = "0.0.0.0", port: Int = 0, bufferBytes: Int32 = 1 << 21) throws(SystemError) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("create UDP socket") }
        var size = bufferBytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let local: UDPAddress
        do { local = try UDPAddress(host: bindHost, port: port) } catch {
            Glibc.close(fd)
            throw error
        }
        var address = local.address
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let error = SystemError("bind UDP \(bindHost):\(port)")
            Glibc.close(fd)
            throw error
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            let error = SystemError("create the UDP socket's wake pipe")
            Glibc.close(fd)
            throw error
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        wake = (ends[0], ends[1])
        self.fd = fd
        self.localPort = Int(UInt16(bigEndian: actual.sin_port))
    }

    deinit { close() }

    public func send(_ bytes: [UInt8], to destination: UDPAddress) throws(SystemError) {
        var address = destination.address
        let sent = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == bytes.count else {
            let code = errno
            // A full send buffer drops the datagram, as a router would: not an error worth stopping for.
            if code == EAGAIN || code == ENOBUFS { return }
            throw SystemError("send \(bytes.count) bytes to \(destination)", errno: code)
        }
    }

    /// Connects the socket to `destination` (no packet is sent) and returns the local address the
    /// system chose for that route.
    public func localAddress(connectingTo destination: UDPAddress) throws(SystemError) -> String {
        var address = destination.address
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw SystemError("find a route to \(destination)") }
        var local = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return UDPAddress(local).host
    }

    /// Starts a thread that calls `handler` for every datagram until `stop()`, with how long ago
    /// the kernel received it (SO_TIMESTAMPNS): a receiver busy decoding reads late, and arrival
    /// times read from its own clock would show that as queueing on the path.
    public func startReceiving(name: String, handler: @escaping @Sendable ([UInt8], UDPAddress, Duration) -> Void) {
        running.enter()
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, socklen_t(MemoryLayout<Int32>.size))
        startThread(named: name) { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            var control = [UInt8](repeating: 0, count: 128)
            var waiting = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            while !stopping.load(ordering: .relaxed) {
                // Until a datagram comes or stop() writes to the wake pipe.
                guard poll(&waiting, 2, -1) > 0 else { continue }
                if waiting[1].revents != 0 {
                    var byte: UInt8 = 0
                    _ = read(wake.read, &byte, 1)
                    continue
                }
                var from = sockaddr_in()
                var stamp: timespec?
                let count = buffer.withUnsafeMutableBytes { raw in
                    control.withUnsafeMutableBytes { controlRaw in
                        withUnsafeMutablePointer(to: &from) { fromPointer in
                            var vector = iovec(iov_base: raw.baseAddress, iov_len: raw.count)
                            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                                var message = msghdr()
                                message.msg_name = UnsafeMutableRawPointer(fromPointer)
                                message.msg_namelen = socklen_t(MemoryLayout<sockaddr_in>.size)
                                message.msg_iov = vectorPointer
                                message.msg_iovlen = 1
                                message.msg_control = controlRaw.baseAddress
                                message.msg_controllen = numericCast(controlRaw.count)
                                let count = recvmsg(fd, &message, 0)
                                if count > 0 { stamp = Self.receiveTimestamp(UnsafeRawBufferPointer(rebasing: controlRaw[..<Int(message.msg_controllen)])) }
                                return count
                            }
                        }
                    }
                }
                guard count > 0 else { continue }
                var age = Duration.zero
                if let stamp {
                    let now = WallClock.now
                    let nanoseconds = Int64(now.tv_sec - stamp.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec - stamp.tv_nsec)
                    // A stamp in the future or from long ago means the wall clock stepped: ignore it.
                    if (0..<1_000_000_000).contains(nanoseconds) { age = .nanoseconds(nanoseconds) }
                }
                handler(Array(buffer[0..<count]), UDPAddress(from), age)
            }
            running.leave()
        }
    }

    /// The SCM_TIMESTAMPNS time in a received message's control data, if there is one.
    static func receiveTimestamp(_ control: UnsafeRawBufferPointer) -> timespec? {
        // Each control message is a cmsghdr, its data aligned to the size of size_t, and the next
        // message aligned the same way (the CMSG_* macros, which Swift does not import).
        let align = MemoryLayout<Int>.size
        func aligned(_ n: Int) -> Int { (n + align - 1) / align * align }
        let headerSize = aligned(MemoryLayout<cmsghdr>.size)
        var offset = 0
        while offset + headerSize <= control.count {
            let header = control.loadUnaligned(fromByteOffset: offset, as: cmsghdr.self)
            let length = Int(header.cmsg_len)
            guard length >= headerSize, offset + length <= control.count else { return nil }
            if header.cmsg_level == SOL_SOCKET, header.cmsg_type == SO_TIMESTAMPNS, length - headerSize >= MemoryLayout<timespec>.size {
                return control.loadUnaligned(fromByteOffset: offset + headerSize, as: timespec.self)
            }
            offset += aligned(length)
        }
        return nil
    }

    /// Stops the receive thread and waits for it.
    public func stop() {
        // After close() the pipe's descriptors may already be another file's.
        guard !closed.load(ordering: .relaxed) else { return }
        stopping.store(true, ordering: .relaxed)
        var one: UInt8 = 1
        _ = write(wake.write, &one, 1)
        running.wait()
    }

    public func close() {
        stop()
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        Glibc.close(fd)
        Glibc.close(wake.read)
        Glibc.close(wake.write)
    }
}
