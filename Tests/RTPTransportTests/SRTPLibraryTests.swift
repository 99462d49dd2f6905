import Testing
@testable import RTPTransport

@Suite struct SRTPLibraryTests {
    @Test func libsrtp2IsLinked() {
        #expect(SRTPLibrary.version.hasPrefix("libsrtp2 2."))
    }
}
