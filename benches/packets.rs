//! Packet parsing throughput (frame demultiplexing included), on the fixture
//! captures and on large captures made by repeating a fixture's buffer in
//! memory, the way ../shared/fixtures/opencsd/BASELINE.md built the inputs it
//! timed trc_pkt_lister on. Nothing is printed: the sink only counts packets.
//!
//! Run: `cargo bench --bench packets`. The 64 MiB inputs are the sizes of
//! BASELINE.md's `juno_r1_1-1024`, `001-ack_test-4151` and `texit-poe2-2232`.

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tracesight::input::Snapshot;
use tracesight::session::{run_packets, BufferPlan, Event, RunOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd")
}

struct Input {
    name: String,
    plan: BufferPlan,
    data: Vec<u8>,
}

/// The default buffer of fixture `name`, repeated until it is at least
/// `min_len` bytes (a whole number of copies, as BASELINE.md does).
fn input(name: &str, min_len: usize) -> Option<Input> {
    let snap = Snapshot::open(&fixtures().join(name)).ok()?;
    let buffer = snap.default_buffer()?.clone();
    let plan = BufferPlan::new(&snap, &buffer).ok()?;
    let one = std::fs::read(&buffer.path).ok()?;
    let copies = min_len.div_ceil(one.len()).max(1);
    let mut data = Vec::with_capacity(one.len() * copies);
    for _ in 0..copies {
        data.extend_from_slice(&one);
    }
    let label = if copies == 1 { name.to_string() } else { format!("{name}-x{copies}") };
    Some(Input { name: label, plan, data })
}

fn count_packets(inp: &Input) -> u64 {
    let mut n = 0u64;
    run_packets(&inp.plan, &inp.data, &RunOptions::default(), |ev| {
        if let Event::Etm4 { .. } = ev {
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
