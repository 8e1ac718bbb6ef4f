//! A run that takes batches ([`RunOptions::batched`], what an index build
//! asks for) reports the same elements as one that takes each element, in
//! the same order and with the same index and time context: on every
//! fixture, and on repeated captures with speculation and cycle counts.
//!
//! A batch does not say in which order its ranges, inaccessible addresses
//! and exception returns came, so both streams are compared as runs: the
//! elements of those three kinds in a row that share trace ID, index and
//! time are merged into one count per kind (a batch, or several batches
//! and elements in a row, likewise). Every other element is compared
//! whole, and the runs must sit between them exactly as they do.
//!
//! With quiet packets ([`RunOptions::quiet_packets`], as an index build
//! runs) batches in a row merge across packets: there runs are cut by
//! trace ID and time only, and carry the greatest index of their elements.

use std::path::PathBuf;

use tracesight::element::{ElementKind, Time};
use tracesight::session::{self, BufferPlan, Event, RunOptions};

#[path = "support/plans.rs"]
mod plans;
use plans::{fixtures, plan_of};

/// One step of a stream as compared: a run of countable elements, or any
/// other element or event, printed whole.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Run { trace_id: u8, index: u64, time: Time, ranges: u64, instructions: u64, nacc: u64, erets: u64 },
    Other(String),
}

fn push_run(steps: &mut Vec<Step>, across: bool, trace_id: u8, index: u64, time: Time, add: [u64; 4]) {
    if let Some(Step::Run { trace_id: t, index: i, time: tm, ranges, instructions, nacc, erets }) = steps.last_mut() {
        if *t == trace_id && (*i == index || across) && *tm == time {
            *i = index.max(*i);
            *ranges += add[0];
            *instructions += add[1];
            *nacc += add[2];
            *erets += add[3];
            return;
        }
    }
    steps.push(Step::Run { trace_id, index, time, ranges: add[0], instructions: add[1], nacc: add[2], erets: add[3] });
}

/// Whether a run met the elements it hands over (the test must see batches
/// to test anything).
struct Stream {
    steps: Vec<Step>,
    batches: u64,
}

fn stream(plan: &BufferPlan, data: &[u8], opts: &RunOptions, across: bool) -> Stream {
    let mut steps = Vec::new();
    let mut batches = 0;
    session::run(plan, data, opts, |ev| match ev {
        Event::Element { element: e, .. } => {
            let add = match e.kind {
                ElementKind::InstrRange { count, .. } => Some([1, count as u64, 0, 0]),
                ElementKind::AddrNotAccessible { .. } => Some([0, 0, 1, 0]),
                ElementKind::ExceptionReturn => Some([0, 0, 0, 1]),
                _ => None,
            };
            match add {
                Some(a) => push_run(&mut steps, across, e.trace_id, e.index, e.time, a),
                None => steps.push(Step::Other(format!("{e:?}"))),
            }
        }
        Event::Batch { batch: b, .. } => {
            batches += 1;
            assert!(b.elements() > 0, "an empty batch");
            push_run(&mut steps, across, b.trace_id, b.index, b.time, [b.ranges, b.instructions, b.addr_not_accessible, b.exception_returns]);
        }
        Event::Message { text, .. } => steps.push(Step::Other(format!("message {text}"))),
        Event::Spec { record, .. } => steps.push(Step::Other(format!("{record:?}"))),
        Event::TransactionFailed { first_seq, last_seq, index, .. } => {
            steps.push(Step::Other(format!("tx failed {first_seq} {last_seq} {index}")))
        }
        Event::EndOfTrace { stream_id, .. } => steps.push(Step::Other(format!("end {stream_id}"))),
        Event::Skipped { trace_id, .. } => steps.push(Step::Other(format!("skipped {trace_id}"))),
        Event::Packet { .. } => {}
    })
    .expect("run");
    Stream { steps, batches }
}

/// The batches of a batched run, then of one with quiet packets, checked
/// against the elements of a run that takes each; the number of batches.
fn compare(what: &str, plan: &BufferPlan, data: &[u8], speculation: bool) -> u64 {
    let mut each = RunOptions { elements: true, ..RunOptions::default() };
    each.decoder.speculation = speculation;
    let mut seen = [0; 2];
    for (k, quiet) in [false, true].into_iter().enumerate() {
        let a = stream(plan, data, &each, quiet);
        let b = stream(plan, data, &RunOptions { batched: true, quiet_packets: quiet, ..each.clone() }, quiet);
        assert_eq!(a.batches, 0, "{what}: batches in a run that did not ask for them");
        if let Some(i) = (0..a.steps.len().max(b.steps.len())).find(|&i| a.steps.get(i) != b.steps.get(i)) {
            panic!(
                "{what} (quiet packets: {quiet}): step {i} differs:\n  each element: {:?}\n  batched:      {:?}",
                a.steps.get(i),
                b.steps.get(i)
            );
        }
        seen[k] = b.batches;
    }
    // Merged, there are fewer.
    assert!(seen[1] <= seen[0], "{what}: {} batches merged, {} not", seen[1], seen[0]);
    seen[0]
}

#[test]
fn batches_stand_for_the_same_elements_on_every_fixture() {
    let Some(root) = fixtures() else {
        eprintln!("fixtures not found; skipped");
        return;
    };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.sort();
    let (mut compared, mut with_batches) = (0, 0);
    for dir in dirs {
        let Some(plan) = plan_of(&dir) else { continue };
        let Ok(file) = plan.open() else { continue };
        let n = compare(&dir.display().to_string(), &plan, file.bytes(), false);
        compared += 1;
        if n > 0 {
            with_batches += 1;
        }
    }
    assert!(compared >= 40, "only {compared} fixtures compared");
    assert!(with_batches >= 15, "only {with_batches} fixtures made batches");
}

fn repeated(name: &str, copies: usize, speculation: bool) {
    let Some(root) = fixtures() else { return };
    let plan = plan_of(&root.join(name)).expect("fixture plan");
    let file = plan.open().unwrap();
    let data = file.bytes().repeat(copies);
    let n = compare(&format!("{name} x{copies}"), &plan, &data, speculation);
    assert!(n > 100, "{name}: only {n} batches");
}

#[test]
fn batches_on_repeated_ete_with_speculation_records() {
    repeated("001-ack_test", 8, true);
}

#[test]
fn batches_on_repeated_cycle_accurate_ete() {
    repeated("texit-poe2", 8, false);
}

#[test]
fn batches_on_repeated_framed_etmv4_of_six_ids() {
    repeated("juno_r1_1", 4, false);
}

/// Damaged captures (errors, resynchronisations, time changes in odd
/// places) repeated so that atom packets replay: batches, kept open across
/// packets with quiet packets, still stand for the same elements.
fn mutated(name: &str, copies: usize, flips: &[(usize, u8)]) {
    let Some(root) = fixtures() else { return };
    let plan = plan_of(&root.join(name)).expect("fixture plan");
    let file = plan.open().unwrap();
    let mut data = file.bytes().repeat(copies);
    for &(at, v) in flips {
        let i = at % data.len();
        data[i] = v;
    }
    compare(&format!("{name} x{copies} with {flips:?}"), &plan, &data, false);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    #[test]
    fn batches_on_damaged_framed_etmv4(flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..24)) {
        mutated("juno_r1_1", 2, &flips);
    }

    #[test]
    fn batches_on_damaged_raw_ete(flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..24)) {
        mutated("001-ack_test", 2, &flips);
    }
}
