#!/bin/sh
# Rebuild the synthesized snapshots checked in under tests/data/synth/snapshots
# (the part of the synth round-trip test that runs without qemu).
#
# Needs qemu-aarch64 (Debian: qemu-user) and aarch64-linux-gnu-gcc
# (gcc-aarch64-linux-gnu). The programs are the freestanding mini_* ones
# (no C library), so the snapshots stay a few kilobytes.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CC=${CC:-aarch64-linux-gnu-gcc}
for p in mini_recursion mini_dispatch; do
    $CC -O1 -g -static -nostdlib -ffreestanding -fno-stack-protector -fno-builtin \
        -Wl,--build-id=none -Wl,-z,max-page-size=4096 \
        -o "$tmp/$p" "$root/tests/data/synth/$p.c"
done
cargo build --release --manifest-path "$root/Cargo.toml"
ts="$root/target/release/tracesight"
snap="$root/tests/data/synth/snapshots"
mkdir -p "$snap"
# Unformatted; speculation, cycle counts, timestamps; a synthetic EL1
# handler traced for each system call.
"$ts" synth -o "$snap/mini_recursion" --expected --ts-period 1000 -- "$tmp/mini_recursion"
# Formatter frames; the kernel filtered out of the trace; frequent syncs.
"$ts" synth -o "$snap/mini_dispatch" --expected --svc filtered --formatted --trace-id 20 \
    --sync-period 512 --max-spec 12 --commit-batch 5 -- "$tmp/mini_dispatch"
