package import CLinux
#if canImport(Glibc)
import Platform
import Glibc
#endif

/// An epoll instance plus an eventfd to wake it from another thread; both closed in deinit.
package final class Epoll {
    let fd: Int32
    package let wakeFD: Int32
    package static let wakeToken: UInt64 = .max

    package init() throws(SystemError) {
        fd = epoll_create1(clinux_epoll_cloexec())
        guard fd >= 0 else { throw SystemError("create epoll instance") }
        wakeFD = eventfd(0, clinux_efd_flags())
        guard wakeFD >= 0 else {
            close(fd)
            throw SystemError("create eventfd")
        }
        try add(wakeFD, token: Self.wakeToken, writable: false)
    }

    deinit {
        close(wakeFD)
        close(fd)
    }

    private func control(_ op: Int32, _ target: Int32, token: UInt64, writable: Bool) throws(SystemError) {
        var event = epoll_event()
        event.events = clinux_epollin() | clinux_epollrdhup() | (writable ? clinux_epollout() : 0)
        event.data.u64 = token
        guard epoll_ctl(fd, op, target, &event) == 0 else { throw SystemError("epoll_ctl on descriptor \(target)") }
    }

    package func add(_ target: Int32, token: UInt64, writable: Bool) throws(SystemError) {
        try control(EPOLL_CTL_ADD, target, token: token, writable: writable)
    }

    package func modify(_ target: Int32, token: UInt64, writable: Bool) throws(SystemError) {
        try control(EPOLL_CTL_MOD, target, token: token, writable: writable)
    }

    package func remove(_ target: Int32) {
        var event = epoll_event()
        epoll_ctl(fd, EPOLL_CTL_DEL, target, &event)
    }

    /// Waits up to `timeoutMs` and returns (token, readable-or-closed, writable) per ready descriptor.
    package func wait(into events: inout [epoll_event], timeoutMs: Int32) -> [(token: UInt64, readable: Bool, writable: Bool)] {
        let count = events.withUnsafeMutableBufferPointer { epoll_wait(fd, $0.baseAddress, Int32($0.count), timeoutMs) }
        guard count > 0 else { return [] }
        let readMask = clinux_epollin() | clinux_epollrdhup() | clinux_epollhup() | clinux_epollerr()
        return (0..<Int(count)).map { i in
            (events[i].data.u64, events[i].events & readMask != 0, events[i].events & clinux_epollout() != 0)
        }
    }

    package func wake() { Self.wake(wakeFD) }

    /// Wakes the loop from any thread (the descriptor lives as long as the Epoll).
    package static func wake(_ fd: Int32) {
        var one: UInt64 = 1
        _ = Glibc.write(fd, &one, 8)
    }

    package func drainWake() {
        var value: UInt64 = 0
        _ = Glibc.read(wakeFD, &value, 8)
    }
}
