//! Address → (function, line) lookups, the hot path of a symbolised trace.
//!
//! Each iteration looks up every address of a list once; with
//! `Throughput::Elements` criterion reports lookups per second, and the time
//! per iteration divided by the count is the amortised cost of one lookup
//! (also printed as `ns/lookup` below the criterion output).
//!
//! - `aarch64/*`: every instruction address of `.text` of the C++ test
//!   program (tests/data/symbols/bin/shapes), in order, repeatedly, as a
//!   trace of that program revisits its code.
//! - `large-scattered/*`: this benchmark executable itself (thousands of
//!   functions, line tables from `debug = 1`), one address every 64 bytes of
//!   `.text`, visited in a scattered order: the worst case, every lookup a
//!   cache miss.
//! - `large-trace/*`: the same image, 200k addresses in runs of 1 to 12
//!   consecutive instructions from basic blocks, 90% of them from a hot set
//!   of 256: what a decoded trace looks like.
//!
//! `locate` is the uncached lookup (binary searches over the sorted symbol
//! and line tables), `cursor` the same behind a cursor's direct-mapped
//! cache, `symbolize` the full answer with the inline chain.
//!
//! Run: `cargo bench --bench symbols`.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use object::{Object, ObjectSection};
use tracesight::symbols::Symbolizer;

fn text_range(path: &Path) -> (u64, u64) {
    let bytes = std::fs::read(path).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let text = file.section_by_name(".text").unwrap();
    (text.address(), text.address() + text.size())
}

fn lookups(sym: &Symbolizer, addrs: &[u64]) -> u64 {
    let mut n = 0u64;
    for &a in addrs {
        let l = sym.locate(a);
        n += u64::from(l.line) + l.function.map_or(0, |f| f.size);
    }
    n
}

fn report(name: &str, addrs: &[u64], mut f: impl FnMut(&[u64]) -> u64) {
    // A quick figure of our own, next to criterion's: amortised ns per lookup.
    let rounds = (2_000_000 / addrs.len()).max(3);
    black_box(f(addrs));
    let t = Instant::now();
    for _ in 0..rounds {
        black_box(f(black_box(addrs)));
    }
    let ns = t.elapsed().as_nanos() as f64 / (rounds * addrs.len()) as f64;
    println!("{name}: {ns:.1} ns/lookup ({} addresses x {rounds})", addrs.len());
}

fn group(c: &mut Criterion, name: &str, sym: &Symbolizer, addrs: &[u64]) {
    // Build the lazily made tables before measuring.
    for im in sym.images() {
        im.line_rows();
    }
    report(&format!("{name}/locate"), addrs, |a| lookups(sym, a));
    let mut cur = sym.cursor();
    report(&format!("{name}/cursor"), addrs, |a| {
        let mut n = 0u64;
        for &x in a {
            let l = cur.locate(x);
            n += u64::from(l.line) + l.function.map_or(0, |f| f.size);
        }
        n
    });

    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(addrs.len() as u64));
    g.bench_function("locate", |b| b.iter(|| lookups(sym, black_box(addrs))));
    let mut cur = sym.cursor();
    g.bench_function("cursor", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for &a in black_box(addrs) {
                let l = cur.locate(a);
                n += u64::from(l.line) + l.function.map_or(0, |f| f.size);
            }
            n
        })
    });
    g.bench_function("function", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for &a in black_box(addrs) {
                n += sym.function(a).map_or(0, |f| f.offset);
            }
            n
        })
    });
    if addrs.len() <= 4096 {
        g.bench_function("symbolize", |b| {
            b.iter(|| {
                let mut n = 0usize;
                for &a in black_box(addrs) {
                    n += sym.symbolize(a).frames.len();
                }
                n
            })
        });
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    let shapes = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/symbols/bin/shapes");
    let sym = Symbolizer::from_images([(&shapes, None)]).unwrap();
    let (lo, hi) = text_range(&shapes);
    let addrs: Vec<u64> = (lo..hi).step_by(4).collect();
    group(c, "aarch64", &sym, &addrs);

    // A large image: this executable.
    let me = std::env::current_exe().unwrap();
    if let Ok(sym) = Symbolizer::from_images([(&me, None)]) {
        let (lo, hi) = text_range(&me);
        let mut addrs: Vec<u64> = (lo..hi).step_by(64).collect();
        // Scatter the order (a fixed permutation) so lookups do not simply
        // walk the tables.
        let n = addrs.len();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..n).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            addrs.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let im = &sym.images()[0];
        println!("large image: {}", im.summary());
        println!("large image: {} line rows, {} lookup addresses", im.line_rows(), addrs.len());
        group(c, "large-scattered", &sym, &addrs);

        // Trace-like: runs of consecutive instructions from basic blocks,
        // most of them from a hot set, as a decoded trace gives them.
        let mut trace = Vec::with_capacity(200_000);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let hot = &addrs[..256];
        while trace.len() < 200_000 {
            let r = rnd();
            let start = if r % 10 < 9 { hot[(r >> 8) as usize % hot.len()] } else { addrs[(r >> 8) as usize % n] };
            let len = 1 + (r >> 40) % 12;
            trace.extend((0..len).map(|k| start + 4 * k));
        }
        group(c, "large-trace", &sym, &trace);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
