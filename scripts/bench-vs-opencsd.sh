#!/bin/sh
# Whole-process decode speed against OpenCSD's trc_pkt_lister, the way
# ../shared/fixtures/opencsd/BASELINE.md measures it: each capture's first
# trace buffer is repeated back to back into a copy of its snapshot until it
# holds at least MIB MiB, then `trc_pkt_lister -decode -profile` (printers
# muted) and `tracesight decode --summary` run alternately RUNS times each;
# the ratio of the median wall times is printed per capture.
#
#   scripts/bench-vs-opencsd.sh [-m MIB] [-r RUNS] [CAPTURE...]
#
# CAPTURE names a snapshot under $FIXTURES (default ../shared/fixtures/opencsd
# beside the repository); default: 001-ack_test texit-poe2 juno_r1_1 (MIB 16,
# RUNS 3). trc_pkt_lister is $TRC_PKT_LISTER or the one on PATH; without it
# only tracesight is timed. OpenCSD 1.8.0's lister exits 139 after a
# `-profile` run has finished (a bug in its statistics printer, see
# TRC_PKT_LISTER.md beside the fixtures): that exit counts as success. The
# inputs are made once under $BENCH_DIR (default target/bench-inputs).
# Run it on an otherwise idle machine: the figures are wall times.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
mib=16
runs=3
while getopts m:r: o; do
    case $o in
        m) mib=$OPTARG ;;
        r) runs=$OPTARG ;;
        *) echo "usage: $0 [-m MIB] [-r RUNS] [CAPTURE...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- 001-ack_test texit-poe2 juno_r1_1
fixtures=${FIXTURES:-$root/../shared/fixtures/opencsd}
work=${BENCH_DIR:-$root/target/bench-inputs}
lister=${TRC_PKT_LISTER:-$(command -v trc_pkt_lister || true)}

cargo build --release --quiet --manifest-path "$root/Cargo.toml"
ts="$root/target/release/tracesight"

now() { date +%s%N; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# The first buffer's trace file, as trc_pkt_lister picks it (trace.ini's
# first `file=` line).
trace_file() { sed -n 's/^[[:space:]]*file[[:space:]]*=[[:space:]]*//p' "$1/trace.ini" | head -n 1 | tr -d '\r'; }

# make_input NAME: a copy of the snapshot with its trace file repeated.
make_input() {
    src="$fixtures/$1"
    dst="$work/$1-${mib}m"
    [ -d "$src" ] || { echo "no capture $src" >&2; exit 1; }
    if [ ! -f "$dst/.complete" ]; then
        rm -rf "$dst"
        mkdir -p "$dst"
        # Everything but the goldens; the trace file is written below.
        (cd "$src" && find . -path ./expected -prune -o -type f -print) | while read -r f; do
            mkdir -p "$dst/$(dirname "$f")"
            cp "$src/$f" "$dst/$f"
        done
        tf=$(trace_file "$src")
        size=$(wc -c <"$src/$tf")
        copies=$(( (mib * 1048576 + size - 1) / size ))
        # Doubled until there are enough copies, then cut to `copies` of
        # them: one `cat` per copy took minutes for a trace of a few bytes.
        cp "$src/$tf" "$dst/$tf.rep"
        n=1
        while [ $n -lt "$copies" ]; do
            cat "$dst/$tf.rep" "$dst/$tf.rep" >"$dst/$tf.tmp"
            mv "$dst/$tf.tmp" "$dst/$tf.rep"
            n=$((n * 2))
        done
        head -c $((copies * size)) "$dst/$tf.rep" >"$dst/$tf"
        rm -f "$dst/$tf.rep"
        touch "$dst/.complete"
    fi
    echo "$dst"
}

version=""
if [ -n "$lister" ]; then
    # Run where its default log file (trc_pkt_lister.ppl) may land.
    mkdir -p "$work"
    version=$(cd "$work" && "$lister" -help -logstdout 2>/dev/null | sed -n 's/.*Library Version : *//p' | head -n 1 || true)
    echo "trc_pkt_lister: $lister (OpenCSD ${version:-version unknown})"
else
    echo "trc_pkt_lister not found (set TRC_PKT_LISTER): timing tracesight only"
fi
echo "tracesight: $("$ts" --version)"
echo
printf '| %-14s | %9s | %14s | %17s | %7s |\n' capture "input MiB" "tracesight s" "trc_pkt_lister s" ratio
printf '| %-14s | %9s | %14s | %17s | %7s |\n' -------------- --------- -------------- ----------------- -------
for name in "$@"; do
    dir=$(make_input "$name")
    bytes=$(wc -c <"$dir/$(trace_file "$dir")")
    t_ours="$work/.ours"
    t_theirs="$work/.theirs"
    : >"$t_ours"
    : >"$t_theirs"
    r=0
    while [ $r -lt "$runs" ]; do
        if [ -n "$lister" ]; then
            a=$(now)
            status=0
            # The braces also silence the shell's own "Segmentation fault".
            { (cd "$dir" && "$lister" -ss_dir . -decode -profile -no_time_print -logfilename /dev/null) \
                >/dev/null 2>&1 || status=$?; } 2>/dev/null
            b=$(now)
            if [ $status -ne 0 ] && [ $status -ne 139 ]; then
                echo "$name: trc_pkt_lister failed (exit $status)" >&2
                exit 1
            fi
            echo $((b - a)) >>"$t_theirs"
        fi
        a=$(now)
        "$ts" decode "$dir" --summary >/dev/null
        b=$(now)
        echo $((b - a)) >>"$t_ours"
        r=$((r + 1))
    done
    ours=$(median <"$t_ours")
    if [ -n "$lister" ]; then
        theirs=$(median <"$t_theirs")
        ratio=$(awk -v a="$theirs" -v b="$ours" 'BEGIN { printf "%.1fx", a / b }')
        theirs_s=$(awk -v t="$theirs" 'BEGIN { printf "%.3f", t / 1e9 }')
    else
        ratio="-"
        theirs_s="-"
    fi
    printf '| %-14s | %9.1f | %14s | %17s | %7s |\n' "$name" "$(awk -v b="$bytes" 'BEGIN { print b / 1048576 }')" \
        "$(awk -v t="$ours" 'BEGIN { printf "%.3f", t / 1e9 }')" "$theirs_s" "$ratio"
done
