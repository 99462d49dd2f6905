@testable import EndpointSignaling
import Foundation
import Testing
@testable import Signaling

/// The strict JSON reader every message, token and Janus reply goes through, and the checked
/// conversions that turn its numbers into integers.
@Suite struct JSONParserTests {
    /// Texts Foundation's JSONDecoder reads: this parser reads them to the same values.
    static let valid = [
        #"{"a":1,"b":[true,false,null],"c":{"d":"e"},"f":-0.5e3,"g":"\u00e9\ud83d\ude00\n\/"}"#,
        #"  [1, 2.25, -3, 1e-300, 1.7976931348623157e308, "x\"y\\z"]  "#, #""plain""#, "0", "-0", "123456789012345678901234567890", "[]", "{}",
    ]

    @Test(arguments: valid)
    func readsWhatFoundationReads(text: String) throws {
        let mine = try JSONValue(parsing: Array(text.utf8))
        let theirs = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(mine == theirs)
        // And what it writes reads back to the same value.
        #expect(try JSONValue(parsing: mine.serialized) == mine)
    }

    static let refused: [(String, String)] = [
        (#"{"type":"offer","type":"bye"}"#, "twice"),
        (#"{"a":{"k":1,"k":2}}"#, "twice"),
        ("1e400", "beyond"), ("-1e400", "beyond"), (#"{"n":1E999}"#, "beyond"),
        (#""\ud800""#, "surrogate"), (#""\udc00x""#, "surrogate"), (#""\ud800\u0041""#, "surrogate"),
        ("\"a\u{1}b\"", "control"), ("\"a\nb\"", "control"),
        ("01", "after"), ("+1", "start"), ("1.", "fraction"), (".5", "start"), ("1e", "exponent"), ("-", "digits"),
        ("[1,]", "start"), ("{\"a\":1,}", "key"), ("{'a':1}", "key"), ("[1 2]", "separated"), ("nul", "value"), ("tru", "value"),
        (#""\x""#, "escape"), (#""\u12g4""#, "hex"), ("[1] [2]", "after"), ("", "ends"),
        (String(repeating: "[", count: 33) + String(repeating: "]", count: 33), "deeper"),
    ]

    @Test(arguments: refused)
    func refusesWithAReason(text: String, reason: String) {
        do {
            let value = try JSONValue(parsing: Array(text.utf8))
            Issue.record("\(text.prefix(40)) read as \(value)")
        } catch {
            #expect(error.reason.contains(reason), "\(text.prefix(40)): \(error)")
        }
    }

    @Test func invalidUTF8IsRefused() {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: [0x22, 0xc3, 0x28, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: [0x22, 0xed, 0xa0, 0x80, 0x22]) }  // a surrogate in UTF-8
    }

    @Test func thirtyTwoLevelsAreTheLimit() throws {
        let deepest = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(throws: Never.self) { try JSONValue(parsing: Array(deepest.utf8)) }
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: Array(("[" + deepest + "]").utf8)) }
    }

    /// A duplicate key in a signaling line is bad JSON to the service: the service and a browser
    /// would read different messages out of it.
    @Test func aDuplicateKeyInAMessageIsBadJSON() {
        do {
            _ = try SignalingMessage(parsing: Array(#"{"type":"offer","id":"1","payload":{"sdp":"a","sdp":"b"}}"#.utf8))
            Issue.record("a duplicate key was taken")
        } catch {
            #expect(error.code == .badJSON && error.message.contains("twice"), "\(error)")
        }
    }

    @Test func writesControlCharactersEscapedAndKeysSorted() {
        let value = JSONValue.object(["b": .string("x\n\u{1}\"\\/"), "a": .number(9_007_199_254_740_992), "c": .number(0.5), "d": .number(.infinity)])
        #expect(String(decoding: value.serialized, as: UTF8.self) == #"{"a":9007199254740992,"b":"x\n\u0001\"\\/","c":0.5,"d":null}"#)
    }

    /// Integers come out of JSON numbers only when they are whole and in range: never a trap.
    @Test func integersAreCheckedConversions() {
        let edges: [Double] = [1e300, -1e300, 9_223_372_036_854_775_808, -9_223_372_036_854_775_808 * 2, 1e-300, 0.5, .nan, .infinity]
        for edge in edges {
            #expect(JSONValue.number(edge).integer() as Int? == nil, "\(edge)")
            #expect(JSONValue.number(edge).integer() as UInt32? == nil, "\(edge)")
        }
        #expect(JSONValue.number(-0.0).integer() as Int? == 0)
        #expect(JSONValue.number(-1).integer() as UInt64? == nil)
        #expect(JSONValue.number(503).integer(in: 100...599) == 503)
        #expect(JSONValue.number(600).integer(in: 100...599) == nil)
        #expect(JSONValue.string("5").integer() as Int? == nil)
        #expect(JanusClient.id(.number(9_007_199_254_740_992)) == 9_007_199_254_740_992)
        #expect(JanusClient.id(.number(0)) == nil && JanusClient.id(.number(1e300)) == nil && JanusClient.id(.number(-5)) == nil)
    }

    /// Janus events with numbers no integer holds are read, not trapped on (the slow-link count
    /// and a leaving feed were converted unchecked before).
    @Test func janusEventsWithExtremeNumbers() throws {
        let slow = try JSONValue(parsing: Array(#"{"janus":"slowlink","uplink":true,"lost":1e300}"#.utf8))
        #expect(JanusEvent(slow) == .slowLink(uplink: true, lost: nil))
        let left = try JSONValue(parsing: Array(#"{"janus":"event","plugindata":{"data":{"videoroom":"event","leaving":-1e300}}}"#.utf8))
        #expect(JanusEvent(left) == .other)
        let gone = try JSONValue(parsing: Array(#"{"janus":"event","plugindata":{"data":{"videoroom":"event","unpublished":42}}}"#.utf8))
        #expect(JanusEvent(gone) == .publisherLeft(feed: 42))
        #expect(throws: JanusError(code: nil, "Janus's plugin refused 'join': no reason given (error not a number)")) {
            try JanusClient.checkPlugin(.object(["error_code": .number(1e300)]), request: "join")
        }
    }
}
