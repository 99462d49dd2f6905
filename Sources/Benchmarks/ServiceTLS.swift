import Signaling

/// TLS for a bench's signaling service, made the way `callend tls` makes it, so that the bench's
/// endpoints speak to the service as a deployment's do (signaling off loopback is TLS).
struct ServiceTLS {
    /// For `callend serve`.
    let serveArguments: [String]
    /// For `callend join` (with `--server tls://HOST:PORT`).
    let joinArguments: [String]
    /// The certificate's key pin, for a browser that must trust it.
    let publicKeyPin: String

    init(directory: String, host: String) throws {
        do {
            let files = try PrivateCA.issue(hosts: [host], directory: directory, days: 7)
            serveArguments = ["--tls-cert", files.certificate, "--tls-key", files.key]
            joinArguments = ["--ca-file", files.caCertificate]
            publicKeyPin = try PrivateCA.publicKeyPin(ofCertificate: files.certificate)
        } catch {
            throw ExternalTool.Failure(description: "TLS for the bench's service: \(error)")
        }
    }
}
