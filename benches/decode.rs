//! Full decode throughput: packets to elements over the program image, no
//! output, on fixture captures and on captures repeated in memory to the sizes
//! of ../shared/fixtures/opencsd/BASELINE.md.
//!
//! Run: `cargo bench --bench decode`.

mod common;

use std::sync::Arc;

use common::{input, Input};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tracesight::element::{ElementKind, MemSpace};
use tracesight::image::memory::MemoryImage;
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

/// The instructions of the ranges `inp` decodes to.
fn instructions(inp: &Input) -> u64 {
    let mut count = 0;
    run(&inp.plan, &inp.data, &RunOptions { elements: true, ..Default::default() }, |ev| {
        if let Event::Element { element, .. } = ev {
            if let ElementKind::InstrRange { count: c, .. } = element.kind {
                count += c as u64;
            }
        }
    })
    .unwrap();
    count
}

/// One instruction range of `n` instructions: 001-ack_test's first packets
/// (A-sync, Trace Info, Trace On, an address with context, one E atom) over an
/// image of `n - 1` NOPs and a RET where that address points. With the image's
/// stop maps the walk's cost hardly grows with `n` once the maps' pages are
/// built (the first iteration builds them); `stepped/N` is the same walk one
/// instruction at a time, as before the maps.
fn long_range(c: &mut Criterion) {
    let Some(base) = input("001-ack_test", 0) else { return };
    let mut g = c.benchmark_group("long_range");
    for (n, maps) in [(1u64 << 10, true), (1 << 16, true), (1 << 22, true), (1 << 16, false)] {
        let mut code = 0xd503_201fu32.to_le_bytes().repeat(n as usize - 1);
        code.extend_from_slice(&0xd65f_03c0u32.to_le_bytes());
        let mut image = MemoryImage::new();
        image.add_bytes(0xa10c8, code, MemSpace::ANY);
        image.set_stop_maps(maps);
        let mut plan = base.plan.clone();
        plan.image = Arc::new(image);
        let name = if maps { format!("{n}") } else { format!("stepped/{n}") };
        let inp = Input { name, plan, data: base.data[..22].to_vec() };
        assert_eq!(instructions(&inp), n, "the range walks the whole image");
        g.bench_with_input(BenchmarkId::from_parameter(&inp.name), &inp, |b, inp| b.iter(|| instructions(inp)));
    }
    g.finish();
}

criterion_group!(benches, bench, long_range);
criterion_main!(benches);
