//! Round trip of the ETE synthesizer: a program runs under qemu-aarch64, its
//! execution is encoded as ETE trace into an OpenCSD snapshot, and decoding
//! that snapshot with tracesight's own decoder (`session::run`, speculation
//! view on) must give back
//!
//! * exactly the instructions qemu executed, as the committed path of each
//!   trace ID (instruction ranges at EL0 expanded into addresses; the EL1
//!   ranges are the synthetic exception handler), and
//! * exactly the injected mis-speculation as canceled, corrected and
//!   discarded elements of the speculation view, every other speculative
//!   element committed,
//!
//! with no decoder message and no gap in the decode.
//!
//! Instruction sequences are compared as runs of consecutive addresses
//! (`start`, `count`), merged wherever one run continues the previous one:
//! two address sequences are equal exactly when these canonical run lists are.
//!
//! The live tests need `qemu-aarch64` (Debian: qemu-user) and the cross
//! compilers (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu); without them they
//! print a note and pass. Two small snapshots are checked in under
//! `tests/data/synth/snapshots/` with their expected results, so part of the
//! round trip always runs (rebuild them with `scripts/synth-test-snapshots.sh`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tracesight::element::ElementKind;
use tracesight::input::Snapshot;
use tracesight::protocol::etm4::decoder::{DecoderOptions, SpecKind, SpecState};
use tracesight::session::{run, BufferPlan, Event, RunOptions};
use tracesight::synth::qemu::{self, push_run, QemuRun};
use tracesight::synth::snapshot::parse_runs;
use tracesight::synth::{self, Fate, Output, P0Kind, SpecConfig, SvcModel, SynthConfig};

/// What the decoder made of one trace ID.
#[derive(Default, Debug)]
struct Decoded {
    /// Committed EL0 instructions as runs.
    runs: Vec<(u64, u64)>,
    /// Speculation view: (seq, kind as traced, state).
    spec: Vec<(u64, SpecKind, SpecState)>,
    exceptions: u64,
    exception_returns: u64,
    el1_instructions: u64,
    timestamps: u64,
    cycle_counts: u64,
    /// Anything suspicious: decoder messages, unexpected elements.
    problems: Vec<String>,
}

fn decode(dir: &Path) -> BTreeMap<u8, Decoded> {
    let snap = Snapshot::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let buf = snap.default_buffer().expect("no trace buffer");
    let plan = BufferPlan::new(&snap, buf).unwrap();
    assert!(plan.notes.is_empty(), "{}: {:?}", dir.display(), plan.notes);
    let file = plan.open().unwrap();
    let opts = RunOptions {
        elements: true,
        decoder: DecoderOptions { speculation: true, ..Default::default() },
        ..Default::default()
    };
    let mut out: BTreeMap<u8, Decoded> = BTreeMap::new();
    let mut el: BTreeMap<u8, u8> = BTreeMap::new();
    let summary = run(&plan, file.bytes(), &opts, |ev| match ev {
        Event::Element { element, .. } => {
            let id = element.trace_id;
            let d = out.entry(id).or_default();
            match element.kind {
                ElementKind::PeContext(c) => {
                    el.insert(id, c.el);
                }
                ElementKind::InstrRange { start, end, count, .. } => {
                    if end - start != 4 * count as u64 {
                        d.problems.push(format!("range 0x{start:x}-0x{end:x} with {count} instructions"));
                    }
                    if el.get(&id) == Some(&0) {
                        push_run(&mut d.runs, start, count as u64);
                    } else {
                        d.el1_instructions += count as u64;
                    }
                }
                ElementKind::Exception { .. } => d.exceptions += 1,
                ElementKind::ExceptionReturn => d.exception_returns += 1,
                ElementKind::Timestamp { .. } => d.timestamps += 1,
                ElementKind::CycleCount => d.cycle_counts += 1,
                ElementKind::NoSync(r) => {
                    // Only before the first sync and after the final discard.
                    use tracesight::element::UnsyncReason as U;
                    if !matches!(r, U::InitDecoder | U::Discard) {
                        d.problems.push(format!("no sync: {r:?} at {}", element.index));
                    }
                }
                ElementKind::AddrNotAccessible { addr, .. } => {
                    d.problems.push(format!("address not accessible: 0x{addr:x}"))
                }
                ElementKind::RangeNoPath { .. } => d.problems.push("range without path".into()),
                _ => {}
            }
        }
        Event::Spec { source, record } => {
            let id = source.trace_id.unwrap_or(0);
            out.entry(id).or_default().spec.push((record.seq, record.kind, record.state));
        }
        Event::Message { source, text } => {
            let id = source.trace_id.unwrap_or(0);
            out.entry(id).or_default().problems.push(text.to_string());
        }
        Event::Skipped { trace_id, reason } => panic!("trace ID {trace_id:x} skipped: {reason}"),
        _ => {}
    })
    .unwrap();
    assert!(summary.frame_error.is_none(), "{:?}", summary.frame_error);
    assert!(summary.fatal.is_none(), "{:?}", summary.fatal);
    out
}

/// Expected speculation fates of a trace ID: total P0 elements and the ones
/// not simply committed (seq -> (kind, state)).
struct ExpectedSpec {
    total: u64,
    others: BTreeMap<u64, (SpecKind, SpecState)>,
}

fn spec_kind(k: P0Kind) -> SpecKind {
    match k {
        P0Kind::Atom(e) => SpecKind::Atom { executed: e },
        P0Kind::Exception => SpecKind::Exception,
    }
}

fn spec_state(f: Fate) -> SpecState {
    match f {
        Fate::Committed => SpecState::Committed,
        Fate::Canceled => SpecState::Canceled,
        Fate::Corrected => SpecState::CorrectedByMispredict,
        Fate::Discarded => SpecState::Discarded,
    }
}

fn parse_spec(text: &str) -> ExpectedSpec {
    let mut lines = text.lines();
    let total = lines.next().and_then(|l| l.strip_prefix("p0 ")).and_then(|n| n.parse().ok()).expect("p0 line");
    let mut others = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split_whitespace().collect();
        let seq: u64 = f[0].parse().unwrap();
        let kind = match f[1] {
            "E" => SpecKind::Atom { executed: true },
            "N" => SpecKind::Atom { executed: false },
            _ => SpecKind::Exception,
        };
        let state = match f[2] {
            "canceled" => SpecState::Canceled,
            "corrected" => SpecState::CorrectedByMispredict,
            "discarded" => SpecState::Discarded,
            other => panic!("state {other}"),
        };
        others.insert(seq, (kind, state));
    }
    ExpectedSpec { total, others }
}

/// Compare one trace ID's decode with what was executed and injected.
fn check(name: &str, id: u8, d: &Decoded, runs: &[(u64, u64)], spec: &ExpectedSpec) {
    assert!(d.problems.is_empty(), "{name} ID {id:x}: {:?}", &d.problems[..d.problems.len().min(10)]);
    if d.runs != runs {
        let i = d.runs.iter().zip(runs).position(|(a, b)| a != b).unwrap_or(d.runs.len().min(runs.len()));
        panic!(
            "{name} ID {id:x}: committed path differs from qemu's at run {i}: decoded {:x?}, executed {:x?} ({} vs {} runs)",
            &d.runs[i.saturating_sub(2)..(i + 3).min(d.runs.len())],
            &runs[i.saturating_sub(2)..(i + 3).min(runs.len())],
            d.runs.len(),
            runs.len()
        );
    }
    assert_eq!(d.spec.len() as u64, spec.total, "{name} ID {id:x}: number of speculative elements");
    let mut others = BTreeMap::new();
    for &(seq, kind, state) in &d.spec {
        match state {
            SpecState::Committed => {}
            _ => {
                others.insert(seq, (kind, state));
            }
        }
    }
    assert_eq!(others, spec.others, "{name} ID {id:x}: canceled / corrected / discarded elements");
}

// ---- checked-in snapshots ---------------------------------------------------

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/synth")
}

fn check_checked_in(name: &str) -> BTreeMap<u8, Decoded> {
    let dir = data_dir().join("snapshots").join(name);
    let decoded = decode(&dir);
    assert!(!decoded.is_empty());
    for (id, d) in &decoded {
        let e = dir.join("expected");
        let runs = parse_runs(&std::fs::read_to_string(e.join(format!("trace_{id:02x}.runs"))).unwrap()).unwrap();
        let spec = parse_spec(&std::fs::read_to_string(e.join(format!("trace_{id:02x}.spec"))).unwrap());
        check(name, *id, d, &runs, &spec);
    }
    decoded
}

#[test]
fn checked_in_mini_recursion() {
    // Unformatted, speculation, synthetic EL1 handler for the SVCs.
    let d = check_checked_in("mini_recursion");
    let t = &d[&0x10];
    assert!(t.exceptions > 0 && t.exception_returns + 1 >= t.exceptions);
    assert!(t.spec.iter().any(|s| s.2 == SpecState::Canceled));
    assert!(t.spec.iter().any(|s| s.2 == SpecState::CorrectedByMispredict));
    assert!(t.timestamps > 0 && t.cycle_counts > 0);
}

#[test]
fn checked_in_mini_dispatch() {
    // Formatter frames, kernel filtered out of the trace.
    let d = check_checked_in("mini_dispatch");
    let t = &d[&0x20];
    assert!(t.exceptions >= 3);
    assert_eq!(t.exception_returns, 0);
    assert_eq!(t.el1_instructions, 0);
}

// ---- live: qemu and the cross compilers ---------------------------------------

fn tool_works(cmd: &str) -> bool {
    Command::new(cmd).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Build the test programs once; None (with a note) when the tools are missing.
fn programs() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let missing: Vec<&str> =
                ["qemu-aarch64", "aarch64-linux-gnu-gcc"].into_iter().filter(|t| !tool_works(t)).collect();
            if !missing.is_empty() {
                eprintln!(
                    "note: synth round-trip tests skipped: {} not found (Debian: apt-get install qemu-user gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)",
                    missing.join(", ")
                );
                return None;
            }
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("synth-programs");
            let st = Command::new("sh").arg(data_dir().join("build.sh")).arg(&out).status().expect("sh");
            assert!(st.success(), "building the test programs failed");
            Some(out)
        })
        .clone()
}

fn sysroot() -> Option<PathBuf> {
    let d = PathBuf::from("/usr/aarch64-linux-gnu");
    d.is_dir().then_some(d)
}

/// Run `prog` under qemu, synthesize with `cfg`, decode, compare.
fn roundtrip(prog: &str, args: &[&str], cfg: &SynthConfig, formatted: Option<bool>) -> Option<BTreeMap<u8, Decoded>> {
    let dir = programs()?;
    let program = dir.join(prog);
    if !program.exists() {
        eprintln!("note: {prog} was not built (cross compiler missing); skipped");
        return None;
    }
    let r = qemu::run(&QemuRun {
        qemu: "qemu-aarch64".into(),
        sysroot: sysroot(),
        program: program.clone(),
        args: args.iter().map(|s| s.to_string()).collect(),
        keep_log: None,
    })
    .unwrap();
    assert!(r.status.success(), "{prog} failed under qemu: {}", r.status);
    let tag = format!("{prog}-{:x}", cfg.seed ^ (cfg.svc as u64) << 8 ^ (cfg.speculation.is_some() as u64) << 9);
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("synth-out").join(tag);
    let mut out = Output::new(&out_dir);
    out.formatted = formatted;
    let s = synth::synthesize(&r.exec, &program, sysroot().as_deref(), &SynthConfig { record: true, ..cfg.clone() }, &out)
        .unwrap();
    let decoded = decode(&out_dir);
    assert_eq!(decoded.len(), s.streams.len(), "{prog}: trace IDs decoded");
    for (t, stream) in s.streams.iter().enumerate() {
        let d = &decoded[&stream.trace_id];
        let runs = r.exec.instruction_runs(t);
        let spec = ExpectedSpec {
            total: stream.stats.p0_elements,
            others: stream.spec.iter().map(|f| (f.seq, (spec_kind(f.kind), spec_state(f.fate)))).collect(),
        };
        check(prog, stream.trace_id, d, &runs, &spec);
        let svc = stream.stats.exceptions;
        assert_eq!(d.exceptions, svc, "{prog}: exceptions");
        if cfg.svc == SvcModel::KernelStub {
            // Every exception but a thread's last (its exit) returns.
            assert!(d.exception_returns + 1 >= svc && d.exception_returns <= svc, "{prog}: exception returns");
        }
    }
    // Any decoder, not only ours: OpenCSD's reference lister must agree.
    // (OpenCSD before 1.4 ignores commits carried by cycle count packets, so
    // commit mode 0 is left to newer versions.)
    if !cfg.commit_in_cycle_counts {
        cross_check_opencsd(&out_dir);
    }
    Some(decoded)
}

fn default_cfg() -> SynthConfig {
    SynthConfig::default()
}

#[test]
fn live_recursion() {
    if let Some(d) = roundtrip("recursion", &[], &default_cfg(), None) {
        assert!(d[&0x10].spec.iter().any(|s| s.2 == SpecState::Canceled));
    }
}

#[test]
fn live_loops_without_speculation_or_cycle_counts() {
    let cfg = SynthConfig { speculation: None, cycle_counts: false, ..default_cfg() };
    roundtrip("loops", &[], &cfg, None);
}

#[test]
fn live_switch_table_and_function_pointers() {
    roundtrip("dispatch", &[], &default_cfg(), None);
    // Commit mode 0: commits carried by cycle count packets.
    let cfg = SynthConfig { commit_in_cycle_counts: true, seed: 7, ..default_cfg() };
    roundtrip("dispatch", &[], &cfg, None);
}

#[test]
fn live_setjmp_longjmp() {
    // Small sync period and commit batches, long wrong paths.
    let cfg = SynthConfig {
        sync_period: 256,
        speculation: Some(SpecConfig { max_spec: 8, commit_batch: 3, wrong_path_max: 7, ..Default::default() }),
        ..default_cfg()
    };
    roundtrip("longjmp", &[], &cfg, None);
}

#[test]
fn live_system_calls() {
    roundtrip("syscalls", &[], &default_cfg(), None);
    // The kernel filtered out, in formatter frames.
    let cfg = SynthConfig { svc: SvcModel::Filtered, ..default_cfg() };
    roundtrip("syscalls", &[], &cfg, Some(true));
}

#[test]
fn live_cxx_exceptions() {
    roundtrip("exceptions", &[], &default_cfg(), None);
}

#[test]
fn live_plt_call() {
    // Dynamically linked: the loader, libc and the program at their load addresses.
    roundtrip("plt", &["7"], &default_cfg(), None);
}

#[test]
fn live_threads_as_trace_ids() {
    if let Some(d) = roundtrip("threads", &[], &default_cfg(), None) {
        assert!(d.len() >= 3, "one trace ID per thread: {:?}", d.keys());
    }
}

#[test]
fn live_repeated_runs() {
    let cfg = SynthConfig { repeat: 3, ..default_cfg() };
    let Some(dir) = programs() else { return };
    let program = dir.join("mini_recursion");
    let r = qemu::run(&QemuRun { qemu: "qemu-aarch64".into(), sysroot: None, program: program.clone(), args: vec![], keep_log: None })
        .unwrap();
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("synth-out").join("repeat");
    let s = synth::synthesize(&r.exec, &program, None, &SynthConfig { record: true, ..cfg }, &Output::new(&out_dir)).unwrap();
    let d = decode(&out_dir);
    let one = r.exec.instruction_runs(0);
    let mut runs = Vec::new();
    for _ in 0..3 {
        for &(a, n) in &one {
            push_run(&mut runs, a, n);
        }
    }
    let st = &s.streams[0];
    let spec = ExpectedSpec {
        total: st.stats.p0_elements,
        others: st.spec.iter().map(|f| (f.seq, (spec_kind(f.kind), spec_state(f.fate)))).collect(),
    };
    check("mini_recursion x3", 0x10, &d[&0x10], &runs, &spec);
}

// ---- cross-check with OpenCSD ------------------------------------------------------

/// Decode a snapshot with OpenCSD's trc_pkt_lister and with `tracesight
/// decode`, and compare packets and elements with ../shared/tools/ppl-compare.
fn cross_check_opencsd(dir: &Path) -> bool {
    let compare = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/ppl-compare");
    // Looked up on PATH: trc_pkt_lister has no harmless probe option (-help
    // writes a log file into the current directory).
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("trc_pkt_lister").is_file()));
    if !on_path {
        eprintln!("note: OpenCSD cross-check skipped: trc_pkt_lister not found (Debian: libopencsd-bin)");
        return false;
    }
    if !compare.is_file() || !tool_works("python3") {
        eprintln!("note: OpenCSD cross-check skipped: python3 or {} missing", compare.display());
        return false;
    }
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("synth-xcheck");
    std::fs::create_dir_all(&tmp).unwrap();
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let ocsd = tmp.join(format!("{name}.ocsd.ppl"));
    let ours = tmp.join(format!("{name}.tracesight.ppl"));
    let _ = std::fs::remove_file(&ocsd);
    let st = Command::new("trc_pkt_lister")
        .current_dir(dir)
        .args(["-ss_dir", ".", "-decode", "-no_time_print", "-logfilename"])
        .arg(&ocsd)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "trc_pkt_lister failed on {}", dir.display());
    let log = std::fs::read_to_string(&ocsd).unwrap();
    assert!(!log.contains("OCSD_ERR"), "{}: OpenCSD reports errors", dir.display());
    let st = Command::new(env!("CARGO_BIN_EXE_tracesight")).arg("decode").arg(dir).arg("-o").arg(&ours).status().unwrap();
    assert!(st.success());
    let out = Command::new("python3").arg(&compare).arg(&ocsd).arg(&ours).arg("--packets").output().unwrap();
    assert!(
        out.status.success(),
        "{}: OpenCSD and tracesight differ:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout)
    );
    true
}

#[test]
fn opencsd_decodes_checked_in_snapshots() {
    for name in ["mini_recursion", "mini_dispatch"] {
        if !cross_check_opencsd(&data_dir().join("snapshots").join(name)) {
            return;
        }
    }
}
