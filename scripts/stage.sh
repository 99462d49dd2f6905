# Sourced by the test command's stages.
#
# skip REASON: the stage cannot run here; says so and exits 77, which the test command counts
# as skipped (and, under CI=true, as a failure: CI's machine can run every stage). Never exit 0
# for a stage that did not run.
skip() {
  echo "$(basename "$(dirname "$0")"): SKIPPED: $*"
  exit 77
}

# service_tls DIR HOST...: a private CA and a certificate for the service at HOST, the one
# documented step (callend tls); sets serve_tls (for serve), join_tls (for join, with
# --server tls://HOST:PORT) and tls_pin (the certificate's key, for a browser to trust).
service_tls() {
  local dir=$1 host
  shift
  local hosts=()
  for host in "$@"; do hosts+=(--host "$host"); done
  "$bin" tls "${hosts[@]}" --out "$dir" > /dev/null || { echo "$(basename "$0"): callend tls failed" >&2; return 1; }
  serve_tls=(--tls-cert "$dir/server.pem" --tls-key "$dir/server-key.pem")
  join_tls=(--ca-file "$dir/ca.pem")
  tls_pin=$(openssl x509 -in "$dir/server.pem" -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)
}

# need_aiortc: sets python to the bench venv's interpreter with aiortc (installing it from PyPI
# the first time), or skips the stage saying why.
need_aiortc() {
  python=.build/bench-venv/bin/python
  if ! "$python" -c "import aiortc" 2>/dev/null; then
    bash scripts/congestion/setup-bench.sh >/dev/null 2>&1 || true
  fi
  "$python" -c "import aiortc" 2>/dev/null || skip "aiortc could not be installed from PyPI into .build/bench-venv"
}

# stop_pids: ends every process in pids (the stage's own) and waits for them.
stop_pids() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  pids=()
}

# has_chromium: Debian's chromium, chromium-driver and python3-selenium are there (for the pages
# the stages drive); need_chromium: the same, or the stage skips saying what to install.
has_chromium() {
  [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && /usr/bin/python3 -c "import selenium" 2>/dev/null
}
need_chromium() {
  has_chromium || skip "needs Debian's chromium, chromium-driver and python3-selenium (scripts/install-deps.sh installs them)"
}

# start_service [-n NETNS] LOG SERVE-OPTION...: `callend serve` with the stage's secret
# ($work/secret, made on first use), inside NETNS if given, its output in LOG; waits until it
# listens (and, with --http, serves its page), then sets port (the signaling port) and web (the
# page's scheme://host:port, with --http). Adds it to pids; fails saying why if it does not start.
start_service() {
  local run=()
  if [ "$1" = -n ]; then run=(ip netns exec "$2"); shift 2; fi
  local log=$1 ready="listening on"
  shift
  [ -s "$work/secret" ] || "$bin" token --new-secret --out "$work/secret" > /dev/null || return 1
  case " $* " in *" --http "*) ready="web page at" ;; esac
  "${run[@]}" "$bin" serve --secret-file "$work/secret" "$@" > "$log" 2>&1 &
  pids+=($!)
  wait_for "$log" "$ready" 30 || { echo "$(basename "$(dirname "$0")"): FAILED: callend serve did not start: $(tail -3 "$log")"; return 1; }
  port=$(sed -n 's/^listening on .*:\([0-9]*\) .*/\1/p' "$log" | head -1)
  web=$(sed -n 's/^web page at \(https\{0,1\}:\/\/[^ ]*\)\/ .*/\1/p' "$log" | head -1)
}

# mint ROOM IDENTITY [TOKEN-OPTION...]: prints a token of the stage's secret for IDENTITY in ROOM.
mint() {
  local room=$1 identity=$2
  shift 2
  [ -s "$work/secret" ] || "$bin" token --new-secret --out "$work/secret" > /dev/null || return 1
  "$bin" token --room "$room" --identity "$identity" "$@" --secret-file "$work/secret"
}

# crash_report FILE: where a process that wrote FILE (its standard error) crashed, if it did:
# the runtime's first lines and the crashed thread's frames (a stage's tail of the file shows
# only the loaded images).
crash_report() {
  grep -a -m1 -A40 -E "Program crashed|Fatal error|Crash report" "$1" 2>/dev/null | grep -a -v "^$" | head -40
}

# decoded_frames v|a FILE [INPUT OPTION...]: how many frames of FILE's first video (v) or audio
# (a) stream ffprobe decodes; 0 when it decodes none or cannot read FILE.
decoded_frames() {
  local stream=$1 file=$2 count
  shift 2
  count=$(ffprobe -v error "$@" -count_frames -select_streams "$stream:0" -show_entries stream=nb_read_frames -of csv=p=0 "$file" 2>/dev/null | head -1)
  echo "${count:-0}"
}

# build_go OUT SOURCE...: builds a Go program of one package (the SOURCEs) on Debian's Go
# packages (GOPATH mode, as Debian ships them) into OUT. Debian installs some modules without
# their /vN directory (pion's webrtc/v3, sdp/v3, transport/v2, udp/v2): a GOPATH of links under
# .build gives them their import paths. The build cache stays in .build (like swift build's), so a
# second build takes seconds.
build_go() {
  local out=$1 gopath=$PWD/.build/go-path name module dir path
  shift
  name=$(basename "$out")
  rm -rf "${gopath:?}/src/$name"
  mkdir -p "$gopath/src/$name" "$PWD/.build/go-cache"
  cp "$@" "$gopath/src/$name/"
  for module in $(cd /usr/share/gocode/src && grep -rl --include=go.mod -m1 '^module .*/v[0-9]*$' github.com 2>/dev/null); do
    dir=$(dirname "$module")
    path=$(sed -n 's/^module //p' "/usr/share/gocode/src/$module" | head -1)
    [ "$path" = "$dir" ] && continue
    mkdir -p "$gopath/src/$(dirname "$path")"
    ln -sfn "/usr/share/gocode/src/$dir" "$gopath/src/$path"
  done
  GOPATH=$gopath:/usr/share/gocode GO111MODULE=off GOCACHE=$PWD/.build/go-cache GOFLAGS= go build -o "$out" "$name"
}
