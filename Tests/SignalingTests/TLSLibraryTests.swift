import Testing
@testable import Signaling

@Suite struct TLSLibraryTests {
    @Test func openSSL3IsLinked() {
        #expect(TLSLibrary.version.hasPrefix("OpenSSL 3."))
    }
}
