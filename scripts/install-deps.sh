#!/usr/bin/env bash
# Installs every Debian package callend needs to build, test and bench. Safe to run again:
# when everything is already installed it changes nothing.
set -euo pipefail

packages=(
  # C libraries behind the system-library targets
  pkg-config libopus-dev libvpx-dev libyuv-dev libjpeg62-turbo-dev libsrtp2-dev libssl-dev
  libasound2-dev libv4l-dev libnice-dev libspeexdsp-dev libhiredis-dev libwebrtc-audio-processing-dev
  # data channels: SCTP over DTLS
  libusrsctp-dev
  # join --record-dir's WebM muxer (headers to build; the library is loaded only when recording)
  libavformat-dev
  # H.264 in software: OpenH264 to encode, libavcodec (with libavformat-dev) to decode; both
  # loaded when H.264 is used
  libopenh264-dev
  # pion (Go) as a WHIP server of another stack in H.264 (scripts/pion/whip_server.go) and a WHEP viewer (scripts/pion/whep_viewer.go)
  golang-go golang-github-pion-webrtc.v3-dev
  # outside tools the tests and benches compare against or make fixtures with
  ffmpeg vpx-tools opus-tools libjpeg-turbo-progs
  # PyJWT for /usr/bin/python3 (token interop tests), openssl to make test certificates
  python3 python3-jwt openssl
  # GStreamer peers for the RTP interop tests (libav's avdec_h264 decodes callend's H.264)
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-libav
  # namespaces, tbf and the path's round trip for the namespace tests and the congestion bench;
  # NAT routers and a TURN/STUN server for the NAT lab
  iproute2 iputils-ping iptables coturn
  # a browser as the peer: headless Chromium driven through chromium-driver by python3-selenium
  chromium chromium-driver python3-selenium
  # node --check, the browser stage's lint of the page's script (Sources/SignalingService/Web/Page/app.js)
  nodejs
  # systemd-analyze, to verify the service units in deploy/systemd; promtool, to check the metrics
  systemd prometheus
  # the two-container call: a Docker engine, compose, and debootstrap for the debian:12 base
  docker.io docker-compose debootstrap
  # the Debian package (scripts/package.sh) and its stage: dpkg-shlibdeps, man pages from --help,
  # lintian, and systemd-nspawn to boot a fresh Debian 12 tree that installs it
  dpkg-dev help2man lintian systemd-container
  # the Redis that several signaling nodes share rooms through (serve --redis), for the fleet test
  redis-server
  # a WHIP publisher of another stack (GStreamer webrtcbin) for serve --http's /whip/ROOM, with
  # the GStreamer elements its pipelines use
  simple-whip-client gstreamer1.0-nice gstreamer1.0-plugins-bad
  # the SFU a room outgrows a mesh into: Janus with its VideoRoom plugin, and its JavaScript
  # library (with webrtc-adapter, from the demos) for a browser subscriber
  janus janus-demos libjs-janus-gateway
  # speech and the echo path for the echo bench (GStreamer's webrtcdsp, in plugins-bad, beside it)
  espeak-ng sox
  # the footprint bench's --codecs: CPU samples by library and malloc'd memory by caller
  linux-perf heaptrack
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run this script as root (or with sudo)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -q
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
