//! The parallel index build gives exactly the index of one pass from the
//! start: same checkpoints, counts, saved states, summaries and file bytes,
//! on every fixture capture and on repeated captures cut into many parts.

use std::path::{Path, PathBuf};

use tracesight::index::{self, format, BuildProgress, IndexOptions, TraceIdentity};
use tracesight::session::{BufferPlan, RunOptions};

#[path = "support/plans.rs"]
mod plans;
use plans::{fixtures, plan_of};

fn build(plan: &BufferPlan, data: &[u8], threads: usize, interval: u64, part: u64) -> (format::IndexData, BuildProgress) {
    let p = BuildProgress::new();
    let iopts = IndexOptions { interval, threads, part, ..IndexOptions::default() };
    let d = index::build(plan, data, &RunOptions::default(), &iopts, &p, None);
    assert!(p.finished() && p.done() == p.total());
    (d, p)
}

fn file_bytes(d: &format::IndexData, plan: &BufferPlan, data: &[u8], path: &Path) -> Vec<u8> {
    let ident = TraceIdentity { size: data.len() as u64, mtime_ns: 1, ends_hash: 2 };
    let _ = plan;
    format::write(path, d, &ident, 3).unwrap();
    std::fs::read(path).unwrap()
}

/// Compare two indexes record by record (for a readable failure), then as files.
fn assert_same(what: &str, a: &format::IndexData, b: &format::IndexData, plan: &BufferPlan, data: &[u8], work: &Path) {
    assert_eq!(a.checkpoints.len(), b.checkpoints.len(), "{what}: checkpoint count");
    for (i, (x, y)) in a.checkpoints.iter().zip(&b.checkpoints).enumerate() {
        assert_eq!(x, y, "{what}: checkpoint {i}");
        assert!(a.states.get(i).unwrap() == b.states.get(i).unwrap(), "{what}: saved state {i}");
    }
    assert_eq!(a.ids, b.ids, "{what}: trace ID summaries");
    assert_eq!(a.totals, b.totals, "{what}: totals");
    assert_eq!(a.stop, b.stop, "{what}: stop");
    let fa = file_bytes(a, plan, data, &work.join("a.tsidx"));
    let fb = file_bytes(b, plan, data, &work.join("b.tsidx"));
    assert!(fa == fb, "{what}: index files differ");
}

fn workdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tracesight-par-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn parallel_build_equals_one_pass_on_every_fixture() {
    let Some(root) = fixtures() else {
        eprintln!("fixtures not found; skipped");
        return;
    };
    let work = workdir("fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.sort();
    let mut compared = 0;
    for dir in dirs {
        let Some(plan) = plan_of(&dir) else { continue };
        let Ok(file) = plan.open() else { continue };
        let data = file.bytes();
        let (one, _) = build(&plan, data, 1, 1024, 0);
        // Parts of two and of five checkpoints: many parts even on small captures.
        for part in [2048, 5120] {
            let (par, _) = build(&plan, data, 2, 1024, part);
            assert_same(&format!("{} (parts of {part})", dir.display()), &one, &par, &plan, data, &work);
        }
        compared += 1;
    }
    assert!(compared >= 30, "only {compared} fixture captures compared");
    let _ = std::fs::remove_dir_all(&work);
}

/// A fixture's buffer repeated in memory, indexed in one pass and in parts.
/// Returns the fraction of the buffer decoded twice by the parallel build.
fn repeated(name: &str, copies: usize, interval: u64, part: u64) -> Option<f64> {
    let plan = plan_of(&fixtures()?.join(name))?;
    let one = std::fs::read(&plan.buffer.path).unwrap();
    let data: Vec<u8> = one.iter().copied().cycle().take(one.len() * copies).collect();
    let work = workdir(name);
    let (seq, _) = build(&plan, &data, 1, interval, 0);
    let (par, p) = build(&plan, &data, 2, interval, part);
    assert!(p.parts() > 4, "{name}: only {} parts", p.parts());
    assert_same(&format!("{name} x{copies}"), &seq, &par, &plan, &data, &work);
    let _ = std::fs::remove_dir_all(&work);
    Some(p.redone() as f64 / data.len() as f64)
}

#[test]
fn parallel_build_equals_one_pass_on_repeated_ete() {
    // Unformatted ETE: each part's decoder meets the previous one a
    // checkpoint after its start, so little is decoded twice.
    let Some(redone) = repeated("001-ack_test", 96, 4096, 64 * 1024) else { return };
    assert!(redone < 0.3, "{:.0}% decoded twice", redone * 100.0);
}

#[test]
fn parallel_build_equals_one_pass_on_repeated_cycle_accurate_ete() {
    // Cycle counts run from the start of the decode: the later parts' are
    // shifted, and their segments' first and last counts chosen again.
    let Some(redone) = repeated("texit-poe2", 96, 16 * 1024, 128 * 1024) else { return };
    assert!(redone < 0.3, "{:.0}% decoded twice", redone * 100.0);
}

#[test]
fn parallel_build_equals_one_pass_on_repeated_formatted_etmv4() {
    // Six trace IDs in formatter frames: correct whether or not the parts'
    // decoders meet.
    repeated("juno_r1_1", 16, 4096, 32 * 1024);
}

#[test]
fn parallel_build_equals_one_pass_on_repeated_ptm() {
    repeated("tc2-ptm-rstk-t32", 32, 1024, 8 * 1024);
}

#[test]
fn parallel_build_meets_where_a_later_part_listed_bytes_before_its_sync() {
    // Issue 16: a part that starts in the middle of a packet lists the bytes
    // before its first A-sync; its parser kept a trace of that and no part
    // ever met the one before (the second half of a summary decoded twice).
    // And the Trace Info entry's sequence number, 0 where every other entry
    // takes the next one, became the shift once parts did meet.
    let Some(redone) = repeated("juno-uname-002", 40, 16 * 1024, 512 * 1024) else { return };
    assert!(redone < 0.3, "{:.0}% decoded twice", redone * 100.0);
}
