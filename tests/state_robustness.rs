//! Saved decode states are read from index files, which travel between
//! machines: a state whose checksum was recomputed after editing must never
//! make a decoder panic or loop (issue 15, finding 2). Each case here edits one
//! field-sized piece of a real checkpoint state (fixed-width bincode, so a
//! word-aligned overwrite is one field of the parser or decoder), loads it and
//! decodes the next bytes with a time limit. Loading may refuse the state; a
//! loaded state must decode without panicking and in bounded time.

// The trace units, image and buffer plan the fuzz targets build from bytes.
#[path = "../fuzz/fuzz_targets/common/mod.rs"]
mod units;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use tracesight::index::{self, IndexOptions};
use tracesight::input::Snapshot;
use tracesight::session::{BufferPlan, RunOptions, Runner};

fn fixture(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd").join(name);
    p.is_dir().then_some(p)
}

/// xorshift64*: reproducible cases without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// One edited state: where, how wide, what value (all read through Debug
/// when a case fails).
#[derive(Clone, Debug)]
#[allow(dead_code)]
struct Case {
    fixture: &'static str,
    checkpoint: usize,
    at: usize,
    width: usize,
    value: u64,
}

/// Values that break assumptions: zero, small counts, lengths, all ones,
/// negative numbers, the high bit, and random ones.
fn interesting(rng: &mut Rng) -> u64 {
    match rng.below(12) {
        0 => 0,
        1 => 1,
        2 => 2 + rng.below(6),
        3 => u64::MAX,
        4 => u64::MAX - rng.below(4),
        5 => 1 << 63,
        6 => 0x7fff_ffff,
        7 => 0x8000_0000,
        8 => 0xffff_ffff,
        9 => 256 + rng.below(100_000),
        10 => rng.below(256),
        _ => rng.next(),
    }
}

struct Loaded {
    plan: BufferPlan,
    data: Vec<u8>,
    offsets: Vec<u64>,
    states: Vec<Vec<u8>>,
}

fn load(name: &str) -> Option<Loaded> {
    let dir = fixture(name)?;
    let snap = Snapshot::open(&dir).ok()?;
    let buffer = snap.default_buffer()?.clone();
    let plan = BufferPlan::new(&snap, &buffer).ok()?;
    let data = plan.open().ok()?.bytes().to_vec();
    let opts = index::index_run_options(&RunOptions::default());
    let built = index::build(
        &plan,
        &data,
        &opts,
        &IndexOptions { interval: 1024, threads: 1, ..IndexOptions::default() },
        &index::BuildProgress::new(),
        None,
    );
    let offsets = built.checkpoints.iter().map(|c| c.offset).collect();
    let states = (0..built.states.len()).map(|i| built.states.get(i).unwrap()).collect();
    Some(Loaded { plan, data, offsets, states })
}

/// Resume from the edited state and decode up to 8 KiB and the end of trace;
/// `Err` when the state is refused, which is fine.
fn run_case(l: &Loaded, c: &Case) -> Result<u64, String> {
    let mut st = l.states[c.checkpoint].clone();
    let bytes = c.value.to_le_bytes();
    let end = (c.at + c.width).min(st.len());
    st[c.at..end].copy_from_slice(&bytes[..end - c.at]);
    let opts = index::index_run_options(&RunOptions::default());
    let mut r = Runner::resume(&l.plan, &opts, &st).map_err(|e| e.to_string())?;
    let from = l.offsets[c.checkpoint] as usize;
    let to = (from + 8192).min(l.data.len());
    let mut n = 0u64;
    let mut on = |_: tracesight::session::Event<'_>| n += 1;
    if r.feed(&l.data[from..to], &mut on) && to == l.data.len() {
        r.finish(&mut on);
    }
    Ok(n)
}

#[derive(Debug)]
#[allow(dead_code)] // the panic message is read through Debug
enum Outcome {
    Done,
    Panic(String),
    Hang,
}

fn cases(l: &Loaded, name: &'static str, cases_per_state: usize, seed: u64) -> Vec<Case> {
    let mut rng = Rng(seed);
    let mut cases = Vec::new();
    // States past the first (which is empty for a decode from the start).
    let picks: Vec<usize> = (1..l.states.len()).step_by((l.states.len() / 12).max(1)).collect();
    for &k in &picks {
        let len = l.states[k].len();
        for _ in 0..cases_per_state {
            let width = [1usize, 4, 8][rng.below(3) as usize];
            let at = rng.below(len.saturating_sub(width - 1) as u64) as usize;
            cases.push(Case { fixture: name, checkpoint: k, at, width, value: interesting(&mut rng) });
        }
    }
    cases
}

thread_local! {
    static WHERE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

enum Msg {
    Total(usize),
    One(usize, Case, Outcome),
}

/// Run every case on a worker thread, each with a time limit; a hung worker
/// is abandoned (the test fails anyway) and a new one takes the rest. (The
/// program image is not shared between threads, so each worker loads the
/// fixture itself.)
fn campaign(name: &'static str, cases_per_state: usize, seed: u64) -> Vec<(Case, Outcome)> {
    if fixture(name).is_none() {
        eprintln!("{name}: fixture not found; skipped");
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut i = 0;
    let mut total = usize::MAX;
    while i < total {
        let (tx, rx) = mpsc::channel::<Msg>();
        let from = i;
        std::thread::spawn(move || {
            let l = load(name).expect("fixture loads");
            let all = cases(&l, name, cases_per_state, seed);
            let _ = tx.send(Msg::Total(all.len()));
            for (j, c) in all.into_iter().enumerate().skip(from) {
                let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(&l, &c)));
                let o = match res {
                    Ok(_) => Outcome::Done,
                    Err(p) => Outcome::Panic(
                        WHERE.with(|w| w.borrow().clone())
                            + ": "
                            + &p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default(),
                    ),
                };
                if tx.send(Msg::One(j, c, o)).is_err() {
                    return;
                }
            }
        });
        let mut last = None;
        loop {
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Msg::Total(n)) => total = n,
                Ok(Msg::One(j, c, o)) => {
                    if !matches!(o, Outcome::Done) {
                        out.push((c.clone(), o));
                    }
                    last = Some(c);
                    i = j + 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    out.push((last.clone().unwrap_or(Case { fixture: name, checkpoint: 0, at: 0, width: 0, value: 0 }), Outcome::Hang));
                    i += 1;
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    if total == usize::MAX {
                        total = 0;
                    }
                    break;
                }
            }
        }
    }
    out
}

/// Quiet panics, remembering where each thread's last one happened for the
/// report.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        WHERE.with(|w| *w.borrow_mut() = at);
    }));
}

fn check(name: &'static str, cases_per_state: usize, seed: u64) {
    quiet_panics();
    let bad = campaign(name, cases_per_state, seed);
    for (c, o) in bad.iter().take(40) {
        eprintln!("{c:?}: {o:?}");
    }
    assert!(bad.is_empty(), "{name}: {} edited states panicked or hung", bad.len());
}

#[test]
fn edited_etm4_states_never_panic_or_hang() {
    check("juno_r1_1", 300, 0x1234_5678_9abc_def1);
}

#[test]
fn edited_ete_speculation_states_never_panic_or_hang() {
    check("ete_spec_1", 300, 0x0bad_cafe_f00d_0001);
}

#[test]
fn edited_etm3_and_ptm_states_never_panic_or_hang() {
    check("TC2", 300, 0x5eed_0000_0000_0003);
}

#[test]
fn edited_raw_ptm_states_never_panic_or_hang() {
    check("tc2-ptm-rstk-t32", 300, 0x5eed_0000_0000_0004);
}

/// Every state a parser reaches must load again: a state the parser itself
/// saved is never refused as out of range (the `runner_routing` fuzz target
/// found an ETMv3 timestamp whose continuation bytes outgrew the loader's
/// packet bound; crash-2195d8dc). After each sync sequence, every header byte
/// is followed by 6,000 bytes with the top bit set (continuation bytes that
/// never end) or zeros; the state is saved every 7 bytes and loaded again,
/// and the packet being gathered stays bounded.
#[test]
fn every_state_a_parser_saves_loads_again() {
    use tracesight::protocol::etm3::Etm3Parser;
    use tracesight::protocol::etm4::Etm4Parser;
    use tracesight::protocol::ptm::PtmParser;

    // Every option that adds packets: ETMv3.5 cycle accurate, with
    // timestamps, branch output, 32-bit context IDs and data trace; PTM cycle
    // accurate, with timestamps, return stack, branch broadcast and context
    // IDs; ETE with cycle counts and timestamps (bits as `units` reads them).
    let etm3 = units::etm3(0x1f, 0x10);
    let ptm = units::ptm(0x1f, 0x11);
    let ete = units::etm4(0x0b, 0x12);
    let mut checked = 0u64;
    for header in 0..=255u8 {
        for fill in [0xffu8, 0x80, 0x00] {
            let body = |sync: &[u8]| {
                let mut v = sync.to_vec();
                v.push(header);
                v.extend(std::iter::repeat_n(fill, 6000));
                v
            };
            let v3 = body(&[0, 0, 0, 0, 0, 0x80]);
            let v4 = body(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]);
            let mut p3 = Etm3Parser::new(&etm3);
            let mut pp = PtmParser::new(&ptm);
            let mut p4 = Etm4Parser::new(&ete);
            for (i, chunk) in v3.chunks(7).enumerate() {
                let at = (i * 7) as u64;
                p3.push(at, chunk, &mut |_, _| {});
                pp.push(at, chunk, &mut |_, _| {});
                let s3 = p3.save_state();
                let sp = pp.save_state();
                assert!(s3.len() < 8192 && sp.len() < 8192, "header 0x{header:02x} fill 0x{fill:02x}: a packet kept growing");
                p3 = Etm3Parser::load_state(&etm3, &s3)
                    .unwrap_or_else(|e| panic!("ETMv3 header 0x{header:02x} fill 0x{fill:02x} at {at}: {e}"));
                pp = PtmParser::load_state(&ptm, &sp)
                    .unwrap_or_else(|e| panic!("PTM header 0x{header:02x} fill 0x{fill:02x} at {at}: {e}"));
                checked += 2;
            }
            for (i, chunk) in v4.chunks(7).enumerate() {
                let at = (i * 7) as u64;
                p4.push(at, chunk, &mut |_, _| {});
                let s4 = p4.save_state();
                assert!(s4.len() < 8192, "header 0x{header:02x} fill 0x{fill:02x}: a packet kept growing");
                p4 = Etm4Parser::load_state(&ete, &s4)
                    .unwrap_or_else(|e| panic!("ETE header 0x{header:02x} fill 0x{fill:02x} at {at}: {e}"));
                checked += 1;
            }
        }
    }
    // Unsynchronised zero runs: PTM's A-sync search holds zeros over from
    // block to block (runner_routing, crash-84f62a56).
    let zeros = vec![0u8; 60_000];
    let mut pp = PtmParser::new(&ptm);
    let mut p3 = Etm3Parser::new(&etm3);
    let mut p4 = Etm4Parser::new(&ete);
    let mut listed = 0usize;
    for (i, chunk) in zeros.chunks(1024).enumerate() {
        let at = (i * 1024) as u64;
        pp.push(at, chunk, &mut |_, r| listed += r.len());
        p3.push(at, chunk, &mut |_, _| {});
        p4.push(at, chunk, &mut |_, _| {});
        pp = PtmParser::load_state(&ptm, &pp.save_state()).unwrap_or_else(|e| panic!("PTM zeros at {at}: {e}"));
        p3 = Etm3Parser::load_state(&etm3, &p3.save_state()).unwrap_or_else(|e| panic!("ETMv3 zeros at {at}: {e}"));
        p4 = Etm4Parser::load_state(&ete, &p4.save_state()).unwrap_or_else(|e| panic!("ETE zeros at {at}: {e}"));
    }
    // OpenCSD lists the zeros it holds again with every block, and holds a
    // third of the run: about 340 bytes listed per zero at this length, and
    // growing with it. Ours stays linear (about 61 per zero).
    assert!(listed < 100 * zeros.len(), "{listed} bytes listed for {} zeros", zeros.len());
    assert!(checked > 1_000_000);
}

/// A parser state saved inside a packet, with any one byte changed, loads
/// or is refused, and a loaded one parses on without panicking: the sizes a
/// state holds for the packet being gathered may not fit the bytes it holds
/// (an ETMv4 context packet whose held info byte named more context ID bytes
/// than were held read past its buffer; found by
/// `edited_etm4_states_never_panic_or_hang` once the state's layout moved).
/// Every byte of every state, so the test does not depend on where the
/// fields lie: every header that starts a packet of more than one byte, one
/// to three of its payload bytes, for ETE with cycle counts and timestamps,
/// ETMv3.5 and PTM with every option that adds packets.
#[test]
fn every_byte_of_a_mid_packet_state_edited() {
    quiet_panics();
    // On a thread, so that a state that makes a parser loop fails the test
    // rather than hang it.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(edit_every_parsers_mid_packet_states());
    });
    let failed = rx.recv_timeout(Duration::from_secs(300)).expect("a parser went on for 300 s from an edited state");
    assert_eq!(failed, 0, "edited states panicked");
}

/// The three parsers' cases of `every_byte_of_a_mid_packet_state_edited`:
/// how many edited states made them panic.
fn edit_every_parsers_mid_packet_states() -> usize {
    use tracesight::protocol::etm3::Etm3Parser;
    use tracesight::protocol::etm4::Etm4Parser;
    use tracesight::protocol::ptm::PtmParser;

    let ete = units::etm4(0x0b, 0x12);
    let etm3 = units::etm3(0x1f, 0x10);
    let ptm = units::ptm(0x1f, 0x11);
    let a_sync = [0u8, 0, 0, 0, 0, 0x80];
    let ete_sync = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x01, 0x00];
    // The three parsers have the same calls and no trait in common.
    macro_rules! edit {
        ($what:expr, $parser:ty, $cfg:expr, $sync:expr) => {
            edit_mid_packet_states(
                $what,
                $sync,
                |v| {
                    let mut p = <$parser>::new($cfg);
                    let mut n = 0;
                    p.push(0, v, &mut |_, r| n += r.len());
                    (n < v.len()).then(|| p.save_state())
                },
                |s, at, tail| {
                    let Ok(mut p) = <$parser>::load_state($cfg, s) else { return false };
                    p.push(at, tail, &mut |_, _| {});
                    true
                },
            )
        };
    }
    edit!("ETE", Etm4Parser, &ete, &ete_sync) + edit!("ETMv3", Etm3Parser, &etm3, &a_sync) + edit!("PTM", PtmParser, &ptm, &a_sync)
}

/// For `every_byte_of_a_mid_packet_state_edited`: `parse` parses bytes with
/// a new parser and gives its saved state when they end inside a packet;
/// `resume` loads an edited state (false: refused) and parses `tail` from
/// the index given. Returns how many edited states panicked, printing the
/// first of them.
fn edit_mid_packet_states(
    what: &str,
    sync: &[u8],
    parse: impl Fn(&[u8]) -> Option<Vec<u8>>,
    resume: impl Fn(&[u8], u64, &[u8]) -> bool,
) -> usize {
    // Continuation bytes, then their ends, then a row of packet headers.
    let tail: Vec<u8> = [0x80u8; 10].iter().chain(&[0x00; 6]).chain(&[0x9a, 0x95, 0x04, 0x82, 0xf7, 0x08]).copied().collect();
    let (mut states, mut loaded, mut bad) = (0usize, 0usize, Vec::new());
    let cases = (0..=255u8).flat_map(|h| (1..=3).flat_map(move |k| [(h, k, 0x81u8), (h, k, 0xff)]));
    for (header, k, fill) in cases {
        let mut v = sync.to_vec();
        v.push(header);
        // Payload bytes with their top bit set (each asks for another), and
        // with every bit set (every optional field named).
        v.extend(std::iter::repeat_n(fill, k));
        let Some(state) = parse(&v) else { continue };
        states += 1;
        for at in 0..state.len() {
            for value in [0x00u8, 0x01, 0x03, 0x05, 0x09, 0x7f, 0xff] {
                if state[at] == value {
                    continue;
                }
                let mut s = state.clone();
                s[at] = value;
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| resume(&s, v.len() as u64, &tail)));
                match run {
                    Ok(true) => loaded += 1,
                    Ok(false) => {}
                    Err(_) => bad.push((header, k, fill, at, value, WHERE.with(|w| w.borrow().clone()))),
                }
            }
        }
    }
    // Printed, as the hook keeps an assertion's own message quiet.
    for b in bad.iter().take(20) {
        eprintln!("{what}: header, payload bytes, their value, offset, value, where: {b:?}");
    }
    eprintln!("{what}: {states} states inside a packet, {loaded} edited ones loaded, {} panicked", bad.len());
    assert!(states > 20 && loaded > 5_000, "{what}: {states} states, {loaded} loaded");
    bad.len()
}

/// A state the ETMv4 decoder saves loads again when its speculation depth has
/// gone below zero, as OpenCSD's does when a cancel resolves elements the
/// depth never counted (exceptions whose address packets never came). Found by the `runner_routing` fuzz target
/// (crash-b7331129: ETE, MAXSPEC 0, four sources, formatted); the input is
/// replayed here the way that target reads it: the exact and recovery runs,
/// then the trace cut in two with the state saved and resumed between.
#[test]
fn a_decoder_state_with_negative_speculation_depth_loads_again() {
    use tracesight::protocol::etm4::decoder::DecoderOptions;
    use tracesight::session::run;

    let input = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/runner_routing_negative_spec_depth.bin"))
        .expect("test input");
    let shape = input[0];
    let n = (shape & 3) as usize + 1;
    let head = 1 + 2 * n + 1 + 16;
    let sources = (0..n).map(|i| units::source(input[1 + 2 * i], input[2 + 2 * i], 0x10 + i as u8)).collect();
    let cut = input[1 + 2 * n] as usize;
    let plan = units::plan(sources, shape & 4 == 0, units::image(&input[head - 16..head]));
    let data = &input[head..];
    let recover = RunOptions {
        elements: shape & 8 == 0,
        decoder: DecoderOptions { recover: true, ..DecoderOptions::default() },
        ..RunOptions::default()
    };
    let summary = run(&plan, data, &recover, |_| {}).expect("run");
    assert_eq!(summary.fatal, None, "recovery mode stopped");
    let at = (data.len() * cut / 256) & !15;
    let mut r = Runner::new(&plan, &recover);
    assert!(r.feed(&data[..at], &mut |_| {}), "the first feed stopped");
    let state = r.save_state().expect("a state after the first feed");
    let mut resumed = Runner::resume(&plan, &recover, &state).unwrap_or_else(|e| panic!("the saved state is refused: {e}"));
    resumed.feed(&data[at..], &mut |_| {});
    resumed.finish(&mut |_| {});
}
