//! `tracesight export`: a range of elements to a file (the OpenCSD listing,
//! JSON lines, CSV or Perfetto slices), through the index.

use crate::cli::CliError;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use tracesight::capture::{parse_number, Capture};
use tracesight::export::{self as export_lib, ExportFormat, ExportRequest};
use tracesight::index;

use super::{open_index, refuse_input_output, CaptureArgs};

#[derive(clap::Args)]
pub struct ExportArgs {
    /// OpenCSD snapshot directory or perf.data file.
    pub path: PathBuf,
    /// First element: an element number, instr:N, ts:VALUE, cc:VALUE,
    /// off:BYTES, addr:HEX or fn:NAME (as decode --seek).
    #[arg(long, value_name = "POS", default_value = "0")]
    pub from: String,
    /// Where to stop (that element is not written), a position as for
    /// --from; default: the end of the trace.
    #[arg(long, value_name = "POS", conflicts_with = "count")]
    pub to: Option<String>,
    /// Write this many elements (instead of --to).
    #[arg(long)]
    pub count: Option<u64>,
    /// Add the speculation view's records (speculative elements that did not
    /// simply commit, each before the element it precedes), as `decode
    /// --speculation` prints them; opencsd and jsonl formats.
    #[arg(long)]
    pub speculation: bool,
    /// opencsd, jsonl, csv or perfetto; default: from the extension of the
    /// output file (.txt, .jsonl, .csv, .json).
    #[arg(long)]
    pub format: Option<ExportFormat>,
    /// The file to write (under a temporary name, renamed when complete).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    #[command(flatten)]
    pub capture: CaptureArgs,
}

pub fn run(args: ExportArgs) -> Result<ExitCode, CliError> {
    let format = match args.format {
        Some(f) => f,
        None => ExportFormat::from_path(&args.output).ok_or_else(|| {
            format!(
                "{}: give --format (opencsd, jsonl, csv or perfetto); the file name does not say which",
                args.output.display()
            )
        })?,
    };
    let copts = args.capture.options();
    let cap = Capture::open(&args.path, &copts)?;
    for w in &cap.warnings {
        eprintln!("tracesight: warning: {w}");
    }
    let idx = open_index(&cap.plan, &cap.file, &cap.fragments, &cap.opts, &index::IndexOptions::default(), false)?;
    for r in &idx.rejected {
        eprintln!("tracesight: index {r}");
    }
    let seeker = cap.seeker(&idx.file);
    let total = idx.file.totals().elements;
    let find = |flag: &str, pos: &str| cap.find_option(&seeker, flag, pos).map_err(|e| e.to_string());
    let from = match find("from", &args.from)? {
        Some(n) => n,
        // The end itself is a valid start: an empty export (a trace with no
        // elements still gives a well-formed file).
        None if parse_number(&args.from).ok() == Some(total) => total,
        None => return Err(format!("--from {}: no element there (the trace has {total} elements)", args.from).into()),
    };
    let to = match (&args.to, args.count) {
        // A position past the last element means the end of the trace.
        (Some(pos), _) => find("to", pos)?.unwrap_or(total),
        (None, Some(n)) => from.saturating_add(n).min(total),
        (None, None) => total,
    };
    if to < from {
        return Err(format!("--to {}: element {to} comes before the --from element {from}", args.to.unwrap_or_default()).into());
    }
    refuse_input_output(Some(&args.output), &cap.path, cap.snapshot.as_ref(), &cap.image_args)?;
    tracesight::outfile::remove_on_signals();
    let req = ExportRequest { from, to, format, path: args.output.clone(), speculation: args.speculation, keep: None };
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let todo = to - from;
    let summary = with_progress(
        todo,
        1 << 20,
        |d| format!("exporting {:>5.1}% ({d} of {todo} elements)", d as f64 * 100.0 / todo.max(1) as f64),
        |p| export_lib::export(&cap, &seeker, &req, p, &cancel),
    )
    .map_err(|e| e.to_string())?;
    if io::IsTerminal::is_terminal(&io::stderr()) {
        eprintln!(
            "tracesight: wrote elements {from}..{} ({} elements, {} bytes) to {}",
            from + summary.elements,
            summary.elements,
            summary.bytes,
            summary.path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Progress of a long job on standard error, when it is a terminal: `f`
/// stores its progress, `describe` turns it into the text shown. Jobs of less
/// than `threshold` show nothing.
fn with_progress<T>(
    total: u64,
    threshold: u64,
    describe: impl Fn(u64) -> String + Sync,
    f: impl FnOnce(&std::sync::atomic::AtomicU64) -> T,
) -> T {
    use std::io::IsTerminal;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let done = AtomicU64::new(0);
    let finished = AtomicBool::new(false);
    if !io::stderr().is_terminal() || total < threshold {
        return f(&done);
    }
    std::thread::scope(|sc| {
        sc.spawn(|| {
            while !finished.load(Ordering::Relaxed) {
                eprint!("\rtracesight: {}", describe(done.load(Ordering::Relaxed)));
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            eprint!("\r\x1b[K");
        });
        let r = f(&done);
        finished.store(true, Ordering::Relaxed);
        r
    })
}
