// A WHIP server (RFC 9725) on pion/webrtc v3 (Debian's golang-github-pion-webrtc.v3-dev), run by
// scripts/whip/test.sh: it takes H.264 alone (packetization mode 1, constrained baseline) and
// Opus, and writes the video it receives to an Annex B file (pion's h264writer) that ffprobe
// then decodes. No trickle: each answer carries all of the server's candidates.
//
//	pion_whip_server -out FILE.h264 [-token T]
//
// Prints "listening on 127.0.0.1:PORT", then for each session one JSON line when it is
// DELETEd: its codecs and the RTP packets received.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pion/interceptor"
	"github.com/pion/webrtc/v3"
	"github.com/pion/webrtc/v3/pkg/media/h264writer"
)

type session struct {
	pc           *webrtc.PeerConnection
	writer       *h264writer.H264Writer
	videoPackets atomic.Int64
	audioPackets atomic.Int64
	mu           sync.Mutex
	codecs       []string
	done         sync.WaitGroup
}

func main() {
	out := flag.String("out", "", "where the received H.264 goes (Annex B)")
	token := flag.String("token", "", "the bearer token a POST must carry (none: any)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "pion_whip_server: -out FILE is needed")
		os.Exit(2)
	}
	media := &webrtc.MediaEngine{}
	feedback := []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}, {Type: "ccm", Parameter: "fir"}, {Type: "transport-cc"}}
	check(media.RegisterCodec(webrtc.RTPCodecParameters{
		RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
			SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", RTCPFeedback: feedback},
		PayloadType: 102}, webrtc.RTPCodecTypeVideo))
	check(media.RegisterCodec(webrtc.RTPCodecParameters{
		RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"},
		PayloadType: 111}, webrtc.RTPCodecTypeAudio))
	registry := &interceptor.Registry{}
	check(webrtc.RegisterDefaultInterceptors(media, registry))
	settings := webrtc.SettingEngine{}
	settings.SetIncludeLoopbackCandidate(true)
	settings.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	api := webrtc.NewAPI(webrtc.WithMediaEngine(media), webrtc.WithInterceptorRegistry(registry), webrtc.WithSettingEngine(settings))

	var mu sync.Mutex
	sessions := map[string]*session{}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if *token != "" && r.Header.Get("Authorization") != "Bearer "+*token {
			http.Error(w, "a bearer token is needed", http.StatusUnauthorized)
			return
		}
		switch r.Method {
		case http.MethodPost:
			if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/sdp") {
				http.Error(w, "application/sdp only", http.StatusUnsupportedMediaType)
				return
			}
			offer, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			s, answer, err := start(api, *out, string(offer))
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnprocessableEntity)
				return
			}
			id := newID()
			mu.Lock()
			sessions[id] = s
			mu.Unlock()
			w.Header().Set("Location", "/session/"+id)
			w.Header().Set("Content-Type", "application/sdp")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, answer)
		case http.MethodDelete:
			id := strings.TrimPrefix(r.URL.Path, "/session/")
			mu.Lock()
			s := sessions[id]
			delete(sessions, id)
			mu.Unlock()
			if s == nil {
				http.Error(w, "no such session", http.StatusNotFound)
				return
			}
			s.pc.Close()
			s.done.Wait()
			s.writer.Close()
			s.mu.Lock()
			line, _ := json.Marshal(map[string]any{"session": id, "codecs": s.codecs, "videoPackets": s.videoPackets.Load(), "audioPackets": s.audioPackets.Load()})
			s.mu.Unlock()
			fmt.Println(string(line))
			w.WriteHeader(http.StatusOK)
		default:
			http.Error(w, "POST or DELETE", http.StatusMethodNotAllowed)
		}
	})
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Printf("listening on %s\n", listener.Addr())
	check(http.Serve(listener, nil))
}

// start answers an offer: the video it receives goes to out, the audio is counted.
func start(api *webrtc.API, out, offer string) (*session, string, error) {
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return nil, "", err
	}
	writer, err := h264writer.New(out)
	if err != nil {
		pc.Close()
		return nil, "", err
	}
	s := &session{pc: pc, writer: writer}
	pc.OnTrack(func(track *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		s.done.Add(1)
		defer s.done.Done()
		s.mu.Lock()
		s.codecs = append(s.codecs, track.Codec().MimeType)
		s.mu.Unlock()
		for {
			packet, _, err := track.ReadRTP()
			if err != nil {
				return
			}
			if track.Kind() == webrtc.RTPCodecTypeVideo {
				s.videoPackets.Add(1)
				s.mu.Lock()
				s.writer.WriteRTP(packet)
				s.mu.Unlock()
			} else {
				s.audioPackets.Add(1)
			}
		}
	})
	fail := func(err error) (*session, string, error) {
		pc.Close()
		writer.Close()
		return nil, "", err
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return fail(err)
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		return fail(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(answer); err != nil {
		return fail(err)
	}
	<-gathered
	return s, pc.LocalDescription().SDP, nil
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "pion_whip_server:", err)
		os.Exit(1)
	}
}
