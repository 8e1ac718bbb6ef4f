//! The ETMv4/ETE decoder's atom memo: in a run that only counts, an atom
//! packet met again at the same walk state is replayed from what it did the
//! first time. These tests decode the same packets twice, once counting
//! (memo on) and once building every element (memo never asked), and require
//! the same counts and, after every packet, the same saved decoder state:
//! walk, return stack, range check and flags. A third run counts in batches
//! kept open across packets, as an index build does, with the same counts.

use std::sync::Arc;

use tracesight::element::{ElementKind, MemSpace, TraceOnReason};
use tracesight::image::memory::MemoryImage;
use tracesight::protocol::etm4::decoder::{DecoderOptions, DecoderOutput, Etm4Decoder, PacketRun};
use tracesight::protocol::etm4::{Etm4Config, Etm4Parser, Packet, PacketSink, PacketType};
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
/// return stack on or off; cycle counts in commit mode 1 (no commit field).
fn config(return_stack: bool) -> Etm4Config {
    let cfgr = 0x1u64 | if return_stack { 1 << 12 } else { 0 };
    let regs = [
        ("TRCCONFIGR", cfgr),
        ("TRCTRACEIDR", 0x1),
        ("TRCDEVARCH", 0x47735a13),
        ("TRCIDR0", 0x2800_0aa1),
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
    cycle_counts: u64,
    cycles: u64,
    /// Elements an atom packet commits before its atoms when they are
    /// queued: trace on, and contexts.
    trace_ons: u64,
    contexts: u64,
    /// Decoder messages (errors): none but where a test allows them.
    messages: u64,
}

impl Counts {
    /// Count what the decoder handed over, built or in a batch.
    fn add(&mut self, o: DecoderOutput<'_>) {
        match o {
            DecoderOutput::Element(e) => match e.kind {
                ElementKind::InstrRange { count, .. } => {
                    self.ranges += 1;
                    self.instructions += count as u64;
                }
                ElementKind::AddrNotAccessible { .. } => self.nacc += 1,
                ElementKind::ExceptionReturn => self.eret += 1,
                ElementKind::CycleCount => {
                    self.cycle_counts += 1;
                    self.cycles += e.cycle_count.unwrap_or(0) as u64;
                }
                ElementKind::TraceOn(_) => self.trace_ons += 1,
                ElementKind::PeContext(_) => self.contexts += 1,
                _ => {}
            },
            DecoderOutput::Batch(b) => {
                self.ranges += b.ranges;
                self.instructions += b.instructions;
                self.nacc += b.addr_not_accessible;
                self.eret += b.exception_returns;
            }
            DecoderOutput::Message(_) => self.messages += 1,
            _ => {}
        }
    }
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
    /// Only counted, by the decoder (`counted`), as in a summary.
    Counted,
}

/// Decode `packets` after the start as `mode` says; the counts, the saved
/// state after each packet, the memo's hits and the batches handed over.
fn decode(program: &Program, packets: &[Vec<u8>], return_stack: bool, mode: Mode) -> (Counts, Vec<Vec<u8>>, u64, u64) {
    let cfg = config(return_stack);
    let mut parser = Etm4Parser::new(&cfg);
    let mut dec = Etm4Decoder::new(&cfg, program.image.clone(), DecoderOptions::default());
    dec.core_mut().batched = mode != Mode::Elements;
    dec.core_mut().merge_batches = mode == Mode::Merged;
    let mut c = Counts::default();
    let mut batches = 0;
    let mut states = Vec::new();
    let mut on_out = |o: DecoderOutput<'_>| {
        batches += matches!(o, DecoderOutput::Batch(_)) as u64;
        c.add(o);
    };
    let mut bytes = Vec::new();
    for p in [&ASYNC[..], &TRACE_INFO, &program.start] {
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

/// The code and the packets that start the trace in it.
struct Program {
    image: Arc<MemoryImage>,
    start: Vec<u8>,
}

fn loop_program() -> Program {
    Program { image: image(), start: START.to_vec() }
}

fn same_both_ways(what: &str, packets: &[Vec<u8>], return_stack: bool) -> u64 {
    same_both_ways_in(&loop_program(), what, packets, return_stack)
}

fn same_both_ways_in(program: &Program, what: &str, packets: &[Vec<u8>], return_stack: bool) -> u64 {
    let (counted, counted_states, hits, per_packet) = decode(program, packets, return_stack, Mode::Batches);
    let (built, built_states, none, _) = decode(program, packets, return_stack, Mode::Elements);
    assert_eq!(built.messages, 0, "{what}: decoder messages");
    let (merged, merged_states, merged_hits, open) = decode(program, packets, return_stack, Mode::Merged);
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

/// `n` branches at scattered addresses (from 0x1000; the others 4-aligned
/// in 16 MiB from 0x100000, drawn by a fixed LCG), each `b` to the next and
/// the last back to the first.
fn scattered_chain(n: usize) -> Program {
    let mut addrs = vec![0x1000u64];
    let mut seen: std::collections::HashSet<u64> = addrs.iter().copied().collect();
    let mut x: u64 = 0x2545_f491;
    while addrs.len() < n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let a = 0x10_0000 + ((x >> 33) % (1 << 22)) * 4;
        if seen.insert(a) {
            addrs.push(a);
        }
    }
    let mut m = MemoryImage::new();
    for (i, &a) in addrs.iter().enumerate() {
        let to = addrs[(i + 1) % n];
        let words = (to.wrapping_sub(a) as i64 / 4) as u32 & 0x03ff_ffff;
        m.add_bytes(a, (0x1400_0000 | words).to_le_bytes().to_vec(), MemSpace::ANY);
    }
    Program { image: Arc::new(m), start: START.to_vec() }
}

#[test]
fn packets_whose_keys_share_a_line_of_the_table_both_replay() {
    // A thousand walk starts, each met once a turn: in a table of 8192
    // entries taken directly from the hash, one in eight of these keys
    // shares its entry with another and the two push each other out every
    // turn (87% of the later turns' packets replayed); in sets of two, only
    // a third key in a set does that (96%).
    const N: usize = 1000;
    let program = scattered_chain(N);
    let packets: Vec<Vec<u8>> = (0..4 * N).map(|_| vec![E]).collect();
    let hits = same_both_ways_in(&program, "scattered walk starts", &packets, true);
    let later = 3 * N as u64;
    assert!(hits * 100 >= later * 93, "only {hits} of the {later} packets of the later turns replayed");
}

/// Takes atom and address packets in runs, as the session's sink for runs
/// that only count does.
struct RunSink<'a, G, const RUNS: bool = true, const ROWS: bool = true> {
    dec: &'a mut Etm4Decoder,
    out: &'a mut G,
    run: PacketRun,
    /// Packets taken one by one, and in runs.
    single: u64,
    in_runs: u64,
}

impl<G: FnMut(DecoderOutput<'_>), const R: bool, const W: bool> PacketSink for RunSink<'_, G, R, W> {
    const RUNS: bool = R;
    const ROWS: bool = W;

    fn packet(&mut self, p: &Packet, _: &[u8]) -> bool {
        self.single += 1;
        self.dec.packet(p, self.out);
        true
    }

    fn run_begin(&mut self) -> bool {
        self.dec.run_begin(self.out).map(|r| self.run = r).is_some()
    }

    fn run_atom(&mut self, bits: u32, count: u8, index: u64) -> bool {
        self.dec.run_atom(&mut self.run, bits, count, index, self.out)
    }

    fn run_row_begin(&mut self, first: u64) -> bool {
        self.dec.run_row_begin(&self.run, first, self.out)
    }

    fn run_atoms(&mut self, bytes: u64, avail: u8, first: u64) -> usize {
        self.dec.run_atoms(&mut self.run, bytes, avail, first) as usize
    }

    fn run_row(&mut self, packets: u8) {
        self.dec.run_row(packets)
    }

    fn run_addr(&mut self, addr: u64, is: u8) -> bool {
        self.dec.run_addr(&self.run, addr, is)
    }

    fn run_cc(&mut self, cc: u32, ptype: PacketType, index: u64) -> bool {
        self.dec.run_cc(&mut self.run, cc, ptype, index)
    }

    fn run_end(&mut self, packets: usize, _: usize, last: u64) {
        self.in_runs += packets as u64;
        self.dec.run_end(self.run, last, self.out);
    }
}

/// The start and `packets` as one buffer.
fn one_buffer(program: &Program, packets: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for p in [&ASYNC[..], &TRACE_INFO, &program.start] {
        bytes.extend_from_slice(p);
    }
    for p in packets {
        bytes.extend_from_slice(p);
    }
    bytes
}

/// How a decode in runs took its packets.
struct Taken {
    /// Atom packets replayed from the memo, one by one or in rows.
    hits: u64,
    /// Rows of atom packets replayed at once.
    rows: u64,
    /// Packets taken in runs, and in all.
    in_runs: u64,
    all: u64,
}

/// Decode the start and `packets` as one buffer, atom and address packets
/// offered in runs: the counts, the decoder's and the parser's saved states
/// at the end, and how the packets were taken.
fn decode_in_runs(program: &Program, packets: &[Vec<u8>], return_stack: bool, mode: Mode) -> (Counts, Vec<u8>, Vec<u8>, Taken) {
    let cfg = config(return_stack);
    let mut parser = Etm4Parser::new(&cfg);
    let mut dec = Etm4Decoder::new(&cfg, program.image.clone(), DecoderOptions::default());
    dec.core_mut().batched = true;
    dec.core_mut().merge_batches = mode == Mode::Merged;
    if mode == Mode::Counted {
        dec.core_mut().counted = Some(Box::default());
    }
    let mut c = Counts::default();
    let mut on_out = |o: DecoderOutput<'_>| c.add(o);
    let bytes = one_buffer(program, packets);
    let (single, in_runs) = {
        let mut sink = RunSink::<_, true> { dec: &mut dec, out: &mut on_out, run: PacketRun::default(), single: 0, in_runs: 0 };
        let used = parser.push_until(0, &bytes, &mut sink);
        assert_eq!(used, bytes.len());
        sink.dec.flush_batch(sink.out);
        (sink.single, sink.in_runs)
    };
    if let Some(k) = dec.core_mut().counted.take() {
        use tracesight::element::{kind_index, KIND_ADDR_NACC, KIND_EXCEPTION_RETURN, KIND_INSTR_RANGE};
        c.ranges += k.kinds[KIND_INSTR_RANGE];
        c.instructions += k.range_instructions;
        c.nacc += k.kinds[KIND_ADDR_NACC];
        c.eret += k.kinds[KIND_EXCEPTION_RETURN];
        c.cycle_counts += k.kinds[kind_index(&ElementKind::CycleCount)];
        c.trace_ons += k.kinds[kind_index(&ElementKind::TraceOn(TraceOnReason::Normal))];
        c.contexts += k.kinds[kind_index(&ElementKind::PeContext(Default::default()))];
        c.cycles += dec.core().time.total_cycles;
    }
    let taken = Taken { hits: dec.memo_hits(), rows: dec.seq_hits(), in_runs, all: single + in_runs };
    (c, dec.save_state(), parser.save_state(), taken)
}

/// The start and `packets` as one trace ID's bytes from several blocks (as
/// from formatter frames): stretches of 7 bytes, the indices jumping by 100
/// from one to the next. Decoded in merged batches (`Mode::Merged`) with
/// runs when `RUNS`: the counts with the index of each batch, the
/// decoder's and the parser's saved states, and the packets taken in runs.
fn decode_in_stretches<const RUNS: bool, const ROWS: bool>(
    program: &Program,
    packets: &[Vec<u8>],
    return_stack: bool,
) -> ((Counts, Vec<u64>), Vec<u8>, Vec<u8>, u64) {
    let cfg = config(return_stack);
    let mut parser = Etm4Parser::new(&cfg);
    let mut dec = Etm4Decoder::new(&cfg, program.image.clone(), DecoderOptions::default());
    dec.core_mut().batched = true;
    dec.core_mut().merge_batches = true;
    let mut c = Counts::default();
    let mut at = Vec::new();
    let mut on_out = |o: DecoderOutput<'_>| {
        if let DecoderOutput::Batch(b) = &o {
            at.push(b.index);
        }
        c.add(o)
    };
    let bytes = one_buffer(program, packets);
    let spans: Vec<(usize, u64)> = (0..bytes.len()).step_by(7).map(|o| (o, o as u64 * 15 + 100)).collect();
    let in_runs = {
        let mut sink = RunSink::<_, RUNS, ROWS> { dec: &mut dec, out: &mut on_out, run: PacketRun::default(), single: 0, in_runs: 0 };
        assert_eq!(parser.push_spans_until(&spans, &bytes, &mut sink), bytes.len());
        sink.dec.flush_batch(sink.out);
        sink.in_runs
    };
    ((c, at), dec.save_state(), parser.save_state(), in_runs)
}

/// The counts and the final decoder state of a decode that takes atoms in
/// runs are those of one that builds every element, with batches per
/// packet and merged; returns how many packets went in runs.
fn same_in_runs(program: &Program, what: &str, packets: &[Vec<u8>], return_stack: bool) -> u64 {
    same_in_runs_rows(program, what, packets, return_stack).0
}

/// [`same_in_runs`], and how many rows of atom packets were replayed at
/// once in batches kept open (an index build's way).
fn same_in_runs_rows(program: &Program, what: &str, packets: &[Vec<u8>], return_stack: bool) -> (u64, u64) {
    let (taken, rows, messages) = same_in_runs_any(program, what, packets, return_stack, true);
    assert_eq!(messages, 0, "{what}: decoder messages");
    (taken, rows)
}

/// Whether every element of `a` is in `b`, in the same order.
fn is_subsequence(a: &[u64], b: &[u64]) -> bool {
    let mut rest = b.iter();
    a.iter().all(|x| rest.any(|y| y == x))
}

/// [`same_in_runs_rows`] where the decoder may report errors: and how many
/// it did. Without `batch_order` batches in stretches may end at other
/// packets in runs than one by one (the counts must be the same): one by one
/// walks an atom packet that starts in a gap of the image learnt before
/// (the memo has no entry for it yet) and sends its batch there, where a
/// run replays it and keeps its batch open.
fn same_in_runs_any(program: &Program, what: &str, packets: &[Vec<u8>], return_stack: bool, batch_order: bool) -> (u64, u64, u64) {
    let (built, built_states, _, _) = decode(program, packets, return_stack, Mode::Elements);
    let (_, _, per_packet_hits, _) = decode(program, packets, return_stack, Mode::Batches);
    // The parser's state after the same buffer parsed one packet at a time.
    let mut parser = Etm4Parser::new(&config(return_stack));
    parser.push_until(0, &one_buffer(program, packets), &mut |_: &Packet, _: &[u8]| true);
    let parsed = parser.save_state();
    let (mut taken, mut merged_taken, mut rows) = (0, 0, 0);
    for mode in [Mode::Batches, Mode::Merged, Mode::Counted] {
        let (counts, state, parser_state, Taken { hits, rows: r, in_runs, all }) = decode_in_runs(program, packets, return_stack, mode);
        assert_eq!(counts, built, "{what}: counts");
        assert!(Some(&state) == built_states.last(), "{what}: decoder state at the end differs");
        assert!(parser_state == parsed, "{what}: parser state at the end differs");
        // Runs replay at least what one by one replays; more where a walk
        // starts at an address of a gap in the image learnt before (the
        // memo has no entry for it yet; one by one walks it).
        assert!(hits >= per_packet_hits, "{what}: {hits} replays in runs against {per_packet_hits}");
        // The start's packets and each of `packets`, one a packet.
        assert_eq!(all, 4 + packets.len() as u64, "{what}: packets");
        if mode == Mode::Merged {
            merged_taken = in_runs;
            rows = r;
        }
        taken = in_runs;
    }
    // Runs that go on across stretches of the buffer.
    let (one_by_one, state, parser_state, none) = decode_in_stretches::<false, false>(program, packets, return_stack);
    let (counts, run_state, run_parser_state, in_runs) = decode_in_stretches::<true, true>(program, packets, return_stack);
    assert_eq!(none, 0);
    assert_eq!(counts.0, one_by_one.0, "{what}: counts in stretches");
    if batch_order {
        // A run may keep a batch open where one by one sends it (after an
        // atom packet that sent what was queued before it): batches merged
        // within a run, where the time cannot change, count alike
        // everywhere. Never split elsewhere or reordered.
        assert!(is_subsequence(&counts.1, &one_by_one.1), "{what}: batches in stretches {:?} against {:?}", counts.1, one_by_one.1);
    }
    // Rows change nothing that runs without them do, batches included. (The
    // parser offers no rows in a framed trace ID's stretches today: this
    // holds it to that, or to rows there that change nothing.)
    let (no_rows, no_rows_state, _, no_rows_in_runs) = decode_in_stretches::<true, false>(program, packets, return_stack);
    assert_eq!(counts, no_rows, "{what}: counts in stretches without rows");
    assert!(run_state == no_rows_state, "{what}: decoder state at the end differs in stretches without rows");
    assert_eq!(in_runs, no_rows_in_runs, "{what}: packets in runs in stretches without rows");
    assert!(run_state == state, "{what}: decoder state at the end differs in stretches");
    assert!(run_parser_state == parser_state, "{what}: parser state at the end differs in stretches");
    assert!(in_runs * 10 >= merged_taken * 9, "{what}: {in_runs} packets in runs in stretches against {merged_taken} in one");
    (taken, rows, built.messages)
}

#[test]
fn atom_packets_taken_in_runs_count_as_one_by_one() {
    let later = |turns: usize, per_turn: usize| ((turns - 1) * per_turn) as u64;
    // Calls and returns: every later turn replays, one long run.
    let n = same_in_runs(&loop_program(), "single atoms", &singles(20), true);
    assert!(n >= later(20, 3), "only {n} packets in runs");
    // Pops at the start of packets.
    let packets: Vec<Vec<u8>> = (0..20).flat_map(|_| [vec![EE], vec![E]]).collect();
    let n = same_in_runs(&loop_program(), "two atoms a packet", &packets, true);
    assert!(n >= later(20, 2), "only {n} packets in runs");
    // Walked every time: a run stops before each such packet.
    let packets: Vec<Vec<u8>> = (0..10).map(|_| vec![EEE]).collect();
    same_in_runs(&loop_program(), "return then more atoms", &packets, true);
    // Addresses are taken in runs too.
    let packets: Vec<Vec<u8>> = (0..15).flat_map(|_| [vec![E], vec![E], BACK.to_vec()]).collect();
    let n = same_in_runs(&loop_program(), "no return stack", &packets, false);
    assert!(n >= later(15, 3), "only {n} packets in runs");
    // An inaccessible address, then atoms committed while the decoder
    // waits for an address.
    let turn = [vec![E], vec![E], vec![N], vec![E], vec![E], vec![N], vec![EE], BACK.to_vec()];
    let packets: Vec<Vec<u8>> = (0..15).flat_map(|_| turn.clone()).collect();
    let n = same_in_runs(&loop_program(), "inaccessible", &packets, true);
    assert!(n >= later(15, 7), "only {n} packets in runs");
    // Many walk starts: misses break runs up.
    let program = scattered_chain(1000);
    let packets: Vec<Vec<u8>> = (0..4000).map(|_| vec![E]).collect();
    let n = same_in_runs(&program, "scattered walk starts", &packets, true);
    assert!(n * 100 >= 3000 * 90, "only {n} packets in runs");
}

/// Long addresses (IS0) 0x1000, 32 and 64 bits; a short address 0x1000
/// that says IS1 (the same in AArch64, but the decoder keeps it for the
/// next context); an exact match of the address before the most recent.
const BACK_L32: [u8; 5] = [0x9a, 0x00, 0x08, 0x00, 0x00];
const BACK_L64: [u8; 9] = [0x9d, 0x00, 0x08, 0, 0, 0, 0, 0, 0];
const BACK_IS1: [u8; 3] = [0x96, 0x80, 0x10];
const MATCH_1: u8 = 0x91;

#[test]
fn address_packets_of_every_form_taken_in_runs_count_as_one_by_one() {
    // Call, return, fall through and branch to where there is no code; an
    // atom committed while the decoder waits; then back by each form of
    // address.
    let backs = [BACK.to_vec(), BACK_L32.to_vec(), vec![MATCH_1], BACK_L64.to_vec(), BACK_IS1.to_vec()];
    let packets: Vec<Vec<u8>> = (0..15)
        .flat_map(|t| [vec![E], vec![E], vec![N], vec![E], vec![E], backs[t % backs.len()].clone()])
        .collect();
    for return_stack in [true, false] {
        let n = same_in_runs(&loop_program(), "every address form", &packets, return_stack);
        // All but the first turn's walks (recorded, not replayed).
        assert!(n >= (packets.len() - 6) as u64, "only {n} packets in runs");
    }
}

/// Cycle count packets, format 3 (count 1-3) and format 2 (count 5).
const CC1: u8 = 0x11;
const CC2: u8 = 0x12;
const CC3: u8 = 0x13;
const CC5: [u8; 2] = [0x0c, 0x05];

#[test]
fn cycle_counts_taken_in_runs_count_as_one_by_one() {
    // A count before a call, a return, a fall-through, a branch to where
    // there is no code and an atom committed while the decoder waits; two
    // counts in a row; a count before an address (not taken in a run: it
    // would be queued behind the count) and before the next turn's atom.
    let turn = [
        vec![CC3],
        vec![E],
        vec![CC1],
        vec![E],
        vec![N],
        CC5.to_vec(),
        vec![E],
        vec![CC1],
        vec![E],
        BACK.to_vec(),
        vec![CC2],
        vec![CC3],
        vec![E],
        vec![E],
        vec![N],
        vec![E],
        vec![CC2],
        BACK.to_vec(),
    ];
    let packets: Vec<Vec<u8>> = (0..10).flat_map(|_| turn.clone()).collect();
    for return_stack in [true, false] {
        let n = same_in_runs(&loop_program(), "cycle counts", &packets, return_stack);
        assert!(n >= (packets.len() - 2 * turn.len()) as u64 / 2, "only {n} packets in runs");
    }
}

/// The loop program, with more around it: `b 0x1000` at 0x3000, mapped
/// only for EL2; two bytes at 0x5000, where no whole instruction is mapped
/// in any space; and `b.ne 0x7000` at 0x7000, the last word mapped there.
fn gaps_program() -> Program {
    let words: [u32; 6] = [0x94000004, 0x54ffffe1, 0xd503201f, 0x140003fd, 0xd503201f, 0xd65f03c0];
    let mut m = MemoryImage::new();
    m.add_bytes(0x1000, words.iter().flat_map(|w| w.to_le_bytes()).collect(), MemSpace::ANY);
    m.add_bytes(0x3000, 0x17fff800u32.to_le_bytes().to_vec(), MemSpace::EL2);
    m.add_bytes(0x5000, vec![0x1f, 0x20], MemSpace::ANY);
    m.add_bytes(0x7000, 0x54000001u32.to_le_bytes().to_vec(), MemSpace::ANY);
    Program { image: Arc::new(m), start: START.to_vec() }
}

/// Short addresses (IS0) 0x3000, 0x0, 0x5000 and 0x7000.
const TO_3000: [u8; 3] = [0x95, 0x80, 0x18];
const TO_0: [u8; 3] = [0x95, 0x80, 0x00];
const TO_5000: [u8; 3] = [0x95, 0x80, 0x28];
const TO_7000: [u8; 3] = [0x95, 0x80, 0x38];
/// Address & Context (64-bit IS0) 0x3000 at EL2 non-secure AArch64.
const CTX_EL2_3000: [u8; 10] = [0x85, 0x00, 0x18, 0, 0, 0, 0, 0, 0, 0x32];

#[test]
fn atom_packets_that_start_where_nothing_is_mapped_count_as_one_by_one() {
    let loop_to_2000 = || [vec![E], vec![E], vec![N], vec![E]];
    let mut turn = Vec::new();
    // The b.ne at 0x7000 not taken: the walk must go on at 0x7004, where
    // nothing is mapped; the second time the gap learnt there knows.
    for _ in 0..2 {
        turn.extend([TO_7000.to_vec(), vec![N], vec![E]]);
    }
    // From the loop into 0x2000 (no code): the gap above the loop's code
    // is learnt at EL1. 0x3000 is in it: an atom packet there has no memo
    // entry yet, but the gap knows. 0x0 is in the gap below; 0x5000 holds
    // two bytes (inaccessible, but no gap); then 0x3000 again, which learns
    // the gap above the loop once more.
    turn.push(BACK.to_vec());
    turn.extend(loop_to_2000());
    turn.extend([vec![E], vec![EE], TO_3000.to_vec(), vec![E], vec![E], TO_0.to_vec(), vec![EE], TO_5000.to_vec(), vec![EEE]]);
    turn.extend([TO_3000.to_vec(), vec![E]]);
    // At EL2 0x3000 has code: the gap learnt at EL1 does not hold there.
    turn.extend([CTX_EL2_3000.to_vec(), vec![E]]);
    turn.extend(loop_to_2000());
    turn.extend([vec![E], TO_3000.to_vec(), vec![E]]);
    // Back at EL1, nothing at 0x3000 again.
    turn.push(START[1..].to_vec());
    turn.extend(loop_to_2000());
    turn.extend([TO_3000.to_vec(), vec![EE]]);
    let packets: Vec<Vec<u8>> = (0..12).flat_map(|_| turn.clone()).collect();
    let program = gaps_program();
    for return_stack in [true, false] {
        let n = same_in_runs(&program, "unmapped starts", &packets, return_stack);
        assert!(n >= (packets.len() - 3 * turn.len()) as u64 / 2, "only {n} packets in runs");
        // The elements themselves, built one by one, show those addresses
        // met (without a return stack the loop's return needs an address,
        // and the ways into 0x2000 are not taken).
        let (built, _, _, _) = decode(&program, &packets, return_stack, Mode::Elements);
        let per_turn = if return_stack { 9 } else { 7 };
        assert_eq!(built.nacc, 12 * per_turn, "inaccessible addresses");
    }
}

/// `calls` words of `bl` to the next word from 0x1000, then `b 0x1000`.
fn calls_program(calls: usize) -> Program {
    let mut words = vec![0x9400_0001u32; calls];
    words.push(0x1400_0000 | ((-(calls as i32)) as u32 & 0x03ff_ffff));
    let mut m = MemoryImage::new();
    m.add_bytes(0x1000, words.iter().flat_map(|w| w.to_le_bytes()).collect(), MemSpace::ANY);
    Program { image: Arc::new(m), start: START.to_vec() }
}

#[test]
fn runs_start_where_elements_are_queued() {
    // An address and context packet, then a turn of the loop: the first
    // atom packet commits what it queued before its atoms (as the
    // addresses and contexts after an exception). Its run takes it.
    let addr_ctxt = &START[1..];
    let turn = [addr_ctxt.to_vec(), vec![E], vec![E], vec![E], vec![EE], vec![E]];
    let packets: Vec<Vec<u8>> = (0..20).flat_map(|_| turn.clone()).collect();
    for return_stack in [true, false] {
        let n = same_in_runs(&loop_program(), "after trace on", &packets, return_stack);
        // Five atom packets a turn, all in runs once the memo knows them
        // (four when the first waited for one by one).
        assert!(n >= 19 * 5, "only {n} packets in runs");
    }
}

#[test]
fn packets_of_up_to_four_calls_replay() {
    // Four E atoms a packet (F6, 0xc0) down a chain of 16 calls: 17 places
    // a packet can start, most of its atoms calls (three where it takes
    // the branch back). Before the memo held four calls a packet, none of
    // these replayed (001-ack_test's recursion is such packets).
    let packets: Vec<Vec<u8>> = (0..85).map(|_| vec![0xc0]).collect();
    for return_stack in [true, false] {
        let hits = same_both_ways_in(&calls_program(16), "four calls a packet", &packets, return_stack);
        assert!(hits >= 85 - 17, "only {hits} packets replayed");
    }
    // Five E atoms (0xc1) then two packets of four: five calls are walked
    // every time (the packets that take the branch back make four), the
    // packets of four replay.
    let packets: Vec<Vec<u8>> = (0..40).flat_map(|_| [vec![0xc1], vec![0xc0], vec![0xc0]]).collect();
    for return_stack in [true, false] {
        let hits = same_both_ways_in(&calls_program(16), "five calls a packet", &packets, return_stack);
        // At most the 80 packets of four.
        assert!((46..=80).contains(&hits), "{hits} packets replayed");
    }
}

#[test]
fn rows_of_atom_packets_replay_as_one_by_one() {
    // Atom packets back to back, the parser's rows cut by returns (the
    // walk waits for the pop) and starting with the pop.
    let (n, rows) = same_in_runs_rows(&loop_program(), "rows of single atoms", &singles(40), true);
    assert!(n >= 110, "only {n} packets in runs");
    assert!(rows >= 30, "only {rows} rows replayed");
    // Several atoms a packet, and rows cut by inaccessible addresses.
    let packets: Vec<Vec<u8>> = (0..20).flat_map(|_| [vec![EE], vec![E]]).collect();
    let (_, rows) = same_in_runs_rows(&loop_program(), "rows of several atoms a packet", &packets, true);
    assert!(rows >= 10, "only {rows} rows replayed");
    let turn = [vec![E], vec![E], vec![E], vec![N], vec![E], vec![E], vec![N], vec![EE], BACK.to_vec()];
    let packets: Vec<Vec<u8>> = (0..15).flat_map(|_| turn.clone()).collect();
    for return_stack in [true, false] {
        let (_, rows) = same_in_runs_rows(&loop_program(), "rows to inaccessible", &packets, return_stack);
        assert!(rows >= 10, "only {rows} rows replayed");
    }
    // A call a packet down a chain of calls: eight packets a row (the rest
    // of each row the first time one by one), 70 rows once every start of
    // a row is known.
    let packets: Vec<Vec<u8>> = (0..600).map(|_| vec![E]).collect();
    for return_stack in [true, false] {
        let (n, rows) = same_in_runs_rows(&calls_program(11), "many calls", &packets, return_stack);
        assert!(n >= 550, "only {n} packets in runs");
        assert!(rows >= 60, "only {rows} rows replayed");
    }
    // Three calls a packet: more calls than a remembered row holds (16) in
    // six packets, so rows are kept without the packet that would overflow
    // them.
    let packets: Vec<Vec<u8>> = (0..600).map(|_| vec![EEE]).collect();
    for return_stack in [true, false] {
        let (n, rows) = same_in_runs_rows(&calls_program(11), "more calls than a row holds", &packets, return_stack);
        assert!(n >= 550, "only {n} packets in runs");
        // 107 rows replayed here; none if an overflowing row were dropped.
        assert!(rows >= 90, "only {rows} rows replayed");
    }
}

/// Atom headers of every format (F1-F6) and the addresses back into the
/// loop program, for random rows.
const PALETTE: [&[u8]; 13] = [
    &[E],
    &[N],
    &[EE],
    &[0xd9],
    &[EEE],
    &[0xfa],
    &[0xdc],
    &[0xde],
    &[0xd5],
    &[0xc2],
    &[0xe1],
    &BACK,
    &TO_3000,
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// Random turns of atom packets with addresses between, repeated so
    /// that rows are met again: counted in runs with rows, as one by one.
    #[test]
    fn random_rows_count_as_one_by_one(
        turn in proptest::collection::vec(0..PALETTE.len(), 1..24),
        repeats in 2usize..6,
        return_stack in proptest::prelude::any::<bool>(),
        gaps in proptest::prelude::any::<bool>(),
    ) {
        let packets: Vec<Vec<u8>> = (0..repeats).flat_map(|_| turn.iter().map(|&k| PALETTE[k].to_vec())).collect();
        let program = if gaps { gaps_program() } else { loop_program() };
        same_in_runs_any(&program, "random rows", &packets, return_stack, false);
    }
}

/// A T32 loop with IT blocks, at 0x1000 (AArch32 EL1 non-secure):
/// ```text
/// 1000: bl    1010
/// 1004: it    ne
/// 1006: b.n   1000       (conditional: the block's one instruction)
/// 1008: itt   ne
/// 100a: b.n   1000       (the block's first: its walk ends inside it)
/// 100c: nop
/// 100e: b.n   1000
/// 1010: nop
/// 1012: bx    lr
/// ```
fn t32_program() -> Program {
    let halfwords: [u16; 10] = [0xf000, 0xf806, 0xbf18, 0xe7fb, 0xbf1c, 0xe7f9, 0xbf00, 0xe7f7, 0xbf00, 0x4770];
    let mut m = MemoryImage::new();
    m.add_bytes(0x1000, halfwords.iter().flat_map(|h| h.to_le_bytes()).collect(), MemSpace::ANY);
    // Trace On, then Address & Context (32-bit IS1) 0x1000, AArch32 EL1 non-secure.
    Program { image: Arc::new(m), start: vec![0x04, 0x83, 0x00, 0x10, 0x00, 0x00, 0x21] }
}

#[test]
fn t32_walks_replay_outside_it_blocks() {
    // Call, return, then: the IT block's branch taken (E E E); not taken
    // and the two-instruction block's branch not taken, walked from inside
    // the block to the b.n (E E N N E); or taken, so that the next walk,
    // from 0x1000, starts inside the block (E E N E).
    let turns: [&[bool]; 3] = [&[true, true, true], &[true, true, false, false, true], &[true, true, false, true]];
    let atoms: Vec<bool> = (0..30).flat_map(|i| turns[i % 3].iter().copied()).collect();
    let singles: Vec<Vec<u8>> = atoms.iter().map(|&e| vec![if e { E } else { N }]).collect();
    let program = t32_program();
    let (built, _, _, _) = decode(&program, &singles, true, Mode::Elements);
    // Every atom ends a range: the loop never leaves the code.
    assert_eq!(built.ranges, atoms.len() as u64, "one range an atom");
    let hits = same_both_ways_in(&program, "T32 single atoms", &singles, true);
    // Walks that end inside the two-instruction block (the third kind's
    // fourth atom, the second kind's fourth) and those that start inside it
    // (the next atom: the second kind's fifth, the call after the third
    // kind) are walked every time: four of the twelve atoms of three turns.
    // The eight others replay from the second round on.
    assert!(hits >= 9 * 8, "only {hits} packets replayed");
    // Two atoms a packet (format 2: E E, and N then E): the call and the
    // return, the IT block's branch alone, or not taken alone and the
    // two-instruction block's branch and the b.n after it, which ends
    // inside the block and is walked every time.
    const NE: u8 = 0xda;
    let packets: Vec<Vec<u8>> = (0..10).flat_map(|_| [vec![EE], vec![E], vec![EE], vec![N], vec![NE]]).collect();
    let hits = same_both_ways_in(&program, "T32 two atoms a packet", &packets, true);
    assert!(hits >= 9 * 4, "only {hits} packets of two replayed");
    let (n, _) = same_in_runs_rows(&program, "T32 rows", &singles, true);
    assert!(n >= 9 * 8, "only {n} packets in runs");
}
