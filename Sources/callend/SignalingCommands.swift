import CallEndpoint
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import RTPTransport
import CLIKit
import Signaling
#if canImport(Glibc)
import Glibc
import SignalingService
#endif

let tokenHelp = """
    usage: callend token --room R --identity I (--secret-file F | CALLEND_SECRET=...) [--can join] [--ttl 1h] [--issuer ISS]
           callend token --new-secret [--out F]

    Prints a standard JWT (HS256) on standard output: sub = identity, room = the room it grants
    ("*" for every room), can = what it allows, iss, iat, nbf = now, exp = now + ttl. --new-secret
    prints a random secret (64 hex characters) to put in a secret file; with --out F it writes the
    file itself, mode 0600.

      --can LIST     what the token allows, comma-separated (default join):
                       join     join the room as a peer (callend join, the browser page, /ws)
                       publish  publish into the room by WHIP (POST /whip/ROOM)
                       watch    watch the room's endpoint by WHEP (POST /whep/ROOM)
                     A viewer's token is --can watch: it cannot take a seat or publish.
      --ttl D        lifetime: seconds, or a number with s, m, h or d (default 1h; at most 30d)
      --issuer ISS   iss claim (default callend)

    A token for every room (--room '*') is not renewed: a participant holding one leaves when it
    expires. Any other is renewed while its holder stays, each renewal living what the token had
    left when it was presented.
    """

func runToken(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(tokenHelp); return }
    if args.flag("--new-secret") {
        let out = try args.value("--out")
        try args.finish(command: "token")
        let secret = TokenSecret.random().printable
        if let out {
            do { try writePrivateFile(atPath: out, contents: secret + [UInt8(ascii: "\n")]) } catch {
                throw UsageError(description: "--out: \(error)")
            }
        } else {
            print(String(decoding: secret, as: UTF8.self))
        }
        return
    }
    guard let room = try args.value("--room") else { throw UsageError(description: "token needs --room R") }
    guard let identity = try args.value("--identity") else { throw UsageError(description: "token needs --identity I") }
    let ttl = try args.value("--ttl").map { text throws(UsageError) in try parseDuration(text) } ?? 3600
    let issuer = try args.value("--issuer") ?? TokenIssuer.defaultIssuer
    let can = try args.value("--can").map { text throws(UsageError) in
        guard let scope = TokenScope(names: text) else { throw UsageError(description: "--can takes join, publish and watch, comma-separated, not '\(text)'") }
        return scope
    } ?? .join
    let secret = try loadSecret(&args)
    try args.finish(command: "token")
    guard room == "*" || SignalingServerCore.isValidRoomName(room) else {
        throw UsageError(description: "room names are 1-128 characters of A-Z a-z 0-9 . _ - (or * for every room), not '\(room)'")
    }
    guard !identity.isEmpty, identity.utf8.count <= 256 else { throw UsageError(description: "--identity must be 1-256 bytes") }
    let now = Int64(WallClock.unixSeconds)
    var claims = TokenClaims(identity: identity, room: room, issuer: issuer, issuedAt: now, expires: now + ttl)
    claims.can = can
    print(TokenIssuer(secret: secret).mint(claims))
}

let tlsHelp = """
    usage: callend tls --host NAME [--host NAME]... --out DIR [--days N]

    Makes what a TLS service needs, in one step: a private certificate authority (DIR/ca.pem and
    its key DIR/ca-key.pem, made once and reused by later runs) and a certificate for the service
    signed by it (DIR/server.pem, DIR/server-key.pem), for every NAME given: DNS names and IP
    addresses the endpoints dial. Keys are ECDSA P-256, written mode 0600. Then:

      callend serve --listen 0.0.0.0:7000 --tls-cert DIR/server.pem --tls-key DIR/server-key.pem ...
      callend join ROOM --server tls://NAME:7000 --ca-file DIR/ca.pem ...     (ca.pem is public)

    Run it again with other names (another node, a renewal) to sign a new server certificate with
    the same CA: endpoints keep trusting ca.pem. Keep ca-key.pem where only you can read it.

      --host NAME   a DNS name or IP address the certificate is for (repeatable; the first is its CN)
      --out DIR     the folder to write to (made mode 0700 if missing)
      --days N      how long the server certificate is valid (default 825; the CA, 10 years)
    """

func runTLS(_ args: inout Arguments) throws {
    if args.flag("--help") || args.flag("-h") { print(tlsHelp); return }
    let hosts = try args.values("--host")
    guard !hosts.isEmpty else { throw UsageError(description: "tls needs --host NAME (the DNS name or IP address endpoints dial)") }
    guard let directory = try args.value("--out") else { throw UsageError(description: "tls needs --out DIR") }
    let days = try args.integer("--days", in: 1...3650) ?? 825
    try args.finish(command: "tls")
    let files: PrivateCA.Files
    do { files = try PrivateCA.issue(hosts: hosts, directory: directory, days: days) } catch {
        throw UsageError(description: error.description)
    }
    print("""
        \(files.madeCA ? "made a private CA" : "used the CA in \(directory)"): \(files.caCertificate) (endpoints trust it: join --ca-file \(files.caCertificate))
        server certificate for \(hosts.joined(separator: ", ")), valid \(days) days: \(files.certificate), key \(files.key)
          callend serve --listen 0.0.0.0:7000 --tls-cert \(files.certificate) --tls-key \(files.key) ...
          callend join ROOM --server tls://\(hosts[0].contains(":") ? "[\(hosts[0])]" : hosts[0]):7000 --ca-file \(files.caCertificate) ...
        """)
}
