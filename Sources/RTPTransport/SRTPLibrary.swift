internal import CSRTP

/// The libsrtp2 this build links; the SRTP session code of the RTP transport issue builds on it.
public enum SRTPLibrary {
    public static var version: String { String(cString: srtp_get_version_string()) }
}
