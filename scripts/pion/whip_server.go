// A WHIP server (RFC 9725) on pion/webrtc v3 (Debian's golang-github-pion-webrtc.v3-dev), run by
// scripts/whip/test.sh: it takes H.264 alone (packetization mode 1, constrained baseline) and
// Opus, and writes the video it receives to an Annex B file (pion's h264writer) that ffprobe
// then decodes. No trickle: each answer carries all of the server's candidates.
//
//	pion-whip -out FILE.h264 [-token T]
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

	"github.com/pion/webrtc/v3"
)

func main() {
	out := flag.String("out", "", "where the received H.264 goes (Annex B)")
	token := flag.String("token", "", "the bearer token a POST must carry (none: any)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "pion-whip: -out FILE is needed")
		os.Exit(2)
	}
	api := h264OnlyAPI()

	var mu sync.Mutex
	sessions := map[string]*receiving{}
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
			summary := s.close()
			summary["session"] = id
			line, _ := json.Marshal(summary)
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
func start(api *webrtc.API, out, offer string) (*receiving, string, error) {
	s, err := receive(api, out)
	if err != nil {
		return nil, "", err
	}
	pc := s.pc
	fail := func(err error) (*receiving, string, error) {
		s.close()
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
