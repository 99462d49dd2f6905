# The image of docker-compose.yml: Debian 12 with callend's runtime libraries and a release
# binary built with the Swift standard library linked in (swift build -c release
# --static-swift-stdlib), so no Swift image is needed, and callend-serve beside it (what
# `callend serve` runs: the service without the media libraries). scripts/containers/test.sh
# builds it from a folder holding this file and those binaries; where no registry is reachable,
# scripts/containers/make-base.sh makes the debian:12 base image with debootstrap.
FROM debian:12
RUN apt-get -o DPkg::Lock::Timeout=600 update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
      libvpx7 libopus0 libyuv0 libspeexdsp1 libwebrtc-audio-processing1 libsrtp2-1 libssl3 libasound2 libv4l-0 libnice10 libusrsctp2 libhiredis0.14 iproute2 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY callend callend-serve /usr/local/bin/
