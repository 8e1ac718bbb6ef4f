//! Time full decode (packets -> elements over the program image) of a capture's
//! default buffer repeated N times in memory:
//! `cargo run --release --example decode_throughput -- SNAPSHOT COPIES [--text FILE]`.
//! With `--text`, every packet and element is also formatted in the OpenCSD
//! text form and written to FILE, as `tracesight decode -o FILE` does.

use std::io::Write;
use std::time::Instant;

use tracesight::element::{self, ElementKind};
use tracesight::input::Snapshot;
use tracesight::session::{run, BufferPlan, Event, RunOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args.first().expect("usage: decode_throughput SNAPSHOT COPIES [--text FILE]");
    let copies: usize = args.get(1).map(|s| s.parse().expect("COPIES is a number")).unwrap_or(1);
    let text = args.iter().position(|a| a == "--text").and_then(|i| args.get(i + 1));
    let snap = Snapshot::open(dir.as_ref()).unwrap_or_else(|e| panic!("{e}"));
    let buffer = snap.default_buffer().expect("no trace buffer").clone();
    let plan = BufferPlan::new(&snap, &buffer).unwrap_or_else(|e| panic!("{e}"));
    let one = std::fs::read(&buffer.path).unwrap();
    let data: Vec<u8> = one.iter().copied().cycle().take(one.len() * copies).collect();
    let mut out = text.map(|p| std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(p).unwrap()));
    let opts = RunOptions { elements: true, ..Default::default() };
    let (mut elements, mut instructions) = (0u64, 0u64);
    let mut buf = String::with_capacity(1 << 20);
    let t = Instant::now();
    let summary = run(&plan, &data, &opts, |ev| {
        match ev {
            Event::Element { element: e, .. } => {
                elements += 1;
                if let ElementKind::InstrRange { count, .. } = e.kind {
                    instructions += count as u64;
                }
                if out.is_some() {
                    element::write_opencsd_line(&mut buf, e);
                }
            }
            Event::Packet { stream_id, packet, raw, source } if out.is_some() => {
                packet.write_opencsd(&mut buf, source, stream_id, raw, false);
            }
            _ => {}
        }
        if buf.len() >= 1 << 20 {
            if let Some(o) = out.as_mut() {
                o.write_all(buf.as_bytes()).unwrap();
            }
            buf.clear();
        }
    })
    .unwrap();
    if let Some(o) = out.as_mut() {
        o.write_all(buf.as_bytes()).unwrap();
        o.flush().unwrap();
    }
    let s = t.elapsed().as_secs_f64();
    let mib = data.len() as f64 / (1 << 20) as f64;
    println!(
        "{mib:.1} MiB: {} packets, {elements} elements, {instructions} instructions in {s:.3} s: {:.1} MiB/s, {:.2} M elements/s, {:.1} M instructions/s",
        summary.packets,
        mib / s,
        elements as f64 / s / 1e6,
        instructions as f64 / s / 1e6
    );
}
