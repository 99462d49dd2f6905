import Foundation

/// A self-signed certificate for `commonName` (default localhost) and 127.0.0.1 made by `openssl req`
/// (a test trusts it as its own CA), in a folder removed afterwards.
public final class TestCertificate {
    public let directory: String
    public var certificate: String { directory + "/cert.pem" }
    public var key: String { directory + "/key.pem" }

    public init(commonName: String = "localhost") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("callend-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                             "-subj", "/CN=\(commonName)", "-addext", "subjectAltName=DNS:\(commonName),IP:127.0.0.1",
                             "-keyout", key, "-out", certificate]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TestCertificateError() }
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }
}

public struct TestCertificateError: Error, CustomStringConvertible {
    public var description: String { "openssl req failed" }
}
