//! `tracesight info`: the buffers, trace sources and their configuration of
//! a capture; with `--image`, the images and the functions the trace enters.

use crate::cli::CliError;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tracesight::capture::{count_function_entries, open_snapshot};
use tracesight::input::Snapshot;
use tracesight::session::{BufferPlan, SourceKind};
use tracesight::symbols;

use super::PerfArgs;

#[derive(clap::Args)]
pub struct InfoArgs {
    /// OpenCSD snapshot directory, or a perf.data file recorded with cs_etm.
    pub path: PathBuf,
    /// ELF file with symbols (and code), at its own addresses or with its
    /// lowest segment at @ADDRESS (hex) (repeatable).
    #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
    pub images: Vec<String>,
    /// How many functions to list, most entered first (0 = all).
    #[arg(long, default_value_t = 20)]
    pub functions: usize,
    #[command(flatten)]
    pub perf: PerfArgs,
}

pub fn run(args: InfoArgs) -> Result<ExitCode, CliError> {
    if super::perf::is_perf(&args.path) {
        return super::perf::info(&args.path, &args.images, &args.perf);
    }
    let (path, image_args) = (args.path.as_path(), args.images.as_slice());
    if path.is_file() {
        return perf_info(path);
    }
    let snap = open_snapshot(path)?;
    let mut o = String::new();
    o.push_str(&format!("snapshot: {}\n", path.display()));
    if let Some(d) = &snap.description {
        o.push_str(&format!("description: {d}\n"));
    }
    for w in &snap.warnings {
        o.push_str(&format!("warning: {w}\n"));
    }
    for buffer in snap.buffers() {
        let size = fs::metadata(&buffer.path).map(|m| m.len().to_string()).unwrap_or_else(|_| "missing".into());
        o.push_str(&format!("\nbuffer {} ({}): {}, {} bytes\n", buffer.name, buffer.file, buffer.format.as_str(), size));
        match BufferPlan::new(&snap, buffer) {
            Err(e) => o.push_str(&format!("  error: {e}\n")),
            Ok(plan) => {
                for n in &plan.notes {
                    o.push_str(&format!("  warning: {n}\n"));
                }
                for s in &plan.sources {
                    let id = s.trace_id.map(|i| format!("0x{i:02x}")).unwrap_or_else(|| "?".into());
                    o.push_str(&format!("  source {} ({}), trace ID {id}\n", s.name, s.device_type));
                    match &s.kind {
                        SourceKind::Unsupported { protocol } => {
                            o.push_str(&format!("    {protocol}: not decoded by this version\n"));
                        }
                        kind => {
                            for (k, v) in kind.describe() {
                                o.push_str(&format!("    {k}: {v}\n"));
                            }
                        }
                    }
                }
            }
        }
    }
    if !image_args.is_empty() {
        o.push_str(&function_report(&snap, image_args, args.functions)?);
    }
    print!("{o}");
    Ok(ExitCode::SUCCESS)
}

/// `info` on a file that is not a perf.data: the reader says why.
fn perf_info(path: &Path) -> Result<ExitCode, CliError> {
    let data = tracesight::input::perf::PerfData::open(path).map_err(|e| e.to_string())?;
    print!("{}", tracesight::input::perf::describe(&data));
    Ok(ExitCode::SUCCESS)
}

/// The images and their symbol detail, then the functions the trace of the
/// default buffer enters, most entered first.
fn function_report(snap: &Snapshot, image_args: &[String], top: usize) -> Result<String, CliError> {
    let mut o = String::new();
    let sym = symbols::Symbolizer::from_image_args(image_args).map_err(|e| e.to_string())?;
    o.push_str("\nimages:\n");
    for im in sym.images() {
        o.push_str(&format!("  {}\n", im.summary()));
        for n in im.notes() {
            o.push_str(&format!("    note: {n}\n"));
        }
    }
    let Some(entries) = count_function_entries(snap, &sym, image_args).map_err(|e| e.to_string())? else { return Ok(o) };
    let order = entries.ranked();
    let shown = if top == 0 { order.len() } else { top.min(order.len()) };
    o.push_str(&format!(
        "\nfunctions entered in buffer {} ({} of {} functions; {} instruction ranges decoded{}):\n",
        entries.buffer,
        order.len(),
        entries.table.functions.len(),
        entries.ranges,
        if entries.stopped_early { ", decode stopped early" } else { "" }
    ));
    for f in &order[..shown] {
        o.push_str(&format!("  {:>10}  0x{:x}  {}\n", f.entries, f.start(), f.name));
    }
    if shown < order.len() {
        o.push_str(&format!("  ... {} more (--functions 0 lists all)\n", order.len() - shown));
    }
    Ok(o)
}
