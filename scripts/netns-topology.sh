# Three network namespaces for tests: hosts A (10.71.1.2) and B (10.71.2.2) joined through a
# router R, which forwards between them. Source this file and call `topology_start NAME`: it
# makes a scratch folder ($work), the namespaces, and an EXIT trap that removes every
# namespace, veth pair, process listed in $pids, and the folder.
# Names carry the caller's PID so parallel runs do not collide.
tag=ce$$
a=${tag}a b=${tag}b r=${tag}r
pids=()

topology_down() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  # Whatever still runs inside the namespaces (a pipeline's far end outlives its shell).
  for ns in "$a" "$b" "$r"; do ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null; done
  wait 2>/dev/null
  for ns in "$a" "$b" "$r"; do ip netns del "$ns" 2>/dev/null; done
}

topology_up() {
  # A (10.71.1.2) -- R (10.71.1.1 | 10.71.2.1) -- B (10.71.2.2); R's link toward B is "${tag}rb".
  for ns in "$a" "$b" "$r"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
  ip link add "${tag}ar" type veth peer name "${tag}ra"
  ip link add "${tag}br" type veth peer name "${tag}rb"
  ip link set "${tag}ar" netns "$a"; ip link set "${tag}ra" netns "$r"
  ip link set "${tag}br" netns "$b"; ip link set "${tag}rb" netns "$r"
  ip -n "$a" addr add 10.71.1.2/24 dev "${tag}ar"; ip -n "$a" link set "${tag}ar" up
  ip -n "$r" addr add 10.71.1.1/24 dev "${tag}ra"; ip -n "$r" link set "${tag}ra" up
  ip -n "$r" addr add 10.71.2.1/24 dev "${tag}rb"; ip -n "$r" link set "${tag}rb" up
  ip -n "$b" addr add 10.71.2.2/24 dev "${tag}br"; ip -n "$b" link set "${tag}br" up
  ip -n "$a" route add default via 10.71.1.1
  ip -n "$b" route add default via 10.71.2.1
  ip netns exec "$r" sysctl -q -w net.ipv4.ip_forward=1
}

source "$(dirname "${BASH_SOURCE[0]}")/wait.sh"

topology_start() {
  work=$(mktemp -d "/tmp/callend-$1.XXXXXX")
  trap 'topology_down; rm -rf "$work"' EXIT
  topology_up
}
