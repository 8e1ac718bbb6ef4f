//! ETE trace synthesis: real traces of real programs without trace hardware.
//!
//! A program runs under `qemu-aarch64` ([`qemu`]), whose execution log gives
//! the exact sequence of executed instructions; the code that ran is located
//! in the program's ELF files ([`program`]); the execution is encoded as the
//! ETE byte stream a trace unit would have produced ([`encoder`], on top of the
//! packet writer [`packets`]), optionally in CoreSight formatter frames
//! ([`frames`]); and the result is written as an OpenCSD snapshot directory
//! ([`snapshot`]) that any snapshot reader decodes.
//!
//! ```no_run
//! use std::path::Path;
//! use tracesight::synth::{self, SynthConfig, qemu::QemuRun};
//!
//! let run = synth::qemu::run(&QemuRun {
//!     qemu: "qemu-aarch64".into(),
//!     sysroot: None,
//!     program: "prog".into(),
//!     args: vec![],
//!     keep_log: None,
//! })?;
//! let out = synth::synthesize(&run.exec, Path::new("prog"), None, &SynthConfig::default(),
//!                             &synth::Output::new("snapshot"))?;
//! println!("{} bytes of trace", out.trace_bytes);
//! # Ok::<(), synth::SynthError>(())
//! ```

pub mod encoder;
pub mod frames;
pub mod packets;
pub mod perf;
pub mod program;
pub mod qemu;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::time::Instant;

pub use encoder::{Fate, P0Kind, SpecConfig, SpecFate, StreamResult, SvcModel, SynthConfig};

/// Why a synthesis (running the program, locating its code, encoding or
/// writing the trace) failed.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// Reading or writing `path` failed.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, #[source] error: std::io::Error },
    #[error("copying {} to {}: {error}", from.display(), to.display())]
    Copy { from: PathBuf, to: PathBuf, #[source] error: std::io::Error },
    /// An ELF file the `object` crate could not read.
    #[error("{}: {source}", path.display())]
    Object { path: PathBuf, source: object::Error },
    #[error("{}: not an AArch64 ELF file", path.display())]
    NotAarch64 { path: PathBuf },
    #[error("{}: segment past end of file", path.display())]
    SegmentPastEnd { path: PathBuf },
    #[error("{}: directory is not empty and was not written by `tracesight synth`; refusing to overwrite it", dir.display())]
    NotOurs { dir: PathBuf },
    /// A line of an expected-runs file that is not `ADDRESS COUNT`.
    #[error("bad run line '{line}'")]
    BadRunLine { line: String },
    /// Finishing the trace file failed.
    #[error("{0}")]
    Trace(#[source] std::io::Error),
    /// Handing encoded trace to its sink failed.
    #[error("writing trace: {0}")]
    WriteTrace(#[source] std::io::Error),
    #[error("cannot run {}: {error}", qemu.display())]
    RunQemu { qemu: PathBuf, #[source] error: std::io::Error },
    /// Waiting for qemu failed.
    #[error("{0}")]
    Wait(#[source] std::io::Error),
    #[error("log reader panicked")]
    LogReader,
    /// qemu logged no executed block; `stderr` is what it printed.
    #[error("qemu ran no code ({status}): {stderr}")]
    NoCode { status: std::process::ExitStatus, stderr: String },
    #[error("reading qemu log: {0}")]
    ReadLog(#[source] std::io::Error),
    /// A log line of no known form (`text` as found).
    #[error("qemu log line {line}: unexpected '{text}'")]
    BadLogLine { line: u64, text: String },
    #[error("qemu log line {line}: block at 0x{pc:x} executed without its instructions (run with -d in_asm,exec,nochain)")]
    BlockWithoutCode { line: u64, pc: u64 },
    #[error("qemu log line {line}: cannot read instruction '{text}'")]
    BadInstruction { line: u64, text: String },
    #[error("execution too large (more than 2^26 distinct blocks or 64 threads)")]
    TooLarge,
    /// Two pieces of code claim the same addresses.
    #[error("code of {name} at 0x{start:x}-0x{end:x} overlaps {other} at 0x{other_start:x}-0x{other_end:x}")]
    Overlap { name: String, start: u64, end: u64, other: String, other_start: u64, other_end: u64 },
    #[error("instruction at 0x{addr:x} ran as 0x{ran:08x} but the loaded file holds 0x{held:08x} (self-modifying code is not supported)")]
    SelfModifying { addr: u64, ran: u32, held: u32 },
    #[error("{}: the code at 0x{addr:x} differs from what ran; is this the program that was run?", path.display())]
    CodeDiffers { path: PathBuf, addr: u64 },
    #[error("the execution is empty")]
    EmptyExecution,
    #[error("trace IDs 0x{first:x}..0x{last:x} are not all valid (0x01-0x6f)")]
    BadTraceIds { first: usize, last: usize },
    #[error("the run has {threads} threads (one trace unit each); an unformatted trace buffer holds one: use formatter frames")]
    Unformatted { threads: usize },
    #[error("'{text}' is not a trace ID (hex 01-6f)")]
    BadTraceId { text: String },
    #[error("{}: no such program", path.display())]
    NoProgram { path: PathBuf },
    #[error("{} is not available; install qemu-user (Debian: apt-get install qemu-user)", qemu.display())]
    NoQemu { qemu: PathBuf },
}

impl SynthError {
    pub(crate) fn io(path: &Path) -> impl Fn(std::io::Error) -> SynthError + Copy + '_ {
        move |error| SynthError::Io { path: path.to_path_buf(), error }
    }
}
pub use program::CodeImage;
pub use qemu::Execution;

/// Where and how to write the snapshot.
#[derive(Clone, Debug)]
pub struct Output {
    pub dir: PathBuf,
    /// Formatter frames (`Some(true)`), one raw stream (`Some(false)`), or
    /// frames only when there are several trace units (`None`).
    pub formatted: Option<bool>,
    /// Write `expected/` (instruction runs from qemu, speculation fates).
    pub expected: bool,
    /// Text recorded in `synth.txt` before the totals.
    pub notes: String,
    /// Write a perf.data (`perf.data` in the directory, with the program's
    /// ELF file) instead of a snapshot: per-CPU AUX data, raw unless
    /// `formatted` asks for frames.
    pub perf: bool,
}

impl Output {
    pub fn new(dir: impl Into<PathBuf>) -> Output {
        Output { dir: dir.into(), formatted: None, expected: false, notes: String::new(), perf: false }
    }
}

/// What a synthesis produced.
#[derive(Clone, Debug)]
pub struct Synthesis {
    pub streams: Vec<StreamResult>,
    pub image: CodeImage,
    pub formatted: bool,
    /// Size of the trace buffer file.
    pub trace_bytes: u64,
    /// Time spent encoding and writing the trace.
    pub encode_seconds: f64,
}

impl Synthesis {
    /// Encoding throughput in MB (10^6 bytes) of trace per second.
    pub fn mb_per_second(&self) -> f64 {
        self.trace_bytes as f64 / 1e6 / self.encode_seconds.max(1e-9)
    }
}

/// Synthesize the trace of `exec` (a run of `program`, dynamically linked
/// against `sysroot` if given) into the snapshot directory `out.dir`.
pub fn synthesize(
    exec: &Execution,
    program: &Path,
    sysroot: Option<&Path>,
    cfg: &SynthConfig,
    out: &Output,
) -> Result<Synthesis, SynthError> {
    let elfs = program::candidate_elfs(program, sysroot)?;
    let mut image = program::locate(exec, &elfs)?;
    if cfg.svc == SvcModel::KernelStub {
        let (addr, words) = encoder::vector_table();
        image.add_code(addr, &words, "vectors")?;
    }
    // A perf.data holds each CPU's trace apart, so raw trace needs no frames.
    let formatted = out.formatted.unwrap_or(exec.threads() > 1 && !out.perf);
    if !formatted && exec.threads() > 1 && !out.perf {
        return Err(SynthError::Unformatted { threads: exec.threads() });
    }
    snapshot::prepare_dir(&out.dir)?;
    let t0 = Instant::now();
    let chunk = if formatted { 512 } else { 1 << 20 };
    let cfg = SynthConfig { record: cfg.record || out.expected, ..cfg.clone() };
    let (streams, trace_bytes) = if out.perf {
        let mut sink = perf::PerfSink::new(&out.dir, formatted);
        let streams = encoder::encode(exec, &image, &cfg, &mut sink, chunk)?;
        let command = [program.display().to_string()];
        let rec = perf::PerfRecording { streams: &streams, image: &image, command: &command, pid: cfg.context_id.unwrap_or(1000) };
        let bytes = sink.finish(&rec, &out.dir.join(perf::PERF_FILE))?;
        (streams, bytes)
    } else {
        let mut trace = snapshot::TraceOut::create(&out.dir, formatted)?;
        let streams = encoder::encode(exec, &image, &cfg, &mut trace, chunk)?;
        (streams, trace.finish()?)
    };
    let encode_seconds = t0.elapsed().as_secs_f64();

    // The program's ELF file, for symbols and source; libraries are in the dumps.
    let copied: Vec<PathBuf> = image.elfs.iter().take(1).map(|e| e.path.clone()).collect();
    let mut notes = out.notes.clone();
    notes.push_str(&summary_text(&streams, &image, &cfg, formatted, trace_bytes, encode_seconds));
    if out.perf {
        // No memory dumps beside a perf.data: the decoder reads the ELF files.
        let _ = std::fs::remove_dir(out.dir.join("mem"));
        snapshot::write_elfs_and_notes(&out.dir, &copied, &notes)?;
    } else {
        snapshot::write_snapshot(
            &out.dir,
            &snapshot::SnapshotInfo { streams: &streams, image: &image, formatted, elfs: &copied, notes },
        )?;
    }
    if out.expected {
        let runs: Vec<_> = (0..exec.threads()).map(|t| exec.instruction_runs(t)).collect();
        snapshot::write_expected(&out.dir, &streams, &runs)?;
    }
    Ok(Synthesis { streams, image, formatted, trace_bytes, encode_seconds })
}

fn summary_text(
    streams: &[StreamResult],
    image: &CodeImage,
    cfg: &SynthConfig,
    formatted: bool,
    bytes: u64,
    secs: f64,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "trace buffer: {} bytes, {}", bytes, if formatted { "formatter frames" } else { "unformatted" });
    let _ = writeln!(
        s,
        "settings: sync every {} bytes; timestamps {}; cycle counts {}; speculation {}; SVC model {:?}; runs {}",
        cfg.sync_period,
        if cfg.timestamps { format!("every {} cycles", cfg.ts_period) } else { "off".into() },
        if cfg.cycle_counts { format!("threshold {}", cfg.cc_threshold) } else { "off".into() },
        match cfg.speculation {
            Some(sp) => format!(
                "MAXSPEC {}, commit batch {}, wrong paths up to {}",
                sp.max_spec, sp.commit_batch, sp.wrong_path_max
            ),
            None => "off".into(),
        },
        cfg.svc,
        cfg.repeat
    );
    for t in streams {
        let st = &t.stats;
        let _ = writeln!(
            s,
            "trace ID 0x{:02x} (qemu CPU {}): {} bytes, {} instructions, {} P0 elements, {} exceptions, {} mispredicted branches, {} canceled, {} discarded, {} cycles",
            t.trace_id, t.cpu, st.bytes, st.instructions, st.p0_elements, st.exceptions, st.mispredicted_branches, st.canceled, st.discarded, st.cycles
        );
    }
    for e in &image.elfs {
        let name = e.path.file_name().map_or_else(|| e.path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let _ = writeln!(s, "code: {} at bias 0x{:x}", name, e.bias);
    }
    let _ = writeln!(s, "encoded in {:.3} s ({:.1} MB/s)", secs, bytes as f64 / 1e6 / secs.max(1e-9));
    s
}
