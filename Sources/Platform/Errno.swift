#if canImport(Glibc)
import Glibc
#endif

/// An error number from the C library, typed (in the manner of swift-system's `Errno`): what a
/// failed call left in errno, printed as the C library names it.
public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno, now: read it before any other call can change it.
    public static var current: Errno { Errno(Glibc.errno) }

    public var description: String { "\(String(cString: strerror(rawValue))) (errno \(rawValue))" }
}

/// A failed system call: what was attempted, on what, and the errno it left. The one error type
/// for sockets, files and descriptors in every module.
public struct SystemError: Error, CustomStringConvertible, Sendable, Equatable {
    public let operation: String
    public let errno: Errno

    public init(_ operation: String, errno: Errno = .current) {
        self.operation = operation
        self.errno = errno
    }

    public init(_ operation: String, errno code: Int32) { self.init(operation, errno: Errno(code)) }

    public var description: String { "\(operation): \(errno)" }
}
