import Foundation
import Testing
@testable import Signaling

@Suite struct MessageTests {
    static let samples: [SignalingMessage] = [
        .join(room: "lab-1", token: "a.b.c", rejoin: false),
        .join(room: "lab-1", token: "a.b.c", rejoin: true),
        .joined(room: "lab-1", participant: "roof", peers: ["bench"]),
        .peerJoined(participant: "bench", rejoin: true),
        .peerLeft(participant: "bench", reason: "disconnected"),
        .relay(RelayMessage(kind: .offer, id: "1", from: "a", to: "b", payload: .object(["sdp": .string("v=0\r\n/x"), "n": .number(3)]))),
        .relay(RelayMessage(kind: .candidate, id: "x-2", payload: .array([.null, .bool(true), .number(1.5)]))),
        .ack(id: "7"),
        .ping(id: 3),
        .pong(id: nil),
        .error(code: .roomFull, message: "full", id: "9"),
        .token(token: "a.b.c", expires: 1_790_000_000),
    ]

    @Test(arguments: samples)
    func roundTrips(message: SignalingMessage) throws {
        let line = message.serialized()
        #expect(line.last == 0x0a)
        #expect(!line.dropLast().contains(0x0a), "one message is one line")
        #expect(try SignalingMessage(parsing: line.dropLast()) == message)
    }

    @Test func unknownFieldsAreIgnored() throws {
        let line = #"{"type":"ping","id":4,"future":{"x":[1,2]},"also":"y"}"#
        #expect(try SignalingMessage(parsing: Array(line.utf8)) == .ping(id: 4))
    }

    static let badLines: [(String, SignalingErrorCode)] = [
        (#"{"type":"dance"}"#, .unknownType),
        (#"{"id":1}"#, .badMessage),
        (#"[1,2]"#, .badMessage),
        (#"{"type":"join","room":"r"}"#, .badMessage),
        (#"{"type":"join","room":5,"token":"t"}"#, .badMessage),
        (#"{"type":"offer","payload":{}}"#, .badMessage),
        (#"{"type":"token","token":"a.b.c"}"#, .badMessage),
        (#"{"type":"token","token":"","expires":5}"#, .badMessage),
        (#"{"type":"ping""#, .badJSON),
        ("\u{0}\u{1}binary", .badJSON),
        (String(repeating: "[", count: 40) + String(repeating: "]", count: 40), .tooDeep),
        (#"{"a":"# + String(repeating: #"{"a":"#, count: 33) + "1" + String(repeating: "}", count: 34), .tooDeep),
    ]

    @Test(arguments: badLines)
    func badInputGetsItsCode(line: String, code: SignalingErrorCode) {
        #expect(throws: SignalingProtocolError.self) { try SignalingMessage(parsing: Array(line.utf8)) }
        do { _ = try SignalingMessage(parsing: Array(line.utf8)) } catch { #expect(error.code == code, "\(line.prefix(40)): \(error)") }
    }

    @Test func invalidUTF8IsBadJSON() {
        let bytes: [UInt8] = Array(#"{"type":"ping","x":""#.utf8) + [0xff, 0xfe] + Array(#""}"#.utf8)
        do {
            _ = try SignalingMessage(parsing: bytes)
            Issue.record("invalid UTF-8 parsed")
        } catch { #expect(error.code == .badJSON) }
    }

    @Test func bracketsInsideStringsDoNotCountAsNesting() throws {
        let line = #"{"type":"offer","id":"1","payload":{"sdp":""# + String(repeating: "[{", count: 100) + #""}}"#
        guard case .relay(let relay) = try SignalingMessage(parsing: Array(line.utf8)) else { Issue.record("not a relay"); return }
        #expect(relay.payload["sdp"]?.stringValue?.count == 200)
    }
}

@Suite struct LineFramerTests {
    let lines = [#"{"type":"ping","id":1}"#, #"{"type":"join","room":"r","token":"t"}"#, #"{"type":"pong"}"#]

    @Test func dripFeedOneByteAtATime() throws {
        var framer = LineFramer()
        var out: [String] = []
        for byte in lines.joined(separator: "\n").utf8 + [0x0a] {
            out += try framer.append([byte]).map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(out == lines)
        #expect(framer.pendingCount == 0)
    }

    @Test func manyMessagesInOneRead() throws {
        var framer = LineFramer()
        let text = lines.joined(separator: "\r\n") + "\n\n" + #"{"type":"pi"#
        let out = try framer.append(Array(text.utf8)).map { String(decoding: $0, as: UTF8.self) }
        #expect(out == lines)
        #expect(framer.pendingCount == 11)
        #expect(try framer.append(Array(#"ng"}"#.utf8) + [0x0a]).map { String(decoding: $0, as: UTF8.self) } == [#"{"type":"ping"}"#])
    }

    @Test func overlongLineIsCaughtWithoutItsNewline() throws {
        var framer = LineFramer(maxLineLength: 100)
        _ = try framer.append([UInt8](repeating: 0x41, count: 100))
        #expect(throws: LineFramer.LineTooLong.self) { try framer.append([0x41]) }
        var other = LineFramer(maxLineLength: 100)
        #expect(throws: LineFramer.LineTooLong.self) { try other.append([UInt8](repeating: 0x41, count: 101) + [0x0a]) }
    }
}
