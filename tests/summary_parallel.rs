//! `decode --summary` on all cores counts exactly what one pass from the
//! start counts: per source packets, bytes, elements per kind, instructions
//! and messages, and the skipped trace IDs; on every fixture cut into parts
//! of two and five checkpoints, and on repeated captures of each protocol
//! cut into many parts. Packets only, the summary's count equals the one
//! from events in the buffer's order.

use std::path::{Path, PathBuf};

use tracesight::export::summary::DecodeCounts;
use tracesight::index::{self, IndexOptions};
use tracesight::session::{BufferPlan, Fragment, RunOptions};

#[path = "support/plans.rs"]
mod plans;
use plans::{fixtures, plan_of};

fn elements() -> RunOptions {
    RunOptions { elements: true, ..RunOptions::default() }
}

fn one_pass(plan: &BufferPlan, data: &[u8]) -> DecodeCounts {
    let mut c = DecodeCounts::default();
    c.count(plan, data, &[Fragment::whole(data.len())], &elements());
    c
}

fn in_parts(plan: &BufferPlan, data: &[u8], interval: u64, part: u64) -> DecodeCounts {
    let mut c = DecodeCounts::default();
    let iopts = IndexOptions { interval, threads: 2, part, ..IndexOptions::default() };
    c.count_parallel(plan, data, &[Fragment::whole(data.len())], &elements(), &iopts);
    c
}

fn assert_same(what: &str, a: &DecodeCounts, b: &DecodeCounts) {
    assert_eq!(a.sources, b.sources, "{what}: per-source counts");
    assert_eq!(a.skipped, b.skipped, "{what}: skipped IDs");
    assert_eq!(a.stops, b.stops, "{what}: stops");
    assert_eq!(a.bytes_processed, b.bytes_processed, "{what}: bytes processed");
}

#[test]
fn parallel_summary_equals_one_pass_on_every_fixture() {
    let Some(root) = fixtures() else {
        eprintln!("fixtures not found; skipped");
        return;
    };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.sort();
    let mut compared = 0;
    let mut multi_part = 0;
    for dir in dirs {
        let Some(plan) = plan_of(&dir) else { continue };
        let Ok(file) = plan.open() else { continue };
        let data = file.bytes();
        let one = one_pass(&plan, data);
        assert!(one.total().packets > 0 || data.is_empty(), "{}: nothing counted", dir.display());
        // 0: the summary's own parts, one per thread.
        for part in [0, 2048, 5120] {
            let par = in_parts(&plan, data, 1024, part);
            assert_same(&format!("{} (parts of {part})", dir.display()), &one, &par);
        }
        let packets = packets_by_events(&plan, data);
        assert_same(&format!("{} (packets)", dir.display()), &packets, &packets_counted(&plan, data));
        compared += 1;
        if data.len() > 2048 {
            multi_part += 1;
        }
    }
    assert!(compared >= 40, "only {compared} fixtures compared");
    assert!(multi_part >= 15, "only {multi_part} fixtures were cut into parts");
}

/// Packets only, counted from events in the buffer's order: what
/// [`packets_counted`] must equal (counts, skipped IDs and stops).
fn packets_by_events(plan: &BufferPlan, data: &[u8]) -> DecodeCounts {
    let mut c = DecodeCounts::default();
    c.count(plan, data, &[Fragment::whole(data.len())], &RunOptions::default());
    c
}

/// Packets only, counted the summary's way: in the parsers' chains, each
/// ID's data gathered across the others'.
fn packets_counted(plan: &BufferPlan, data: &[u8]) -> DecodeCounts {
    let mut c = DecodeCounts::default();
    c.count_parallel(plan, data, &[Fragment::whole(data.len())], &RunOptions::default(), &IndexOptions::default());
    c
}

/// A fixture's buffer repeated in memory, counted in one pass and in parts.
fn repeated(name: &str, copies: usize, interval: u64, part: u64) {
    let Some(root) = fixtures() else { return };
    let plan = plan_of(&root.join(name)).expect("fixture plan");
    let file = plan.open().unwrap();
    let data = file.bytes().repeat(copies);
    let one = one_pass(&plan, &data);
    let par = in_parts(&plan, &data, interval, part);
    assert!(data.len() as u64 / part >= 8, "{name}: too few parts to test anything");
    assert_same(&format!("{name} x{copies}"), &one, &par);
    // The parallel path itself, not a fall-back to one pass: its tally is there.
    let built = index::tally_fragments(&plan, &data, &[Fragment::whole(data.len())], &elements(), &IndexOptions { interval, threads: 2, part, ..IndexOptions::default() });
    assert!(built.tally.is_some() && built.stop.is_none(), "{name}: no tally from the parallel build");
}

#[test]
fn parallel_summary_equals_one_pass_on_repeated_ete() {
    repeated("001-ack_test", 24, 4096, 32 * 1024);
}

#[test]
fn parallel_summary_equals_one_pass_on_repeated_cycle_accurate_ete() {
    repeated("texit-poe2", 24, 4096, 32 * 1024);
}

#[test]
fn parallel_summary_equals_one_pass_on_repeated_formatted_etmv4() {
    repeated("juno_r1_1", 8, 4096, 32 * 1024);
}

#[test]
fn parallel_summary_equals_one_pass_on_repeated_ptm() {
    repeated("tc2-ptm-rstk-t32", 32, 1024, 8 * 1024);
}

#[test]
fn parallel_summary_equals_one_pass_on_repeated_etmv3_and_ptm() {
    repeated("TC2", 16, 1024, 8 * 1024);
}

/// A decoder that stops part way: the parallel summary gathers each ID's
/// data across the others' (see `Deformatter::set_gather`), so when one
/// stops the others have taken data past it; the summary counts again in
/// one pass and gives the same counts and stop.
#[test]
fn parallel_summary_equals_one_pass_when_a_decoder_stops() {
    let Some(root) = fixtures() else { return };
    let plan = plan_of(&root.join("juno_r1_1")).expect("fixture plan");
    let file = plan.open().unwrap();
    let mut data = file.bytes().repeat(8);
    // In the fifth copy, where the cores' data take turns every few bytes: a
    // frame whose ID change to 0x11 in byte 12 is delayed and followed by one
    // to 0x10, which gives 0x11 an empty block (a fatal data-path error). The
    // data before it goes to ID 0, which nothing decodes.
    let at = 4 * 65536 + 2048;
    let mut frame = [0u8; 16];
    frame[0] = 0x01;
    frame[12] = (0x11 << 1) | 1;
    frame[14] = (0x10 << 1) | 1;
    frame[15] = 1 << 6;
    data[at..at + 16].copy_from_slice(&frame);
    let one = one_pass(&plan, &data);
    assert!(one.stops.iter().any(|s| s.contains("zero-length data block for trace ID 0x11")), "no stop: {:?}", one.stops);
    for part in [0, 32 * 1024] {
        let par = in_parts(&plan, &data, 4096, part);
        assert_same(&format!("juno_r1_1 x8 stopped (parts of {part})"), &one, &par);
    }
    // Packets only, gathered: the deformatter delivers what it gathered
    // before the empty block, so the stop comes where it does in order.
    let want = packets_by_events(&plan, &data);
    assert!(want.stops.iter().any(|s| s.contains("zero-length")), "no stop: {:?}", want.stops);
    assert_same("juno_r1_1 x8 stopped (packets)", &want, &packets_counted(&plan, &data));
    // The gathering build saw the stop, which sends the summary to one pass.
    let gathered = RunOptions { gather_ids: true, ..elements() };
    let iopts = IndexOptions { interval: 4096, threads: 2, part: 32 * 1024, ..IndexOptions::default() };
    let built = index::tally_fragments(&plan, &data, &[Fragment::whole(data.len())], &gathered, &iopts);
    assert!(built.stop.is_some(), "the gathering build did not stop");
}

/// A perf.data: many AUX fragments, each decoded from fresh decoders, several
/// at once; the same counts as one fragment after the other.
#[test]
fn parallel_summary_equals_one_pass_on_perf_data() {
    use tracesight::capture::{Capture, CaptureOptions};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf/simpleperf");
    let mut compared = 0;
    for name in ["perf_etm.data", "perf_inject.data", "perf_with_missing_aux_data.data"] {
        let path = dir.join(name);
        if !path.is_file() {
            continue;
        }
        let copts = CaptureOptions { symdirs: vec![dir.clone()], ..CaptureOptions::default() };
        let Ok(cap) = Capture::open(&path, &copts) else { continue };
        if cap.fragments.len() < 2 {
            continue;
        }
        let data = cap.file.bytes();
        let opts = RunOptions { elements: true, ..cap.opts.clone() };
        let mut one = DecodeCounts::default();
        one.count(&cap.plan, data, &cap.fragments, &opts);
        for threads in [1, 2] {
            let mut par = DecodeCounts::default();
            let iopts = IndexOptions { interval: 1024, threads, part: 4096, ..IndexOptions::default() };
            par.count_parallel(&cap.plan, data, &cap.fragments, &opts, &iopts);
            assert_same(&format!("{name} ({threads} threads)"), &one, &par);
        }
        assert!(one.total().element_total() > 0, "{name}: no elements counted");
        compared += 1;
    }
    assert!(compared >= 1 || !dir.is_dir(), "no perf.data with several fragments");
}
