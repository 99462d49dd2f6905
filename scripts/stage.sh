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
