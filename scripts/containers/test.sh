#!/usr/bin/env bash
# The two-container call of docker-compose.yml with a real Docker engine: a private dockerd (its
# own data root and socket; the host's iptables rules are saved before it starts and put back as
# they were after it stops, its default bridge removed and IP forwarding set back), the debian:12
# base made with debootstrap (no registry is needed), the image built from Dockerfile and a
# release binary with the Swift standard library linked in, then
#   docker-compose up --abort-on-container-exit --exit-code-from host-b
# which exits 0 when both endpoints decoded video and audio. Root; skips, saying so, where dockerd,
# docker-compose or debootstrap is missing or the engine cannot start. Removes everything it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
if [ "$(id -u)" -ne 0 ] || ! command -v dockerd >/dev/null || ! command -v docker-compose >/dev/null || ! command -v debootstrap >/dev/null; then
  skip "needs root, dockerd, docker-compose and debootstrap (Debian docker.io, docker-compose, debootstrap)"
fi
docker=$(command -v docker)
work=$(mktemp -d /var/tmp/callend-containers.XXXXXX)
export DOCKER_HOST=unix://$work/docker.sock
project=callend$$
started=$SECONDS
cleanup() {
  # Containers, networks (their bridges on the host) and the volume go with the project.
  CALLEND_SECRET=unused docker-compose -p "$project" down -v --remove-orphans > /dev/null 2>&1
  local pid
  pid=$(cat "$work/dockerd.pid" 2>/dev/null)
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null
    timeout 30 tail --pid="$pid" -f /dev/null
  fi
  # The engine adds chains and sets the FORWARD policy: the rules go back to what they were,
  # and its default bridge goes.
  [ -s "$work/iptables.rules" ] && iptables-restore < "$work/iptables.rules"
  [ -n "$had_docker0" ] || ip link del docker0 2>/dev/null
  [ -n "$forwarding" ] && sysctl -q -w net.ipv4.ip_forward="$forwarding"
  # The engine leaves its network namespace file mounted: unmount whatever is left, then remove.
  grep -o " $work[^ ]*" /proc/mounts | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  rm -rf "$work"
}
trap cleanup EXIT

iptables-save > "$work/iptables.rules"
had_docker0=$(ip link show docker0 2>/dev/null)
forwarding=$(sysctl -n net.ipv4.ip_forward)
dockerd --data-root "$work/data" --exec-root "$work/exec" --pidfile "$work/dockerd.pid" -H "$DOCKER_HOST" \
  > "$work/dockerd.log" 2>&1 &
deadline=$((SECONDS + 60))
until "$docker" version > /dev/null 2>&1; do
  if [ $SECONDS -ge $deadline ] || ! kill -0 $! 2>/dev/null; then
    skip "the Docker engine cannot start here: $(tail -1 "$work/dockerd.log")"
  fi
  sleep 0.1
done

# The base image from the Debian mirror, and a binary that needs no Swift runtime: the one waits
# on the network, the other on the cores, so they run side by side.
bash scripts/containers/make-base.sh "$work/rootfs" > /dev/null 2> "$work/base.log" &
base=$!
# The two programs the image holds, as scripts/package.sh builds them (test.sh has built them
# beside the stages before this one; run alone, this stage builds them).
scripts/static-build.sh > "$work/build.log" 2>&1
built=$?
echo "containers: static build done in $((SECONDS - started)) s"
if ! wait $base; then
  cat "$work/base.log" >&2
  skip "debootstrap could not reach the Debian mirror"
fi
[ $built -eq 0 ] || { tail -20 "$work/build.log"; exit 1; }
mkdir -p "$work/context"
cp Dockerfile .build/static/release/callend .build/static/release/callend-serve "$work/context/"
"$docker" build -q --network host -t callend "$work/context" > "$work/image.log" 2>&1 || { tail -20 "$work/image.log"; exit 1; }
echo "containers: engine, base image and callend image ready in $((SECONDS - started)) s"

CALLEND_SECRET=$(.build/static/release/callend token --new-secret) timeout 180 docker-compose -p "$project" up \
  --abort-on-container-exit --exit-code-from host-b > "$work/compose.log" 2>&1
status=$?
grep -E "<- host-|host-a: " "$work/compose.log" | sed 's/^.*| /containers: /'
if [ $status -eq 0 ]; then
  echo "containers: passed (docker-compose up exited 0 after $((SECONDS - started)) s)"
else
  echo "containers: FAILED: docker-compose up exited $status"
  tail -30 "$work/compose.log"
  "$docker" run --rm -v "${project}_results:/results" callend sh -c 'tail -n 15 /results/*.err /results/serve.log' 2>&1
fi
exit $status
