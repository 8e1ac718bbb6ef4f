//! Call stacks and function statistics against the truth of synthesized
//! traces: the synthesizer encodes exactly what qemu executed, so the
//! executed instruction sequence gives, independently of the trace,
//!
//! * each function's self instructions (executed addresses it holds),
//! * each function's calls (a branch with link landing at an instruction
//!   that is not the next one, or a taken branch without link from one
//!   function to another function's first instruction: a tail call),
//! * each caller→callee pair of calls with link (the caller being the
//!   function holding the branch with link),
//!
//! and the reconstruction from the decoded elements must give the same. The
//! live programs (recursion, longjmp, C++ exceptions, tail calls through
//! function pointers and PLT-like stubs, threads) need qemu-aarch64 and the
//! cross compilers (CI installs them); without them only the checked-in
//! snapshots are checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use tracesight::element::{InstrSubtype, InstrType};
use tracesight::image::a64::{classify, A64Options};
use tracesight::input::Snapshot;
use tracesight::profile::callstack::{Origin, ThreadKey};
use tracesight::profile::stats::{Group, Stats};
use tracesight::profile::{CodeMap, Collector, FunctionMap};
use tracesight::session::{run, BufferPlan, Event, RunOptions};
use tracesight::symbols::Symbolizer;
use tracesight::synth::qemu::{self, QemuRun};
use tracesight::synth::snapshot::parse_runs;
use tracesight::synth::{self, Output, SynthConfig};

/// What the executed sequence says, per function entry.
#[derive(Default, Debug)]
struct Truth {
    self_instructions: BTreeMap<u64, u64>,
    calls: BTreeMap<u64, u64>,
    /// (caller, callee) of calls with link.
    linked: BTreeMap<(u64, u64), u64>,
    tail_called: BTreeSet<u64>,
    instructions: u64,
}

/// The truth of one thread's executed sequence: `(address, opcode)` pairs.
fn truth(code: &FunctionMap, seq: impl Iterator<Item = (u64, u32)>) -> Truth {
    let mut t = Truth::default();
    let mut prev: Option<(u64, u32)> = None;
    for (a, op) in seq {
        t.instructions += 1;
        if let Some((entry, _)) = code.function_at(a) {
            *t.self_instructions.entry(entry).or_default() += 1;
        }
        if let Some((pa, pop)) = prev {
            let i = classify(pop, pa, A64Options::default());
            let to = code.function_at(a);
            let from = code.function_at(pa).map(|f| f.0);
            // A branch to the next instruction is taken when it is
            // unconditional (a conditional one may have fallen through).
            let taken = a != pa + 4 || !i.conditional;
            if i.link && a != pa + 4 {
                if let Some((callee, _)) = to {
                    *t.calls.entry(callee).or_default() += 1;
                    if let Some(c) = from {
                        *t.linked.entry((c, callee)).or_default() += 1;
                    }
                }
            } else if !i.link
                && taken
                && matches!(i.itype, InstrType::Branch | InstrType::IndirectBranch)
                && i.subtype == InstrSubtype::None
            {
                if let Some((callee, _)) = to {
                    if callee == a && from != Some(callee) {
                        *t.calls.entry(callee).or_default() += 1;
                        t.tail_called.insert(callee);
                    }
                }
            }
        }
        prev = Some((a, op));
    }
    t
}

fn functions_of(elf: &Path) -> FunctionMap {
    let mut sym = Symbolizer::new();
    sym.add_image(elf, None).unwrap_or_else(|e| panic!("{}: {e}", elf.display()));
    FunctionMap::from_table(&sym.function_table())
}

/// Decode a snapshot and collect statistics per stream; also the decoded
/// instruction total.
fn reconstruct(dir: &Path, code: &FunctionMap) -> (Stats, u64) {
    let snap = Snapshot::open(dir).unwrap();
    let plan = BufferPlan::new(&snap, snap.default_buffer().unwrap()).unwrap();
    let file = plan.open().unwrap();
    let opts = RunOptions { elements: true, ..Default::default() };
    let mut col = Collector::new(code, Group::Stream, true, false);
    let mut n = 0u64;
    run(&plan, file.bytes(), &opts, |ev| {
        if let Event::Element { element, .. } = ev {
            col.feed(Origin { stream: element.trace_id as u32, thread: None }, n, element);
            n += 1;
        }
    })
    .unwrap();
    col.finish();
    // The call tree and the statistics count the same instructions.
    let tree_total: u64 = col.tree.as_ref().unwrap().nodes.iter().map(|n| n.self_instructions).sum();
    assert_eq!(tree_total, col.instructions);
    (col.stats, col.instructions)
}

/// Compare one stream's reconstruction with the truth.
fn compare(name: &str, stats: &Stats, stream: u32, t: &Truth, code: &FunctionMap) {
    let scope = Some(ThreadKey { stream, context: None });
    let mut self_i = BTreeMap::new();
    let mut calls = BTreeMap::new();
    for ((s, k), f) in &stats.functions {
        if *s != scope || code.function_at(*k).is_none() {
            continue;
        }
        if f.self_instructions > 0 {
            self_i.insert(*k, f.self_instructions);
        }
        if f.calls > 0 {
            calls.insert(*k, f.calls);
        }
    }
    let named = |m: &BTreeMap<u64, u64>| -> BTreeMap<String, u64> {
        m.iter().map(|(k, v)| (code.name(*k).unwrap_or_else(|| format!("{k:x}")), *v)).collect()
    };
    same(name, stream, "self instructions", &named(&self_i), &named(&t.self_instructions));
    same(name, stream, "calls", &named(&calls), &named(&t.calls));
    for ((caller, callee), n) in &t.linked {
        if t.tail_called.contains(callee) || t.tail_called.contains(caller) {
            continue;
        }
        let got = stats.pairs.get(&(scope, *caller, *callee)).map_or(0, |p| p.calls);
        assert_eq!(
            got,
            *n,
            "{name} stream {stream:x}: calls {} -> {}",
            code.name(*caller).unwrap_or_default(),
            code.name(*callee).unwrap_or_default()
        );
    }
    // Frames left open at the end are the ones around the last instruction
    // (plus any the start of the trace could not place): a stack that is
    // not unwound (longjmp, exceptions) would leave many more.
    assert!(stats.unknown_ends <= 16, "{name}: {} frames ended unknown", stats.unknown_ends);
}

/// Equal maps, or a failure naming the keys that differ.
fn same(name: &str, stream: u32, what: &str, got: &BTreeMap<String, u64>, want: &BTreeMap<String, u64>) {
    let keys: BTreeSet<&String> = got.keys().chain(want.keys()).collect();
    let diff: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| format!("{k}: {:?} (truth {:?})", got.get(k), want.get(k)))
        .collect();
    assert!(diff.is_empty(), "{name} stream {stream:x}: {what} differ:\n{}", diff.join("\n"));
}

// ---- checked-in snapshots ---------------------------------------------------

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/synth")
}

fn checked_in(name: &str) {
    let dir = data_dir().join("snapshots").join(name);
    let code = functions_of(&dir.join(name));
    let runs = parse_runs(&std::fs::read_to_string(dir.join("expected/trace_10.runs")).or_else(|_| {
        std::fs::read_to_string(dir.join("expected/trace_20.runs"))
    }).unwrap())
    .unwrap();
    let stream = if dir.join("expected/trace_10.runs").exists() { 0x10 } else { 0x20 };
    let snap = Snapshot::open(&dir).unwrap();
    let plan = BufferPlan::new(&snap, snap.default_buffer().unwrap()).unwrap();
    let image = plan.image.clone();
    let seq = runs.iter().flat_map(|&(a, n)| (0..n).map(move |i| a + 4 * i));
    let t = truth(&code, seq.map(|a| (a, image.read_u32(a, tracesight::element::MemSpace::ANY).unwrap_or(0))));
    let (stats, _) = reconstruct(&dir, &code);
    assert!(t.calls.values().sum::<u64>() > 10, "{name}: the program makes calls");
    compare(name, &stats, stream, &t, &code);
}

#[test]
fn checked_in_recursion_calls_and_instructions() {
    checked_in("mini_recursion");
}

#[test]
fn checked_in_dispatch_calls_and_instructions() {
    checked_in("mini_dispatch");
}

// ---- live: qemu and the cross compilers ---------------------------------------

fn tool_works(cmd: &str) -> bool {
    Command::new(cmd).arg("--version").output().is_ok_and(|o| o.status.success())
}

fn programs() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !["qemu-aarch64", "aarch64-linux-gnu-gcc"].iter().all(|t| tool_works(t)) {
                eprintln!("note: live profile tests skipped: qemu-aarch64 or aarch64-linux-gnu-gcc missing");
                return None;
            }
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("profile-programs");
            let st = Command::new("sh").arg(data_dir().join("build.sh")).arg(&out).status().expect("sh");
            assert!(st.success(), "building the test programs failed");
            Some(out)
        })
        .clone()
}

/// Run `prog`, synthesize its trace, reconstruct, compare every thread.
fn live(prog: &str) {
    let Some(dir) = programs() else { return };
    let program = dir.join(prog);
    if !program.exists() {
        eprintln!("note: {prog} was not built; skipped");
        return;
    }
    let r = qemu::run(&QemuRun { qemu: "qemu-aarch64".into(), sysroot: None, program: program.clone(), args: vec![], keep_log: None })
        .unwrap();
    assert!(r.status.success(), "{prog} failed under qemu");
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("profile-synth").join(prog);
    let s = synth::synthesize(&r.exec, &program, None, &SynthConfig::default(), &Output::new(&out_dir)).unwrap();
    let code = functions_of(&program);
    let (stats, decoded) = reconstruct(&out_dir, &code);
    assert!(decoded >= r.exec.instruction_count(), "{prog}: every executed instruction decoded");
    for (thread, stream) in s.streams.iter().enumerate() {
        let exec = &r.exec;
        let seq = exec
            .events
            .iter()
            .filter(|&&e| (e >> qemu::THREAD_SHIFT) as usize == thread)
            .flat_map(|&e| {
                let tb = exec.tbs[(e & qemu::TB_MASK) as usize];
                (0..tb.len as u64).map(move |i| (tb.pc + 4 * i, exec.opcodes[(tb.first as u64 + i) as usize]))
            });
        let t = truth(&code, seq);
        compare(prog, &stats, stream.trace_id as u32, &t, &code);
    }
}

#[test]
fn live_recursion() {
    live("recursion");
}

#[test]
fn live_longjmp() {
    live("longjmp");
}

#[test]
fn live_cxx_exceptions() {
    live("exceptions");
}

#[test]
fn live_tail_calls_and_function_pointers() {
    live("dispatch");
}

#[test]
fn live_threads() {
    live("threads");
}
