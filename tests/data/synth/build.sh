#!/bin/sh
# Build the synthesis test programs for AArch64 Linux into OUT_DIR.
#
#   tests/data/synth/build.sh OUT_DIR
#
# Needs aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu); the C++
# program also needs aarch64-linux-gnu-g++ (g++-aarch64-linux-gnu) and is
# skipped without it. Everything is static except plt, which is linked
# against the cross sysroot's shared C library (run it with qemu -L).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT_DIR}
mkdir -p "$out"
CC=${CC:-aarch64-linux-gnu-gcc}
CXX=${CXX:-aarch64-linux-gnu-g++}
CFLAGS="-O1 -g -fno-omit-frame-pointer"

for p in recursion loops dispatch longjmp syscalls; do
    $CC $CFLAGS -static -o "$out/$p" "$here/$p.c"
done
$CC $CFLAGS -static -pthread -o "$out/threads" "$here/threads.c"
$CC $CFLAGS -o "$out/plt" "$here/plt.c"
if command -v "$CXX" >/dev/null 2>&1; then
    $CXX $CFLAGS -static -o "$out/exceptions" "$here/exceptions.cpp"
fi
# Freestanding programs: no C library, a few kilobytes each.
for p in mini_recursion mini_dispatch; do
    $CC -O1 -g -static -nostdlib -ffreestanding -fno-stack-protector -fno-builtin \
        -Wl,--build-id=none -Wl,-z,max-page-size=4096 -o "$out/$p" "$here/$p.c"
done
