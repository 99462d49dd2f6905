import Foundation
import MediaCore
import RTPTransport
import Testing
import TestSupport

/// RTP packets in RFC 4571 framing (each behind its 16-bit length), which GStreamer's
/// rtpstreampay writes and rtpstreamdepay reads: a capture that is a plain file.
private func unframe(_ bytes: [UInt8]) throws -> [RTPPacket] {
    var packets: [RTPPacket] = []
    var offset = 0
    while offset + 2 <= bytes.count {
        let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
        let end = offset + 2 + length
        guard end <= bytes.count else { throw ParseError("RFC 4571 capture", "a packet runs past the end of the file") }
        packets.append(try RTPPacket(parsing: Array(bytes[(offset + 2)..<end])))
        offset = end
    }
    return packets
}

private func frame(_ packets: [RTPPacket]) -> [UInt8] {
    var bytes: [UInt8] = []
    for packet in packets {
        let wire = packet.serialized()
        bytes += [UInt8(wire.count >> 8), UInt8(wire.count & 0xff)] + wire
    }
    return bytes
}

/// Runs a GStreamer pipeline that ends by itself (a bounded source), for at most a minute.
private func gstreamer(_ pipeline: String) throws {
    let process = try launch("gst-launch-1.0", ["-q"] + pipeline.split(separator: " ").map(String.init))
    finish(process, within: 60)
    #expect(process.terminationStatus == 0, "gst-launch-1.0 \(pipeline)")
}

/// Frames an outside decoder (FFmpeg's) decodes from an Annex B file.
private func decodedFrames(_ path: String) throws -> Int {
    let (status, output) = try runTool("/usr/bin/ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v",
                                                           "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
    #expect(status == 0, "ffprobe: \(output)")
    return Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

private func bytes(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

/// RFC 6184 against GStreamer's H.264 payloader and depayloader, with OpenH264 encoding and
/// FFmpeg decoding: both directions byte for byte, STAP-A and FU-A included (an MTU of 500 cuts
/// every picture into fragments).
@Suite struct H264InteropTests {
    static let frames = 90

    /// OpenH264 encodes 3 s (an IDR every second, with its parameter sets); each access unit is
    /// kept in a file of its own, and the same stream leaves through rtph264pay into a capture.
    static func encode(in work: WorkDirectory) throws -> [[UInt8]] {
        try gstreamer("videotestsrc num-buffers=\(frames) pattern=smpte ! video/x-raw,width=320,height=240,framerate=30/1 "
            + "! openh264enc gop-size=30 bitrate=300000 ! video/x-h264,stream-format=byte-stream,alignment=au ! tee name=t "
            + "t. ! queue ! multifilesink location=\(work.file("au-%05d.h264")) "
            + "t. ! queue ! rtph264pay mtu=500 pt=96 config-interval=0 aggregate-mode=zero-latency ! rtpstreampay "
            + "! filesink location=\(work.file("gstreamer.rtp"))")
        return try (0..<frames).map { try bytes(work.file(String(format: "au-%05d.h264", $0))) }
    }

    @Test func gstreamersPacketsRebuildTheEncodersStream() throws {
        let work = try WorkDirectory()
        let accessUnits = try Self.encode(in: work)
        let packets = try unframe(try bytes(work.file("gstreamer.rtp")))
        #expect(packets.contains { H264NALUnit.type(of: $0.payload[0]) == H264NALUnit.fuA }, "the capture has FU-A")
        #expect(packets.contains { H264NALUnit.type(of: $0.payload[0]) == H264NALUnit.stapA }, "the capture has STAP-A")

        // Pictures end at the marker (RFC 6184 §5.1).
        var depacketizer = H264Depacketizer()
        var rebuilt: [H264Depacketizer.AccessUnit] = []
        var picture: [(sequence: UInt16, payload: [UInt8])] = []
        for packet in packets {
            picture.append((packet.sequenceNumber, packet.payload))
            if packet.marker {
                rebuilt.append(depacketizer.accessUnit(from: picture))
                picture = []
            }
        }
        #expect(picture.isEmpty)
        #expect(rebuilt.count == Self.frames)
        #expect(rebuilt.allSatisfy { $0.decodable })
        #expect(rebuilt.filter(\.isKeyframe).count == 3)
        for (index, accessUnit) in zip(accessUnits.indices, rebuilt) {
            let sent = H264NALUnit.units(inAnnexB: accessUnits[index]).map(Array.init)
            #expect(accessUnit.units == sent, "access unit \(index) byte for byte")
        }
        // The jitter buffer, which has no marker to go by at a frame's start, finds the same
        // pictures.
        var buffer = VideoJitterBuffer(format: .h264)
        var frames: [VideoJitterBuffer.Frame] = []
        for (index, packet) in packets.enumerated() {
            _ = buffer.insert(packet, arrival: .milliseconds(index))
            frames += buffer.popFrames(now: .milliseconds(index))
        }
        #expect(frames.map(\.data) == rebuilt.map(\.annexB) && frames.filter(\.isKeyframe).count == 3)
        let file = work.file("rebuilt.h264")
        try Data(rebuilt.flatMap(\.annexB)).write(to: URL(fileURLWithPath: file))
        #expect(try decodedFrames(file) == Self.frames)
    }

    /// Our packets into rtph264depay, with the encoder's parameter sets removed from every access
    /// unit but the first: the packetizer puts them back before each IDR, so a receiver that
    /// starts at the second keyframe decodes from there.
    @Test func gstreamerDepacketizesOurPackets() throws {
        let work = try WorkDirectory()
        let accessUnits = try Self.encode(in: work)
        var packetizer = H264Packetizer(maxPayloadSize: 500)
        var packets: [RTPPacket] = []
        var sequence: UInt16 = 65_500  // wraps within the stream
        var secondKeyframe: Int?
        var sentUnits: [[UInt8]] = []
        for (index, accessUnit) in accessUnits.enumerated() {
            var units = H264NALUnit.units(inAnnexB: accessUnit)
            if index > 0 {
                units.removeAll { [H264NALUnit.sequenceParameterSet, H264NALUnit.pictureParameterSet].contains(H264NALUnit.type(of: $0.first!)) }
            }
            if index > 0, units.contains(where: { H264NALUnit.type(of: $0.first!) == H264NALUnit.idrSlice }), secondKeyframe == nil {
                secondKeyframe = packets.count
            }
            let payloads = packetizer.packetize(units: units)
            var depacketizer = H264Depacketizer()
            sentUnits += depacketizer.accessUnit(from: payloads.enumerated().map { (UInt16($0.offset), $0.element) }).units
            for (n, payload) in payloads.enumerated() {
                packets.append(RTPPacket(payloadType: 96, sequenceNumber: sequence, timestamp: UInt32(index * 3000), ssrc: 0x1234,
                                         marker: n == payloads.count - 1, payload: payload))
                sequence &+= 1
            }
        }
        #expect(sentUnits.count(where: { H264NALUnit.type(of: $0[0]) == H264NALUnit.sequenceParameterSet }) == 3, "SPS before each IDR")

        let start = try #require(secondKeyframe)
        for (name, sent) in [("all", packets[...]), ("late", packets[start...])] {
            try Data(frame(Array(sent))).write(to: URL(fileURLWithPath: work.file("\(name).rtp")))
            try gstreamer("filesrc location=\(work.file("\(name).rtp")) "
                + "! application/x-rtp-stream,media=video,clock-rate=90000,encoding-name=H264,payload=96 ! rtpstreamdepay "
                + "! rtph264depay ! video/x-h264,stream-format=byte-stream,alignment=au "
                + "! filesink location=\(work.file("\(name).h264"))")
        }
        let received = H264NALUnit.units(inAnnexB: try bytes(work.file("all.h264"))).map(Array.init)
        #expect(received == sentUnits, "rtph264depay's stream is what was packetized, byte for byte")
        #expect(try decodedFrames(work.file("all.h264")) == Self.frames)
        #expect(try decodedFrames(work.file("late.h264")) == Self.frames - 30, "a receiver that joins at the second IDR")
    }
}
