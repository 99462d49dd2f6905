#!/usr/bin/python3
"""Which pages of an executable a running process holds, and whose code is on them (issue 54).

  scripts/footprint/pages.py PID [--top N]

Reads /proc/PID/maps and /proc/PID/pagemap (root: the pagemap's present bit) for the mappings of
the process's own executable, and the executable's section headers and symbols (readelf, nm).
Prints, per section the process maps: its size and how much of it is resident; then the resident
text by whose code lies on each page: a Swift module (from the mangled name: `$s` + length + name)
or, for the rest, C/C++ (the Swift runtime's C++ parts, libdispatch, the C libraries linked in).

A resident text page holds code that ran, or code next to it: the kernel maps the pages around a
fault that are already in the page cache (fault-around), so the figure is a property of both what
ran and how the linker laid the code out.
"""
import argparse
import collections
import re
import struct
import subprocess
import sys

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("pid", type=int)
parser.add_argument("--top", type=int, default=12, help="modules to list (default 12)")
args = parser.parse_args()

executable = subprocess.run(["readlink", f"/proc/{args.pid}/exe"], capture_output=True, text=True, check=True).stdout.strip()
PAGE = 4096

# The executable's mappings: start, end, file offset.
mappings = []
with open(f"/proc/{args.pid}/maps") as f:
    for line in f:
        fields = line.split()
        if len(fields) >= 6 and fields[5] == executable:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            mappings.append((start, end, int(fields[2], 16), fields[1]))
if not mappings:
    sys.exit(f"pages.py: no mapping of {executable} in process {args.pid}")
load_bias = min(start - offset for start, _, offset, _ in mappings)

resident = set()  # addresses (as in the file's section headers) of resident pages
with open(f"/proc/{args.pid}/pagemap", "rb") as pagemap:
    for start, end, _, _ in mappings:
        for page in range(start, end, PAGE):
            pagemap.seek(page // PAGE * 8)
            (entry,) = struct.unpack("<Q", pagemap.read(8))
            if entry >> 63:
                resident.add(page - load_bias)
if not resident:
    sys.exit("pages.py: no page reads as present (the pagemap's present bit needs root)")

def resident_bytes(start, size):
    """Bytes of [start, start + size) on resident pages."""
    total = 0
    page = start // PAGE * PAGE
    while page < start + size:
        if page in resident:
            total += min(start + size, page + PAGE) - max(start, page)
        page += PAGE
    return total

sections = []
headers = subprocess.run(["readelf", "-SW", executable], capture_output=True, text=True, check=True).stdout
for line in headers.splitlines():
    m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\S+\s+(\S*A\S*)\s", line)
    if m and int(m.group(2), 16) != 0:  # allocated (flag A) and loaded at an address
        sections.append((m.group(1), int(m.group(2), 16), int(m.group(3), 16)))

print(f"{executable}: {len(resident) * PAGE // 1024} KiB of its pages resident in process {args.pid}")
print(f"{'section':32s} {'size KiB':>9s} {'resident KiB':>13s}")
for name, start, size in sections:
    held = resident_bytes(start, size)
    if held >= 1024:
        print(f"{name:32s} {size // 1024:9d} {held // 1024:13d}")

def owner(symbol):
    m = re.match(r"\$s(\d+)([A-Za-z_]\w*)", symbol)
    if m and len(m.group(2)) >= int(m.group(1)):
        return "Swift " + m.group(2)[: int(m.group(1))]
    if re.match(r"\$s[A-Za-z]", symbol):
        return "Swift Swift"  # the standard library's own substitutions ($sS..., $ss...)
    return "C/C++ (runtime, libdispatch, C libraries)"

text, size = collections.Counter(), collections.Counter()
symbols = subprocess.run(["nm", "-S", "--defined-only", executable], capture_output=True, text=True, check=True).stdout
for line in symbols.splitlines():
    fields = line.split()
    if len(fields) == 4 and fields[2] in "tTwW":
        text[owner(fields[3])] += resident_bytes(int(fields[0], 16), int(fields[1], 16))
        size[owner(fields[3])] += int(fields[1], 16)
print(f"\nresident text by whose code is on the page: KiB resident of KiB in the executable")
for name, held in text.most_common(args.top):
    print(f"  {name:44s} {held // 1024:6d} of {size[name] // 1024:6d}")
