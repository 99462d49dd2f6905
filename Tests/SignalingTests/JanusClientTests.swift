@testable import EndpointSignaling
import FoundationEssentials
@testable import Signaling
import Testing

/// Reading Janus's HTTP API replies (janus.transport.http): ids, acknowledgements, the core's
/// and a plugin's errors, and what is not a reply at all. The whole exchange with a real Janus
/// runs in scripts/janus/test.sh.
@Suite struct JanusClientTests {
    private func response(_ json: String, status: Int = 200) -> HTTPResponseMessage {
        HTTPResponseMessage(status: status, reason: status == 200 ? "OK" : "Not Found", fields: [("Content-Type", "application/json")], body: Array(json.utf8))
    }

    @Test func aSessionIdAsLargeAsJanusMakesThemSurvivesTheRoundTrip() throws {
        // Janus's ids run up to 2^53; one sent back as a number must stay an integer, exactly.
        let id: Double = 8_298_667_663_773_849
        let text = String(decoding: try JSONEncoder().encode(JSONValue.object(["feed": .number(id)])), as: UTF8.self)
        #expect(text == #"{"feed":8298667663773849}"#)
        let back = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(back["feed"]?.numberValue == id)
    }

    @Test func theCoresErrorsSayWhatTheyMean() throws {
        let denied = response(#"{"janus":"error","transaction":"a","error":{"code":403,"reason":"Unauthorized request (wrong or missing secret/token)"}}"#)
        #expect(throws: JanusError.self) { try JanusClient.reply(denied, to: "'create'") }
        do {
            _ = try JanusClient.reply(denied, to: "'create'")
        } catch {
            #expect(error.code == 403)
            #expect(error.description.contains("Unauthorized request") && error.description.contains("API secret"), "\(error)")
        }
        do {
            _ = try JanusClient.reply(response(#"{"janus":"error","error":{"code":458,"reason":"No such session 12"}}"#), to: "'attach'")
        } catch {
            #expect(error.code == 458 && error.description.contains("timed out"), "\(error)")
        }
    }

    @Test func whatIsNotAJanusReplyIsRefused() throws {
        do {
            _ = try JanusClient.reply(response("<html>no</html>"), to: "'create'")
            Issue.record("HTML taken for a reply")
        } catch {
            #expect(error.code == nil && error.description.contains("not JSON"), "\(error)")
        }
        do {
            _ = try JanusClient.reply(response("", status: 404), to: "'create'")
            Issue.record("a 404 taken for a reply")
        } catch {
            #expect(error.description.contains("HTTP 404") && error.description.contains("API root"), "\(error)")
        }
        let deep = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: JanusError.self) { try JanusClient.reply(response(deep), to: "'create'") }
    }

    @Test func aPluginsRefusalIsAnErrorAndItsAnswerIsNot() throws {
        let refusal: JSONValue = .object(["videoroom": .string("event"), "error_code": .number(426), "error": .string("No such room (4321)")])
        do {
            try JanusClient.checkPlugin(refusal, request: "joinandconfigure")
            Issue.record("a plugin's refusal passed")
        } catch {
            #expect(error.code == 426 && error.description.contains("No such room (4321)") && error.description.contains("joinandconfigure"), "\(error)")
        }
        try JanusClient.checkPlugin(.object(["videoroom": .string("joined"), "id": .number(7)]), request: "join")
        let ok = try JanusClient.reply(response(#"{"janus":"success","data":{"id":5540787942800470}}"#), to: "'create'")
        #expect(ok["data"]?["id"]?.numberValue == 5_540_787_942_800_470)
    }

    @Test func theSecretIsPercentEncodedInThePollsQuery() {
        #expect(JanusClient.percentEncoded("a b&c=d/é") == "a%20b%26c%3Dd%2F%C3%A9")
        #expect(JanusClient.percentEncoded("Az09-_.~") == "Az09-_.~")
    }
}
