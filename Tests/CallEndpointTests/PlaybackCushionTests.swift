import Testing
@testable import CallEndpoint

/// The silence a playback stream starts with grows with the card's underruns and shrinks back
/// after a quiet minute.
struct PlaybackCushionTests {
    @Test func startsAtOneBlockAndGrowsAnUnderrunAtATimeUpToTheBufferLessOne() {
        var cushion = PlaybackCushion(bufferBlocks: 4)
        #expect(cushion.blocks == 1)
        cushion.underran()
        #expect(cushion.blocks == 2)
        for _ in 0..<10 { cushion.underran() }
        #expect(cushion.blocks == 3, "a four-block buffer holds at most three blocks ahead of the one being written")
    }

    @Test func aQuietMinuteGivesABlockBackAndAnUnderrunStartsTheMinuteAgain() {
        var cushion = PlaybackCushion(bufferBlocks: 10)
        for _ in 0..<3 { cushion.underran() }
        #expect(cushion.blocks == 4)
        for _ in 0..<(PlaybackCushion.shrinkAfter - 1) { cushion.wrote() }
        #expect(cushion.blocks == 4)
        cushion.underran()
        #expect(cushion.blocks == 5)
        for _ in 0..<(PlaybackCushion.shrinkAfter - 1) { cushion.wrote() }
        #expect(cushion.blocks == 5, "the underrun restarted the quiet minute")
        cushion.wrote()
        #expect(cushion.blocks == 4)
        for _ in 0..<(PlaybackCushion.shrinkAfter * 10) { cushion.wrote() }
        #expect(cushion.blocks == 1, "never below one block")
    }

    @Test func aBufferOfOneBlockStillPrimesOne() {
        var cushion = PlaybackCushion(bufferBlocks: 1)
        cushion.underran()
        #expect(cushion.blocks == 1)
    }
}
