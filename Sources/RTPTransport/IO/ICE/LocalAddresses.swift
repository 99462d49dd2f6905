import Platform
import MediaCore
#if canImport(Glibc)
import Glibc
#endif

/// The addresses of this host's interfaces that are up, as ICE would gather them: IPv4 and
/// IPv6, without loopback and IPv6 link-local ones. A change in this set (a modem's new address,
/// an interface down and up, a second uplink) is what an ICE restart answers.
public enum LocalAddresses {
    public static func current() -> Set<String> {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var found = Set<String>()
        var entry = list
        while let e = entry {
            defer { entry = e.pointee.ifa_next }
            let flags = Int32(bitPattern: e.pointee.ifa_flags)
            guard let address = e.pointee.ifa_addr, flags & Int32(IFF_UP) != 0, flags & Int32(IFF_LOOPBACK) == 0 else { continue }
            let family = Int32(address.pointee.sa_family)
            guard family == AF_INET || family == AF_INET6 else { continue }
            let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            guard getnameinfo(address, length, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if name.lowercased().hasPrefix("fe80:") { continue }
            found.insert(name)
        }
        return found
    }
}

/// The local addresses, looked at once a second by a call's watcher: a change restarts ICE.
public struct LocalAddressWatch: Sendable {
    public private(set) var addresses = LocalAddresses.current()
    /// When `changed` next looks (nil: at its first call, which only starts the watch).
    public private(set) var nextLook: MediaTime?

    public init() {}

    /// The addresses before, when they changed since the last look; nil otherwise (and between looks).
    public mutating func changed(at now: MediaTime) -> Set<String>? {
        guard let due = nextLook else {
            nextLook = now + .seconds(1)
            return nil
        }
        guard now >= due else { return nil }
        nextLook = now + .seconds(1)
        let fresh = LocalAddresses.current()
        guard fresh != addresses else { return nil }
        defer { addresses = fresh }
        return addresses
    }
}
