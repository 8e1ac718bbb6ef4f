//! The index reader (`IndexFile::open`) and the saved-state loader behind
//! seeks, on a valid index of a fixture capture edited by the input, with the
//! records checksum recomputed or not (as someone editing a file would).
//!
//! Input: bit 0 of byte 0 recomputes the checksum after the edits; then
//! 11-byte edits `[o0, o1, o2, width, v0..v6]`: at byte offset `o % len`
//! write the low `width % 8 + 1` bytes of `v`.
//!
//! Checks: no panic, no hang; an index that opens can be sought in
//! (`Seeker::find`, `window`, decoding from each checkpoint) and either
//! works or says why.
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;
use tracesight::index::format::{self, Fnv, IndexFile};
use tracesight::index::{self, BuildProgress, IndexOptions, SeekTarget, Seeker, TraceIdentity};
use tracesight::input::Snapshot;
use tracesight::session::{BufferPlan, RunOptions};

// The file layout as the writer lays it out (index/format.rs).
const HEADER_WORDS: usize = 16;
const CHECKPOINT_WORDS: usize = 19;
const ID_WORDS: usize = 9;

struct Base {
    plan: BufferPlan,
    data: Vec<u8>,
    opts: RunOptions,
    ident: TraceIdentity,
    fingerprint: u64,
    file: Vec<u8>,
}

fn base() -> &'static Base {
    // libFuzzer runs the target on one thread; the plan's image is not Sync.
    thread_local! {
        static BASE: &'static Base = Box::leak(Box::new(build_base()));
    }
    BASE.with(|b| *b)
}

fn build_base() -> Base {
    {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/opencsd/juno_r1_1");
        let snap = Snapshot::open(&dir).expect("the juno_r1_1 fixture");
        let plan = BufferPlan::new(&snap, snap.default_buffer().expect("a buffer")).expect("plan");
        let data = std::fs::read(&plan.buffer.path).expect("trace");
        let opts = index::index_run_options(&RunOptions::default());
        let iopts = IndexOptions { interval: 4096, threads: 1, ..IndexOptions::default() };
        let built = index::build(&plan, &data, &opts, &iopts, &BuildProgress::default(), None);
        let ident = TraceIdentity::of(&plan.buffer.path, &data);
        let fingerprint = index::fingerprint(&plan, &opts);
        let path = scratch();
        format::write(&path, &built, &ident, fingerprint).expect("write the index");
        let file = std::fs::read(&path).expect("read the index");
        Base { plan, data, opts, ident, fingerprint, file }
    }
}

fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("tracesight-fuzz-index-{}.tsidx", std::process::id()))
}

fn word(b: &[u8], i: usize) -> u64 {
    b.get(i * 8..i * 8 + 8).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap()))
}

/// The records checksum, recomputed the way the writer computes it.
fn rehash(b: &mut [u8]) {
    let (count, ids, stop) = (word(b, 6) as usize, word(b, 7) as usize, word(b, 11) as usize);
    let Some(states_at) = count
        .checked_mul(CHECKPOINT_WORDS)
        .and_then(|c| c.checked_add(HEADER_WORDS))
        .and_then(|c| ids.checked_mul(ID_WORDS).and_then(|i| c.checked_add(i)))
        .and_then(|c| c.checked_mul(8))
        .and_then(|c| c.checked_add(stop.div_ceil(8).checked_mul(8)?))
    else {
        return;
    };
    let mut h = Fnv::new();
    h.write(&b[..(HEADER_WORDS - 1) * 8]);
    h.write(&b[(HEADER_WORDS * 8).min(b.len())..states_at.min(b.len()).max((HEADER_WORDS * 8).min(b.len()))]);
    let at = (HEADER_WORDS - 1) * 8;
    b[at..at + 8].copy_from_slice(&h.finish().to_le_bytes());
}

fuzz_target!(|input: &[u8]| {
    let Some(&flags) = input.first() else { return };
    let b = base();
    let mut file = b.file.clone();
    for e in input[1..].chunks_exact(11).take(32) {
        let at = (u32::from_le_bytes([e[0], e[1], e[2], 0]) as usize) % file.len();
        let width = (e[3] as usize % 8 + 1).min(7).min(file.len() - at);
        file[at..at + width].copy_from_slice(&e[4..4 + width]);
    }
    if flags & 1 != 0 && file.len() >= HEADER_WORDS * 8 {
        rehash(&mut file);
    }
    let path = scratch();
    if std::fs::write(&path, &file).is_err() {
        return;
    }
    let Ok(idx) = IndexFile::open(&path, &b.ident, b.fingerprint) else { return };
    let seeker = Seeker::new(&b.plan, &b.data, &b.opts, &idx);
    for t in [SeekTarget::Element(0), SeekTarget::Element(5000), SeekTarget::Offset(30000), SeekTarget::Timestamp(u64::MAX / 2), SeekTarget::Instruction(100_000)] {
        let _ = seeker.find(&t);
    }
    let _ = seeker.window(1000, 20);
    // Each checkpoint's state loads and decodes (a few hundred elements).
    for k in 0..idx.len().min(20) {
        let mut n = 0;
        let _ = seeker.run_from(k, |_| {
            n += 1;
            n < 300
        });
    }
});
