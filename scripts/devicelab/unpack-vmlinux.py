# Writes the ELF kernel inside a Debian bzImage (its xz-compressed payload) to a file.
import lzma
import sys

image = open(sys.argv[1], "rb").read()
start = image.find(b"\xfd7zXZ\x00")
if start < 0:
    sys.exit("no xz payload in " + sys.argv[1])
elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(image[start:])
if elf[:4] != b"\x7fELF":
    sys.exit("the payload is not an ELF kernel")
open(sys.argv[2], "wb").write(elf)
