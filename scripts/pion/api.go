// What the pion programs of the test stages share (built with each by build_go in
// scripts/stage.sh): pion/webrtc v3 (Debian's golang-github-pion-webrtc.v3-dev) set up to take
// H.264 alone (packetization mode 1, constrained baseline) and Opus, with pion's default
// interceptors (NACK, reports, transport-cc), on IPv4 UDP with loopback candidates.
package main

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/webrtc/v3"
	"github.com/pion/webrtc/v3/pkg/media/h264writer"
)

func h264OnlyAPI() *webrtc.API {
	media := &webrtc.MediaEngine{}
	feedback := []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}, {Type: "ccm", Parameter: "fir"}, {Type: "transport-cc"}}
	check(media.RegisterCodec(webrtc.RTPCodecParameters{
		RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
			SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", RTCPFeedback: feedback},
		PayloadType: 102}, webrtc.RTPCodecTypeVideo))
	check(media.RegisterCodec(webrtc.RTPCodecParameters{
		RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"},
		PayloadType:        111}, webrtc.RTPCodecTypeAudio))
	registry := &interceptor.Registry{}
	check(webrtc.RegisterDefaultInterceptors(media, registry))
	settings := webrtc.SettingEngine{}
	settings.SetIncludeLoopbackCandidate(true)
	settings.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	return webrtc.NewAPI(webrtc.WithMediaEngine(media), webrtc.WithInterceptorRegistry(registry), webrtc.WithSettingEngine(settings))
}

// check ends the program on an error, naming it.
func check(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[0], err)
		os.Exit(1)
	}
}

// receiving is a peer connection whose received video goes to an Annex B file (pion's
// h264writer), its packets and those of its audio counted, its tracks' codecs named.
type receiving struct {
	pc           *webrtc.PeerConnection
	writer       *h264writer.H264Writer
	started      time.Time
	videoPackets atomic.Int64
	audioPackets atomic.Int64
	mu           sync.Mutex
	codecs       []string
	firstVideo   time.Duration
	done         sync.WaitGroup
}

// receive makes the peer connection; its video goes to out.
func receive(api *webrtc.API, out string) (*receiving, error) {
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return nil, err
	}
	writer, err := h264writer.New(out)
	if err != nil {
		pc.Close()
		return nil, err
	}
	r := &receiving{pc: pc, writer: writer, started: time.Now()}
	pc.OnTrack(func(track *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		r.done.Add(1)
		defer r.done.Done()
		r.mu.Lock()
		r.codecs = append(r.codecs, track.Codec().MimeType)
		r.mu.Unlock()
		for {
			packet, _, err := track.ReadRTP()
			if err != nil {
				return
			}
			if track.Kind() != webrtc.RTPCodecTypeVideo {
				r.audioPackets.Add(1)
				continue
			}
			r.mu.Lock()
			if r.videoPackets.Add(1) == 1 {
				r.firstVideo = time.Since(r.started)
			}
			r.writer.WriteRTP(packet)
			r.mu.Unlock()
		}
	})
	return r, nil
}

// close ends the connection and the file; what was received, for a JSON line.
func (r *receiving) close() map[string]any {
	r.pc.Close()
	r.done.Wait()
	r.writer.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	return map[string]any{"codecs": r.codecs, "videoPackets": r.videoPackets.Load(), "audioPackets": r.audioPackets.Load(),
		"firstVideoMs": r.firstVideo.Milliseconds()}
}
