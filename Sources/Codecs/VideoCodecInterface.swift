import MediaCore

/// What the call path asks of a video encoder, whichever codec it runs: the automatic mode
/// steers the rate and size, a PLI/FIR asks for a keyframe, and each picture gives zero or
/// more frames. VP8 (libvpx) and H.264 (OpenH264) take it alike.
public protocol VideoEncoder: AnyObject {
    func setTargetBitrate(_ bitsPerSecond: Int) throws(MediaError)
    /// A new size: the next frame is a keyframe.
    func setResolution(width: Int, height: Int) throws(MediaError)
    func requestKeyframe()
    /// `time`: when the picture is shown on the sender's clock, if not its own timestamp.
    func encode(_ frame: VideoFrame, at time: Duration?, forceKeyframe: Bool) throws(MediaError) -> [EncodedVideoFrame]
}

/// What the call path asks of a video decoder: one complete frame in, a picture out when it
/// gives one.
public protocol VideoDecoder: AnyObject {
    func decode(_ data: [UInt8], timestamp: Duration) throws(MediaError) -> VideoFrame?
}

extension VP8Encoder: VideoEncoder {}
extension H264Encoder: VideoEncoder {}
extension VP8Decoder: VideoDecoder {}
extension H264Decoder: VideoDecoder {}
