// swift-tools-version:6.0
import PackageDescription

// C libraries come from Debian packages (scripts/install-deps.sh) through system-library
// targets; each has a module.modulemap and a shim.h of prefixed static inline helpers.
let package = Package(
    name: "callend",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "callend", targets: ["callend"]),
        .executable(name: "callend-serve", targets: ["callend-serve"]),
        .executable(name: "callend-bench", targets: ["callend-bench"]),
        .library(name: "CallEndpoint", targets: ["CallEndpoint"]),
    ],
    targets: [
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "CVPX", pkgConfig: "vpx", providers: [.apt(["libvpx-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSRTP", pkgConfig: "libsrtp2", providers: [.apt(["libsrtp2-dev"])]),
        .systemLibrary(name: "CALSA", pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "CV4L2", pkgConfig: "libv4l2", providers: [.apt(["libv4l-dev"])]),
        .systemLibrary(name: "CSpeexDSP", pkgConfig: "speexdsp", providers: [.apt(["libspeexdsp-dev"])]),
        // GLib's include paths, for the libnice glue below only.
        .systemLibrary(name: "CGObject", pkgConfig: "gobject-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // libyuv ships no pkg-config file in Debian; the modulemap links it by name.
        .systemLibrary(name: "CYUV", providers: [.apt(["libyuv-dev"])]),
        // The Redis project's C client, for the signaling service's room directory across nodes.
        .systemLibrary(name: "CHiredis", providers: [.apt(["libhiredis-dev"])]),
        // Linux system calls the Glibc module does not export (epoll, eventfd, accept4).
        .systemLibrary(name: "CLinux"),

        // What every module needs from the operating system: named threads.
        .target(name: "Platform", dependencies: ["CLinux"]),
        .target(name: "ICEServers"),
        // Frames, pixel conversion, containers, MediaTime and the clocks: what codecs, devices
        // and the media path share, with no codec in it.
        .target(name: "MediaCore", dependencies: ["CYUV", "Platform"]),
        .target(name: "Codecs", dependencies: ["MediaCore", "COpus", "CVPX", "CSpeexDSP", "CVoice", "CH264"]),
        .target(name: "RTPTransport", dependencies: ["MediaCore", "CSRTP", "CNice", "COpenSSL", "Platform", "CDataChannel", "ICEServers"]),
        // Signaling in three: what both sides speak (messages, tokens, sockets and TLS, HTTP's
        // parts), the service (server, cluster, web side) and what an endpoint links (the room
        // client, WHIP/WHEP and Janus HTTP clients); neither side carries the other's code.
        .target(name: "Signaling", dependencies: ["COpenSSL", "CLinux", "Platform"]),
        .target(name: "SignalingService", dependencies: ["Signaling", "COpenSSL", "CHiredis", "CLinux", "Platform"],
                resources: [.embedInCode("Web/Page/index.html"), .embedInCode("Web/Page/app.js")]),
        .target(name: "EndpointSignaling", dependencies: ["Signaling", "COpenSSL", "CLinux", "Platform"]),
        .target(name: "Devices", dependencies: ["MediaCore", "CALSA", "CV4L2", "CLinux", "Platform"]),
        .target(name: "CallEndpoint", dependencies: ["MediaCore", "Codecs", "RTPTransport", "Signaling", "EndpointSignaling", "Devices", "Platform", "CWebMWriter", "ICEServers"]),
        // The benches: they shell out (ip, tc, ffmpeg, Python) and open TUN devices, so they
        // live beside the SDK, not in it; callend-bench links them (`callend bench` runs it).
        .target(name: "Benchmarks", dependencies: ["CallEndpoint", "MediaCore", "Codecs", "Devices", "RTPTransport", "Signaling", "EndpointSignaling", "Platform"]),
        .executableTarget(name: "callend", dependencies: ["CallEndpoint", "MediaCore", "Codecs", "Devices", "RTPTransport", "Platform", "Signaling", "SignalingService", "ServeCommand", "CLIKit", "ICEServers"]),
        .executableTarget(name: "callend-bench", dependencies: ["Benchmarks", "CallEndpoint", "MediaCore", "Codecs", "Platform", "CLIKit"]),
        // The service alone: `callend serve` runs it when it sits beside callend (no media library mapped).
        .target(name: "CLIKit", dependencies: ["Signaling", "Platform"]),
        .target(name: "ServeCommand", dependencies: ["CLIKit", "Signaling", "SignalingService", "Platform", "ICEServers"]),
        .executableTarget(name: "callend-serve", dependencies: ["ServeCommand", "CLIKit"]),
        // Every parser the network or a user feeds, one entry point each, and the executable
        // libFuzzer drives them through (scripts/fuzz.sh); a plain build replays inputs.
        .target(name: "FuzzTargets", dependencies: ["MediaCore", "Codecs", "RTPTransport", "Signaling", "EndpointSignaling", "SignalingService", "Platform"]),
        .executableTarget(name: "callend-fuzz", dependencies: ["FuzzTargets"]),
        // libnice (ICE, STUN, TURN, consent freshness) and the GLib main loop it runs on, behind a
        // small C API of plain types: GLib's headers, imported into Swift, redefine the socket
        // constants Glibc already exports and hide them from every file of the importing module.
        .target(name: "CNice", dependencies: ["CGObject"],
                linkerSettings: [.linkedLibrary("nice"), .linkedLibrary("gio-2.0"), .linkedLibrary("gobject-2.0"), .linkedLibrary("glib-2.0")]),
        // Echo cancellation, noise suppression and gain control (webrtc-audio-processing, a C++
        // library) behind a C API, so no Swift module imports C++.
        // (Its pkg-config file's flags are defines, which SwiftPM refuses from pkg-config with a
        // warning, so they are given here: Debian's libwebrtc-audio-processing-dev. Its headers
        // come through a symlink in the target, since SwiftPM takes only relative header paths
        // without unsafe flags, which a package depending on callend by URL may not use.)
        .target(name: "CVoice",
                cxxSettings: [.define("WEBRTC_POSIX"), .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD"),
                              .headerSearchPath("webrtc_audio_processing")],
                linkerSettings: [.linkedLibrary("webrtc_audio_processing"), .linkedLibrary("stdc++")]),
        // WebM recording through libavformat's Matroska muxer behind a small C API; libavformat
        // is loaded with dlopen when a recording starts (Debian's links some sixty libraries an
        // endpoint that records nothing should not map), its headers from libavformat-dev.
        .target(name: "CWebMWriter"),
        // H.264 in software behind a small C API: OpenH264 to encode, libavcodec's decoder to
        // decode, both loaded with dlopen on first use (a VP8 call maps neither, and a box
        // without them still calls in VP8); headers from libopenh264-dev and libavcodec-dev.
        .target(name: "CH264"),
        // Data channels' SCTP (RFC 8831) through usrsctp (Debian's libusrsctp-dev) behind a small
        // C API: AF_CONN associations whose packets ride on the call's DTLS.
        .target(name: "CDataChannel", linkerSettings: [.linkedLibrary("usrsctp")]),
        // Helpers shared by the test targets only, and the pool their tasks run on.
        .target(name: "CTestPool"),
        .target(name: "TestSupport", dependencies: ["CTestPool", "CV4L2"], path: "Sources/TestSupport"),

        .testTarget(name: "CodecsTests", dependencies: ["TestSupport", "MediaCore", "Codecs"]),
        .testTarget(name: "RTPTransportTests", dependencies: ["TestSupport", "MediaCore", "RTPTransport", "ICEServers"]),
        .testTarget(name: "SignalingTests", dependencies: ["TestSupport", "Signaling", "EndpointSignaling", "SignalingService"]),
        .testTarget(name: "FuzzTargetsTests", dependencies: ["FuzzTargets"], resources: [.copy("Corpus")]),
        .testTarget(name: "DevicesTests", dependencies: ["TestSupport", "MediaCore", "Codecs", "Devices", "Platform"]),
        .testTarget(name: "CallEndpointTests", dependencies: ["TestSupport", "CallEndpoint", "MediaCore", "Codecs", "RTPTransport", "Signaling", "EndpointSignaling", "SignalingService", "Devices"]),
        .testTarget(name: "BenchmarksTests", dependencies: ["TestSupport", "Benchmarks", "CallEndpoint", "MediaCore", "Codecs", "RTPTransport"]),
        .testTarget(name: "callendTests", dependencies: ["TestSupport", "callend", "Benchmarks", "MediaCore", "Codecs", "RTPTransport", "CallEndpoint"]),
    ],
    swiftLanguageModes: [.v6]
)
