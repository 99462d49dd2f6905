# One image for the three roles of docker-compose.yml (router, signaling service + endpoint,
# endpoint): the same build and commands as scripts/twohost/test.sh, which runs this topology in
# network namespaces on machines without a Docker engine (like the ones this was written on, so
# this file has not been built here). The base is Swift's Debian 12 image; install-deps.sh adds
# the C libraries and tools from Debian.
ARG SWIFT_IMAGE=swift:6.1-bookworm
FROM ${SWIFT_IMAGE}
COPY . /src
WORKDIR /src
RUN apt-get -o DPkg::Lock::Timeout=600 update -q \
 && apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends iproute2 \
 && scripts/install-deps.sh \
 && swift build -c release \
 && cp .build/release/callend /usr/local/bin/callend
