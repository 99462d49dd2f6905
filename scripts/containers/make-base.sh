#!/usr/bin/env bash
# Makes the debian:12 base image with debootstrap from the Debian mirror, for machines that reach
# no image registry: scripts/containers/make-base.sh [ROOTFS_DIR]. Root; talks to the Docker
# engine DOCKER_HOST points at. Prints the image id.
set -euo pipefail
rootfs=${1:-$(mktemp -d /tmp/callend-rootfs.XXXXXX)}
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian > "$rootfs.log" 2>&1 \
  || { tail -5 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"
tar -C "$rootfs" -c . | docker import - debian:12
