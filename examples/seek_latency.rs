//! Seek latency inside the library: open a capture's index (building it when
//! missing), then fetch a screenful of elements (50) at random element
//! numbers and report the latency distribution.
//!
//! ```sh
//! cargo run --release --example seek_latency -- /tmp/big/ack-1g [TARGETS]
//! ```

use std::time::Instant;

use tracesight::index::{self, IndexOptions, Seeker};
use tracesight::input::Snapshot;
use tracesight::session::{BufferPlan, RunOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).expect("usage: seek_latency SNAPSHOT_DIR [TARGETS]");
    let targets: usize = args.get(2).map(|s| s.parse().expect("a number of targets")).unwrap_or(1000);
    let snap = Snapshot::open(std::path::Path::new(dir)).expect("snapshot");
    let buffer = snap.default_buffer().expect("a trace buffer").clone();
    let plan = BufferPlan::new(&snap, &buffer).expect("plan");
    let file = plan.open().expect("trace file");
    let data = file.bytes();
    let opts = RunOptions::default();
    let t0 = Instant::now();
    let idx = index::open_or_build(&plan, data, &opts, &IndexOptions::default(), false, &index::BuildProgress::new(), None).expect("index");
    println!(
        "index: {} in {:.3} s ({} checkpoints, {} elements, {:.1} MiB file)",
        if idx.built { "built" } else { "opened" },
        t0.elapsed().as_secs_f64(),
        idx.file.len(),
        idx.file.totals().elements,
        idx.file.file_len() as f64 / (1 << 20) as f64
    );
    if idx.built {
        println!("index build: {:.1} MiB/s", data.len() as f64 / (1 << 20) as f64 / t0.elapsed().as_secs_f64());
    }
    let seeker = Seeker::over_file(&plan, &file, &opts, &idx.file);
    let total = idx.file.totals().elements;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut lat = Vec::with_capacity(targets);
    for _ in 0..targets {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = x % total.max(1);
        let t = Instant::now();
        let rows = seeker.window(at, 50).expect("window");
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(!rows.is_empty());
    }
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{} seeks of 50 elements: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        lat[lat.len() - 1]
    );
}
