#!/usr/bin/env bash
# The Debian package on a box with no toolchain: builds callend_V_ARCH.deb (scripts/package.sh,
# lintian: no error) and a rebuilt V+rebuild1, boots a fresh Debian 12 tree made with debootstrap
# under systemd-nspawn --boot (systemd as PID 1), and in it:
#   apt installs the package (its Depends from the Debian mirror); callend-serve and two
#   callend-join@ instances run from config files and call each other (frames decoded, in their
#   metrics); 'systemctl reload' of one end takes a new record quota without ending the call;
#   'systemctl restart' of the other and an upgrade to the rebuilt package each end with the call
#   back by itself; the recording one end made across all that holds only complete segments;
#   systemd-analyze security of both installed units is <= 2.0; 'apt-get remove' leaves no unit,
#   user or program behind (the configuration and the recordings stay) and purge removes those.
# Root; the container shares the host's network (apt reaches the mirror; the services listen on
# loopback ports picked free). Skips where debootstrap or systemd-nspawn is missing or the mirror
# cannot be reached. Removes everything it made.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/wait.sh
source scripts/stage.sh
if [ "$(id -u)" -ne 0 ] || ! command -v debootstrap > /dev/null || ! command -v systemd-nspawn > /dev/null; then
  skip "needs root, debootstrap and systemd-nspawn (Debian debootstrap, systemd-container)"
fi
started=$SECONDS
work=$(mktemp -d /var/tmp/callend-package-test.XXXXXX)
root=$work/root
nspawn= tree=
cleanup() {
  # debootstrap first: left running, it would write into the tree again after the rm below.
  if [ -n "$tree" ] && kill -0 "$tree" 2> /dev/null; then
    kill -TERM "$tree" 2> /dev/null
    pkill -TERM -f -- "$root" 2> /dev/null   # what it runs names the tree: wget, dpkg, chroot
    timeout 30 tail --pid="$tree" -f /dev/null
  fi
  if [ -n "$nspawn" ] && kill -0 "$nspawn" 2> /dev/null; then
    kill -TERM "$nspawn" 2> /dev/null   # systemd-nspawn asks the container's systemd to power off
    timeout 30 tail --pid="$nspawn" -f /dev/null || kill -KILL "$nspawn" 2> /dev/null
  fi
  grep -o " $work[^ ]*" /proc/mounts | sort -r | while read -r m; do umount "$m" 2> /dev/null || umount -l "$m"; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "package: FAILED: $*"; exit 1; }

# The tree from the mirror and the packages from the cores, side by side.
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$root" http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 &
tree=$!
deb=$(scripts/package.sh --lintian --out "$work/debs" 2> "$work/package.log") || { tail -30 "$work/package.log"; fail "scripts/package.sh"; }
grep -E "^(W|E): " "$work/package.log" | sed 's/^/package: lintian: /'
version=$(dpkg-deb -f "$deb" Version)
rebuilt=$(scripts/package.sh --version "$version+rebuild1" --out "$work/debs" 2> "$work/package2.log") || { tail -30 "$work/package2.log"; fail "the rebuilt package"; }
echo "package: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB) and $(basename "$rebuilt") built in $((SECONDS - started)) s"
wait $tree || { tail -5 "$work/debootstrap.log"; skip "debootstrap could not make a Debian 12 tree from deb.debian.org"; }
cp "$deb" "$rebuilt" "$root/var/tmp/"

systemd-nspawn --boot --register=no --keep-unit --quiet -D "$root" --machine="callendpkg$$" > "$work/boot.log" 2>&1 &
nspawn=$!
leader=
find_leader() { leader=$(pgrep -P "$nspawn" | head -1); [ -n "$leader" ]; }
wait_until 30 "the container's systemd starting" find_leader || { tail -20 "$work/boot.log"; fail "no container"; }
inside() { nsenter -t "$leader" -a -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
booted() { state=$(inside systemctl is-system-running); [ "$state" = running ] || [ "$state" = degraded ]; }
wait_until 90 "the container's boot" booted || { tail -20 "$work/boot.log"; fail "the container did not boot"; }
echo "package: Debian 12 booted under systemd-nspawn (PID 1: $(inside cat /proc/1/comm)) after $((SECONDS - started)) s"

apt_get() { inside apt-get -q -y -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confold "$@" > "$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; return 1; }; }
apt_get update || skip "apt in the container cannot reach the Debian mirror"
apt_get install "/var/tmp/$(basename "$deb")" || fail "apt-get install of the package"
echo "package: installed $(inside dpkg-query -W -f='${Package} ${Version}' callend) with $(grep -c '^Setting up' "$work/apt.log") packages set up"
inside id callend > /dev/null || fail "no callend user after install"
[ "$(inside stat -c '%a %U:%G' /var/lib/callend/recordings)" = "750 callend:callend" ] || fail "tmpfiles did not make /var/lib/callend/recordings"
[ "$(inside stat -c '%a %G' /etc/callend/secret)" = "640 callend" ] || fail "the token secret is not 0640 root:callend"
completed=$(inside bash -c 'source /usr/share/bash-completion/completions/callend; COMP_WORDS=(callend jo); COMP_CWORD=1; _callend
  a=${COMPREPLY[*]}; COMP_WORDS=(callend join --token-f); COMP_CWORD=2; _callend; echo "$a ${COMPREPLY[*]}"')
[ "$completed" = "join --token-file" ] || fail "bash completion of 'callend jo' and 'callend join --token-f' gave '$completed'"

free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port) metrics_a=$(free_port) metrics_b=$(free_port)
inside sed -i "s/^listen = .*/listen = 127.0.0.1:$port/" /etc/callend/serve.conf
for end in a b; do
  metrics=metrics_$end
  inside sh -c "install -m 0640 -g callend /dev/null /etc/callend/join/$end.token && \
    callend token --secret-file /etc/callend/secret --room deck --identity $end --ttl 1d > /etc/callend/join/$end.token"
  {
    echo "room = deck"
    echo "server = tls://127.0.0.1:$port"
    echo "ca-file = /etc/callend/tls/ca.pem"
    echo "token-file = /etc/callend/join/$end.token"
    echo "video-size = 320x240"
    echo "metrics = 127.0.0.1:${!metrics}"
    [ $end = a ] && printf 'record-dir = /var/lib/callend/recordings/a\nrecord-segment = 5\nrecord-quota = 64M\n'
  } > "$root/etc/callend/join/$end.conf"
  inside callend join --config "/etc/callend/join/$end.conf" --check > "$work/check-$end.log" 2>&1 || { cat "$work/check-$end.log"; fail "join --check of $end.conf"; }
done
inside callend serve --config /etc/callend/serve.conf --check > /dev/null 2>&1 || fail "serve --check of the shipped serve.conf"
# A config file join refuses: the unit fails with the reason in the journal and is not restarted
# over and over (RestartPreventExitStatus=2), although an endpoint otherwise always restarts.
# (Its token file is one every user can read: refused, as the journal says.)
inside sh -c 'callend token --secret-file /etc/callend/secret --room deck --identity bad > /etc/callend/join/bad.token && chmod 0644 /etc/callend/join/bad.token'
printf 'room = deck\ntoken-file = /etc/callend/join/bad.token\n' > "$root/etc/callend/join/bad.conf"
inside systemctl start callend-join@bad.service
failed() { [ "$(inside systemctl is-failed callend-join@bad.service)" = failed ]; }
wait_until 20 "callend-join@bad failing" failed || fail "a bad config file did not fail its unit"
[ "$(inside systemctl show -P NRestarts callend-join@bad.service)" = 0 ] || fail "a bad config file's unit was restarted"
inside journalctl --no-pager -u callend-join@bad.service | grep -q "bad.conf line 2: token-file /etc/callend/join/bad.token is readable by every user" \
  || { inside journalctl --no-pager -u callend-join@bad.service | tail -5; fail "the journal does not say which line is bad"; }
echo "package: a bad config file: callend-join@bad failed at once with its line in the journal, no restart"
inside systemctl reset-failed callend-join@bad.service
rm "$root/etc/callend/join/bad.conf" "$root/etc/callend/join/bad.token"
inside systemctl enable --now callend-serve.service callend-join@a.service callend-join@b.service > "$work/enable.log" 2>&1 \
  || { cat "$work/enable.log"; fail "systemctl enable --now"; }

decoded() { curl -s "http://127.0.0.1:$1/metrics" | sed -n 's/^callend_call_frames_decoded_total \([0-9]*\).*/\1/p'; }
# call_flows SECONDS WHAT: both ends decode at least 60 more pictures than when asked (2 s of video).
call_flows() {
  local a0 b0
  a0=$(decoded "$metrics_a"); b0=$(decoded "$metrics_b")
  grown() { local a b; a=$(decoded "$metrics_a"); b=$(decoded "$metrics_b"); [ "${a:-0}" -ge $(( ${a0:-0} + 60 )) ] && [ "${b:-0}" -ge $(( ${b0:-0} + 60 )) ]; }
  wait_until "$1" "$2" grown || { inside journalctl -n 30 --no-pager -u 'callend-*'; fail "$2"; }
  echo "package: $2: a decoded $(decoded "$metrics_a"), b $(decoded "$metrics_b") pictures in all ($((SECONDS - started)) s)"
}
call_flows 60 "the two endpoints call each other from their config files"

pid_a=$(inside systemctl show -P MainPID callend-join@a.service)
inside sed -i 's/^record-quota = .*/record-quota = 48M/' /etc/callend/join/a.conf
inside systemctl reload callend-join@a.service || fail "systemctl reload"
reloaded() { inside journalctl --no-pager -u callend-join@a.service | grep -q "reload: record quota 50331648; the call goes on"; }
wait_until 20 "the reload of a" reloaded || fail "no reload line in a's journal"
[ "$(inside systemctl show -P MainPID callend-join@a.service)" = "$pid_a" ] || fail "the reload restarted a"
call_flows 30 "the call goes on after 'systemctl reload callend-join@a'"

inside systemctl restart callend-join@b.service || fail "systemctl restart"
call_flows 60 "the call is back after 'systemctl restart callend-join@b'"

pids=$(inside systemctl show -P MainPID callend-serve.service callend-join@a.service callend-join@b.service | tr '\n' ' ')
apt_get install "/var/tmp/$(basename "$rebuilt")" || fail "the upgrade"
[ "$(inside dpkg-query -W -f='${Version}' callend)" = "$version+rebuild1" ] || fail "the upgrade did not install $version+rebuild1"
after=$(inside systemctl show -P MainPID callend-serve.service callend-join@a.service callend-join@b.service | tr '\n' ' ')
for p in $after; do case " $pids " in *" $p "*) fail "a service was not restarted by the upgrade (main PIDs $pids -> $after)" ;; esac; done
call_flows 60 "the call is back after the upgrade to $version+rebuild1 (services restarted: PIDs $pids-> $after)"

# As installed: the units verify (a minbase tree has no man: the pages they name are looked for
# as files; lintian read them at build), and expose little.
inside systemd-analyze verify --man=no callend-serve.service callend-join@a.service > "$work/verify.log" 2>&1 && [ ! -s "$work/verify.log" ] \
  || { cat "$work/verify.log"; fail "systemd-analyze verify of the installed units"; }
for page in callend callend-serve callend-join callend-token; do
  [ -s "$root/usr/share/man/man1/$page.1.gz" ] || fail "no man page $page(1)"
done
# Dispatch's workers may log that they could not change their priority (seen at the first start
# only, errno 13): counted for the record, not a verdict (packaging.md).
priority=$(inside journalctl --no-pager -u 'callend-*' | grep -c "Failed to set thread priority")
echo "package: 'Failed to set thread priority' lines in the services' journal: $priority"
for unit in callend-serve.service callend-join@a.service; do
  line=$(inside systemd-analyze security --no-pager "$unit" | grep "Overall exposure level")
  score=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) .*/\1/p')
  echo "package: systemd-analyze security $unit as installed: $score"
  awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 2.0) }' || fail "$unit exposure $line"
done

# The recording a made across the reload, the restart of b and the upgrade: stopped now, every
# segment is a whole WebM file.
inside systemctl stop callend-join@a.service callend-join@b.service
segments=0
for segment in "$root"/var/lib/callend/recordings/a/*.webm; do
  [ -e "$segment" ] || break
  segments=$((segments + 1))
  duration=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$segment") || fail "$(basename "$segment") is not a whole WebM file"
  awk -v d="$duration" 'BEGIN { exit !(d > 0) }' || fail "$(basename "$segment") holds nothing (duration $duration)"
done
[ $segments -ge 4 ] || fail "a recorded $segments segments"
echo "package: a's recording: $segments segments, every one a whole WebM file (ffprobe)"

apt_get remove callend || fail "apt-get remove"
left=$(inside sh -c 'ls /lib/systemd/system/callend* /etc/systemd/system/*.wants/callend* /usr/bin/callend* 2>/dev/null; getent passwd callend; getent group callend; systemctl list-units --all --plain --no-legend "callend*"')
[ -z "$left" ] || fail "apt-get remove left: $left"
[ -e "$root/etc/callend/serve.conf" ] && [ -e "$root/etc/callend/join/a.conf" ] || fail "apt-get remove took the configuration"
# Anything else named callend on the box, but dpkg's own records of a removed package and the
# .debs this stage copied in: the configuration and the recordings only.
stray=$(inside find / -xdev \( -path /proc -o -path /sys -o -path /var/lib/dpkg -o -path /var/tmp -o -path /etc/callend -o -path /var/lib/callend/recordings \) -prune -o -name '*callend*' -print)
[ "$stray" = /var/lib/callend ] || fail "apt-get remove left: $stray"
echo "package: removed: no unit, user or program left; /etc/callend and the recordings stay"
apt_get purge callend || fail "apt-get purge"
left=$(inside sh -c 'ls -d /etc/callend /var/lib/callend 2>/dev/null; dpkg-query -W callend 2>/dev/null')
[ -z "$left" ] || fail "apt-get purge left: $left"
echo "package: purged: /etc/callend and /var/lib/callend gone"
echo "package: passed in $((SECONDS - started)) s"
