#!/bin/bash
# Starts Debian's Janus (1.1.2) with a configuration of its own: the HTTP transport on ADDR:PORT
# and the VideoRoom plugin alone, two rooms (1234, VP8 + Opus; 1235 the same in H.264; up to 6 publishers, no bitrate cap
# beyond 2.5 Mbit/s), ICE on the interfaces that carry ADDR's network, an API secret when given.
# Run inside a namespace the caller made; writes the configuration under DIR and logs to DIR/janus.log.
#   usage: start.sh DIR ADDR PORT [API_SECRET]      (prints Janus's pid; waits until it answers)
set -euo pipefail
dir=$1 addr=$2 port=$3 secret=${4:-}
lib=/usr/lib/x86_64-linux-gnu/janus
[ -d "$lib" ] || lib=$(dirname "$(dpkg -L janus | grep -m1 '/janus/plugins$')")
mkdir -p "$dir/conf" "$dir/plugins" "$dir/transports"
ln -sf "$lib/plugins/libjanus_videoroom.so" "$dir/plugins/"
ln -sf "$lib/transports/libjanus_http.so" "$dir/transports/"
cat > "$dir/conf/janus.jcfg" <<CFG
general: {
	configs_folder = "$dir/conf"
	plugins_folder = "$dir/plugins"
	transports_folder = "$dir/transports"
	events_folder = "$dir/none"
	loggers_folder = "$dir/none"
	debug_level = 4
	${secret:+api_secret = \"$secret\"}
}
media: {
	rtp_port_range = "20000-20999"
}
nat: {
	nice_debug = false
	ice_ignore_list = "vmnet"
}
CFG
cat > "$dir/conf/janus.transport.http.jcfg" <<CFG
general: {
	json = "plain"
	base_path = "/janus"
	http = true
	port = $port
	ip = "$addr"
	https = false
}
admin: {
	admin_http = false
}
CFG
cat > "$dir/conf/janus.plugin.videoroom.jcfg" <<CFG
general: {
}
room-1234: {
	description = "callend test room"
	publishers = 6
	bitrate = 2500000
	fir_freq = 10
	audiocodec = "opus"
	videocodec = "vp8"
	transport_wide_cc_ext = true
}
room-1235: {
	description = "callend H.264 room"
	publishers = 6
	bitrate = 2500000
	fir_freq = 10
	audiocodec = "opus"
	videocodec = "h264"
	transport_wide_cc_ext = true
}
CFG
janus -C "$dir/conf/janus.jcfg" -F "$dir/conf" -o -L "$dir/janus.log" -N >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 200); do
    if curl -fs -m 1 -o /dev/null "http://$addr:$port/janus/info"; then echo "$pid"; exit 0; fi
    kill -0 "$pid" 2>/dev/null || { echo "janus exited; its log:" >&2; tail -20 "$dir/janus.log" >&2; exit 1; }
    sleep 0.1  # poll: Janus answers its /info once the HTTP transport is up
done
echo "janus did not answer on $addr:$port in 20 s" >&2; kill "$pid"; exit 1
