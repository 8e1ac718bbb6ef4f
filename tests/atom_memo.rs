//! The ETMv4/ETE decoder's atom memo: in a run that only counts, an atom
//! packet met again at the same walk state is replayed from what it did the
//! first time. These tests decode the same packets twice, once counting
//! (memo on) and once building every element (memo never asked), and require
//! the same counts and, after every packet, the same saved decoder state:
//! walk, return stack, range check and flags. A third run counts in batches
//! kept open across packets, as an index build does, with the same counts.

use std::sync::Arc;

use tracesight::element::{ElementKind, MemSpace};
use tracesight::image::memory::MemoryImage;
use tracesight::protocol::etm4::decoder::{DecoderOptions, DecoderOutput, Etm4Decoder};
use tracesight::protocol::etm4::{Etm4Config, Etm4Parser, Packet};
use tracesight::protocol::Decoder;

/// The program, at 0x1000:
/// ```text
/// 1000: bl   1010
/// 1004: b.ne 1000
/// 1008: nop
/// 100c: b    2000      (no code there: inaccessible)
/// 1010: nop
/// 1014: ret
/// ```
fn image() -> Arc<MemoryImage> {
    let words: [u32; 6] = [0x94000004, 0x54ffffe1, 0xd503201f, 0x140003fd, 0xd503201f, 0xd65f03c0];
    let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut m = MemoryImage::new();
    m.add_bytes(0x1000, bytes, MemSpace::ANY);
    Arc::new(m)
}

/// ETE without a speculation window (atoms commit as they come), with the
/// return stack on or off.
fn config(return_stack: bool) -> Etm4Config {
    let cfgr = 0x1u64 | if return_stack { 1 << 12 } else { 0 };
    let regs = [
        ("TRCCONFIGR", cfgr),
        ("TRCTRACEIDR", 0x1),
        ("TRCDEVARCH", 0x47735a13),
        ("TRCIDR0", 0x0800_0aa1),
        ("TRCIDR1", 0x4100fff0),
        ("TRCIDR2", 0x4000_1088),
        ("TRCIDR8", 0),
    ];
    Etm4Config::from_registers(|n| regs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), true, Some("ARM-AA64"))
        .unwrap()
}

const ASYNC: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];
const TRACE_INFO: [u8; 2] = [0x01, 0x00];
/// Trace On, then Address & Context (64-bit IS0) 0x1000 at EL1 non-secure AArch64.
const START: [u8; 11] = [0x04, 0x85, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0x31];
/// Short address (IS0) 0x1000: back to the loop after the inaccessible address.
const BACK: [u8; 3] = [0x95, 0x80, 0x08];
const E: u8 = 0xf7;
const N: u8 = 0xf6;
/// Format 2 atoms E E, and format 3 E E E (oldest first, in the low bit).
const EE: u8 = 0xdb;
const EEE: u8 = 0xff;

#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    ranges: u64,
    instructions: u64,
    nacc: u64,
    eret: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every element built (the memo is never asked).
    Elements,
    /// Counted in a batch per packet.
    Batches,
    /// Counted in batches the decoder may keep open across packets, as in
    /// an index build (`merge_batches`); flushed at the end.
    Merged,
}

/// Decode `packets` after the start as `mode` says; the counts, the saved
/// state after each packet, the memo's hits and the batches handed over.
fn decode(packets: &[Vec<u8>], return_stack: bool, mode: Mode) -> (Counts, Vec<Vec<u8>>, u64, u64) {
    let cfg = config(return_stack);
    let mut parser = Etm4Parser::new(&cfg);
    let mut dec = Etm4Decoder::new(&cfg, image(), DecoderOptions::default());
    dec.core_mut().batched = mode != Mode::Elements;
    dec.core_mut().merge_batches = mode == Mode::Merged;
    let mut c = Counts::default();
    let mut batches = 0;
    let mut states = Vec::new();
    let mut on_out = |o: DecoderOutput<'_>| match o {
        DecoderOutput::Element(e) => match e.kind {
            ElementKind::InstrRange { count, .. } => {
                c.ranges += 1;
                c.instructions += count as u64;
            }
            ElementKind::AddrNotAccessible { .. } => c.nacc += 1,
            ElementKind::ExceptionReturn => c.eret += 1,
            _ => {}
        },
        DecoderOutput::Batch(b) => {
            batches += 1;
            c.ranges += b.ranges;
            c.instructions += b.instructions;
            c.nacc += b.addr_not_accessible;
            c.eret += b.exception_returns;
        }
        DecoderOutput::Message(m) => panic!("unexpected decoder message: {m}"),
        _ => {}
    };
    let mut bytes = Vec::new();
    for p in [&ASYNC[..], &TRACE_INFO, &START] {
        bytes.extend_from_slice(p);
    }
    let mut sink = |p: &Packet, _: &[u8]| {
        dec.packet(p, &mut on_out);
    };
    parser.push(0, &bytes, &mut sink);
    let mut at = bytes.len() as u64;
    for p in packets {
        let mut sink = |p: &Packet, _: &[u8]| {
            dec.packet(p, &mut on_out);
            states.push(dec.save_state());
        };
        parser.push(at, p, &mut sink);
        at += p.len() as u64;
    }
    // What the session does at the end of each block.
    dec.flush_batch(&mut on_out);
    let hits = dec.memo_hits();
    (c, states, hits, batches)
}

fn same_both_ways(what: &str, packets: &[Vec<u8>], return_stack: bool) -> u64 {
    let (counted, counted_states, hits, per_packet) = decode(packets, return_stack, Mode::Batches);
    let (built, built_states, none, _) = decode(packets, return_stack, Mode::Elements);
    let (merged, merged_states, merged_hits, open) = decode(packets, return_stack, Mode::Merged);
    assert_eq!(none, 0, "{what}: the memo is for runs that only count");
    assert_eq!(counted, built, "{what}: counts");
    assert_eq!(merged, built, "{what}: counts of merged batches");
    assert_eq!(merged_hits, hits, "{what}: replays with merged batches");
    // Consecutive replayed packets share one batch.
    if hits > 1 {
        assert!(open < per_packet, "{what}: {open} merged batches against {per_packet} per packet");
    }
    for states in [&counted_states, &merged_states] {
        assert_eq!(states.len(), built_states.len(), "{what}: packets decoded");
        for (i, (a, b)) in states.iter().zip(&built_states).enumerate() {
            assert!(a == b, "{what}: decoder state after packet {i} differs");
        }
    }
    assert!(built.ranges > 0, "{what}: nothing walked");
    hits
}

/// One turn of the loop, atom by atom: call (E), return (E), loop back (E).
fn singles(turns: usize) -> Vec<Vec<u8>> {
    (0..turns).flat_map(|_| [vec![E], vec![E], vec![E]]).collect()
}

#[test]
fn calls_and_returns_replay_with_the_return_stack() {
    let hits = same_both_ways("single atoms", &singles(20), true);
    // The first turn records its three packets; every later one replays them.
    assert!(hits >= 19 * 3, "only {hits} packets replayed");
}

#[test]
fn several_atoms_per_packet_replay() {
    // Call and return in one packet: the return ends it, the next packet pops.
    let packets: Vec<Vec<u8>> = (0..20).flat_map(|_| [vec![EE], vec![E]]).collect();
    let hits = same_both_ways("two atoms a packet", &packets, true);
    assert!(hits >= 19 * 2, "only {hits} packets replayed");
}

#[test]
fn a_return_followed_by_more_atoms_in_its_packet_is_walked() {
    // Call, return and loop in one packet: what the return pops is not in
    // the memo's key, so the packet is walked every time.
    let packets: Vec<Vec<u8>> = (0..10).map(|_| vec![EEE]).collect();
    let hits = same_both_ways("return then more atoms", &packets, true);
    assert_eq!(hits, 0, "a packet that pops inside was replayed");
}

#[test]
fn a_packet_that_starts_with_the_pop_replays() {
    // The return ends one packet; the next starts with its pop, taken before
    // the memo is asked, then loops, calls and returns again.
    let packets: Vec<Vec<u8>> = std::iter::once(vec![EE]).chain((0..10).map(|_| vec![EEE])).collect();
    let hits = same_both_ways("pop first", &packets, true);
    assert!(hits >= 9, "only {hits} packets replayed");
}

#[test]
fn without_a_return_stack_the_return_needs_an_address() {
    let packets: Vec<Vec<u8>> = (0..15).flat_map(|_| [vec![E], vec![E], BACK.to_vec()]).collect();
    let hits = same_both_ways("no return stack", &packets, false);
    assert!(hits >= 14 * 2, "only {hits} packets replayed");
}

#[test]
fn an_inaccessible_address_ends_a_replayed_packet() {
    // Loop once (N at the b.ne falls through), then the branch to 0x2000,
    // which has no code; an address brings the walk back.
    let turn = [vec![E], vec![E], vec![N], vec![E], vec![E], BACK.to_vec()];
    let packets: Vec<Vec<u8>> = (0..15).flat_map(|_| turn.clone()).collect();
    let hits = same_both_ways("inaccessible", &packets, true);
    assert!(hits >= 14 * 5, "only {hits} packets replayed");
}
