#!/bin/sh
# Rebuild the aarch64 test programs for tests/symbols.rs and regenerate the
# expected addr2line output.
#
# Needs the Debian packages gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu and
# binutils-aarch64-linux-gnu. The tests themselves only read the checked-in
# results, so they need no cross toolchain.
#
# Paths in the debug information are mapped to /tracesight/symbols, so the
# output does not depend on where the repository is checked out.
set -eu
cd "$(dirname "$0")"
here=$(pwd)
T=aarch64-linux-gnu
CFLAGS="-g -O2 -frandom-seed=tracesight -ffile-prefix-map=$here=/tracesight/symbols"
LDFLAGS="-Wl,-z,max-page-size=4096 -Wl,-z,common-page-size=4096 -Wl,--build-id=none"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf bin expected
mkdir -p bin expected

# C: position-dependent executable.
$T-gcc $CFLAGS -fno-pie -no-pie $LDFLAGS -o bin/prog src/prog.c src/util.c
# C: position-independent executable with zlib-compressed debug sections.
$T-gcc $CFLAGS -fpie -pie $LDFLAGS -Wl,--compress-debug-sections=zlib -o bin/prog-pie src/prog.c src/util.c
# C: symbols only (debug information removed), and fully stripped.
$T-strip --strip-debug -o bin/prog-nodebug bin/prog
$T-strip --strip-all -o bin/prog-stripped bin/prog
# C: split DWARF: skeleton units in the executable, the rest in .dwo files
# next to it (found through DW_AT_dwo_name, or next to the executable). The
# code is the same as bin/prog; GNU addr2line 2.40 cannot read split DWARF,
# so the test compares it with expected/prog.txt. (The DWO id of
# split-prog.dwo changes from one build to the next.)
$T-gcc $CFLAGS -fno-pie -gsplit-dwarf -c -o bin/split-prog.o src/prog.c
$T-gcc $CFLAGS -fno-pie -gsplit-dwarf -c -o bin/split-util.o src/util.c
$T-gcc -no-pie $LDFLAGS -o bin/prog-split bin/split-prog.o bin/split-util.o
rm bin/split-prog.o bin/split-util.o
# C++: namespaces, templates, an anonymous namespace, a lambda.
$T-g++ $CFLAGS -fno-pie -no-pie $LDFLAGS -o bin/shapes src/shapes.cpp

# Every instruction address of .text, through addr2line.
text_addresses() {
    set -- $($T-objdump -h "$1" | awk '$2 == ".text" { print $3, $4 }')
    a=$((0x$2)); end=$((0x$2 + 0x$1))
    while [ $a -lt $end ]; do printf '0x%x\n' $a; a=$((a + 4)); done
}
for b in prog prog-pie prog-nodebug prog-stripped shapes; do
    text_addresses bin/$b > "$tmp/addrs"
    $T-addr2line -a -f -i -C -e bin/$b $(cat "$tmp/addrs") > expected/$b.txt
done
# The C++ symbol names and their demangling by binutils.
$T-nm --defined-only bin/shapes | awk '$3 ~ /^_Z/ { print $3 }' | sort -u > "$tmp/mangled"
$T-c++filt < "$tmp/mangled" > "$tmp/demangled"
paste "$tmp/mangled" "$tmp/demangled" > expected/shapes-demangled.txt
ls -l bin expected
