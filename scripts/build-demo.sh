#!/bin/sh
# Rebuild the bundled demo capture, assets/demo/snapshot: the demo program
# (assets/demo/src/demo.c) built for AArch64 Linux with DWARF, run under
# qemu-aarch64, and its execution synthesized as an ETE trace with
# timestamps, cycle counts and speculation.
#
#   scripts/build-demo.sh [ROUNDS]
#
# ROUNDS (default 24) sets how much work the program does and so the size of
# the trace (about 150 KB per round). Needs qemu-aarch64 (Debian: qemu-user)
# and aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu); the checked-in result
# does not.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-24}
demo="$root/assets/demo"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CC=${CC:-aarch64-linux-gnu-gcc}
# Compiled from assets/demo, so that the DWARF names the source src/demo.c.
# The DWARF compilation directory is recorded as "..", so that the source
# resolves from the ELF's directory (snapshot/) to ../src/demo.c.
(cd "$demo" && $CC -O2 -g -static -fno-omit-frame-pointer -fdebug-prefix-map="$demo"=.. \
    -o "$tmp/demo" src/demo.c)
cargo build --release --manifest-path "$root/Cargo.toml"
"$root/target/release/tracesight" synth -o "$demo/snapshot" --ts-period 2000 -- "$tmp/demo" "$rounds"
du -sh "$demo"
