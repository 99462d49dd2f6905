import Platform
#if canImport(Glibc)
import Glibc
#endif

/// The result of a non-blocking read or write.
package enum IOResult: Equatable {
    case bytes(Int)
    /// The socket would block in this direction: wait until it is ready for it.
    case wouldBlock
    /// TLS: nothing moves until the peer's next bytes are read (a handshake under way). Waiting
    /// for the socket to be writable would wake at once, again and again: wait for readable.
    case needsRead
    case closed
}

/// Calls a system function that returns -1 and sets errno, retrying EINTR and turning
/// EAGAIN/EWOULDBLOCK into `.wouldBlock` rather than an error.
package func nonBlocking(_ operation: @autoclosure () -> String, _ call: () -> Int) throws(SystemError) -> IOResult {
    while true {
        let result = call()
        if result > 0 { return .bytes(result) }
        if result == 0 { return .closed }
        let code = errno
        if code == EINTR { continue }
        if code == EAGAIN || code == EWOULDBLOCK { return .wouldBlock }
        throw SystemError(operation(), errno: code)
    }
}

/// Why a connection's read or write failed (its socket's or TLS's words), for the server's and
/// the client's connections alike.
package struct ConnectionFailure: Error, CustomStringConvertible {
    package let description: String
    package init(description: String) { self.description = description }
}
