//! Time `profile --format stats` of a capture beside its index build, in the
//! library (nothing printed but the figures):
//! `cargo run --release --example profile_stats -- SNAPSHOT [--image ELF]...`
//!
//! The index is rebuilt first (on all cores, timed), then the statistics
//! pass decodes the whole buffer through it, once on one core and once on
//! all cores (both timed, with the load average read before each: the
//! figures mean little on a busy machine); the two tables must be equal and
//! the sum of self instructions must equal the index's instruction total.

use std::time::Instant;

use tracesight::capture::{Capture, CaptureOptions};
use tracesight::index::{BuildProgress, IndexOptions};
use tracesight::profile::pass::{collect, collect_parallel, Parallel};
use tracesight::profile::stats::{write_text, Column, Group};
use tracesight::profile::{CodeMap, Collector, FunctionMap, NoCode};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args.first().expect("usage: profile_stats SNAPSHOT [--image ELF]...");
    let images: Vec<String> = args.windows(2).filter(|w| w[0] == "--image").map(|w| w[1].clone()).collect();
    let cap = Capture::open(dir.as_ref(), &CaptureOptions { images, ..Default::default() }).unwrap_or_else(|e| panic!("{e}"));
    let mib = cap.file.bytes().len() as f64 / (1 << 20) as f64;

    let t0 = Instant::now();
    let idx = cap.open_index(&IndexOptions::default(), true, &BuildProgress::new()).unwrap_or_else(|e| panic!("{e}"));
    let build = t0.elapsed().as_secs_f64();

    let fmap = cap.symbols.as_ref().map(|s| FunctionMap::from_table(&s.function_table()));
    let code: &dyn CodeMap = match &fmap {
        Some(m) => m,
        None => &NoCode,
    };
    let seeker = cap.seeker(&idx.file);
    let total = idx.file.totals();
    let mut col = Collector::new(code, Group::All, false, false);
    let load1 = load();
    let t1 = Instant::now();
    collect(&seeker, 0, total.elements, &mut col, |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let serial = t1.elapsed().as_secs_f64();
    assert_eq!(col.stats.self_instructions(), total.instructions, "self instructions sum to the total");
    let mut par = Collector::new(code, Group::All, false, false);
    let load2 = load();
    let t2 = Instant::now();
    collect_parallel(&seeker, 0, total.elements, &mut par, Parallel::default(), |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let parallel = t2.elapsed().as_secs_f64();
    let text = |c: &Collector| write_text(&c.stats, code, Column::SelfInstructions);
    assert!(text(&col) == text(&par), "the parallel pass gives the serial one's table");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{dir}: {mib:.1} MiB, {} elements, {} instructions, {} functions",
        total.elements,
        total.instructions,
        col.stats.functions.len()
    );
    println!("index build (rebuild, all cores): {build:.2} s = {:.1} MiB/s", mib / build);
    println!("profile stats, one core:          {serial:.2} s = {:.1} MiB/s (load average before: {load1})", mib / serial);
    println!(
        "profile stats, {:<19}{parallel:.2} s = {:.1} MiB/s (load average before: {load2}), {:.2}x",
        format!("{cores} cores:"),
        mib / parallel,
        serial / parallel
    );
}

/// The 1, 5 and 15 minute load averages (Linux), to note beside a figure.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "unknown".into(), |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}
