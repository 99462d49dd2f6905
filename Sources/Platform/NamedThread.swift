import Glibc
internal import CLinux

/// Starts a dedicated, detached thread whose name the kernel knows, so every thread shows by its
/// job in `top -H`, `ps -L` and gdb, and a busy thread can be told from an idle one. Linux allows
/// 15 bytes; a longer name keeps its first 15. `stackSize` (bytes) replaces the default of
/// RLIMIT_STACK (8 MiB) where a thread is known to need less. A pthread of its own, not
/// Foundation's `Thread`, so that the service links no Foundation.
public func startThread(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
    final class Start {
        let name: String, body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) { (self.name, self.body) = (name, body) }
    }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    if let stackSize { pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN))) }
    let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(&thread, &attributes, { argument in
        let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
        _ = clinux_set_thread_name(start.name)
        start.body()
        return nil
    }, start)
    precondition(result == 0, "pthread_create failed: \(result)")
}

/// Returns the memory malloc holds free to the kernel. A burst that fills buffers (the pacer and
/// jitter buffers through an outage) leaves freed memory in whichever arenas its threads used;
/// glibc keeps it, so a long call's resident size creeps up outage by outage without a leak.
public func releaseFreeMemory() { _ = clinux_malloc_trim() }

/// Blocks the calling thread for `duration` (nanosleep, resumed after a signal): Foundation's
/// `Thread.sleep` for the modules that link FoundationEssentials only.
public func sleepThread(_ duration: Duration) {
    guard duration > .zero else { return }
    let (seconds, attoseconds) = duration.components
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}
