import Platform
#if canImport(Glibc)
import Glibc
#endif

/// A failure to use a camera or audio device: what was attempted, on which device, what the
/// system said, and what to try.
public struct DeviceError: Error, CustomStringConvertible, Sendable, Equatable {
    public let operation: String
    public let errno: Errno?
    public let detail: String

    public init(operation: String, errno code: Int32, hint: String? = nil) {
        self.operation = operation
        let number = Errno(code)
        self.errno = number
        self.detail = hint.map { "\(number); \($0)" } ?? number.description
    }

    public init(operation: String, detail: String) {
        self.operation = operation
        self.errno = nil
        self.detail = detail
    }

    public var description: String { "\(operation): \(detail)" }
}
