#if canImport(Glibc)
import Glibc
#endif

/// A failure to use a camera or audio device: what was attempted, on which device, what the
/// system said, and what to try.
public struct DeviceError: Error, CustomStringConvertible, Sendable, Equatable {
    public let operation: String
    public let errno: Int32?
    public let detail: String

    public init(operation: String, errno code: Int32, hint: String? = nil) {
        self.operation = operation
        self.errno = code
        let message = String(cString: strerror(code))
        self.detail = hint.map { "\(message) (errno \(code)); \($0)" } ?? "\(message) (errno \(code))"
    }

    public init(operation: String, detail: String) {
        self.operation = operation
        self.errno = nil
        self.detail = detail
    }

    public var description: String { "\(operation): \(detail)" }
}
