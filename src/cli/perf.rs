//! `decode` and `info` on a perf.data, and the options every command takes
//! for one (`index`, `export`, `profile` and the viewer open it through
//! [`Capture::open`] like a snapshot).

use crate::cli::CliError;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tracesight::capture::{Capture, CaptureOptions};
use tracesight::element::{self, Element, ElementKind};
use tracesight::export::jsonl;
use tracesight::export::listing::ListingOutput;
use tracesight::index;
use tracesight::protocol::etm4::decoder::DecoderOptions;
use tracesight::session::{run_fragments, Event, Fragment};

use super::decode::{DecodeArgs, Format};
use super::env_decoder;

/// Options for perf.data captures, shared by every command.
#[derive(clap::Args, Clone, Default)]
pub struct PerfArgs {
    /// perf.data: a directory to find the recorded binaries in, by file name
    /// or by their recorded path below it (repeatable; searched before perf's
    /// build-id cache and the recorded paths).
    #[arg(long = "symdir", value_name = "DIR")]
    pub symdirs: Vec<PathBuf>,
    /// perf.data: the kernel image (vmlinux) for kernel addresses.
    #[arg(long, value_name = "VMLINUX")]
    pub kernel: Option<PathBuf>,
    /// perf.data: only this CPU's trace.
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,
}

/// Whether `path` is a perf.data file (by its magic).
pub fn is_perf(path: &Path) -> bool {
    tracesight::capture::perf::is_perf_data(path)
}

/// Open a perf.data, printing what the capture warns about.
pub fn open(path: &Path, images: &[String], perf: &PerfArgs, decoder: DecoderOptions) -> Result<Capture, CliError> {
    let copts = CaptureOptions {
        images: images.to_vec(),
        decoder,
        symdirs: perf.symdirs.clone(),
        kernel: perf.kernel.clone(),
        cpu: perf.cpu,
        ..CaptureOptions::default()
    };
    let cap = Capture::open(path, &copts).map_err(|e| e.to_string())?;
    for w in &cap.warnings {
        eprintln!("tracesight: warning: {w}");
    }
    Ok(cap)
}

/// One element line: the OpenCSD element line after the CPU, or a JSON
/// object with `cpu` (and the missing image for a gap) added.
fn write_element(out: &mut String, cap: &Capture, number: Option<u64>, e: &Element, json: bool, cursor: Option<&mut tracesight::symbols::Cursor<'_>>) {
    let cpu = cap.cpu_of(e.trace_id);
    let missing = cap.perf.as_ref().and_then(|p| p.missing_image(e));
    if json {
        jsonl::write_element(out, number, e, cursor);
        if out.ends_with('}') {
            out.pop();
            if let Some(c) = cpu {
                out.push_str(&format!(",\"cpu\":{c}"));
            }
            if let Some(m) = &missing {
                out.push_str(",\"missing_image\":");
                element::write_json_string(out, m);
            }
            // The recorded binary the range runs in, as perf script names its DSO.
            if let (ElementKind::InstrRange { start, .. }, Some(p)) = (e.kind, &cap.perf) {
                if let Some(b) = p.binary_at(start) {
                    out.push_str(",\"binary\":");
                    element::write_json_string(out, &b.filename);
                }
            }
            out.push('}');
        }
    } else {
        if let Some(c) = cpu {
            out.push_str(&format!("CPU:{c}; "));
        }
        element::write_opencsd_line(out, e);
        if let Some(m) = &missing {
            if out.ends_with('\n') {
                out.pop();
            }
            out.push_str(&format!(" [{m}]\n"));
            return;
        }
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
}

/// `tracesight decode perf.data`.
pub fn decode(args: &DecodeArgs) -> Result<ExitCode, CliError> {
    let decoder = DecoderOptions { speculation: false, ..args.decoder() };
    let cap = open(&args.path, &args.images, &args.perf, decoder)?;
    let json = args.format == Format::Jsonl;
    let mut opts = cap.opts.clone();
    if !args.ids.is_empty() {
        opts.ids.retain(|i| args.ids.contains(i));
        if opts.ids.is_empty() {
            opts.ids = args.ids.clone();
        }
    }
    opts.elements = !args.packets;
    let mut cursor = if json { cap.symbols.as_ref().map(|s| s.cursor()) } else { None };
    super::refuse_input_output(args.output.as_deref(), &args.path, None, &args.images)?;
    let mut out = ListingOutput::new(args.output.as_deref()).map_err(|e| e.to_string())?;
    if cap.fragments.is_empty() {
        eprintln!("tracesight: {}: no trace data to decode", args.path.display());
        out.close().map_err(|e| e.to_string())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(pos) = &args.seek {
        let idx = super::open_index(&cap.plan, &cap.file, &cap.fragments, &opts, &index::IndexOptions::default(), false)?;
        let seeker = index::Seeker::with_fragments(&cap.plan, cap.file.bytes(), &cap.fragments, &opts, &idx.file).releasing(&cap.file);
        let found = cap.find_position(&seeker, "seek", pos, |name| {
            eprintln!("tracesight: no function is named like that; using the best match, {name}")
        });
        let Some(start) = found.map_err(|e| e.to_string())? else {
            eprintln!("tracesight: --seek {pos}: no element there (the trace has {} elements)", idx.file.totals().elements);
            return Ok(ExitCode::from(1));
        };
        seeker
            .each(start, args.count, |n| write_element(&mut out.buf, &cap, Some(n.number), n.element, json, cursor.as_mut()))
            .map_err(|e| e.to_string())?;
        out.close().map_err(|e| e.to_string())?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.summary {
        let started = std::time::Instant::now();
        let mut counts = tracesight::export::summary::DecodeCounts::default();
        counts.count_parallel(&cap.plan, cap.file.bytes(), &cap.fragments, &opts, &tracesight::index::IndexOptions::default());
        return super::decode::write_summary(&counts, started.elapsed().as_secs_f64(), !json, out);
    }
    let show_packets = !args.elements_only;
    let mut io_err = None;
    for (i, frag) in cap.fragments.iter().enumerate() {
        if !json {
            out.buf.push_str(&fragment_header(&cap, i, frag));
        }
        let summary = run_fragments(&cap.plan, cap.file.bytes(), std::slice::from_ref(frag), &opts, |ev| {
            if io_err.is_some() {
                return;
            }
            match ev {
                Event::Element { element: e, .. } => write_element(&mut out.buf, &cap, None, e, json, cursor.as_mut()),
                Event::Message { text, .. } if !json => out.buf.push_str(text),
                Event::Packet { source, stream_id, packet, raw } if show_packets => {
                    if json {
                        packet.write_json(&mut out.buf, source.trace_id.unwrap_or(stream_id), raw);
                        out.buf.push('\n');
                    } else {
                        packet.write_opencsd(&mut out.buf, source, stream_id, raw, args.packets);
                    }
                }
                Event::Skipped { trace_id, reason } => {
                    eprintln!("tracesight: {}: trace ID 0x{trace_id:x} skipped: {reason}", args.path.display())
                }
                _ => {}
            }
            if let Err(e) = out.maybe_flush() {
                io_err = Some(e);
            }
        });
        if let Some(f) = summary.fatal.as_ref().map(|f| f.to_string()).or(summary.frame_error.map(|e| e.to_string())) {
            eprintln!("tracesight: {}: AUX fragment at 0x{:x}: decode stopped: {f}", args.path.display(), frag.start);
        } else if let Some(f) = &summary.fatal_at_end {
            eprintln!(
                "tracesight: {}: AUX fragment at 0x{:x}: decode stopped at its end: {f}",
                args.path.display(),
                frag.start
            );
        }
    }
    match io_err {
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        Some(e) => return Err(format!("writing output: {e}").into()),
        None => {}
    }
    out.close().map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

/// The line that opens a fragment's listing.
fn fragment_header(cap: &Capture, i: usize, f: &Fragment) -> String {
    let what = match f.raw_source.and_then(|s| cap.plan.sources.get(s)) {
        Some(s) => format!("raw trace of CPU {}", s.cpu.map_or("?".into(), |c| c.to_string())),
        None => "formatted trace".into(),
    };
    let cpu = cap
        .perf
        .as_ref()
        .and_then(|p| p.data.fragments().iter().find(|x| x.data.start as u64 == f.start))
        .map(|x| if x.cpu < 0 { " (per-thread)".to_string() } else { format!(" of CPU {}", x.cpu) })
        .unwrap_or_default();
    format!("AUX fragment {i}{cpu}: 0x{:x}..0x{:x} ({} bytes), {what}\n", f.start, f.end, f.len())
}

/// `tracesight info perf.data`: the recording as the reader describes it,
/// then the files found for its binaries, its threads and the decoder's
/// view of each CPU's configuration.
pub fn info(path: &Path, images: &[String], perf: &PerfArgs) -> Result<ExitCode, CliError> {
    let cap = open(path, images, perf, env_decoder())?;
    let Some(p) = &cap.perf else { return Err(format!("{}: not a perf.data", path.display()).into()) };
    let mut o = tracesight::input::perf::describe(&p.data);
    o.push_str("
binaries for decoding:
");
    for b in &p.binaries {
        let state = match &b.found {
            Some(f) => format!("found ({}): {}", f.how(), f.path().display()),
            None => format!("not found{}", b.note.as_ref().map(|n| format!(": {n}")).unwrap_or_default()),
        };
        o.push_str(&format!("  {}{}: {state}\n", b.filename, if b.kernel { " (kernel)" } else { "" }));
    }
    if !p.threads.is_empty() {
        let names: Vec<String> = p.threads.values().map(|t| format!("{}/{} {}", t.pid, t.tid, t.comm)).collect();
        o.push_str(&format!("threads (pid/tid command): {}\n", names.join(", ")));
    }
    for s in &cap.plan.sources {
        o.push_str(&format!("source {} ({}), trace ID 0x{:02x}\n", s.name, s.device_type, s.trace_id.unwrap_or(0)));
        for (k, v) in s.kind.describe() {
            o.push_str(&format!("    {k}: {v}\n"));
        }
    }
    print!("{o}");
    Ok(ExitCode::SUCCESS)
}
