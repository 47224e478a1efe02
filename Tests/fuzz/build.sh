#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer target of Tests/fuzz/FuzzTarget.swift: the sources of ShutterCore and
# the entry compiled as one module with -sanitize=fuzzer,address, linked under three names
# (fuzz-request, fuzz-json, fuzz-config; the name picks the parser).
#   Tests/fuzz/build.sh [OUTDIR]      default .build/fuzz
# Exit status 0 when built, 77 when this toolchain cannot build fuzzers (the reason is
# printed), 1 when the sources do not compile.
set -u
cd "$(dirname "$0")/../.."
out=${1:-.build/fuzz}

if ! command -v swiftc >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swiftc ]; then
    PATH=/opt/swift/usr/bin:$PATH
fi
command -v swiftc >/dev/null 2>&1 || { echo "fuzz: swiftc is not on PATH"; exit 77; }
mkdir -p "$out"

# Up to date: nothing it is built from is newer than the binary.
if [ -x "$out/shutter-fuzz" ] && [ -z "$(find Sources/ShutterCore Tests/fuzz/FuzzTarget.swift Tests/fuzz/build.sh \
    -newer "$out/shutter-fuzz" -name '*.s[wh]*' 2>/dev/null)" ]; then
    echo "fuzz: $out/shutter-fuzz is up to date"
    exit 0
fi

# The toolchain's own lld links these quietly; fall back to the default linker without it.
ld=
if swiftc -print-target-info >/dev/null 2>&1 && [ -x "$(dirname "$(command -v swiftc)")/ld.lld" ]; then
    ld=-use-ld=lld
fi

# Can this toolchain build a fuzzer at all? (libFuzzer ships with the Linux toolchains.)
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '@_cdecl("LLVMFuzzerTestOneInput")\npublic func f(_ d: UnsafePointer<UInt8>?, _ n: Int) -> CInt { 0 }\n' \
    >"$probe/probe.swift"
if ! swiftc -parse-as-library -sanitize=fuzzer,address $ld "$probe/probe.swift" -o "$probe/probe" \
    >"$probe/log" 2>&1; then
    echo "fuzz: this toolchain cannot build a fuzzer (swiftc -sanitize=fuzzer,address):"
    head -n 5 "$probe/log"
    exit 77
fi

# -O: libFuzzer's figures are executions per second; -g: reports name lines.
if ! swiftc -module-name ShutterFuzz -package-name shutterd -parse-as-library -O -g -sanitize=fuzzer,address $ld \
    Sources/ShutterCore/*.swift Tests/fuzz/FuzzTarget.swift -o "$out/shutter-fuzz"; then
    echo "fuzz: the fuzz target does not compile"
    exit 1
fi
for p in request json config; do
    ln -sf shutter-fuzz "$out/fuzz-$p"
done
echo "fuzz: built $out/fuzz-request, $out/fuzz-json, $out/fuzz-config"
