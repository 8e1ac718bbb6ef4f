//! The perf.data counterpart of the snapshot figures in README (big_trace,
//! `tracesight index`, key_latency): synthesize a perf.data of SIZE MiB
//! (default 1024) into a scratch directory, then time
//! - the viewer, headless at 160x48, from `tracesight PERF.DATA` (the file
//!   opened, the recording read, the binaries found) to its first screen
//!   drawn with every visible row decoded, and on to its index ready (built
//!   on all cores and written beside the perf.data, as the viewer does);
//! - the full index build in the library (no file written), once per
//!   thread count, each build checked to equal the first.
//!
//! ```sh
//! cargo run --release --example perf_big -- [SIZE_MIB] [--dir DIR] [--keep] [--formatted] [--threads N,...]
//! ```
//! The input is tests/data/synth/threads.c built with aarch64-linux-gnu-gcc
//! and run under qemu-aarch64 (three threads, so three CPUs), its execution
//! encoded again and again until the trace reaches SIZE MiB: per CPU one
//! AUXTRACE record of raw ETE (TRBE style), or formatter frames with
//! `--formatted`. DIR (default: a directory under the system's temporary
//! directory) is removed at the end unless `--keep` is given; then
//! `tracesight index --rebuild DIR/out/perf.data` can be timed as a whole
//! process too.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tracesight::capture::{Capture, CaptureOptions};
use tracesight::index::{self, IndexOptions};
use tracesight::synth::qemu::{self, QemuRun};
use tracesight::synth::{self, Output, SynthConfig};
use tracesight::tui::app::App;
use tracesight::tui::{self, draw};

const SIZE: (u16, u16) = (160, 48);
const TIMEOUT: Duration = Duration::from_secs(1800);

struct Args {
    mib: u64,
    dir: PathBuf,
    keep: bool,
    formatted: bool,
    threads: Vec<usize>,
}

fn parse_args() -> Args {
    let mut a = Args {
        mib: 1024,
        dir: std::env::temp_dir().join(format!("tracesight-perf-big-{}", std::process::id())),
        keep: false,
        formatted: false,
        threads: vec![1, 2],
    };
    let mut it = std::env::args().skip(1);
    let usage = "usage: perf_big [SIZE_MIB] [--dir DIR] [--keep] [--formatted] [--threads N,...]";
    while let Some(s) = it.next() {
        match s.as_str() {
            "--dir" => a.dir = it.next().expect(usage).into(),
            "--keep" => a.keep = true,
            "--formatted" => a.formatted = true,
            "--threads" => {
                a.threads = it.next().expect(usage).split(',').map(|t| t.parse().expect("--threads: numbers")).collect();
            }
            n => a.mib = n.parse().expect(usage),
        }
    }
    a
}

/// Every visible row decoded and, on a range, the source pane there.
fn loaded(app: &App) -> bool {
    app.visible().iter().all(|p| app.entry(p.number).is_some())
        && app.cursor_addr().is_none_or(|a| app.source.as_ref().is_some_and(|(v, _)| v.addr == a))
}

fn main() {
    let args = parse_args();
    std::fs::create_dir_all(&args.dir).expect("creating the scratch directory");
    let result = run(&args);
    if !args.keep {
        let _ = std::fs::remove_dir_all(&args.dir);
    }
    if let Err(e) = result {
        eprintln!("perf_big: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let perf = synthesize(args)?;
    let mib = std::fs::metadata(&perf).map_err(|e| e.to_string())?.len() as f64 / (1 << 20) as f64;
    let copts = CaptureOptions { symdirs: vec![perf.parent().unwrap().to_path_buf()], ..CaptureOptions::default() };

    // The viewer, as `tracesight PERF.DATA` starts it.
    let t0 = Instant::now();
    let mut app = tui::spawn(&perf, &copts, SIZE);
    let mut term = Terminal::new(TestBackend::new(SIZE.0, SIZE.1)).map_err(|e| e.to_string())?;
    let mut first = None;
    while first.is_none() || app.indexed.is_none() {
        let left = TIMEOUT.checked_sub(t0.elapsed()).ok_or("the viewer did not finish in time")?;
        match app.chans.rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(r) => app.on_response(r),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(format!("the viewer's workers stopped: {:?}", app.error)),
        }
        if let Some(e) = &app.error {
            return Err(format!("the viewer: {e}"));
        }
        if first.is_none() && app.info.is_some() && loaded(&app) {
            term.draw(|f| draw::draw(&app, f)).map_err(|e| e.to_string())?;
            first = Some(t0.elapsed());
        }
    }
    let first = first.unwrap_or_default();
    let ready = t0.elapsed();
    println!(
        "viewer: first screen (160x48, rows decoded, drawn) after {:.3} s; index ready (built and written) after {:.2} s = {:.1} MiB/s; {} elements",
        first.as_secs_f64(),
        ready.as_secs_f64(),
        mib / ready.as_secs_f64(),
        app.total().unwrap_or(0)
    );
    drop(app);

    // The index build alone, in memory.
    let cap = Capture::open(&perf, &copts).map_err(|e| e.to_string())?;
    let mut reference: Option<index::format::IndexData> = None;
    for &t in &args.threads {
        let iopts = IndexOptions { threads: t, ..IndexOptions::default() };
        let t1 = Instant::now();
        let built = index::build_fragments(&cap.plan, cap.file.bytes(), &cap.fragments, &cap.opts, &iopts, &index::BuildProgress::new(), None);
        let s = t1.elapsed().as_secs_f64();
        println!(
            "index build, {t} thread(s): {mib:.0} MiB in {s:.2} s = {:.1} MiB/s ({} fragments, {} checkpoints, {} elements, {} instructions)",
            mib / s,
            cap.fragments.len(),
            built.checkpoints.len(),
            built.totals.elements,
            built.totals.instructions
        );
        match &reference {
            None => reference = Some(built),
            Some(r) => {
                let same = r.checkpoints == built.checkpoints && r.states == built.states && r.ids == built.ids && r.totals == built.totals;
                println!("  {}", if same { "identical to the first build" } else { "DIFFERS from the first build" });
                if !same {
                    return Err("the builds differ".into());
                }
            }
        }
    }
    Ok(())
}

/// Build threads.c, run it under qemu and write its trace as a perf.data of
/// about `args.mib` MiB; returns the perf.data's path.
fn synthesize(args: &Args) -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/synth/threads.c");
    let prog = args.dir.join("threads");
    let st = Command::new("aarch64-linux-gnu-gcc")
        .args(["-O1", "-g", "-static", "-pthread", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .map_err(|e| format!("aarch64-linux-gnu-gcc: {e}"))?;
    if !st.success() {
        return Err("building threads.c failed".into());
    }
    let run = QemuRun { qemu: "qemu-aarch64".into(), sysroot: None, program: prog.clone(), args: vec![], keep_log: None };
    let exec = qemu::run(&run).map_err(|e| e.to_string())?.exec;
    let output = |tag: &str| {
        let mut o = Output::new(args.dir.join(tag));
        o.perf = true;
        o.formatted = Some(args.formatted);
        o
    };
    // Two probes give the bytes of one more repetition, start-up aside.
    let probe = |repeat: u32| {
        let s = synth::synthesize(&exec, &prog, None, &SynthConfig { repeat, ..SynthConfig::default() }, &output("probe"));
        s.map(|s| s.trace_bytes).map_err(|e| e.to_string())
    };
    let (one, two) = (probe(1)?, probe(2)?);
    let _ = std::fs::remove_dir_all(args.dir.join("probe"));
    let per_run = two.saturating_sub(one).max(1);
    let repeat = ((args.mib << 20).saturating_sub(one).div_ceil(per_run) + 1).min(u32::MAX as u64) as u32;
    let t = Instant::now();
    let s = synth::synthesize(&exec, &prog, None, &SynthConfig { repeat, ..SynthConfig::default() }, &output("out"))
        .map_err(|e| e.to_string())?;
    println!(
        "synthesized {:.1} MiB of trace ({} CPUs, {}) in {:.1} s",
        s.trace_bytes as f64 / (1 << 20) as f64,
        s.streams.len(),
        if args.formatted { "formatter frames" } else { "raw" },
        t.elapsed().as_secs_f64()
    );
    Ok(args.dir.join("out/perf.data"))
}
