import MediaCore
import Dispatch
import FoundationEssentials
import Glibc
import Platform
import Signaling
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP endpoint that answers `GET /metrics` with whatever `render` returns (the
/// Prometheus text format), one request per connection, on its own thread: `join --metrics`.
/// Several scrapers are served at once (up to `maxClients`), each within `deadline` from accept
/// to the last byte: a client that sends its request a byte a minute holds one place for that
/// long and no more.
public final class MetricsEndpoint: Sendable {
    public let port: Int
    private let fd: Int32
    private let render: @Sendable () -> String
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let wake: (read: Int32, write: Int32)
    public static let maxClients = 16
    /// From accept to the last byte of the response.
    public let deadline: Duration

    public init(host: String, port: Int, deadline: Duration = .seconds(5), render: @escaping @Sendable () -> String) throws(SystemError) {
        self.deadline = deadline
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw SystemError("metrics: resolve \(host)", errno: EADDRNOTAVAIL)
        }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw SystemError("metrics: socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0, listen(fd, 16) == 0 else {
            let error = SystemError("metrics: listen on \(host):\(port)")
            close(fd)
            throw error
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            let error = SystemError("metrics: pipe")
            close(fd)
            throw error
        }
        for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        let bound = withUnsafeBytes(of: address) { raw -> UInt16 in
            // sin_port and sin6_port sit at the same offset, in network order.
            UInt16(raw[2]) << 8 | UInt16(raw[3])
        }
        self.fd = fd
        self.port = Int(bound)
        self.render = render
        self.wake = (pipeFDs[0], pipeFDs[1])
    }

    /// One scraper's connection: what it sent so far, what is left to send, and its deadline.
    private struct Client {
        let fd: Int32
        let deadline: MediaTime
        var reader = HTTPRequestHead.Reader()
        var response: [UInt8]?
    }

    public func start() {
        startThread(named: "metrics") { [self] in
            defer { finished.signal() }
            var clients: [Client] = []
            defer { for client in clients { close(client.fd) } }
            while !stopping.load(ordering: .relaxed) {
                let now = MediaTime.now
                clients.removeAll { client in
                    guard now >= client.deadline else { return false }
                    close(client.fd)
                    return true
                }
                var fds = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: fd, events: clients.count < Self.maxClients ? Int16(POLLIN) : 0, revents: 0)]
                fds += clients.map { pollfd(fd: $0.fd, events: Int16($0.response == nil ? POLLIN : POLLOUT), revents: 0) }
                let soonest = clients.map(\.deadline).min().map { max(.zero, $0 - now) } ?? .seconds(3600)
                _ = poll(&fds, nfds_t(fds.count), Int32(min(soonest.inMilliseconds + 1, 3_600_000)))
                if fds[1].revents != 0 {
                    while clients.count < Self.maxClients {
                        let client = accept(fd, nil, nil)
                        guard client >= 0 else { break }
                        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                        clients.append(Client(fd: client, deadline: MediaTime.now + deadline))
                    }
                }
                for (index, polled) in fds.dropFirst(2).enumerated().reversed() where polled.revents != 0 {
                    if !serve(&clients[index]) {
                        close(clients[index].fd)
                        clients.remove(at: index)
                    }
                }
            }
        }
    }

    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        var one: UInt8 = 1
        _ = write(wake.write, &one, 1)
        finished.wait()
        close(fd)
        close(wake.read)
        close(wake.write)
    }

    /// Reads the request or writes the response, whichever is due; false when the connection is done.
    private func serve(_ client: inout Client) -> Bool {
        if client.response == nil {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { read(client.fd, $0.baseAddress, $0.count) }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return true }
            guard n > 0 else { return false }
            do {
                guard let (head, _) = try client.reader.append(buffer[0..<n]) else { return true }
                if head.method != "GET" {
                    client.response = HTTPResponse.text(status: 405, "only GET", fields: [("Allow", "GET")])
                } else if head.path != "/metrics" {
                    client.response = HTTPResponse.text(status: 404, "not found: the metrics are at /metrics")
                } else {
                    client.response = HTTPResponse.make(status: 200, body: Array(render().utf8), contentType: "text/plain; version=0.0.4; charset=utf-8")
                }
            } catch {
                client.response = HTTPResponse.text(status: error.status, error.description)
            }
        }
        guard let response = client.response else { return true }
        let n = response.withUnsafeBytes { send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return true }
        guard n > 0 else { return false }
        client.response = Array(response.dropFirst(n))
        return !(client.response?.isEmpty ?? true)
    }
}

extension CallStatus {
    /// This second of the call as Prometheus metrics (`join --metrics`).
    public var prometheus: String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, Double?)]) {
            let present = samples.compactMap { labels, value in value.map { (labels, $0) } }
            guard !present.isEmpty else { return }
            out += "# HELP callend_call_\(name) \(help)\n# TYPE callend_call_\(name) \(type)\n"
            for (labels, value) in present { out += "callend_call_\(name)\(labels) \(value)\n" }
        }
        func label(_ text: String) -> String {
            var out = String.UnicodeScalarView()
            for c in text.unicodeScalars {
                switch c {
                case "\\": out += "\\\\".unicodeScalars
                case "\"": out += "\\\"".unicodeScalars
                case "\n": out += "\\n".unicodeScalars
                default: out.append(c)
                }
            }
            return String(out)
        }
        func size(_ text: String) -> (Double?, Double?) {
            let parts = text.split(separator: "x").compactMap { Double($0) }
            return parts.count == 2 ? (parts[0], parts[1]) : (nil, nil)
        }
        let (sentWidth, sentHeight) = size(sentResolution), (width, height) = size(resolution)
        metric("sent_bitrate_kbps", "gauge", "Bitrate sent in the last second, by kind.", [(#"{kind="video"}"#, sentVideoKbps), (#"{kind="audio"}"#, sentAudioKbps)])
        metric("received_fps", "gauge", "Pictures decoded in the last second.", [("", receivedFps)])
        metric("frames_decoded_total", "counter", "Pictures decoded since the start.", [("", Double(framesDecoded))])
        metric("resolution_pixels", "gauge", "Size of the video, by direction and dimension.",
               [(#"{direction="sent",dimension="width"}"#, sentWidth), (#"{direction="sent",dimension="height"}"#, sentHeight),
                (#"{direction="received",dimension="width"}"#, width), (#"{direction="received",dimension="height"}"#, height)])
        metric("rtt_ms", "gauge", "Round trip, from the peer's receiver reports.", [("", rttMs)])
        metric("loss_percent", "gauge", "Loss of our video the peer reported.", [("", lossPercent)])
        metric("estimate_kbps", "gauge", "The bandwidth estimate (automatic mode).", [("", estimateKbps.map(Double.init))])
        metric("video_target_kbps", "gauge", "The video encoder's target (automatic mode).", [("", videoTargetKbps.map(Double.init))])
        metric("mode_info", "gauge", "The video mode sent (automatic mode).", [(mode.map { #"{mode=""# + label($0) + #""}"# } ?? "", mode == nil ? nil : 1)])
        if let candidatePair {
            let sides = candidatePair.components(separatedBy: " -> ").map { $0.split(separator: " ").first.map(String.init) ?? "?" }
            metric("candidate_pair_info", "gauge", "The ICE candidate pair media flows over, by candidate type.",
                   [(#"{local=""# + label(sides.first ?? "?") + #"",remote=""# + label(sides.last ?? "?") + #""}"#, 1)])
        }
        metric("outages_total", "counter", "Silences of the peer longer than 4 s since the start.", [("", Double(outages))])
        metric("ice_restarts_total", "counter", "ICE restarts since the start.", [("", Double(iceRestarts))])
        metric("freezes_total", "counter", "Pictures 300 ms or more after the one before, since the start.", [("", Double(freezes))])
        metric("decode_errors_total", "counter", "Pictures the decoder refused since the start.", [("", Double(decodeErrors))])
        metric("send_errors_total", "counter", "Packets not sent (no path, a network error) since the start.", [("", Double(sendErrors))])
        metric("av_offset_ms", "gauge", "How much later the peer's picture is shown than its sound.", [("", avOffsetMs)])
        metric("quality", "gauge", "Network quality 0-5 by direction (NetworkQuality).",
               [(#"{direction="sent"}"#, qualitySent), (#"{direction="received"}"#, qualityReceived)])
        return out
    }
}

extension CallRecording.Health {
    /// The recording's metrics (`join --record-dir` with `--metrics`): for an alert on a disk
    /// that fills, or a direction no longer written.
    public func prometheus(quotaBytes: Int64?) -> String {
        var out = ""
        func metric(_ name: String, _ help: String, _ value: Int64?) {
            guard let value else { return }
            out += "# HELP callend_call_recording_\(name) \(help)\n# TYPE callend_call_recording_\(name) gauge\ncallend_call_recording_\(name) \(value)\n"
        }
        metric("bytes", "What the recording directory's segments hold.", heldBytes)
        metric("quota_bytes", "The most they may hold (--record-quota).", quotaBytes)
        metric("free_bytes", "Room left on the directory's filesystem for this user.", freeBytes)
        metric("failing", "1 while a direction is not being written (no room in the quota or on the disk, a failed write) until its next segment starts.",
               failing ? 1 : 0)
        return out
    }
}
