import Foundation
import Testing
import TestSupport
@testable import CallEndpoint

/// A loopback TCP client for the metrics endpoints.
final class ScrapeClient {
    let fd: Int32
    init(port: Int) throws {
        fd = connectLoopback(port: port, timeout: 10)
        try #require(fd >= 0)
    }
    deinit { close(fd) }
    func send(_ text: String) { _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    /// Everything until the server closes (or 10 s pass).
    func readAll() -> String { String(decoding: readUntilClosed(fd), as: UTF8.self) }
}

@Suite struct MetricsEndpointTests {
    /// Scrapers that open a connection and send nothing hold a place until the deadline, no
    /// longer, and a scraper that asks meanwhile is answered at once.
    @Test func slowScrapersDoNotHoldTheOthers() throws {
        let endpoint = try MetricsEndpoint(host: "127.0.0.1", port: 0, deadline: .seconds(2)) { "callend_call_up 1\n" }
        endpoint.start()
        defer { endpoint.stop() }
        let silent = try (0..<3).map { _ in try ScrapeClient(port: endpoint.port) }
        let dripping = try ScrapeClient(port: endpoint.port)
        dripping.send("GET /metr")
        let prompt = try ScrapeClient(port: endpoint.port)
        let started = ContinuousClock.now
        prompt.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        let answer = prompt.readAll()
        #expect(answer.hasPrefix("HTTP/1.1 200") && answer.contains("callend_call_up 1"), "\(answer)")
        // Answered while the slow ones still hold their places (nothing to read, not closed).
        for client in silent + [dripping] {
            var waiting = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&waiting, 1, 0) == 0, "a slow scraper was closed before the prompt one was answered")
        }
        // The slow ones are closed at their deadline with nothing said.
        for client in silent + [dripping] { #expect(client.readAll().isEmpty) }
        #expect(ContinuousClock.now - started >= .milliseconds(1900))
        let again = try ScrapeClient(port: endpoint.port)
        again.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(again.readAll().hasPrefix("HTTP/1.1 404"))
    }
}
