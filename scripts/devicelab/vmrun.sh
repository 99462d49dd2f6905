#!/usr/bin/env bash
# vmrun.sh [-t SECONDS] [-r RESULTS_DIR] -- COMMAND [ARGS...]
# Runs COMMAND in the current directory inside the device lab VM (vivid at /dev/video0, the
# snd-aloop card as hw:CARD=Loopback), with the host's / visible read-only and RESULTS_DIR
# writable, and exits with COMMAND's status: 124 when the VM timed out, 125 when it gave none.
set -u
timeout_s=300
results=""
while [ $# -gt 0 ]; do
  case "$1" in
    -t) timeout_s=$2; shift 2 ;;
    -r) results=$(realpath "$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-t SECONDS] [-r RESULTS_DIR] -- COMMAND [ARGS...]" >&2; exit 2; }
lab=${DEVICELAB_DIR:-/var/tmp/callend-devicelab}
[ -f "$lab/vmlinux" ] && [ -f "$lab/initramfs.cpio.gz" ] || { echo "vmrun: run scripts/devicelab/setup.sh first" >&2; exit 2; }
mkdir -p "$lab/jobs"
job=$(mktemp "$lab/jobs/job.XXXXXX")
trap 'rm -f "$job"' EXIT
{
  echo '#!/bin/sh'
  echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root'
  printf 'cd %q || exit 125\n' "$PWD"
  echo 'echo "--- job start"'
  printf '%q ' "$@"; echo
  echo 'status=$?; echo "--- job end ($status)"; exit $status'
} > "$job"
share=()
append=""
if [ -n "$results" ]; then
  share=(-virtfs "local,path=$results,mount_tag=results,security_model=none")
  append="results=$results"
fi
# The emulated CPU is qemu's "max" without AVX: with AVX the libraries pick AVX2 paths, which TCG
# emulates several times slower, and the echo lab's voice run fell behind its sound card (ERLE
# 5-14 dB, 50-80 underruns in 14 s; without AVX 45 dB and 4). DEVICELAB_CPU overrides.
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -cpu ${DEVICELAB_CPU:-max,avx=off,avx2=off,fma=off} -m 2048 -smp 2 \
  -kernel "$lab/vmlinux" -initrd "$lab/initramfs.cpio.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 job=$job $append" \
  -nographic -no-reboot -nodefaults -serial stdio \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  "${share[@]}" -device isa-debug-exit,iobase=0xf4,iosize=0x04 < /dev/null 2>&1 \
  | tr -d '\r' | if [ -n "${VMRUN_VERBOSE:-}" ]; then cat; else sed -n '/--- job start/,/^--- job end/{/--- job/d;p}'; fi
qemu_status=${PIPESTATUS[0]}
[ "$qemu_status" -eq 124 ] && { echo "vmrun: the VM did not finish within ${timeout_s} s" >&2; exit 124; }
[ $((qemu_status & 1)) -eq 1 ] && exit $(( (qemu_status - 1) / 2 ))
echo "vmrun: the VM ended without a status (qemu exit $qemu_status)" >&2
exit 125
