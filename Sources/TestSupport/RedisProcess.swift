import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private redis-server (Debian's) on a loopback port, with no persistence: killed, it forgets
/// everything, as a Redis restarted without a dump does. Nil where redis-server is not installed.
public final class RedisProcess: @unchecked Sendable {  // used by one test at a time
    public static let executable = "/usr/bin/redis-server"
    public let port: Int
    private let directory: URL
    private var process: Process?

    /// TLS only, on `port` (the certificate and key PEM files), when given.
    private let tls: (certificate: String, key: String)?
    /// ACL users: (name, password), each allowed the service's keys and channels (callend:*) and
    /// every command but the administrator's; the default user is off when any is given.
    private let users: [(name: String, password: String)]

    public init?(tls: (certificate: String, key: String)? = nil, users: [(name: String, password: String)] = []) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else { return nil }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("callend-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        port = Self.freePort()
        self.tls = tls
        self.users = users
        try start()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts redis-server and returns once it accepts connections (10 s at most).
    public func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        var arguments = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory.path, "--loglevel", "warning"]
        if let tls {
            arguments += ["--port", "0", "--tls-port", "\(port)", "--tls-cert-file", tls.certificate, "--tls-key-file", tls.key,
                          "--tls-ca-cert-file", tls.certificate, "--tls-auth-clients", "no"]
        } else {
            arguments += ["--port", "\(port)"]
        }
        if !users.isEmpty {
            arguments += ["--user", "default", "off"]
            for user in users { arguments += ["--user", user.name, "on", ">" + user.password, "~callend:*", "&callend:*", "+@all", "-@admin"] }
        }
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        // Until it accepts, or exits (a port taken meanwhile).
        if eventually(10, { Self.accepts(port: port) || !process.isRunning }) && process.isRunning { return }
        kill()
        throw NSError(domain: "RedisProcess", code: 1, userInfo: [NSLocalizedDescriptionKey: "redis-server did not start on port \(port)"])
    }

    /// Kills redis-server at once (SIGKILL: no goodbye to its clients) and waits for it.
    public func kill() {
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// Stops redis-server where it is (SIGSTOP) or lets it go on (SIGCONT): a Redis that stalls,
    /// as one does forking for a dump or on a loaded host, its connections kept.
    public func pause() { if let process { Glibc.kill(process.processIdentifier, SIGSTOP) } }
    public func resume() { if let process { Glibc.kill(process.processIdentifier, SIGCONT) } }

    /// A loopback port the kernel had free a moment ago (nothing listens on it).
    public static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
