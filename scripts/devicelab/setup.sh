#!/usr/bin/env bash
# Prepares the device lab: a Debian kernel with the vivid (virtual camera) and snd-aloop
# (loopback sound card) modules, booted by qemu from a busybox initramfs, and v4l2loopback
# (Debian's v4l2loopback-dkms source, built here against the lab kernel's headers) for a
# camera that delivers H.264, and vicodec with v4l2-mem2mem (from Debian's linux-source of the
# same version: Debian's amd64 kernel builds neither) for a memory-to-memory encoder, which
# tests load mid-run. Idempotent: a lab
# already built for the current kernel package is reused. Work folder: $DEVICELAB_DIR
# (default /var/tmp/callend-devicelab); the Debian packages it downloads are kept in
# $DEVICELAB_DEBS (default /var/cache/callend-devicelab) for the next lab.
# Needs root (apt).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lab=${DEVICELAB_DIR:-/var/tmp/callend-devicelab}
mkdir -p "$lab"
# Not apt's own cache: Debian's container images remove every .deb in /var/cache/apt/archives
# after each install (/etc/apt/apt.conf.d/docker-clean), so on a fresh machine the kernel image
# fetched before the headers' install was gone when it was unpacked.
cache=${DEVICELAB_DEBS:-/var/cache/callend-devicelab}
mkdir -p "$cache"
log() { echo "devicelab: $*" >&2; }

need=()
for p in qemu-system-x86 busybox-static kmod cpio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

package=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$package" ] || { log "cannot find Debian's kernel package (apt-get update first?)"; exit 1; }
version=${package#linux-image-}
loopback_module="$lab/kernel/lib/modules/$version/updates/v4l2loopback.ko"
vicodec_module="$lab/kernel/lib/modules/$version/updates/vicodec.ko"
if [ -f "$lab/ready-$version" ] && [ -f "$loopback_module" ] && [ -f "$vicodec_module" ]; then
  echo "$lab"
  exit 0
fi

if ! ls "$cache/${package}"_*.deb >/dev/null 2>&1; then
  log "downloading $package"
  (cd "$cache" && apt-get download -q "$package" >/dev/null 2>&1) || { log "apt-get download $package failed"; exit 1; }
fi
rm -rf "$lab/kernel"
dpkg-deb -x "$(ls "$cache/${package}"_*.deb | head -1)" "$lab/kernel"

# v4l2loopback, built out of tree for the lab kernel (its headers package brings the compiler).
if ! dpkg-query -W -f='${Status}' "linux-headers-$version" 2>/dev/null | grep -q "install ok installed"; then
  log "installing linux-headers-$version (to build v4l2loopback)"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "linux-headers-$version" make >/dev/null
fi
if ! ls "$cache"/v4l2loopback-dkms_*.deb >/dev/null 2>&1; then
  log "downloading v4l2loopback-dkms"
  (cd "$cache" && apt-get download -q v4l2loopback-dkms >/dev/null 2>&1) || { log "apt-get download v4l2loopback-dkms failed"; exit 1; }
fi
rm -rf "$lab/v4l2loopback"
dpkg-deb -x "$(ls "$cache"/v4l2loopback-dkms_*.deb | head -1)" "$lab/v4l2loopback"
source_dir=$(ls -d "$lab"/v4l2loopback/usr/src/v4l2loopback-* | head -1)
make -s -C "/usr/src/linux-headers-$version" M="$source_dir" modules >"$lab/v4l2loopback-build.log" 2>&1 \
  || { cat "$lab/v4l2loopback-build.log" >&2; log "building v4l2loopback failed"; exit 1; }
mkdir -p "$(dirname "$loopback_module")"
cp "$source_dir/v4l2loopback.ko" "$loopback_module"

# vicodec (the kernel's FWHT codec behind the stateful memory-to-memory API) and the
# v4l2-mem2mem framework it needs, from the kernel source of the lab kernel's own version.
kernel_version=$(dpkg-deb -f "$(ls "$cache/${package}"_*.deb | head -1)" Version)
series=$(echo "$version" | cut -d. -f1-2)
source_package="linux-source-$series"
if ! ls "$cache/${source_package}_${kernel_version}"_*.deb >/dev/null 2>&1; then
  log "downloading $source_package $kernel_version (139 MB; for vicodec)"
  (cd "$cache" && apt-get download -q "$source_package=$kernel_version" >/dev/null 2>&1) \
    || { log "apt-get download $source_package=$kernel_version failed"; exit 1; }
fi
rm -rf "$lab/vicodec"
mkdir -p "$lab/vicodec"
dpkg-deb --fsys-tarfile "$(ls "$cache/${source_package}_${kernel_version}"_*.deb | head -1)" \
  | tar -xO "./usr/src/$source_package.tar.xz" \
  | tar -xJ -C "$lab/vicodec" --strip-components=4 --wildcards \
      "$source_package/drivers/media/v4l2-core/v4l2-mem2mem.c" "$source_package/drivers/media/test-drivers/vicodec/*.[ch]"
mv "$lab"/vicodec/vicodec/* "$lab/vicodec/" && rmdir "$lab/vicodec/vicodec"
printf 'obj-m := v4l2-mem2mem.o vicodec.o\nvicodec-objs := vicodec-core.o codec-fwht.o codec-v4l2-fwht.o\n' > "$lab/vicodec/Makefile"
make -s -C "/usr/src/linux-headers-$version" M="$lab/vicodec" modules >"$lab/vicodec-build.log" 2>&1 \
  || { cat "$lab/vicodec-build.log" >&2; log "building vicodec failed"; exit 1; }
cp "$lab/vicodec/v4l2-mem2mem.ko" "$lab/vicodec/vicodec.ko" "$(dirname "$vicodec_module")/"
depmod -b "$lab/kernel" "$version"
# qemu boots the uncompressed ELF through its PVH entry, skipping the slow in-guest decompression under TCG.
python3 "$here/unpack-vmlinux.py" "$lab/kernel/boot/vmlinuz-$version" "$lab/vmlinux"

log "building the initramfs"
root="$lab/initramfs"
rm -rf "$root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,host,newroot,lib/modules/$version}
cp /bin/busybox "$root/bin/busybox"
for tool in sh mount umount mkdir cat echo insmod sleep chroot cut printf dd poweroff ls cp chmod; do ln -s busybox "$root/bin/$tool"; done
: > "$root/modules"
for module in vivid snd-aloop virtio_pci 9pnet_virtio 9p overlay; do
  modprobe -d "$lab/kernel" -S "$version" --show-depends "$module" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r path; do
  relative=${path#"$lab/kernel"}
  mkdir -p "$root$(dirname "$relative")"
  cp "$path" "$root$relative"
  echo "$relative" >> "$root/modules"
done
cp "$here/init" "$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$lab/initramfs.cpio.gz"
rm -f "$lab"/ready-*
touch "$lab/ready-$version"
log "ready: kernel $version, $(wc -l < "$root/modules") modules"
echo "$lab"
