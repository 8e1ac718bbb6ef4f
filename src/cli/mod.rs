//! The commands of the `tracesight` binary, one file each, over library
//! calls: the options each takes (clap), what it prints, and its exit code.
//! Errors reach `main` as the message printed after `tracesight: `.

use std::io;
use std::path::{Path, PathBuf};

use tracesight::input::{Snapshot, TraceFile};
use tracesight::protocol::etm4::decoder::DecoderOptions;
use tracesight::session::{BufferPlan, Fragment, RunOptions};

/// What a command fails with: any layer's error, or the command's own
/// message; `main` prints it after `tracesight: `.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

pub mod decode;
pub mod export;
pub mod index;
pub mod info;
pub mod perf;
pub mod profile;
pub mod symbolize;
pub mod synth;
pub mod view;

pub use perf::PerfArgs;

/// How to open a capture (the viewer and `export`).
#[derive(clap::Args)]
pub struct CaptureArgs {
    /// ELF file with code and symbols, at its own addresses or with its lowest
    /// segment at @ADDRESS (hex) (repeatable). ELF files inside the snapshot
    /// directory are used for symbols without this.
    #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
    pub images: Vec<String>,
    /// Trace buffer to open, by its name in trace.ini (default: the first).
    #[arg(long)]
    pub source: Option<String>,
    /// Read dstream_coresight buffers as DSTREAM captures.
    #[arg(long)]
    pub dstream: bool,
    #[command(flatten)]
    pub perf: PerfArgs,
}

/// Where source files are found (`symbolize` and the viewer).
#[derive(clap::Args)]
pub struct SourceArgs {
    /// Directory to look for source files in (repeatable), before the
    /// places next to the capture.
    #[arg(long = "source-root", value_name = "DIR")]
    pub source_roots: Vec<PathBuf>,
    /// Rewrite a source path prefix, as debuggers do (repeatable).
    #[arg(long = "substitute-path", value_name = "OLD=NEW")]
    pub substitutions: Vec<String>,
}

impl CaptureArgs {
    pub fn options(&self) -> tracesight::capture::CaptureOptions {
        tracesight::capture::CaptureOptions {
            images: self.images.clone(),
            source: self.source.clone(),
            dstream: self.dstream,
            decoder: DecoderOptions {
                // The viewer and export keep going after damage.
                recover: true,
                ..env_decoder()
            },
            symdirs: self.perf.symdirs.clone(),
            kernel: self.perf.kernel.clone(),
            cpu: self.perf.cpu,
            ..Default::default()
        }
    }
}

/// OpenCSD's environment switches, honoured for scripts written for it.
pub fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

pub fn env_number(name: &str) -> Option<u32> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Decoder options as OpenCSD's environment switches set them.
pub fn env_decoder() -> DecoderOptions {
    DecoderOptions {
        instr_range_limit: env_number("OPENCSD_INSTR_RANGE_LIMIT").unwrap_or(0),
        aa64_opcode_check: env_flag("OPENCSD_ERR_ON_AA64_BAD_OPCODE"),
        ..DecoderOptions::default()
    }
}

/// Refuse an output file that is one of the run's inputs: the capture file
/// itself (a perf.data), a file of its snapshot, or an `--image` ELF.
pub fn refuse_input_output(out: Option<&Path>, capture: &Path, snap: Option<&Snapshot>, images: &[String]) -> Result<(), CliError> {
    let Some(out) = out else { return Ok(()) };
    let mut inputs = vec![capture.to_path_buf()];
    inputs.extend(snap.map(Snapshot::input_files).unwrap_or_default());
    inputs.extend(images.iter().filter_map(|a| tracesight::image::elf::parse_image_arg(a).ok()).map(|(p, _)| p));
    Ok(tracesight::outfile::refuse_inputs(out, &inputs)?)
}

/// Open a buffer's index, building it (with a progress bar when standard
/// error is a terminal) when needed. The build reads the trace once: pages
/// behind each decoder are given back so a multi-gigabyte capture does not
/// stay resident.
pub fn open_index(
    plan: &BufferPlan,
    file: &TraceFile,
    fragments: &[Fragment],
    opts: &RunOptions,
    iopts: &tracesight::index::IndexOptions,
    rebuild: bool,
) -> Result<tracesight::index::Index, CliError> {
    use std::io::IsTerminal;
    use std::sync::atomic::{AtomicBool, Ordering};
    let data = file.bytes();
    let progress = tracesight::index::BuildProgress::new();
    let release = |a: usize, b: usize| file.release(a, b);
    let over = AtomicBool::new(false);
    let show = io::stderr().is_terminal() && data.len() >= (64 << 20);
    std::thread::scope(|sc| {
        if show {
            sc.spawn(|| {
                let mut bar = None;
                while !over.load(Ordering::Relaxed) {
                    // Only once a build has started: an index that is up to
                    // date opens without one.
                    if progress.total() > 0 {
                        let b = bar.get_or_insert_with(|| {
                            let b = indicatif::ProgressBar::new(progress.total());
                            b.set_style(
                                indicatif::ProgressStyle::with_template(
                                    "indexing {bar:24} {percent:>3}% {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
                                )
                                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                            );
                            b
                        });
                        b.set_position(progress.done());
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
            });
        }
        let r = tracesight::index::open_or_build_fragments(plan, data, fragments, opts, iopts, rebuild, &progress, Some(&release));
        over.store(true, Ordering::Relaxed);
        r
    })
    .map_err(CliError::from)
}

/// The bundled demo capture, beside the executable or in the source tree.
pub fn demo_path() -> PathBuf {
    let beside_exe = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.join("../../assets/demo/snapshot")));
    let p = match beside_exe {
        Some(p) if p.is_dir() => p,
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/snapshot"),
    };
    p.canonicalize().unwrap_or(p)
}
