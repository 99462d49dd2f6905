import Glibc

/// Writes a file that holds a secret (a key, a token, SRTP keys in an SDP file) readable and
/// writable by its owner only, whatever the umask: a file that existed keeps nothing of its old
/// mode or contents. The file is made under a temporary name in the same folder with mode 0600
/// from the start, then renamed over `path`, so no reader ever sees it wider or half written.
public func writePrivateFile(atPath path: String, contents: [UInt8]) throws(SystemError) {
    let temporary = path + ".tmp-\(getpid())"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw SystemError("cannot write \(path)") }
    var written = 0
    while written < contents.count {
        let n = contents.withUnsafeBytes { write(fd, $0.baseAddress! + written, contents.count - written) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else {
            let code = errno
            close(fd)
            unlink(temporary)
            throw SystemError("cannot write \(path)", errno: code)
        }
        written += n
    }
    // The umask can only narrow 0600; fchmod makes sure of it.
    guard fchmod(fd, 0o600) == 0, fsync(fd) == 0, close(fd) == 0, rename(temporary, path) == 0 else {
        let code = errno
        unlink(temporary)
        throw SystemError("cannot write \(path)", errno: code)
    }
}
