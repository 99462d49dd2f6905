import Codecs
import MediaCore
import Devices
import RTPTransport
import Signaling

/// The C libraries this build links, with their versions, for `callend --version`.
public enum LinkedLibraries {
    public static var all: [(name: String, version: String)] {
        [
            ("libopus", CodecLibraries.opusVersion),
            ("libvpx", CodecLibraries.vpxVersion),
            ("libsrtp2", SRTPLibrary.version),
            ("OpenSSL", TLSLibrary.version),
            ("alsa-lib", DeviceLibraries.alsaVersion),
        ]
    }
}
