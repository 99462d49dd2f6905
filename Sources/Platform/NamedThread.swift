import Foundation
internal import CLinux

/// Starts a dedicated thread whose name the kernel knows: Foundation keeps `Thread.name` to
/// itself on Linux, so without this every thread shows in `top -H`, `ps -L` and gdb under the
/// name of whichever thread started it, and a busy thread cannot be told from an idle one.
/// Linux allows 15 bytes; a longer name keeps its first 15.
@discardableResult
public func startThread(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) -> Thread {
    let thread = Thread {
        _ = clinux_set_thread_name(name)
        body()
    }
    thread.name = name
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
    return thread
}

/// Returns the memory malloc holds free to the kernel. A burst that fills buffers (the pacer and
/// jitter buffers through an outage) leaves freed memory in whichever arenas its threads used;
/// glibc keeps it, so a long call's resident size creeps up outage by outage without a leak.
public func releaseFreeMemory() { _ = clinux_malloc_trim() }
