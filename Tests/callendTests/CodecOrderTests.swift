import CallEndpoint
import Testing
import CLIKit
@testable import callend

/// `--video-codec auto` offers H.264 first only for a camera asked for its own H.264, in every
/// command that sends: the sources have to be read before the codecs.
struct CodecOrderTests {
    let h264Camera = ["--camera", "/dev/video0", "--pixel-format", "H264", "--video-codec", "auto"]

    @Test(.enabled(if: VideoCodec.h264.unavailableReason == nil, "needs OpenH264 and libavcodec (scripts/install-deps.sh)"))
    func autoPutsACameraOwnH264First() throws {
        var args = Arguments(h264Camera)
        let janus = try parseJanusMedia(.publisher, &args)
        #expect(janus.codecs == [.h264, .vp8])
        args = Arguments(h264Camera)
        let video = try parseCallSources(&args).0
        #expect(try parseVideoCodec(&args, video: video) == [.h264, .vp8])
        for raw in [["--camera", "/dev/video0", "--pixel-format", "YUYV", "--video-codec", "auto"], ["--video-codec", "auto"]] {
            args = Arguments(raw)
            #expect(try parseJanusMedia(.publisher, &args).codecs == [.vp8, .h264], "\(raw)")
        }
        args = Arguments(["--video-codec", "auto"])
        let subscriber = try parseJanusMedia(.subscriber, &args)
        #expect(subscriber.sources == nil && subscriber.codecs == [.vp8, .h264])
    }
}
