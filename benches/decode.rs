//! Full decode throughput: packets to elements over the program image, no
//! output, on fixture captures and on captures repeated in memory to the sizes
//! of ../shared/fixtures/opencsd/BASELINE.md.
//!
//! Run: `cargo bench --bench decode`.

mod common;

use common::{input, Input};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tracesight::session::{run, Event, RunOptions};

fn decode(inp: &Input) -> u64 {
    let opts = RunOptions { elements: true, ..Default::default() };
    let mut n = 0u64;
    run(&inp.plan, &inp.data, &opts, |ev| {
        if let Event::Element { .. } = ev {
            n += 1;
        }
    })
    .unwrap();
    n
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    g.sample_size(10);
    let names = ["001-ack_test", "texit-poe2", "juno_r1_1"];
    let inputs = names.iter().filter_map(|n| input(n, 0)).chain(names.iter().filter_map(|n| input(n, 16 << 20)));
    for inp in inputs {
        g.throughput(Throughput::Bytes(inp.data.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(&inp.name), &inp, |b, inp| b.iter(|| decode(inp)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
