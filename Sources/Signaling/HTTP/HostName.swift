import Glibc

/// Names of hosts, as the service's certificates and its web side's origin checks see them.
package enum HostName {
    /// Whether `name` is an IPv4 or IPv6 address rather than a DNS name.
    package static func isIPAddress(_ name: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, name, &v4) == 1 || inet_pton(AF_INET6, name, &v6) == 1
    }
}
