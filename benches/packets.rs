//! Packet parsing throughput (frame demultiplexing included), on the fixture
//! captures and on large captures made by repeating a fixture's buffer in
//! memory, the way ../shared/fixtures/opencsd/BASELINE.md built the inputs it
//! timed trc_pkt_lister on. Nothing is printed: the sink only counts packets.
//!
//! Run: `cargo bench --bench packets`. The 64 MiB inputs are the sizes of
//! BASELINE.md's `juno_r1_1-1024`, `001-ack_test-4151` and `texit-poe2-2232`.
//!
//! Group `packets`: every packet sent as an event in the buffer's order (what
//! a listing reads). Group `packet_counts`: what `decode --summary
//! --packets` does, the packets counted per source in the parsers' chains
//! and each trace ID's data gathered across the others'.

mod common;

use common::{input, Input};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tracesight::export::summary::DecodeCounts;
use tracesight::index::IndexOptions;
use tracesight::session::{run_packets, Event, Fragment, RunOptions};

fn count_packets(inp: &Input) -> u64 {
    let mut n = 0u64;
    run_packets(&inp.plan, &inp.data, &RunOptions::default(), |ev| {
        if let Event::Packet { .. } = ev {
            n += 1;
        }
    })
    .unwrap();
    n
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("packets");
    g.sample_size(10);
    let small = ["001-ack_test", "texit-poe2", "juno_r1_1", "bugfix-exact-match"];
    let large = ["001-ack_test", "texit-poe2", "juno_r1_1"];
    let inputs = small
        .iter()
        .filter_map(|n| input(n, 0))
        .chain(large.iter().filter_map(|n| input(n, 64 << 20)));
    for inp in inputs {
        g.throughput(Throughput::Bytes(inp.data.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(&inp.name), &inp, |b, inp| b.iter(|| count_packets(inp)));
    }
    g.finish();
    let mut g = c.benchmark_group("packet_counts");
    g.sample_size(10);
    for inp in large.iter().filter_map(|n| input(n, 64 << 20)) {
        g.throughput(Throughput::Bytes(inp.data.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(&inp.name), &inp, |b, inp| b.iter(|| summary_packets(inp)));
    }
    g.finish();
}

fn summary_packets(inp: &Input) -> u64 {
    let mut c = DecodeCounts::default();
    c.count_parallel(&inp.plan, &inp.data, &[Fragment::whole(inp.data.len())], &RunOptions::default(), &IndexOptions::default());
    c.total().packets
}

criterion_group!(benches, bench);
criterion_main!(benches);
