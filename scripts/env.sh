# Sourced by the other scripts: puts the Swift toolchain on PATH where the image keeps it.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi
command -v swift >/dev/null 2>&1 || { echo "swift is not on PATH (expected /opt/swift/usr/bin)" >&2; exit 1; }
