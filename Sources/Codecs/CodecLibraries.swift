internal import COpus
internal import CVPX

/// Versions of the codec libraries this build links.
public enum CodecLibraries {
    public static var opusVersion: String { String(cString: opus_get_version_string()) }
    public static var vpxVersion: String { String(cString: vpx_codec_version_str()) }
}
