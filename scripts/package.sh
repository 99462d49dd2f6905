#!/usr/bin/env bash
# Builds the Debian package: scripts/package.sh [--version V] [--out DIR]
# A release build with the Swift standard library linked in (the box needs no toolchain), both
# programs stripped into /usr/bin, the systemd units and the files that make the callend user
# and its state folders (systemd-sysusers, systemd-tmpfiles), /etc/callend/serve.conf (a
# conffile), the docs, a man page for each program and command made from its --help (help2man),
# bash completion, and Depends computed from the binaries by dpkg-shlibdeps. Writes
# DIR/callend_V_ARCH.deb (DIR defaults to .build/package) and prints its path; with --lintian, runs
# lintian on it and fails on an error. The same script on an arm64 box builds the arm64 package.
set -euo pipefail
cd "$(dirname "$0")/.."
version= out=.build/package lint=
while [ $# -gt 0 ]; do
  case $1 in
    --version) version=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --lintian) lint=1; shift ;;
    *) echo "usage: scripts/package.sh [--version V] [--out DIR] [--lintian]" >&2; exit 2 ;;
  esac
done
for tool in dpkg-deb dpkg-shlibdeps help2man; do
  command -v $tool > /dev/null || { echo "package.sh: needs $tool (Debian dpkg-dev, help2man: scripts/install-deps.sh installs them)" >&2; exit 1; }
done

# The build the containers stage uses too: whichever comes first builds, the other finds it done
# (the build stage holds the tree warning-free).
scripts/static-build.sh >&2
bin=.build/static/release
version=${version:-$("$bin/callend" --version | sed -n '1s/^callend //p')}
arch=$(dpkg --print-architecture)
work=$(mktemp -d /tmp/callend-package.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/callend
umask 022

install -d "$root/usr/bin" "$root/lib/systemd/system" "$root/usr/lib/sysusers.d" "$root/usr/lib/tmpfiles.d" \
  "$root/etc/callend" "$root/usr/share/doc/callend/examples" "$root/usr/share/man/man1" \
  "$root/usr/share/bash-completion/completions" "$root/DEBIAN"
for program in callend callend-serve; do
  install -m 0755 "$bin/$program" "$root/usr/bin/$program"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$program"
done
install -m 0644 deploy/systemd/callend-serve.service deploy/systemd/callend-join@.service "$root/lib/systemd/system/"
install -m 0644 deploy/debian/sysusers.conf "$root/usr/lib/sysusers.d/callend.conf"
install -m 0644 deploy/debian/tmpfiles.conf "$root/usr/lib/tmpfiles.d/callend.conf"
install -m 0644 deploy/etc/serve.conf "$root/etc/callend/serve.conf"
install -m 0644 deploy/etc/join.conf "$root/usr/share/doc/callend/examples/join.conf"
install -m 0644 deploy/prometheus/callend-alerts.yml "$root/usr/share/doc/callend/examples/"
install -m 0644 deploy/bash-completion/callend "$root/usr/share/bash-completion/completions/callend"
ln -s callend "$root/usr/share/bash-completion/completions/callend-serve"
install -m 0644 deploy/debian/copyright "$root/usr/share/doc/callend/copyright"
for doc in README.md docs/*.md; do
  gzip -9n < "$doc" > "$root/usr/share/doc/callend/$(basename "$doc").gz"
done
# A native package's changelog: this version, from the last commit.
{
  echo "callend ($version) unstable; urgency=medium"
  echo
  echo "  * Built from commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)."
  echo
  echo " -- callend authors <callend@example.org>  $(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")"
} | gzip -9n > "$root/usr/share/doc/callend/changelog.gz"

# Man pages from --help: one for each program and one for each command of callend.
man=$work/man
mkdir -p "$man"
page() {  # page NAME DESCRIPTION COMMAND...
  local name=$1 description=$2
  shift 2
  printf '#!/bin/sh\n[ "$1" = --version ] && { echo "%s %s"; exit 0; }\nexec %s "$@"\n' "$name" "$version" "$*" > "$man/$name"
  chmod +x "$man/$name"
  help2man --no-info --no-discard-stderr --section 1 --source "callend $version" --name "$description" "$man/$name" \
    | sed "s|$man/||g" | gzip -9n > "$root/usr/share/man/man1/$name.1.gz"
}
page callend "a headless peer-to-peer call endpoint" "$PWD/$bin/callend"
page callend-serve "the callend signaling service" "$PWD/$bin/callend-serve"
"$bin/callend" --help | sed -n 's/^  \([a-z][a-z-]*\)  *\(.*\)/\1\t\2/p' | while IFS=$'\t' read -r command description; do
  [ "$command" = bench ] && continue  # the benches are callend-bench's, not the package's
  page "callend-$command" "callend $command: $description" "$PWD/$bin/callend" "$command"
done

# Depends: what the binaries link (dpkg-shlibdeps), and systemd for the units, sysusers and tmpfiles.
mkdir -p "$work/debian"
printf 'Source: callend\n\nPackage: callend\nArchitecture: any\n' > "$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O "callend/usr/bin/callend" "callend/usr/bin/callend-serve" 2> "$work/shlibdeps.log" | sed -n 's/^shlibs:Depends=//p') \
  || { cat "$work/shlibdeps.log" >&2; exit 1; }
# Recording (join --record-dir) loads libavformat when it starts (dlopen: an endpoint that records
# nothing never maps it), so dpkg-shlibdeps cannot see it: Recommends names the package that holds
# the major version this build was made for.
avformat=$(dpkg -S "$(readlink -f "$(pkg-config --variable=libdir libavformat)/libavformat.so")" | cut -d: -f1) \
  || { echo "package.sh: cannot tell which package holds libavformat (Debian libavformat-dev)" >&2; exit 1; }
# H.264 in software loads OpenH264 and libavcodec the same way, when a call first uses H.264.
openh264=$(dpkg -S "$(readlink -f "$(pkg-config --variable=libdir openh264)/libopenh264.so")" | cut -d: -f1) \
  || { echo "package.sh: cannot tell which package holds libopenh264 (Debian libopenh264-dev)" >&2; exit 1; }
avcodec=$(dpkg -S "$(readlink -f "$(pkg-config --variable=libdir libavcodec)/libavcodec.so")" | cut -d: -f1) \
  || { echo "package.sh: cannot tell which package holds libavcodec (Debian libavcodec-dev)" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: callend
Version: $version
Architecture: $arch
Maintainer: callend authors <callend@example.org>
Installed-Size: $size
Depends: $shlibs, systemd
Recommends: $avformat, $avcodec, $openh264
Section: net
Priority: optional
Homepage: https://github.com/callend/callend
Description: headless peer-to-peer call endpoint (Opus, VP8, WebRTC)
 callend joins a named room through its signaling service and holds a call:
 Opus audio and VP8 video over ICE and DTLS-SRTP, from V4L2 cameras and ALSA
 sound cards, with congestion control that adapts the bitrate and the camera
 mode. It speaks WHIP and WHEP, Janus VideoRoom and the browser's WebRTC.
 .
 This package holds callend and callend-serve, the systemd units
 callend-serve.service and callend-join@.service (an endpoint per config file
 in /etc/callend/join/), man pages and bash completion.
CONTROL
echo /etc/callend/serve.conf > "$root/DEBIAN/conffiles"
install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control" "$root/DEBIAN/conffiles"

mkdir -p "$out"
deb=$out/callend_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" > /dev/null
if [ -n "$lint" ]; then
  # lintian's verdict: errors fail; the warnings it may give are explained in docs/packaging.md.
  lintian --no-tag-display-limit "$deb" >&2 || { echo "package.sh: lintian found errors in $deb" >&2; exit 1; }
fi
echo "$deb"
