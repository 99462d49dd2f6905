import Signaling
import Testing
@testable import CallEndpoint

struct CallEventQueueTests {
    typealias Queue = Call.EventQueue

    @Test func aFloodKeepsTheNewestUpToTheCapacity() {
        let queue = Queue(capacity: 64)
        for n in 0..<5000 {
            queue.append(.signaling(.message(RelayMessage(kind: .candidate, id: "c\(n)", from: "peer"))))
        }
        #expect(queue.count == 64)
        #expect(queue.dropped == 5000 - 64)
        let ids = queue.drain().compactMap { event -> String? in
            if case .signaling(.message(let m)) = event { return m.id }
            return nil
        }
        #expect(ids.first == "c\(5000 - 64)" && ids.last == "c4999")
        #expect(queue.count == 0)
    }

    @Test func stateEventsKeepOnlyTheirNewestCopy() {
        let queue = Queue()
        for n in 0..<10_000 {
            queue.append(.signaling(.reconnecting(attempt: n, delay: .seconds(1), reason: "lost")))
            queue.append(.signaling(.joined(participant: "me", peers: ["peer"], rejoined: true)))
            queue.append(.signaling(.tokenRenewed(expires: Int64(n))))
        }
        queue.append(.signaling(.message(RelayMessage(kind: .bye, id: "bye", from: "peer"))))
        #expect(queue.count == 4, "a long call's reconnects and renewals do not pile up")
        #expect(queue.dropped == 0)
        #expect(queue.contains { if case .signaling(.tokenRenewed(9999)) = $0 { true } else { false } })
        #expect(queue.contains { if case .signaling(.message(let m)) = $0 { m.kind == .bye } else { false } })
    }
}
