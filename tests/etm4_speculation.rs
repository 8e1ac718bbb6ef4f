//! Speculation scenarios of the Arm ARM's ETE chapter (D4.3.3 commit, D4.3.8
//! cancel / mispredict / discard, D4.3.2.3 cancel across a Trace Info, and
//! transaction failure), each as a hand-made packet sequence over a tiny A64
//! program, asserting both the committed element stream and the speculation view.

use std::sync::Arc;

use tracesight::element::{write_opencsd_element, Element, MemSpace};
use tracesight::image::memory::MemoryImage;
use tracesight::protocol::Decoder;
use tracesight::protocol::etm4::decoder::{
    DecoderOptions, DecoderOutput, Etm4Decoder, SpecKind, SpecRecord, SpecState,
};
use tracesight::protocol::etm4::{Etm4Config, Etm4Parser, Packet};

/// The program, at 0x1000:
/// ```text
/// 1000: nop
/// 1004: b.ne 1010
/// 1008: nop
/// 100c: b    1000
/// 1010: nop
/// 1014: ret
/// ```
fn image() -> Arc<MemoryImage> {
    let words: [u32; 6] = [0xd503201f, 0x54000061, 0xd503201f, 0x17fffffd, 0xd503201f, 0xd65f03c0];
    let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut m = MemoryImage::new();
    m.add_bytes(0x1000, bytes, MemSpace::ANY);
    Arc::new(m)
}

/// ETE 1.3 with a speculation depth of 16, commit mode 0, transactions.
fn config() -> Etm4Config {
    let regs = [
        ("TRCCONFIGR", 0x1u64),
        ("TRCTRACEIDR", 0x1),
        ("TRCDEVARCH", 0x47735a13),
        ("TRCIDR0", 0x0800_0aa1),
        ("TRCIDR1", 0x4100fff0),
        ("TRCIDR2", 0x4000_1088),
        ("TRCIDR8", 16),
    ];
    Etm4Config::from_registers(|n| regs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), true, Some("ARM-AA64"))
        .unwrap()
}

const ASYNC: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];
/// Trace On, then Address & Context (64-bit IS0) 0x1000 at EL1 non-secure AArch64.
const START: [u8; 11] = [0x04, 0x85, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0x31];
const E: u8 = 0xf7;
const N: u8 = 0xf6;

struct Run {
    elements: Vec<String>,
    spec: Vec<SpecRecord>,
    failed: Vec<(u64, u64)>,
}

fn run(packets: &[&[u8]]) -> Run {
    let cfg = config();
    let mut parser = Etm4Parser::new(&cfg);
    let opts = DecoderOptions { speculation: true, ..Default::default() };
    let mut dec = Etm4Decoder::new(&cfg, image(), opts);
    let mut r = Run { elements: vec![], spec: vec![], failed: vec![] };
    let mut bytes = Vec::new();
    for p in packets {
        bytes.extend_from_slice(p);
    }
    let mut on_out = |o: DecoderOutput<'_>| match o {
        DecoderOutput::Element(e) => r.elements.push(text(e)),
        DecoderOutput::Spec(s) => r.spec.push(*s),
        DecoderOutput::TransactionFailed { first_seq, last_seq, .. } => r.failed.push((first_seq, last_seq)),
        DecoderOutput::Message(m) => panic!("unexpected decoder message: {m}"),
        DecoderOutput::Batch(b) => panic!("a batch from a decoder not asked for them: {b:?}"),
    };
    let mut sink = |p: &Packet, _: &[u8]| dec.packet(p, &mut on_out);
    parser.push(0, &bytes, &mut sink);
    parser.finish(&mut sink);
    dec.finish(&mut on_out);
    r
}

fn text(e: &Element) -> String {
    let mut s = String::new();
    write_opencsd_element(&mut s, e);
    s.trim_start_matches("OCSD_GEN_TRC_ELEM_").to_string()
}

fn ranges(r: &Run) -> Vec<String> {
    r.elements.iter().filter(|e| e.starts_with("INSTR_RANGE")).cloned().collect()
}

fn states(r: &Run) -> Vec<(u64, SpecKind, SpecState)> {
    let mut v: Vec<_> = r.spec.iter().map(|s| (s.seq, s.kind, s.state)).collect();
    v.sort_by_key(|x| x.0);
    v
}

fn trace_info(spec: Option<u8>) -> Vec<u8> {
    match spec {
        // PLCTL 0x05: INFO and SPEC sections present.
        Some(d) => vec![0x01, 0x05, 0x00, d],
        None => vec![0x01, 0x00],
    }
}

const R1: &str = "INSTR_RANGE(exec range=0x1000:[0x1008] num_i(2) last_sz(4) (ISA=A64) E BR   <cond>)";
const R1N: &str = "INSTR_RANGE(exec range=0x1000:[0x1008] num_i(2) last_sz(4) (ISA=A64) N BR   <cond>)";
const R2: &str = "INSTR_RANGE(exec range=0x1010:[0x1018] num_i(2) last_sz(4) (ISA=A64) N iBR A64:ret )";

#[test]
fn commit_resolves_the_oldest_atoms_in_order() {
    // Figure D4-8: atoms stay speculative until Commit packets commit them.
    let ti = trace_info(None);
    let r = run(&[&ASYNC, &ti, &START, &[E, N], &[0x2d, 0x01]]);
    assert_eq!(ranges(&r), vec![R1]);
    let r = run(&[&ASYNC, &ti, &START, &[E, N], &[0x2d, 0x01], &[0x2d, 0x01]]);
    assert_eq!(ranges(&r), vec![R1, R2]);
    assert_eq!(
        states(&r),
        vec![
            (0, SpecKind::Atom { executed: true }, SpecState::Committed),
            (1, SpecKind::Atom { executed: false }, SpecState::Committed)
        ]
    );
    // Committed at the packets that committed them.
    assert_eq!(r.spec.iter().map(|s| s.resolved.unwrap()).collect::<Vec<_>>(), vec![27, 29]);
}

#[test]
fn cancel_removes_the_youngest_uncommitted_atoms() {
    // Figure D4-9: three atoms, the two youngest canceled, the oldest committed.
    let ti = trace_info(None);
    let r = run(&[&ASYNC, &ti, &START, &[E, E, E], &[0x2e, 0x02], &[0x2d, 0x01]]);
    assert_eq!(ranges(&r), vec![R1]);
    assert_eq!(
        states(&r),
        vec![
            (0, SpecKind::Atom { executed: true }, SpecState::Committed),
            (1, SpecKind::Atom { executed: true }, SpecState::Canceled),
            (2, SpecKind::Atom { executed: true }, SpecState::Canceled)
        ]
    );
}

#[test]
fn mispredict_flips_the_most_recent_atom() {
    // The branch was traced as not taken, then corrected to taken.
    let ti = trace_info(None);
    let r = run(&[&ASYNC, &ti, &START, &[N], &[0x30], &[0x2d, 0x01]]);
    assert_eq!(ranges(&r), vec![R1]);
    assert_eq!(states(&r), vec![(0, SpecKind::Atom { executed: false }, SpecState::CorrectedByMispredict)]);
    // Without the mispredict the committed range ends in a not-taken branch.
    let r = run(&[&ASYNC, &ti, &START, &[N], &[0x2d, 0x01]]);
    assert_eq!(ranges(&r), vec![R1N]);
}

#[test]
fn discard_drops_everything_uncommitted() {
    let ti = trace_info(None);
    let r = run(&[&ASYNC, &ti, &START, &[E, N], &[0x2d, 0x01], &[0x00, 0x03]]);
    assert_eq!(ranges(&r), vec![R1]);
    assert!(r.elements.iter().any(|e| e == "NO_SYNC( [discard])"), "{:?}", r.elements);
    assert_eq!(
        states(&r),
        vec![
            (0, SpecKind::Atom { executed: true }, SpecState::Committed),
            (1, SpecKind::Atom { executed: false }, SpecState::Discarded)
        ]
    );
}

#[test]
fn cancel_across_a_trace_info() {
    // D4.3.2.3: a Trace Info says two elements traced before it are still
    // speculative; a later Cancel and Commit resolve them like any other.
    let ti = trace_info(Some(2));
    let r = run(&[&ASYNC, &ti, &START, &[E], &[0x2e, 0x01], &[0x2d, 0x02]]);
    assert!(ranges(&r).is_empty(), "the unseen elements produce no ranges: {:?}", r.elements);
    assert_eq!(
        states(&r),
        vec![
            (0, SpecKind::Unseen, SpecState::Committed),
            (1, SpecKind::Unseen, SpecState::Committed),
            (2, SpecKind::Atom { executed: true }, SpecState::Canceled)
        ]
    );
}

#[test]
fn transaction_failure_undoes_what_committed_since_its_start() {
    // Transaction Start (not a P0 element here), two atoms committed, then the
    // transaction fails: OpenCSD's stream shows MEMTRANS(Fail); the speculation
    // view reports the two atoms as undone.
    let ti = trace_info(None);
    let fail = [0x06, 0x30, 0x00];
    // Transaction Start is a P0 element here (TRCIDR0.COMMTRANS = 0): seq 0.
    let r = run(&[&ASYNC, &ti, &START, &[0x0a], &[E, N], &[0x2d, 0x02], &fail, &[E], &[0x2d, 0x02]]);
    assert_eq!(ranges(&r), vec![R1, R2]);
    assert!(r.elements.iter().any(|e| e == "MEMTRANS(Start)"));
    assert!(r.elements.iter().any(|e| e == "MEMTRANS(Fail)"), "{:?}", r.elements);
    assert_eq!(states(&r)[0], (0, SpecKind::TransactionStart, SpecState::Committed));
    // The two atoms committed inside the transaction did not take effect.
    assert_eq!(r.failed, vec![(1, 2)]);
}

#[test]
fn unresolved_at_end_of_trace() {
    let ti = trace_info(None);
    let r = run(&[&ASYNC, &ti, &START, &[E, E]]);
    assert!(ranges(&r).is_empty());
    assert!(r.spec.iter().all(|s| s.state == SpecState::Unresolved && s.resolved.is_none()));
    assert_eq!(r.spec.len(), 2);
    assert_eq!(r.elements.last().unwrap(), "EO_TRACE( [end-of-trace])");
}

/// The speculation view only adds records, and the decoder's shortcuts
/// change nothing, on every fixture capture. Without the view the decoder
/// commits atoms that cannot walk code (no address yet, no speculation
/// window) without queueing them, and commits the atoms of a packet as they
/// arrive when only elements that do not count are queued before them (with
/// the view too); `long_way` queues and resolves every atom. The elements
/// and the messages between them must be the same all three ways, and the
/// speculation records the same with and without the shortcuts. With the
/// view reporting only losses (as the index build asks), the output is the
/// full view's without its commits, though the idle atoms take the shortcut.
#[test]
fn the_speculation_view_leaves_the_committed_elements_of_every_fixture_alone() {
    use std::path::{Path, PathBuf};
    use tracesight::input::Snapshot;
    use tracesight::session::{run, BufferPlan, Event, RunOptions};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    let Ok(rd) = std::fs::read_dir(&root) else {
        eprintln!("fixtures not found; skipped");
        return;
    };
    let mut dirs: Vec<PathBuf> = rd.filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.sort();
    let elements = |plan: &BufferPlan, data: &[u8], speculation: bool, long_way: bool, spec_losses_only: bool| -> Vec<String> {
        let decoder = DecoderOptions { speculation, long_way, spec_losses_only, ..Default::default() };
        let opts = RunOptions { elements: true, decoder, ..RunOptions::default() };
        let mut out = Vec::new();
        let _ = run(plan, data, &opts, |ev| {
            match ev {
                Event::Element { element, .. } => {
                    out.push(format!("{} {} {:?}", element.trace_id, text(element), element.time))
                }
                Event::Message { source, text } => out.push(format!("{:?} {text}", source.trace_id)),
                Event::Spec { source, record } => out.push(format!("{:?} spec {record:?}", source.trace_id)),
                _ => {}
            }
        });
        out
    };
    let mut compared = 0;
    let mut specs = 0;
    let mut lost = 0;
    for dir in dirs {
        let Ok(snap) = Snapshot::open(&dir) else { continue };
        let Some(buffer) = snap.default_buffer().cloned() else { continue };
        let Ok(plan) = BufferPlan::new(&snap, &buffer) else { continue };
        let Ok(file) = plan.open() else { continue };
        let plain = elements(&plan, file.bytes(), false, false, false);
        let viewed = elements(&plan, file.bytes(), true, false, false);
        let long = elements(&plan, file.bytes(), true, true, false);
        assert_eq!(viewed, long, "{}: the shortcuts changed the output", dir.display());
        // Only the losses (the index build's view): the same without the commits.
        let losses = elements(&plan, file.bytes(), true, false, true);
        let want: Vec<&String> = long.iter().filter(|l| !(l.contains(" spec ") && l.contains("state: Committed"))).collect();
        assert_eq!(losses.iter().collect::<Vec<_>>(), want, "{}: only the losses", dir.display());
        lost += losses.iter().filter(|l| l.contains(" spec ")).count();
        let viewed: Vec<&String> = viewed.iter().filter(|l| !l.contains(" spec ")).collect();
        assert_eq!(plain.len(), viewed.len(), "{}: element count", dir.display());
        for (i, (a, b)) in plain.iter().zip(&viewed).enumerate() {
            assert_eq!(&a, b, "{}: element {i}", dir.display());
        }
        let recorded = long.iter().filter(|l| l.contains(" spec ")).count();
        specs += recorded;
        compared += !plain.is_empty() as usize;
    }
    assert!(compared >= 30, "only {compared} fixtures compared");
    assert!(specs > 1_000_000, "only {specs} speculation records compared");
    assert!(lost > 0, "no speculative element was lost in any fixture");
}
