# One image for the three roles of docker-compose.yml (signaling service, two endpoints): the
# same build and the same commands as scripts/twohost/test.sh, which runs this topology in
# network namespaces where no Docker engine is available.
FROM debian:12
COPY . /src
WORKDIR /src
# Swift toolchain: provide it at /opt/swift in the build context's base (as on the project's machines).
ENV PATH=/opt/swift/usr/bin:$PATH
RUN scripts/install-deps.sh && swift build -c release && cp .build/release/callend /usr/local/bin/callend
