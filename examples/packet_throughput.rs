//! Time packet parsing of a capture's default buffer repeated N times in memory
//! (no output): `cargo run --release --example packet_throughput -- SNAPSHOT [COPIES]`.
//! A quick profiling target; `cargo bench --bench packets` gives the figures.

use std::time::Instant;

use tracesight::input::Snapshot;
use tracesight::session::{run_packets, BufferPlan, Event, RunOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: packet_throughput SNAPSHOT [COPIES]");
    let copies: usize = args.next().map(|s| s.parse().expect("COPIES is a number")).unwrap_or(1024);
    let snap = Snapshot::open(dir.as_ref()).unwrap_or_else(|e| panic!("{e}"));
    let buffer = snap.default_buffer().expect("no trace buffer").clone();
    let plan = BufferPlan::new(&snap, &buffer).unwrap_or_else(|e| panic!("{e}"));
    let one = std::fs::read(&buffer.path).unwrap();
    let data: Vec<u8> = one.iter().copied().cycle().take(one.len() * copies).collect();
    let t = Instant::now();
    let mut packets = 0u64;
    run_packets(&plan, &data, &RunOptions::default(), |ev| {
        if let Event::Packet { .. } = ev {
            packets += 1;
        }
    })
    .unwrap();
    let s = t.elapsed().as_secs_f64();
    let mib = data.len() as f64 / (1 << 20) as f64;
    println!("{mib:.1} MiB, {packets} packets in {s:.3} s: {:.1} MiB/s, {:.1} M packets/s", mib / s, packets as f64 / s / 1e6);
}
