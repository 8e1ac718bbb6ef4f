//! `Snapshot::open` over a generated snapshot directory, then planning each
//! buffer (`BufferPlan::new`: registers, memory dumps), opening its trace and
//! decoding the first 4 KiB in recovery mode.
//!
//! Input: the files of the directory separated by `\0\n` (the ini files are
//! text; a NUL-newline pair does not occur in them): `snapshot.ini`,
//! `trace.ini`, `device1.ini`, `cpu_0.ini`, `trace.bin`, `dump.bin`. Seed the
//! corpus with the fixtures' files joined that way.
//!
//! Checks: no panic, no hang; a buffer that plans decodes without stopping.
#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use tracesight::input::Snapshot;
use tracesight::protocol::etm4::decoder::DecoderOptions;
use tracesight::session::{run, BufferPlan, RunOptions};

const NAMES: [&str; 6] = ["snapshot.ini", "trace.ini", "device1.ini", "cpu_0.ini", "trace.bin", "dump.bin"];

fn dir() -> PathBuf {
    std::env::temp_dir().join(format!("tracesight-fuzz-snapshot-{}", std::process::id()))
}

fuzz_target!(|input: &[u8]| {
    let d = dir();
    let _ = std::fs::create_dir_all(&d);
    let mut parts = Vec::new();
    let mut rest = input;
    while parts.len() < NAMES.len() - 1 {
        match rest.windows(2).position(|w| w == b"\0\n") {
            Some(i) => {
                parts.push(&rest[..i]);
                rest = &rest[i + 2..];
            }
            None => break,
        }
    }
    parts.push(rest);
    for (i, name) in NAMES.iter().enumerate() {
        let p = d.join(name);
        match parts.get(i) {
            Some(bytes) => {
                let _ = std::fs::write(&p, bytes);
            }
            None => {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    let Ok(snap) = Snapshot::open(&d) else { return };
    let opts = RunOptions {
        elements: true,
        decoder: DecoderOptions { recover: true, instr_range_limit: 4096, ..DecoderOptions::default() },
        ..RunOptions::default()
    };
    for b in snap.buffers().iter().take(4) {
        let Ok(plan) = BufferPlan::new(&snap, b) else { continue };
        let Ok(file) = plan.open() else { continue };
        let data = file.bytes();
        let data = &data[..data.len().min(4096)];
        let s = run(&plan, data, &opts, |_| {}).expect("run");
        assert_eq!(s.fatal, None, "recovery mode stopped");
    }
});
