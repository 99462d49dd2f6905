@testable import EndpointSignaling
import Foundation
import Platform
@testable import Signaling
import Synchronization
import Testing
import TestSupport

/// A path that drops connections without a word (an LTE stall, a blackhole route) is made here
/// on loopback: a listener whose accept queue is full drops every SYN, counted by the kernel as
/// TcpExt ListenDrops. Accepting the queued connection opens the path again.
private final class SilentListener {
    let fd: Int32
    let port: Int
    private var blocker: Int32 = -1

    init() throws {
        (fd, port) = try TCPSocket.listen(host: "127.0.0.1", port: 0, backlog: 0)
        do { blocker = try TCPSocket.connect(host: "127.0.0.1", port: port, timeout: .seconds(2)) } catch { close(fd); throw error }
    }

    /// Takes the queued connection: the next SYN is answered.
    func open() {
        let taken = accept(fd, nil, nil)
        if taken >= 0 { close(taken) }
        close(blocker)
        blocker = -1
    }

    deinit {
        if blocker >= 0 { close(blocker) }
        close(fd)
    }
}

/// SYNs dropped so far by full listeners in this network namespace .
private func listenDrops() -> Int {
    let lines = (try? String(contentsOfFile: "/proc/net/netstat", encoding: .utf8))?.split(separator: "\n") ?? []
    for (names, values) in zip(lines, lines.dropFirst()) where names.hasPrefix("TcpExt:") && values.hasPrefix("TcpExt:") {
        let pairs = zip(names.split(separator: " "), values.split(separator: " "))
        if let drops = pairs.first(where: { $0.0 == "ListenDrops" }) { return Int(drops.1) ?? 0 }
    }
    return 0
}

@Suite(.serialized) struct SilentPathTests {
    /// One connection's SYN is sent again by the kernel at 1 s and 3 s, then not before 7 s
    /// (Linux 6.1, Debian 12's kernel); from 6.5, every second up to 5 s, then not before 7 s
    /// (tcp_syn_linear_timeouts 4). Either way a path back after the sixth drop would wait past
    /// this 6.8 s limit. Fresh attempts every second find it within a second. Synchronous, on
    /// threads of its own: the path must open in time, whatever holds the task pool.
    @Test func aFreshAttemptFindsAPathThatCameBack() throws {
        let listener = try SilentListener()
        let before = listenDrops()
        let port = listener.port
        let outcome = Mutex<String?>(nil)
        let connected = Thread {
            do {
                let fd = try TCPSocket.connect(host: "127.0.0.1", port: port, timeout: .milliseconds(6800), freshAttemptEvery: .seconds(1))
                close(fd)
                outcome.withLock { $0 = "connected" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
        }
        connected.start()
        let dropped = eventually(6.5) { listenDrops() >= before + 6 }
        #expect(dropped, "six SYNs dropped while the path was silent")
        listener.open()
        #expect(eventually(10) { outcome.withLock { $0 } != nil })
        #expect(outcome.withLock { $0 } == "connected")
    }

    /// Nothing reached a server, so waiting longer spares no server: the client tries again
    /// after its first delay each time. A refusal (a server that is there and says no) still
    /// makes it back off.
    @Test func unansweredAttemptsDoNotGrowTheDelayRefusalsDo() async throws {
        let listener = try SilentListener()
        let (closed, closedPort) = try TCPSocket.listen(host: "127.0.0.1", port: 0)
        close(closed)
        for (port, silent) in [(listener.port, true), (closedPort, false)] {
            let (client, log) = makeClient(port: port, identity: "roof", fastRetry: false) {
                $0.connectTimeout = .milliseconds(600)
                $0.freshConnectEvery = .milliseconds(200)
                $0.backoffInitial = .milliseconds(100)
            }
            defer { client.stop() }
            let attempts = { log.all.compactMap { event -> (Int, Duration)? in
                if case .reconnecting(let attempt, let delay, _) = event { return (attempt, delay) }
                return nil
            } }
            #expect(await eventually(within: .seconds(20)) { attempts().count >= 3 })
            let seen = attempts().prefix(3)
            if silent {
                #expect(seen.allSatisfy { $0.0 == 1 && $0.1 <= .milliseconds(100) }, "\(seen)")
            } else {
                #expect(seen.map(\.0) == [1, 2, 3], "\(seen)")
            }
        }
        withExtendedLifetime(listener) {}
    }
}
