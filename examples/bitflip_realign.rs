//! The share of single-bit flips after which the element listing realigns
//! with the clean one from the next sync point on (see
//! `tests/support/realign.rs` for the exact rule), per protocol, for the exact
//! decode (trc_pkt_lister's behaviour) and `--recover`:
//! `cargo run --release --example bitflip_realign -- [FIXTURES] [--flips N] [--seed S] [-v]`.
//! FIXTURES defaults to `../shared/fixtures/opencsd`; N (default 300) flips per
//! capture, drawn from seed S (default 1). `-v` lists the flips that do not
//! realign with `--recover`.

#[path = "../tests/support/realign.rs"]
mod realign;

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The captures measured, with the buffer when not the default one.
/// Unformatted ETE captures (001-ack_test, ...) are left out: their only
/// A-sync is their first packet, so no flip has a sync point after it.
const CAPTURES: &[(&str, Option<&str>)] = &[
    ("juno_r1_1", None),
    ("juno-uname-002", None),
    ("juno-ret-stck", None),
    ("infrastructure", None),
    ("TC2", None),
    ("Snowball", None),
    ("tc2-ptm-rstk-t32", None),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let flips: usize = value("--flips").map(|v| v.parse().expect("--flips N")).unwrap_or(300);
    let seed: u64 = value("--seed").map(|v| v.parse().expect("--seed S")).unwrap_or(1);
    let verbose = args.iter().any(|a| a == "-v");
    let root = match args.first() {
        Some(a) if !a.starts_with('-') => PathBuf::from(a),
        _ => PathBuf::from("../shared/fixtures/opencsd"),
    };
    // protocol -> (flips, exact stops, exact realigned, recover realigned)
    let mut tally: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    for (name, buffer) in CAPTURES {
        let cap = match realign::Capture::load(&root.join(name), *buffer) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{name}: skipped: {e}");
                continue;
            }
        };
        let t = std::time::Instant::now();
        let outcomes = realign::measure(&cap, flips, seed);
        let (mut stops, mut ex, mut rec) = (0, 0, 0);
        for o in &outcomes {
            let row = tally.entry(o.protocol).or_default();
            row[0] += 1;
            row[1] += o.exact_stopped as usize;
            row[2] += o.exact as usize;
            row[3] += o.recover as usize;
            stops += o.exact_stopped as usize;
            ex += o.exact as usize;
            rec += o.recover as usize;
            if verbose && o.exact_stopped {
                println!("  {name}: bit {} ({} data) stops the exact decode", o.bit, o.protocol);
            }
            if verbose && !o.recover {
                println!("  {name}: bit {} (byte {} bit {}) does not realign with --recover", o.bit, o.bit / 8, o.bit % 8);
                if let Some((id, a, b)) = &o.difference {
                    print!("    ID 0x{id:x}: clean   {a}    damaged {b}");
                }
            }
        }
        println!(
            "{name}: {} flips, {stops} stop the exact decode; realigned: exact {ex}, --recover {rec} ({:.1} s)",
            outcomes.len(),
            t.elapsed().as_secs_f64()
        );
    }
    println!("\n| protocol | flips | exact decode stops | realigned, exact | realigned, --recover |");
    println!("| --- | --- | --- | --- | --- |");
    let mut all = [0usize; 4];
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    for (p, r) in &tally {
        println!("| {p} | {} | {} ({:.1}%) | {:.1}% | {:.1}% |", r[0], r[1], pct(r[1], r[0]), pct(r[2], r[0]), pct(r[3], r[0]));
        for i in 0..4 {
            all[i] += r[i];
        }
    }
    println!(
        "| all | {} | {} ({:.1}%) | {:.1}% | {:.1}% |",
        all[0],
        all[1],
        pct(all[1], all[0]),
        pct(all[2], all[0]),
        pct(all[3], all[0])
    );
}
