internal import CALSA

/// Versions of the device libraries this build links.
public enum DeviceLibraries {
    public static var alsaVersion: String { String(cString: snd_asoundlib_version()) }
}
