import Codecs
import Devices
import MediaCore

/// The kernel's memory-to-memory encoder (a board's H.264 block) behind the interface the call
/// path drives, as libvpx and OpenH264 are. It has no quantizer to report (0).
extension MemoryToMemoryEncoder: VideoEncoder {
    public func setTargetBitrate(_ bitsPerSecond: Int) throws(MediaError) {
        do { try setBitrate(bitsPerSecond) } catch { throw MediaError(.io, error.operation, error.detail) }
    }

    public func setResolution(width: Int, height: Int) throws(MediaError) {
        do { try setSize(width: width, height: height) } catch { throw MediaError(.io, error.operation, error.detail) }
    }

    public func encode(_ frame: VideoFrame, at time: Duration?, forceKeyframe: Bool) throws(MediaError) -> [EncodedVideoFrame] {
        var picture = frame
        if let time { picture.timestamp = time }
        do {
            return try encodePicture(picture, forceKeyframe: forceKeyframe).map {
                EncodedVideoFrame(data: $0.data, isKeyframe: $0.isKeyframe, quantizer: 0, width: $0.width, height: $0.height, timestamp: $0.timestamp)
            }
        } catch {
            throw MediaError(.io, error.operation, error.detail)
        }
    }
}
