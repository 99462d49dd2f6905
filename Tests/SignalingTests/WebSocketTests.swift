import Foundation
@testable import SignalingService
import Testing
import TestSupport
@testable import Signaling

/// A client frame: masked with `mask`, FIN as given, the length in its shortest form unless `longLength`.
func clientFrame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, mask: [UInt8] = [0x37, 0xfa, 0x21, 0x3d], masked: Bool = true,
                 rsv: UInt8 = 0) -> [UInt8] {
    var out: [UInt8] = [(fin ? 0x80 : 0) | rsv | opcode]
    let maskBit: UInt8 = masked ? 0x80 : 0
    if payload.count < 126 {
        out.append(maskBit | UInt8(payload.count))
    } else if payload.count <= 0xffff {
        out += [maskBit | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
    } else {
        out.append(maskBit | 127)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: UInt64(payload.count) >> UInt64(shift))) }
    }
    guard masked else { return out + payload }
    out += mask
    out += payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
    return out
}

@Suite struct WebSocketReaderTests {
    @Test func acceptValueIsTheRFCExample() {
        // RFC 6455 §1.3.
        #expect(WebSocket.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(WebSocket.isValidKey("dGhlIHNhbXBsZSBub25jZQ=="))
        #expect(!WebSocket.isValidKey("short"))
        #expect(!WebSocket.isValidKey("dGhlIHNhbXBsZSBub25jZQ"))
    }

    @Test func textMessagesArriveWholeHoweverTheBytesAreSplit() throws {
        let message = Array(#"{"type":"ping","id":7}"#.utf8)
        let bytes = clientFrame(1, message) + clientFrame(1, Array("[]".utf8))
        for chunk in [1, 2, 3, 7, bytes.count] {
            var reader = WebSocketReader()
            var events: [WebSocketEvent] = []
            var i = 0
            while i < bytes.count {
                events += try reader.append(bytes[i..<min(i + chunk, bytes.count)])
                i += chunk
            }
            #expect(events == [.text(message), .text(Array("[]".utf8))])
            #expect(reader.pendingCount == 0)
        }
    }

    @Test func fragmentsAreJoinedAndControlFramesMayComeBetweenThem() throws {
        var reader = WebSocketReader()
        let events = try reader.append(clientFrame(1, Array("{\"ty".utf8), fin: false) + clientFrame(9, [1, 2]) +
                                       clientFrame(0, Array("pe\":".utf8), fin: false) + clientFrame(0, Array("\"pong\"}".utf8)))
        #expect(events == [.ping([1, 2]), .text(Array(#"{"type":"pong"}"#.utf8))])
    }

    @Test func lengthsOf16And64BitsAreRead() throws {
        var reader = WebSocketReader(maxMessageLength: 1 << 20)
        let medium = [UInt8](repeating: 0x61, count: 300), large = [UInt8](repeating: 0x62, count: 70_000)
        #expect(try reader.append(clientFrame(1, medium) + clientFrame(1, large)) == [.text(medium), .text(large)])
    }

    @Test func closeFrames() throws {
        var reader = WebSocketReader()
        #expect(try reader.append(clientFrame(8, [0x03, 0xe8, 0x62, 0x79, 0x65]) + clientFrame(1, [0x61])) == [.close(1000)])
        var bare = WebSocketReader()
        #expect(try bare.append(clientFrame(8, [])) == [.close(nil)])
    }

    /// Every breach of RFC 6455's rules for a client, and of the service's limits, with its close code.
    @Test(arguments: [
        (clientFrame(1, Array("{}".utf8), masked: false), WebSocket.CloseCode.protocolError),
        (clientFrame(1, [0x61], rsv: 0x40), .protocolError),
        (clientFrame(3, [0x61]), .protocolError),
        (clientFrame(2, [0x61]), .unsupportedData),
        (clientFrame(0, [0x61]), .protocolError),
        (clientFrame(9, [0x61], fin: false), .protocolError),
        (clientFrame(9, [UInt8](repeating: 0, count: 126)), .protocolError),
        (clientFrame(1, [0x61], fin: false) + clientFrame(1, [0x62]), .protocolError),
        (clientFrame(1, [0xc3, 0x28]), .invalidPayload),
        (clientFrame(8, [0x03]), .protocolError),
        ([0x81, 0xfe, 0x00, 0x05] + [0, 0, 0, 0] + Array("hello".utf8), .protocolError),
        ([0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1], .protocolError),
    ])
    func violationsCloseWithTheirCode(bytes: [UInt8], code: WebSocket.CloseCode) {
        var reader = WebSocketReader()
        #expect(throws: WebSocketViolation.self) { _ = try reader.append(bytes) }
        do { _ = try reader.append(bytes) } catch { #expect(error.code == code) }
    }

    @Test func aMessageOverTheLimitFailsAtItsHeaderWithoutBufferingIt() throws {
        var reader = WebSocketReader(maxMessageLength: 1000)
        // The header alone of a frame announcing 2 GB: refused before any payload arrives.
        let header: [UInt8] = [0x81, 0xff, 0, 0, 0, 0, 0x80, 0, 0, 0]
        #expect(throws: WebSocketViolation(.tooBig, "a message over 1000 bytes")) { _ = try reader.append(header) }
        // Fragments count together: 600 + 600 is over 1000.
        var fragmented = WebSocketReader(maxMessageLength: 1000)
        let part = [UInt8](repeating: 0x61, count: 600)
        #expect(throws: WebSocketViolation.self) { _ = try fragmented.append(clientFrame(1, part, fin: false) + clientFrame(0, part)) }
        // Exactly at the limit is fine.
        var exact = WebSocketReader(maxMessageLength: 1000)
        #expect(try exact.append(clientFrame(1, [UInt8](repeating: 0x61, count: 1000))).count == 1)
    }

    @Test func emptyFragmentsAreCounted() {
        var reader = WebSocketReader(maxFragments: 10)
        var bytes = clientFrame(1, [], fin: false)
        for _ in 0..<10 { bytes += clientFrame(0, [], fin: false) }
        #expect(throws: WebSocketViolation(.policyViolation, "a message in more than 10 fragments")) { _ = try reader.append(bytes) }
    }

    @Test func serverFramesAreUnmaskedWithShortestLengths() {
        #expect(WebSocket.frame(.text, Array("hi".utf8)) == [0x81, 0x02, 0x68, 0x69])
        #expect(Array(WebSocket.frame(.text, [UInt8](repeating: 0, count: 200)).prefix(4)) == [0x81, 126, 0, 200])
        #expect(Array(WebSocket.frame(.text, [UInt8](repeating: 0, count: 70_000)).prefix(10)) == [0x81, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70])
        #expect(WebSocket.closeFrame(.tooBig) == [0x88, 0x02, 0x03, 0xf1])
    }
}

/// Seeded random and mutated input through both web parsers: no crash, and what they hold stays
/// within their bounds whatever arrives.
@Suite struct WebParserFuzzTests {
    @Test func randomAndMutatedFramesKeepTheReaderWithinItsBounds() {
        var rng = SeededGenerator(seed: 6455)
        let valid = clientFrame(1, Array(#"{"type":"ping"}"#.utf8)) + clientFrame(9, [1]) + clientFrame(1, [0x61], fin: false) + clientFrame(0, [0x62])
        for round in 0..<20_000 {
            var reader = WebSocketReader(maxMessageLength: 4096, maxFragments: 64)
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            } else {
                bytes = valid
                for _ in 0..<Int.random(in: 1...4, using: &rng) { bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            }
            var i = 0
            while i < bytes.count {
                let n = Int.random(in: 1...64, using: &rng)
                guard (try? reader.append(bytes[i..<min(i + n, bytes.count)])) != nil else { break }
                #expect(reader.pendingCount <= 4096 + 14 + 64)
                i += n
            }
        }
    }

    @Test func randomHeadsNeverCrashTheRequestReader() {
        var rng = SeededGenerator(seed: 9112)
        let valid = Array("GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n\r\n".utf8)
        for round in 0..<20_000 {
            var reader = HTTPRequestHead.Reader()
            var bytes = valid
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 0...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } + [13, 10, 13, 10]
            } else {
                for _ in 0..<Int.random(in: 1...4, using: &rng) { bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            }
            _ = try? reader.append(bytes)
        }
    }
}

@Suite struct HTTPRequestHeadTests {
    @Test func aWebSocketUpgradeRequest() throws {
        var reader = HTTPRequestHead.Reader()
        let text = "GET /ws?x=1 HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n" +
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        let bytes = Array(text.utf8) + [0x81]
        #expect(try reader.append(bytes.prefix(20)) == nil)
        let (head, rest) = try #require(try reader.append(bytes.dropFirst(20)))
        #expect(head.method == "GET" && head.path == "/ws" && head.query == "x=1")
        #expect(head.field("upgrade", contains: "websocket") && head.field("connection", contains: "upgrade"))
        #expect(head.field("Sec-WebSocket-Version") == "13")
        #expect(rest == [0x81])
    }

    @Test(arguments: [
        ("GARBAGE\r\n\r\n", 400), ("GET / HTTP/2\r\nHost: x\r\n\r\n", 505), ("GET noslash HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n\r\n", 400), ("GET / HTTP/1.1\r\nHost x\r\n\r\n", 400), ("GET / HTTP/1.1\r\nHo st: x\r\n\r\n", 400),
        ("get / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ])
    func malformedHeads(text: String, status: Int) {
        var reader = HTTPRequestHead.Reader()
        do {
            _ = try reader.append(Array(text.utf8))
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.status == status)
        }
    }

    @Test func aHeadOverTheLimitIsRefusedWithoutWaitingForItsEnd() {
        var reader = HTTPRequestHead.Reader()
        let long = Array("GET / HTTP/1.1\r\nX: ".utf8) + [UInt8](repeating: 0x61, count: HTTPRequestHead.maxLength)
        #expect(throws: HTTPRequestHead.Malformed.self) { _ = try reader.append(long) }
        do { _ = try reader.append([]) } catch { #expect(error.status == 431) }
    }
}
