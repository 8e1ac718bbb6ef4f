//! Time the index build of a capture's default buffer in memory (no file
//! written), once per thread count given:
//! `cargo run --release --example index_build -- SNAPSHOT [THREADS...] [--repeat N]`
//! (default thread counts: 1 and 2). Every build after the first is checked
//! to give the same index as the first.

use std::time::Instant;

use tracesight::index::{self, IndexOptions};
use tracesight::input::Snapshot;
use tracesight::session::{BufferPlan, RunOptions};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut repeat = 1usize;
    if let Some(i) = args.iter().position(|a| a == "--repeat") {
        repeat = args.get(i + 1).and_then(|s| s.parse().ok()).expect("--repeat N");
        args.drain(i..i + 2);
    }
    let dir = args.first().expect("usage: index_build SNAPSHOT [THREADS...] [--repeat N]").clone();
    let mut threads: Vec<usize> = args[1..].iter().map(|s| s.parse().expect("THREADS is a number")).collect();
    if threads.is_empty() {
        threads = vec![1, 2];
    }
    let snap = Snapshot::open(dir.as_ref()).unwrap_or_else(|e| panic!("{e}"));
    let buffer = snap.default_buffer().expect("no trace buffer").clone();
    let plan = BufferPlan::new(&snap, &buffer).unwrap_or_else(|e| panic!("{e}"));
    let file = plan.open().unwrap_or_else(|e| panic!("{e}"));
    let data = file.bytes();
    let mib = data.len() as f64 / (1 << 20) as f64;
    let opts = RunOptions::default();
    let mut first: Option<index::format::IndexData> = None;
    for &t in &threads {
        let mut rates = Vec::new();
        for _ in 0..repeat {
            let iopts = IndexOptions { threads: t, ..IndexOptions::default() };
            let c0 = cpu_seconds();
            let t0 = Instant::now();
            let progress = index::BuildProgress::new();
            let built = index::build(&plan, data, &opts, &iopts, &progress, None);
            let s = t0.elapsed().as_secs_f64();
            rates.push(mib / s);
            let cpu = cpu_seconds() - c0;
            println!(
                "{t} thread(s): {mib:.0} MiB in {s:.2} s = {:.1} MiB/s ({} checkpoints, {} elements; {} parts, {:.1} MiB decoded twice)",
                mib / s,
                built.checkpoints.len(),
                built.totals.elements,
                progress.parts(),
                progress.redone() as f64 / (1 << 20) as f64
            );
            println!("  CPU time {cpu:.1} s ({:.1} MiB per CPU second)", mib / cpu.max(0.01));
            match &first {
                None => first = Some(built),
                Some(f) => {
                    let same = f.checkpoints == built.checkpoints
                        && f.states == built.states
                        && f.ids == built.ids
                        && f.totals == built.totals
                        && f.stop == built.stop;
                    println!("  {}", if same { "identical to the first build" } else { "DIFFERS from the first build" });
                    assert!(same);
                }
            }
        }
        rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
        if repeat > 1 {
            println!("{t} thread(s): best {:.1} MiB/s, median {:.1} MiB/s", rates[rates.len() - 1], rates[rates.len() / 2]);
        }
    }
}

/// User and system CPU time of this process (from /proc), 0 where unknown.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    (ticks(11) + ticks(12)) / 100.0
}
