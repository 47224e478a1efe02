#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Extracts the uncompressed ELF kernel from a bzImage, for a faster boot under TCG.

Usage: extract_vmlinux.py BZIMAGE OUT

The ELF image has a PVH entry note, so qemu starts it directly and the emulated CPU skips
the decompressor. Tries each compressed stream found in the image (xz, gzip, lzma, and
zstd through the zstd program, as Debian 13's kernel is compressed) and keeps the first
that yields an ELF file. Exit 0 on success, 1 when no stream decompressed to an ELF file.
"""
import lzma
import os
import shutil
import subprocess
import sys
import zlib

MAGICS = [
    ("xz", b"\xfd7zXZ\x00"),
    ("gzip", b"\x1f\x8b\x08"),
    ("lzma", b"\x5d\x00\x00\x00"),
    ("zstd", b"\x28\xb5\x2f\xfd"),
]


def try_decompress(kind, blob):
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(blob)
    if kind == "lzma":
        return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(blob)
    if kind == "gzip":
        # wbits 16+MAX_WBITS: a gzip header; a decompressobj stops at the stream's end and
        # ignores the rest of the image.
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(blob)
    if kind == "zstd":
        # Python's standard library has no zstd before 3.14: the zstd program (Debian's zstd
        # package), which writes the frame out and then fails on the image's trailing bytes,
        # as the kernel's scripts/extract-vmlinux expects of it.
        if shutil.which("zstd") is None:
            raise OSError("no zstd program")
        run = subprocess.run(["zstd", "-dcq"], input=blob, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=120, check=False)
        return run.stdout
    raise ValueError(kind)


def extract(image):
    for kind, magic in MAGICS:
        start = 0
        while True:
            pos = image.find(magic, start)
            if pos < 0:
                break
            start = pos + 1
            try:
                out = try_decompress(kind, image[pos:])
            except (lzma.LZMAError, zlib.error, EOFError, OSError, subprocess.TimeoutExpired):
                continue
            if out[:4] == b"\x7fELF":
                return out
    return None


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        image = f.read()
    elf = extract(image)
    if elf is None:
        print(f"extract_vmlinux: no compressed ELF kernel found in {src}", file=sys.stderr)
        return 1
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(elf)
    os.replace(tmp, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
