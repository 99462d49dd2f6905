// A WHEP viewer (draft-ietf-wish-whep) on pion/webrtc v3, run by scripts/whep/test.sh: it offers
// to receive H.264 alone and Opus, POSTs its offer with all of its candidates (no trickle),
// writes the video it receives to an Annex B file (pion's h264writer) that ffprobe then decodes,
// and after -seconds DELETEs the session.
//
//	pion-whep -url URL -token-file F -seconds N -out FILE.h264
//
// Prints one JSON line: the codecs of its tracks, the RTP packets received, POST -> first video
// packet, and the DELETE's status. Exit 1, saying why, when the session cannot be made.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/pion/webrtc/v3"
)

func main() {
	endpoint := flag.String("url", "", "the WHEP endpoint")
	tokenFile := flag.String("token-file", "", "the file of the bearer token")
	seconds := flag.Int("seconds", 20, "how long to watch")
	out := flag.String("out", "", "where the received H.264 goes (Annex B)")
	flag.Parse()
	if *endpoint == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "pion-whep: -url and -out are needed")
		os.Exit(2)
	}
	token := ""
	if *tokenFile != "" {
		text, err := os.ReadFile(*tokenFile)
		check(err)
		token = strings.TrimSpace(string(text))
	}
	r, err := receive(h264OnlyAPI(), *out)
	check(err)
	for _, kind := range []webrtc.RTPCodecType{webrtc.RTPCodecTypeVideo, webrtc.RTPCodecTypeAudio} {
		_, err := r.pc.AddTransceiverFromKind(kind, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly})
		check(err)
	}
	offer, err := r.pc.CreateOffer(nil)
	check(err)
	gathered := webrtc.GatheringCompletePromise(r.pc)
	check(r.pc.SetLocalDescription(offer))
	<-gathered

	r.started = time.Now()
	response := send(http.MethodPost, *endpoint, token, r.pc.LocalDescription().SDP)
	body, _ := io.ReadAll(io.LimitReader(response.Body, 1<<20))
	response.Body.Close()
	if response.StatusCode != http.StatusCreated {
		check(fmt.Errorf("POST %s: %s: %s", *endpoint, response.Status, strings.TrimSpace(string(body))))
	}
	base, err := url.Parse(*endpoint)
	check(err)
	location, err := base.Parse(response.Header.Get("Location"))
	check(err)
	check(r.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: string(body)}))

	time.Sleep(time.Duration(*seconds) * time.Second) // the watching itself
	deleted := send(http.MethodDelete, location.String(), token, "")
	deleted.Body.Close()
	summary := r.close()
	summary["deleteStatus"] = deleted.StatusCode
	line, _ := json.Marshal(summary)
	fmt.Println(string(line))
}

// send makes one request of the session's, with the token and, when there is one, an SDP body.
func send(method, target, token, sdp string) *http.Response {
	request, err := http.NewRequest(method, target, strings.NewReader(sdp))
	check(err)
	if sdp != "" {
		request.Header.Set("Content-Type", "application/sdp")
	}
	if token != "" {
		request.Header.Set("Authorization", "Bearer "+token)
	}
	response, err := http.DefaultClient.Do(request)
	check(err)
	return response
}
