//! `tracesight synth`: run a program under qemu-aarch64 and write the ETE
//! trace of its execution as an OpenCSD snapshot directory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use tracesight::synth::encoder::{SpecConfig, SvcModel, SynthConfig};
use tracesight::synth::qemu::{self, QemuRun};
use tracesight::synth::{synthesize, Output, SynthError};

/// Arguments of `tracesight synth`.
#[derive(clap::Args, Debug, Clone)]
pub struct SynthArgs {
    /// Directory to write (created; an earlier synthesis there is replaced):
    /// a snapshot, or with `--format perf` a perf.data and the program.
    #[arg(short = 'o', long = "output", value_name = "OUT_DIR")]
    pub out: PathBuf,
    /// The qemu user-mode emulator to run the program with.
    #[arg(long, default_value = "qemu-aarch64", value_name = "PATH")]
    pub qemu: PathBuf,
    /// Sysroot for dynamically linked programs (qemu's -L; default
    /// /usr/aarch64-linux-gnu when it exists).
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
    /// Read this qemu log (-d in_asm,exec,nochain) instead of running qemu.
    #[arg(long, value_name = "LOG")]
    pub from_log: Option<PathBuf>,
    /// Keep qemu's execution log in this file.
    #[arg(long, value_name = "LOG", conflicts_with = "from_log")]
    pub keep_log: Option<PathBuf>,
    /// Trace ID of the first thread (hex); further threads take the next IDs.
    #[arg(long, default_value = "10", value_parser = parse_hex_u8, value_name = "HEX")]
    pub trace_id: u8,
    /// Write CoreSight formatter frames even for a single trace unit
    /// (several threads always use frames in a snapshot; a perf.data keeps
    /// each CPU's trace apart and is raw unless this is given).
    #[arg(long)]
    pub formatted: bool,
    /// What to write: an OpenCSD snapshot directory, or `perf`: OUT_DIR/perf.data
    /// as `perf record -e cs_etm//` writes it (per-CPU AUX data, AUXTRACE_INFO,
    /// MMAP2 with build ids, COMM), with the program's ELF file beside it.
    #[arg(long, default_value = "snapshot", value_parser = ["snapshot", "perf"])]
    pub format: String,
    /// Synchronisation (A-sync, Trace Info, address) every this many bytes.
    #[arg(long, default_value_t = 8192, value_name = "BYTES")]
    pub sync_period: u64,
    /// No timestamps.
    #[arg(long)]
    pub no_timestamps: bool,
    /// Core cycles between timestamps.
    #[arg(long, default_value_t = 5000, value_name = "CYCLES")]
    pub ts_period: u64,
    /// No cycle counts.
    #[arg(long)]
    pub no_cycle_counts: bool,
    /// Cycle count threshold (cycles between cycle count elements at least).
    #[arg(long, default_value_t = 64, value_name = "CYCLES")]
    pub cc_threshold: u32,
    /// Commit mode (TRCIDR0.COMMOPT): 1 traces commits in Commit packets, 0
    /// lets cycle count packets carry them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub commit_mode: u8,
    /// No speculation: every element is committed as traced (MAXSPEC 0).
    #[arg(long)]
    pub no_speculation: bool,
    /// TRCIDR8.MAXSPEC: most uncommitted P0 elements.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max_spec: u32,
    /// Commit resolved elements in batches of this many.
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub commit_batch: u32,
    /// Longest mis-speculated path, in P0 elements.
    #[arg(long, default_value_t = 6, value_name = "N")]
    pub wrong_path_max: u32,
    /// Share of the modelled branch mispredictions traced as speculation, per mille.
    #[arg(long, default_value_t = 1000, value_name = "PERMILLE")]
    pub mispredict_rate: u32,
    /// How system calls appear: `stub` traces a synthetic EL1 handler that
    /// returns with ERET; `filtered` leaves EL1 out (Trace On at the return).
    #[arg(long, default_value = "stub", value_parser = ["stub", "filtered"])]
    pub svc: String,
    /// Context ID traced for the process (0: no context ID tracing).
    #[arg(long, default_value_t = 1000)]
    pub context_id: u32,
    /// Encode the execution this many times in a row (a new process each time).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// Repeat the execution until the trace is at least this many MiB
    /// (overrides --repeat; for large-trace benchmarks).
    #[arg(long, value_name = "MIB")]
    pub target_mib: Option<u64>,
    /// Seed of the speculation choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also write expected/ (executed instruction runs from qemu, speculation fates).
    #[arg(long)]
    pub expected: bool,
    /// Program to run (an AArch64 Linux executable) and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
    pub program: Vec<String>,
}

fn parse_hex_u8(s: &str) -> Result<u8, SynthError> {
    let t = s.trim_start_matches("0x").trim_start_matches("0X");
    match u8::from_str_radix(t, 16) {
        Ok(v) if (1..0x70).contains(&v) => Ok(v),
        _ => Err(SynthError::BadTraceId { text: s.to_string() }),
    }
}

impl SynthArgs {
    /// The synthesis settings these arguments select.
    pub fn config(&self) -> SynthConfig {
        SynthConfig {
            first_trace_id: self.trace_id,
            sync_period: self.sync_period.max(64),
            timestamps: !self.no_timestamps,
            ts_period: self.ts_period.max(1),
            cycle_counts: !self.no_cycle_counts,
            cc_threshold: self.cc_threshold.max(1),
            commit_in_cycle_counts: self.commit_mode == 0,
            speculation: (!self.no_speculation).then(|| SpecConfig {
                max_spec: self.max_spec.clamp(2, 1 << 16),
                commit_batch: self.commit_batch.clamp(1, self.max_spec.max(2)),
                wrong_path_max: self.wrong_path_max,
                rate_permille: self.mispredict_rate.min(1000),
                discard_at_end: true,
            }),
            svc: if self.svc == "filtered" { SvcModel::Filtered } else { SvcModel::KernelStub },
            context_id: (self.context_id != 0).then_some(self.context_id),
            repeat: self.repeat.max(1),
            seed: self.seed,
            record: self.expected,
        }
    }
}

/// Run `tracesight synth`.
pub fn run(args: SynthArgs) -> Result<ExitCode, SynthError> {
    let program = PathBuf::from(&args.program[0]);
    if !program.is_file() {
        return Err(SynthError::NoProgram { path: program });
    }
    let sysroot = args.sysroot.clone().or_else(|| {
        let d = PathBuf::from("/usr/aarch64-linux-gnu");
        d.is_dir().then_some(d)
    });
    let t0 = Instant::now();
    let exec = match &args.from_log {
        Some(log) => qemu::parse_log_file(log)?,
        None => {
            if !qemu::qemu_available(&args.qemu) {
                return Err(SynthError::NoQemu { qemu: args.qemu.clone() });
            }
            let r = qemu::run(&QemuRun {
                qemu: args.qemu.clone(),
                sysroot: sysroot.clone(),
                program: program.clone(),
                args: args.program[1..].to_vec(),
                keep_log: args.keep_log.clone(),
            })?;
            if !r.status.success() {
                eprintln!("tracesight synth: note: the program exited with {}", r.status);
            }
            r.exec
        }
    };
    let run_secs = t0.elapsed().as_secs_f64();
    let mut cfg = args.config();
    if let Some(mib) = args.target_mib {
        // Measure one run, then repeat enough times.
        let probe = std::env::temp_dir().join(format!("tracesight-synth-probe-{}", std::process::id()));
        let one = synthesize(&exec, &program, sysroot.as_deref(), &SynthConfig { repeat: 1, ..cfg.clone() }, &Output::new(&probe))?;
        let _ = std::fs::remove_dir_all(&probe);
        cfg.repeat = ((mib << 20) / one.trace_bytes.max(1) + 1).min(u32::MAX as u64) as u32;
    }
    let mut out = Output::new(&args.out);
    out.formatted = args.formatted.then_some(true);
    out.expected = args.expected;
    out.perf = args.format == "perf";
    let name = program.file_name().map_or_else(|| args.program[0].clone(), |n| n.to_string_lossy().into_owned());
    out.notes = format!("tracesight synth -- {} {}\n", name, args.program[1..].join(" "));
    let s = synthesize(&exec, &program, sysroot.as_deref(), &cfg, &out)?;
    let instrs: u64 = s.streams.iter().map(|t| t.stats.instructions).sum();
    eprintln!(
        "{}: {} trace unit(s), {} instructions, {} bytes of trace ({}); qemu {:.2} s, encoding {:.2} s = {:.1} MB/s",
        args.out.display(),
        s.streams.len(),
        instrs,
        s.trace_bytes,
        if s.formatted { "formatter frames" } else { "unformatted" },
        run_secs,
        s.encode_seconds,
        s.mb_per_second()
    );
    Ok(ExitCode::SUCCESS)
}
