//! `tracesight index`: build (or refresh) the index of a capture and
//! describe it.

use crate::cli::CliError;
use std::path::PathBuf;
use std::process::ExitCode;

use tracesight::capture::{Capture, CaptureOptions};
use tracesight::index::IndexOptions;

use super::{env_decoder, open_index, PerfArgs};

#[derive(clap::Args)]
pub struct IndexArgs {
    /// OpenCSD snapshot directory or perf.data file.
    pub path: PathBuf,
    /// Ignore any existing index and build it again.
    #[arg(long)]
    pub rebuild: bool,
    /// Trace buffer to index (default: the first, as decode).
    #[arg(long)]
    pub source: Option<String>,
    /// ELF files of the program image, as for decode (repeatable).
    #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
    pub images: Vec<String>,
    /// Read dstream_coresight buffers as DSTREAM captures.
    #[arg(long)]
    pub dstream: bool,
    /// Bytes of trace between checkpoints, in KiB.
    #[arg(long, default_value_t = 256)]
    pub interval_kib: u64,
    #[command(flatten)]
    pub perf: PerfArgs,
}

pub fn run(args: IndexArgs) -> Result<ExitCode, CliError> {
    let perf = super::perf::is_perf(&args.path);
    let cap = if perf {
        super::perf::open(&args.path, &args.images, &args.perf, env_decoder())?
    } else {
        let copts = CaptureOptions {
            images: args.images.clone(),
            source: args.source.clone(),
            dstream: args.dstream,
            decoder: env_decoder(),
            // Decoding needs the images' code, not their symbols.
            no_auto_images: true,
            no_symbols: true,
            ..CaptureOptions::default()
        };
        Capture::open(&args.path, &copts)?
    };
    // A snapshot's `index` reads the whole trace to check it against an
    // existing index: the only command that does (seeks check what they
    // decode).
    let iopts = IndexOptions { interval: args.interval_kib.max(1) * 1024, verify: !perf, ..Default::default() };
    let t0 = std::time::Instant::now();
    let idx = open_index(&cap.plan, &cap.file, &cap.fragments, &cap.opts, &iopts, args.rebuild)?;
    print!("{}", tracesight::capture::index_report(&cap, &idx, t0.elapsed(), iopts.interval));
    Ok(ExitCode::SUCCESS)
}
