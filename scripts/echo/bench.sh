#!/usr/bin/env bash
# The echo bench (issue 32): speech from espeak-ng, an echo path made with sox -V1 (a delay of 40,
# 120 or 250 ms, attenuation, a reverberation tail), near-end speech mixed in for double talk,
# run through join --voice's processing (callend bench voice) and through GStreamer's
# webrtcdsp/webrtcechoprobe (the same library, as GStreamer drives it: its default, and with
# delay-agnostic mode), side by side on the same files. Then speech in pink noise through each
# noise suppressor. scripts/echo/measure.py prints the figures; see docs/voice.md.
#
#   scripts/echo/bench.sh [--delays "40 120 250"] [--out DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
delays="40 120 250" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --delays) delays=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: scripts/echo/bench.sh [--delays \"40 120 250\"] [--out DIR]" >&2; exit 2 ;;
  esac
done
for tool in espeak-ng sox gst-launch-1.0; do
  command -v $tool >/dev/null || { echo "echo bench: needs $tool (scripts/install-deps.sh installs it)"; exit 1; }
done
gst-inspect-1.0 webrtcdsp >/dev/null 2>&1 || { echo "echo bench: needs GStreamer's webrtcdsp (gstreamer1.0-plugins-bad)"; exit 1; }
bin=${CALLEND_BIN:-$(swift build -c release --show-bin-path)/callend}
[ -x "$bin" ] || { echo "echo bench: build first: swift build -c release"; exit 1; }
work=$(mktemp -d /tmp/callend-echo.XXXXXX)
if [ -n "$out" ]; then mkdir -p "$out"; else trap 'rm -rf "$work"' EXIT; fi
py=/usr/bin/python3

# speech TEXT VOICE FILE: espeak-ng's speech as 48 kHz mono WAV.
speech() {
  espeak-ng -v "$2" -s 165 -w "$work/tts.wav" "$1" || return 1
  sox -V1 "$work/tts.wav" -r 48000 -c 1 -b 16 "$3" norm -3
}
far_text="The rooftop camera has been running since Tuesday. The link went down twice during the storm, \
but the call came back both times within a second. Tomorrow we will move the antenna to the north side \
of the building and check the signal again. Please keep the lab door closed while the test is running, \
and write down every time the picture freezes."
near_text="Wait, I can hear you, but the picture on my side is frozen. Can you say that again slowly?"
noise_text="Every engineer on the bench can watch the same camera at once. The control room sees it too. \
The phone in my pocket shows the picture, and nobody has to start a second encoder for that. \
The box on the roof keeps the call up through rain and wind."
speech "$far_text" en-us "$work/far-speech.wav" && speech "$near_text" en+f3 "$work/near-speech.wav" \
  && speech "$noise_text" en-gb "$work/ns-speech.wav" || { echo "echo bench: espeak-ng failed"; exit 1; }
# Far end: 24 s of speech from 0.5 s. Near end: its sentence from 14 s (double talk).
sox -V1 "$work/far-speech.wav" "$work/far.wav" pad 0.5 trim 0 24 pad 0 24 trim 0 24
sox -V1 "$work/near-speech.wav" "$work/near.wav" pad 14 pad 0 24 trim 0 24
# A quiet room (-60 dBFS of pink noise) under every microphone.
sox -V1 -n -r 48000 -c 1 -b 16 "$work/floor.wav" synth 24 pinknoise vol 0.001
echo "echo bench: far end $(soxi -D "$work/far-speech.wav") s of speech, near end $(soxi -D "$work/near-speech.wav") s from 14 s"

for d in $delays; do
  # The echo path: the delay, then the speaker and room: reflections at 11, 23, 47 and 97 ms
  # falling away (the reverberation tail), 6 dB down at the microphone.
  sox -V1 "$work/far.wav" "$work/echo-$d.wav" pad "$(awk "BEGIN{print $d/1000}")" echo 0.8 0.8 11 0.4 23 0.3 47 0.2 97 0.1 vol 0.5 trim 0 24
  sox -V1 -m -v 1 "$work/echo-$d.wav" -v 1 "$work/near.wav" -v 1 "$work/floor.wav" "$work/mic-$d.wav"
  "$bin" bench voice --far "$work/far.wav" --mic "$work/mic-$d.wav" --out "$work/callend-$d.wav" --parts aec ${ECHO_SUPPRESSION:+--echo-suppression $ECHO_SUPPRESSION} > "$work/callend-$d.json" \
    || { echo "echo bench: callend bench voice failed"; exit 1; }
  for agnostic in false true; do
    # webrtcdsp pairs the probe's far end with the microphone by running time: both branches
    # play in real time (sync=true), as from a sound card.
    timeout 60 gst-launch-1.0 -q \
      filesrc location="$work/far.wav" ! wavparse ! audioconvert ! audio/x-raw,format=S16LE,rate=48000,channels=1 ! webrtcechoprobe name=probe ! fakesink sync=true \
      filesrc location="$work/mic-$d.wav" ! wavparse ! audioconvert ! audio/x-raw,format=S16LE,rate=48000,channels=1 \
        ! webrtcdsp probe=probe echo-cancel=true noise-suppression=false gain-control=false high-pass-filter=false voice-detection=false \
          extended-filter=true delay-agnostic=$agnostic \
        ! audioconvert ! wavenc ! filesink location="$work/gst-$agnostic-$d.wav" sync=true > "$work/gst-$agnostic-$d.log" 2>&1 \
      || { echo "echo bench: gst-launch-1.0 failed: $(tail -3 "$work/gst-$agnostic-$d.log")"; exit 1; }
  done
done

# Noise suppression: 20 s of speech in pink noise at 5 dB SNR, through each suppressor alone.
sox -V1 "$work/ns-speech.wav" "$work/ns-clean.wav" pad 1 pad 0 20 trim 0 20
sox -V1 -n -r 48000 -c 1 -b 16 "$work/ns-noise.wav" synth 20 pinknoise
"$py" scripts/echo/measure.py mix-snr "$work/ns-clean.wav" "$work/ns-noise.wav" 5 "$work/ns-mic.wav" || exit 1
sox -V1 -n -r 48000 -c 1 -b 16 "$work/silence.wav" trim 0 20
"$bin" bench voice --far "$work/silence.wav" --mic "$work/ns-mic.wav" --out "$work/callend-ns.wav" --parts ns > /dev/null || exit 1
timeout 60 gst-launch-1.0 -q filesrc location="$work/ns-mic.wav" ! wavparse ! audioconvert ! audio/x-raw,format=S16LE,rate=48000,channels=1 \
  ! webrtcdsp echo-cancel=false noise-suppression=true noise-suppression-level=high gain-control=false high-pass-filter=false voice-detection=false \
  ! audioconvert ! wavenc ! filesink location="$work/gst-ns.wav" > "$work/gst-ns.log" 2>&1 \
  || { echo "echo bench: gst-launch-1.0 (noise) failed: $(tail -3 "$work/gst-ns.log")"; exit 1; }

"$py" scripts/echo/measure.py report "$work" $delays
status=$?
[ -n "$out" ] && { cp "$work"/*.wav "$work"/*.json "$out"/ 2>/dev/null; rm -rf "$work"; echo "echo bench: files in $out"; }
exit $status
