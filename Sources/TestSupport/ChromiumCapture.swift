/// An offer captured from Debian's Chromium 156 (headless, fake camera and microphone: one audio
/// and one video track from getUserMedia and a data channel), `createOffer()` as it came:
/// Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36.
public let chromium156Offer = """
v=0\r
o=- 6319127109758225661 2 IN IP4 127.0.0.1\r
s=-\r
t=0 0\r
a=group:BUNDLE 0 1 2\r
a=extmap-allow-mixed\r
a=msid-semantic: WMS 16bb0492-579f-49c3-90bf-49af18acca10\r
m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126\r
c=IN IP4 0.0.0.0\r
a=rtcp:9 IN IP4 0.0.0.0\r
a=ice-ufrag:Wive\r
a=ice-pwd:KSGiHp6HVlPM7zR3+c7/XiG8\r
a=ice-options:trickle\r
a=fingerprint:sha-256 63:D6:A7:E8:0E:73:A9:F4:BD:60:E3:38:1F:DB:42:30:58:5B:52:AC:90:A6:85:90:8A:A9:5C:FE:25:C3:00:F4\r
a=setup:actpass\r
a=mid:0\r
a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r
a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r
a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r
a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid\r
a=sendrecv\r
a=msid:16bb0492-579f-49c3-90bf-49af18acca10 8e07e760-8244-49b5-8bd8-d45014b273f5\r
a=rtcp-mux\r
a=rtcp-rsize\r
a=rtcp-xr:rcvr-rtt=all\r
a=rtpmap:111 opus/48000/2\r
a=rtcp-fb:111 transport-cc\r
a=fmtp:111 minptime=10;useinbandfec=1\r
a=rtpmap:63 red/48000/2\r
a=fmtp:63 111/111\r
a=rtpmap:9 G722/8000\r
a=rtpmap:0 PCMU/8000\r
a=rtpmap:8 PCMA/8000\r
a=rtpmap:13 CN/8000\r
a=rtpmap:110 telephone-event/48000\r
a=rtpmap:126 telephone-event/8000\r
a=ssrc:3789044179 cname:vpOxoVoAMMvCoa4k\r
a=ssrc:3789044179 msid:16bb0492-579f-49c3-90bf-49af18acca10 8e07e760-8244-49b5-8bd8-d45014b273f5\r
m=video 9 UDP/TLS/RTP/SAVPF 96 97 102 103 104 107 108 109 114 115 116 117 39 40 45 46 98 99 100 101 118 119 120\r
c=IN IP4 0.0.0.0\r
a=rtcp:9 IN IP4 0.0.0.0\r
a=ice-ufrag:Wive\r
a=ice-pwd:KSGiHp6HVlPM7zR3+c7/XiG8\r
a=ice-options:trickle\r
a=fingerprint:sha-256 63:D6:A7:E8:0E:73:A9:F4:BD:60:E3:38:1F:DB:42:30:58:5B:52:AC:90:A6:85:90:8A:A9:5C:FE:25:C3:00:F4\r
a=setup:actpass\r
a=mid:1\r
a=extmap:14 urn:ietf:params:rtp-hdrext:toffset\r
a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r
a=extmap:13 urn:3gpp:video-orientation\r
a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r
a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay\r
a=extmap:6 http://www.webrtc.org/experiments/rtp-hdrext/video-content-type\r
a=extmap:7 http://www.webrtc.org/experiments/rtp-hdrext/video-timing\r
a=extmap:8 http://www.webrtc.org/experiments/rtp-hdrext/color-space\r
a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid\r
a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id\r
a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id\r
a=sendrecv\r
a=msid:16bb0492-579f-49c3-90bf-49af18acca10 68627a88-b0c5-4750-82f2-b082e38dd729\r
a=rtcp-mux\r
a=rtcp-rsize\r
a=rtcp-xr:rcvr-rtt=all\r
a=rtpmap:96 VP8/90000\r
a=rtcp-fb:96 goog-remb\r
a=rtcp-fb:96 transport-cc\r
a=rtcp-fb:96 ccm fir\r
a=rtcp-fb:96 nack\r
a=rtcp-fb:96 nack pli\r
a=rtpmap:97 rtx/90000\r
a=fmtp:97 apt=96\r
a=rtpmap:102 H264/90000\r
a=rtcp-fb:102 goog-remb\r
a=rtcp-fb:102 transport-cc\r
a=rtcp-fb:102 ccm fir\r
a=rtcp-fb:102 nack\r
a=rtcp-fb:102 nack pli\r
a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f\r
a=rtpmap:103 rtx/90000\r
a=fmtp:103 apt=102\r
a=rtpmap:104 H264/90000\r
a=rtcp-fb:104 goog-remb\r
a=rtcp-fb:104 transport-cc\r
a=rtcp-fb:104 ccm fir\r
a=rtcp-fb:104 nack\r
a=rtcp-fb:104 nack pli\r
a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f\r
a=rtpmap:107 rtx/90000\r
a=fmtp:107 apt=104\r
a=rtpmap:108 H264/90000\r
a=rtcp-fb:108 goog-remb\r
a=rtcp-fb:108 transport-cc\r
a=rtcp-fb:108 ccm fir\r
a=rtcp-fb:108 nack\r
a=rtcp-fb:108 nack pli\r
a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f\r
a=rtpmap:109 rtx/90000\r
a=fmtp:109 apt=108\r
a=rtpmap:114 H264/90000\r
a=rtcp-fb:114 goog-remb\r
a=rtcp-fb:114 transport-cc\r
a=rtcp-fb:114 ccm fir\r
a=rtcp-fb:114 nack\r
a=rtcp-fb:114 nack pli\r
a=fmtp:114 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f\r
a=rtpmap:115 rtx/90000\r
a=fmtp:115 apt=114\r
a=rtpmap:116 H264/90000\r
a=rtcp-fb:116 goog-remb\r
a=rtcp-fb:116 transport-cc\r
a=rtcp-fb:116 ccm fir\r
a=rtcp-fb:116 nack\r
a=rtcp-fb:116 nack pli\r
a=fmtp:116 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f\r
a=rtpmap:117 rtx/90000\r
a=fmtp:117 apt=116\r
a=rtpmap:39 H264/90000\r
a=rtcp-fb:39 goog-remb\r
a=rtcp-fb:39 transport-cc\r
a=rtcp-fb:39 ccm fir\r
a=rtcp-fb:39 nack\r
a=rtcp-fb:39 nack pli\r
a=fmtp:39 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=4d001f\r
a=rtpmap:40 rtx/90000\r
a=fmtp:40 apt=39\r
a=rtpmap:45 AV1/90000\r
a=rtcp-fb:45 goog-remb\r
a=rtcp-fb:45 transport-cc\r
a=rtcp-fb:45 ccm fir\r
a=rtcp-fb:45 nack\r
a=rtcp-fb:45 nack pli\r
a=fmtp:45 level-idx=5;profile=0;tier=0\r
a=rtpmap:46 rtx/90000\r
a=fmtp:46 apt=45\r
a=rtpmap:98 VP9/90000\r
a=rtcp-fb:98 goog-remb\r
a=rtcp-fb:98 transport-cc\r
a=rtcp-fb:98 ccm fir\r
a=rtcp-fb:98 nack\r
a=rtcp-fb:98 nack pli\r
a=fmtp:98 profile-id=0\r
a=rtpmap:99 rtx/90000\r
a=fmtp:99 apt=98\r
a=rtpmap:100 VP9/90000\r
a=rtcp-fb:100 goog-remb\r
a=rtcp-fb:100 transport-cc\r
a=rtcp-fb:100 ccm fir\r
a=rtcp-fb:100 nack\r
a=rtcp-fb:100 nack pli\r
a=fmtp:100 profile-id=2\r
a=rtpmap:101 rtx/90000\r
a=fmtp:101 apt=100\r
a=rtpmap:118 red/90000\r
a=rtpmap:119 rtx/90000\r
a=fmtp:119 apt=118\r
a=rtpmap:120 ulpfec/90000\r
a=ssrc-group:FID 2855068886 2188244324\r
a=ssrc:2855068886 cname:vpOxoVoAMMvCoa4k\r
a=ssrc:2855068886 msid:16bb0492-579f-49c3-90bf-49af18acca10 68627a88-b0c5-4750-82f2-b082e38dd729\r
a=ssrc:2188244324 cname:vpOxoVoAMMvCoa4k\r
a=ssrc:2188244324 msid:16bb0492-579f-49c3-90bf-49af18acca10 68627a88-b0c5-4750-82f2-b082e38dd729\r
m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r
c=IN IP4 0.0.0.0\r
a=ice-ufrag:Wive\r
a=ice-pwd:KSGiHp6HVlPM7zR3+c7/XiG8\r
a=ice-options:trickle\r
a=fingerprint:sha-256 63:D6:A7:E8:0E:73:A9:F4:BD:60:E3:38:1F:DB:42:30:58:5B:52:AC:90:A6:85:90:8A:A9:5C:FE:25:C3:00:F4\r
a=setup:actpass\r
a=mid:2\r
a=sctp-port:5000\r
a=max-message-size:262144\r
"""
