/// The H.264 a=fmtp parameters that decide whether two sides can talk (RFC 6184 §8.1):
/// `profile-level-id` (the profile and level a payload type carries), `packetization-mode` (only
/// mode 1, non-interleaved, is spoken here) and `level-asymmetry-allowed` (each side states the
/// level it can receive, RFC 6184 §8.2.2; RFC 7742 §6.2 makes these rules WebRTC's). Other
/// parameters are kept out of the decision, as libwebrtc does.
public struct H264FormatParameters: Sendable, Equatable {
    public var profileLevelID: H264ProfileLevelID
    public var packetizationMode: Int
    public var levelAsymmetryAllowed: Bool

    public init(profileLevelID: H264ProfileLevelID, packetizationMode: Int = 1, levelAsymmetryAllowed: Bool = true) {
        self.profileLevelID = profileLevelID
        self.packetizationMode = packetizationMode
        self.levelAsymmetryAllowed = levelAsymmetryAllowed
    }

    /// Reads an a=fmtp value. Absent parameters take RFC 6184's defaults (profile-level-id
    /// 42000a, baseline level 1; packetization-mode 0); a value that does not parse is nil, and
    /// the payload type is not one to choose.
    public init?(fmtp: String?) {
        var profileLevelID = H264ProfileLevelID(profileIDC: 0x42, profileIOP: 0x00, levelIDC: 0x0a)
        var mode = 0, asymmetry = false
        for pair in (fmtp ?? "").split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
            guard parts.count == 2 else { continue }
            switch parts[0].lowercased() {
            case "profile-level-id":
                guard let parsed = H264ProfileLevelID(hex: parts[1]) else { return nil }
                profileLevelID = parsed
            case "packetization-mode":
                guard let value = Int(parts[1]), (0...2).contains(value) else { return nil }
                mode = value
            case "level-asymmetry-allowed":
                asymmetry = parts[1] == "1"
            default:
                continue
            }
        }
        self.init(profileLevelID: profileLevelID, packetizationMode: mode, levelAsymmetryAllowed: asymmetry)
    }

    /// The a=fmtp value, in the order browsers write it.
    public var fmtp: String {
        "level-asymmetry-allowed=\(levelAsymmetryAllowed ? 1 : 0);packetization-mode=\(packetizationMode);profile-level-id=\(profileLevelID.hex)"
    }

    /// The answer's parameters for a payload type offered with `self`, by a side that receives up
    /// to `localLevel` (RFC 6184 §8.2.2): the same profile and mode; the answerer's own level when
    /// both allow asymmetry, else the lower of the two (both directions use one level then).
    public func answer(localLevel: UInt8) -> H264FormatParameters {
        var answered = self
        answered.profileLevelID.levelIDC = levelAsymmetryAllowed ? localLevel : min(profileLevelID.levelIDC, localLevel)
        return answered
    }
}

/// `profile-level-id` (RFC 6184 §8.1): profile_idc, profile-iop (the constraint_set flags) and
/// level_idc of H.264 §7.4.2.1.1, as six hex digits.
public struct H264ProfileLevelID: Sendable, Equatable {
    public enum Profile: String, Sendable {
        case constrainedBaseline = "constrained baseline", baseline, main, high, constrainedHigh = "constrained high"
    }

    public var profileIDC: UInt8
    public var profileIOP: UInt8
    public var levelIDC: UInt8

    public init(profileIDC: UInt8, profileIOP: UInt8, levelIDC: UInt8) {
        self.profileIDC = profileIDC
        self.profileIOP = profileIOP
        self.levelIDC = levelIDC
    }

    public init?(hex: String) {
        guard hex.count == 6, let value = UInt32(hex, radix: 16) else { return nil }
        self.init(profileIDC: UInt8(value >> 16), profileIOP: UInt8((value >> 8) & 0xff), levelIDC: UInt8(value & 0xff))
    }

    public var hex: String {
        [profileIDC, profileIOP, levelIDC].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    static let constraintSet0: UInt8 = 0x80, constraintSet1: UInt8 = 0x40, constraintSet2: UInt8 = 0x20
    static let constraintSet3: UInt8 = 0x10, constraintSet4: UInt8 = 0x08, constraintSet5: UInt8 = 0x04

    /// The profile, read as H.264 Annex A defines the constraint flags: a baseline or extended
    /// stream that also obeys main's constraints (constraint_set1), or a main stream that also
    /// obeys baseline's (constraint_set0), is constrained baseline, which every WebRTC peer
    /// decodes. Nil for profiles callend neither sends nor is asked about.
    public var profile: Profile? {
        let iop = profileIOP
        switch profileIDC {
        case 0x42: return iop & Self.constraintSet1 != 0 ? .constrainedBaseline : .baseline
        case 0x4d: return iop & Self.constraintSet0 != 0 ? .constrainedBaseline : .main
        case 0x58: return iop & (Self.constraintSet0 | Self.constraintSet1) == Self.constraintSet0 | Self.constraintSet1 ? .constrainedBaseline
                        : iop & Self.constraintSet0 != 0 ? .baseline : nil
        case 0x64: return iop & (Self.constraintSet4 | Self.constraintSet5) == Self.constraintSet4 | Self.constraintSet5 ? .constrainedHigh : .high
        default: return nil
        }
    }

    /// A constrained baseline stream (what OpenH264 makes here) is a valid stream of this
    /// profile: CB obeys the constraints of baseline, main and high alike (H.264 A.2.1.1).
    public var carriesConstrainedBaseline: Bool { profile != nil }
}
