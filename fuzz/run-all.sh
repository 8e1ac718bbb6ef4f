#!/bin/sh
# Run every fuzz target for N minutes each (default 10), one after the other,
# and print each one's executions and coverage at the end.
# Usage: fuzz/run-all.sh [MINUTES]   (from anywhere)
set -eu
minutes=${1:-10}
cd "$(dirname "$0")"
# cargo-fuzz needs a nightly toolchain.
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
# Inputs large enough for each target's header and a few packets.
max_len() {
    case "$1" in
        perf_data) echo 65536 ;;
        demangle) echo 1100 ;;
        frame_demux|snapshot_open|export_writers|runner_routing) echo 8192 ;;
        *) echo 4096 ;;
    esac
}
mkdir -p logs
for t in $(cargo +nightly fuzz list); do
    mkdir -p "corpus/$t"
    echo "== $t: $minutes min"
    cargo +nightly fuzz run -O -s none "$t" -- \
        -max_total_time=$((minutes * 60)) -max_len="$(max_len "$t")" -print_final_stats=1 \
        >"logs/$t.log" 2>&1 || echo "$t: FAILED (see fuzz/logs/$t.log and fuzz/artifacts/$t/)"
    # The last status line has the executions (#N) and coverage (cov: / ft:).
    grep -E '^#[0-9]+' "logs/$t.log" | tail -1
    grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec' "logs/$t.log" || true
done
