//! Writing a range of decoded elements to a file: the OpenCSD listing, JSON
//! lines, CSV, or function slices for Perfetto.
//!
//! [`export`] streams the range through the index (never the whole range in
//! memory: ranges can hold billions of elements), reports progress, can be
//! cancelled from another thread, and only ever leaves a complete file: it
//! writes under a temporary name in the destination directory and renames it
//! into place at the end, so an existing file at the destination survives a
//! failed or cancelled export untouched.
//!
//! Elements are numbered as `decode --elements-only` lists them (all trace
//! IDs together, from 0).

pub mod csv;
pub mod jsonl;
pub mod listing;
pub mod perfetto;
pub mod summary;

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::capture::Capture;
use crate::element::{self, Element};
use crate::index::{IndexError, SeekTarget, Seeker};
use crate::protocol::etm4::decoder::{SpecRecord, SpecState};
use crate::session::Event;
use crate::symbols::Cursor;

/// File formats of an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExportFormat {
    /// One line per element exactly as `decode --elements-only` prints it
    /// (element lines only: no header, footer or decoder messages).
    Opencsd,
    /// One JSON object per line, as `decode --seek --format jsonl` prints it.
    Jsonl,
    /// A header row, then one row per element.
    Csv,
    /// Chrome trace-event JSON of function activations (ui.perfetto.dev).
    Perfetto,
}

impl ExportFormat {
    pub const ALL: [ExportFormat; 4] = [ExportFormat::Opencsd, ExportFormat::Jsonl, ExportFormat::Csv, ExportFormat::Perfetto];

    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Opencsd => "opencsd",
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::Csv => "csv",
            ExportFormat::Perfetto => "perfetto",
        }
    }

    /// The usual file extension (without the dot).
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Opencsd => "txt",
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::Csv => "csv",
            ExportFormat::Perfetto => "json",
        }
    }

    /// The format a file name's extension suggests, if any.
    pub fn from_path(path: &Path) -> Option<ExportFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        ExportFormat::ALL.into_iter().find(|f| f.extension() == ext)
    }
}

impl fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ExportFormat {
    type Err = ExportError;
    fn from_str(s: &str) -> Result<Self, ExportError> {
        let s = s.trim().to_ascii_lowercase();
        ExportFormat::ALL.into_iter().find(|f| f.name() == s).ok_or(ExportError::UnknownFormat { name: s })
    }
}

/// What to export: elements `from..to` (`to` exclusive; past the end of the
/// trace means up to its end) to `path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportRequest {
    pub from: u64,
    pub to: u64,
    pub format: ExportFormat,
    pub path: PathBuf,
    /// Add the speculation view's records (speculative elements that did
    /// not simply commit), each before the element it precedes in the view.
    pub speculation: bool,
    /// Only these elements of `from..to`, as runs `(first, count)` sorted by
    /// first element (a viewer's filtered view); `None` writes them all.
    pub keep: Option<Vec<(u64, u64)>>,
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    /// Elements written (fewer than requested when the trace ends first).
    pub elements: u64,
    /// Size of the file.
    pub bytes: u64,
    pub path: PathBuf,
}

/// Why an export failed. Nothing is left at the destination but what was
/// there before.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Creating, writing or renaming the file failed; `path` is the
    /// destination.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, #[source] error: io::Error },
    /// The cancel flag was set.
    #[error("export cancelled")]
    Cancelled,
    /// The index could not be used.
    #[error("{0}")]
    Index(#[from] IndexError),
    /// `from` is after `to`.
    #[error("element range {from}..{to}: the start is after the end")]
    BadRange { from: u64, to: u64 },
    /// A format name that is none of [`ExportFormat::ALL`].
    #[error("'{name}' is not an export format (expected opencsd, jsonl, csv or perfetto)")]
    UnknownFormat { name: String },
}

/// How many elements pass between looks at the cancel flag (and progress
/// updates): often enough to stop within milliseconds.
const CHECK_EVERY: u64 = 4096;

/// Checkpoints decoded in one go before the decode is restarted at the
/// checkpoint reached, which gives the trace pages read back to the system
/// (a seeker releases them at the end of each run).
const CHECKPOINTS_PER_RUN: usize = 64;

/// Text is gathered in memory and written in pieces of about this size.
const WRITE_SIZE: usize = 1 << 20;

/// One output format: text for the start, each element and the end.
trait Sink {
    fn begin(&mut self, _out: &mut String) {}
    fn element(&mut self, out: &mut String, number: u64, e: &Element);
    /// A speculation record before element `number` (formats without a
    /// place for them leave them out).
    fn spec(&mut self, _out: &mut String, _number: u64, _r: &SpecRecord) {}
    fn end(&mut self, _out: &mut String) {}
}

struct OpencsdSink;

impl Sink for OpencsdSink {
    fn element(&mut self, out: &mut String, _number: u64, e: &Element) {
        element::write_opencsd_line(out, e);
    }

    fn spec(&mut self, out: &mut String, _number: u64, r: &SpecRecord) {
        listing::write_spec_line(out, r);
    }
}

struct JsonlSink<'a> {
    cursor: Option<Cursor<'a>>,
    cpus: Option<CpuMap>,
}

impl Sink for JsonlSink<'_> {
    fn element(&mut self, out: &mut String, number: u64, e: &Element) {
        jsonl::write_element(out, Some(number), e, self.cursor.as_mut());
        if let Some(c) = self.cpus.as_ref().and_then(|m| m.get(e.trace_id)) {
            if out.ends_with('}') {
                out.pop();
                out.push_str(",\"cpu\":");
                crate::textout::dec(out, c as u64);
                out.push('}');
            }
        }
        out.push('\n');
    }

    fn spec(&mut self, out: &mut String, _number: u64, r: &SpecRecord) {
        listing::write_spec_json(out, r);
    }
}

/// The CPU of each trace ID, for captures that know them (a perf.data).
#[derive(Clone, Debug)]
pub struct CpuMap([Option<u32>; 128]);

impl CpuMap {
    /// `None` when no source names its CPU (a snapshot): exports then keep
    /// their columns as they were.
    pub fn of(cap: &Capture) -> Option<CpuMap> {
        let mut m = [None; 128];
        for s in &cap.plan.sources {
            if let (Some(id), Some(cpu)) = (s.trace_id, s.cpu) {
                m[id as usize & 0x7f] = Some(cpu);
            }
        }
        m.iter().any(|c| c.is_some()).then_some(CpuMap(m))
    }

    pub fn get(&self, trace_id: u8) -> Option<u32> {
        self.0[trace_id as usize & 0x7f]
    }
}

/// A file being written under a temporary name beside its destination;
/// removed again unless [`TempFile::commit`] renames it into place.
struct TempFile {
    tmp: PathBuf,
    dest: PathBuf,
    file: Option<std::fs::File>,
    bytes: u64,
}

impl TempFile {
    fn create(dest: &Path) -> Result<TempFile, ExportError> {
        let (tmp, file) = crate::outfile::create_temp(dest).map_err(|e| match e {
            crate::outfile::OutputError::Io { error, .. } => ExportError::Io { path: dest.to_path_buf(), error },
            other => ExportError::Io { path: dest.to_path_buf(), error: io::Error::new(io::ErrorKind::InvalidInput, other.to_string()) },
        })?;
        Ok(TempFile { tmp, dest: dest.to_path_buf(), file: Some(file), bytes: 0 })
    }

    fn write(&mut self, text: &mut String) -> Result<(), ExportError> {
        if let Some(f) = &mut self.file {
            f.write_all(text.as_bytes()).map_err(|error| ExportError::Io { path: self.dest.clone(), error })?;
        }
        self.bytes += text.len() as u64;
        text.clear();
        Ok(())
    }

    fn commit(mut self) -> Result<u64, ExportError> {
        let io_err = |error| ExportError::Io { path: self.dest.clone(), error };
        let f = self.file.take().expect("file open until commit");
        // Errors that a close would swallow show up here instead.
        f.sync_data().map_err(io_err)?;
        drop(f);
        crate::outfile::commit(&self.tmp, &self.dest).map_err(io_err)?;
        self.tmp = PathBuf::new();
        Ok(self.bytes)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        self.file = None;
        if !self.tmp.as_os_str().is_empty() {
            crate::outfile::discard(&self.tmp);
        }
    }
}

/// Write elements `req.from..req.to` of the capture to `req.path` in
/// `req.format`. `progress` receives the number of elements written so far;
/// setting `cancel` stops the export within a few thousand elements with
/// [`ExportError::Cancelled`]. Symbols (function, file and line in JSON lines
/// and CSV, slice names in Perfetto) come from `cap.symbols`.
pub fn export(
    cap: &Capture,
    seeker: &Seeker<'_>,
    req: &ExportRequest,
    progress: &AtomicU64,
    cancel: &AtomicBool,
) -> Result<ExportSummary, ExportError> {
    if req.from > req.to {
        return Err(ExportError::BadRange { from: req.from, to: req.to });
    }
    progress.store(0, Ordering::Relaxed);
    // First, so that a destination that cannot be written fails at once.
    let mut file = TempFile::create(&req.path)?;
    let cursor = || cap.symbols.as_ref().map(|s| s.cursor());
    let mut sink: Box<dyn Sink + '_> = match req.format {
        ExportFormat::Opencsd => Box::new(OpencsdSink),
        ExportFormat::Jsonl => Box::new(JsonlSink { cursor: cursor(), cpus: CpuMap::of(cap) }),
        ExportFormat::Csv => Box::new(csv::CsvSink::new(cursor(), CpuMap::of(cap))),
        ExportFormat::Perfetto => {
            let cancelled = || cancel.load(Ordering::Relaxed);
            let base = perfetto::time_base(seeker, req.from, req.to, &cancelled)?.ok_or(ExportError::Cancelled)?;
            let mut meta = vec![
                ("generator", format!("tracesight {}", env!("CARGO_PKG_VERSION"))),
                ("snapshot", cap.path.display().to_string()),
                ("buffer", cap.plan.buffer.name.clone()),
                ("from_element", req.from.to_string()),
                ("time_base", base.name().to_string()),
                ("time_unit", base.unit().to_string()),
            ];
            if let perfetto::TimeBase::Timestamp { origin } = base {
                meta.push(("time_origin", origin.to_string()));
            }
            let process = format!("{} ({})", cap.path.display(), cap.plan.buffer.name);
            Box::new(perfetto::PerfettoSink::new(cursor(), base, process, meta))
        }
    };
    let mut text = String::with_capacity(WRITE_SIZE + (64 << 10));
    sink.begin(&mut text);
    let written = stream(seeker, req.from, req.to, req.speculation, req.keep.as_deref(), progress, cancel, |number, item| {
        match item {
            Item::Element(e) => sink.element(&mut text, number, e),
            Item::Spec(r) => sink.spec(&mut text, number, r),
        }
        if text.len() >= WRITE_SIZE {
            file.write(&mut text)?;
        }
        Ok(())
    })?;
    sink.end(&mut text);
    file.write(&mut text)?;
    let bytes = file.commit()?;
    progress.store(written, Ordering::Relaxed);
    Ok(ExportSummary { elements: written, bytes, path: req.path.clone() })
}

/// Call `on` with each element `from..to` in order; the number written.
/// What [`stream`] hands over.
enum Item<'a> {
    Element(&'a Element),
    Spec(&'a SpecRecord),
}

#[allow(clippy::too_many_arguments)]
fn stream(
    seeker: &Seeker<'_>,
    from: u64,
    to: u64,
    speculation: bool,
    keep: Option<&[(u64, u64)]>,
    progress: &AtomicU64,
    cancel: &AtomicBool,
    mut on: impl FnMut(u64, Item<'_>) -> Result<(), ExportError>,
) -> Result<u64, ExportError> {
    let mut next = from;
    let mut written = 0u64;
    // The run of `keep` that element numbers have reached: they only grow.
    let mut run = 0usize;
    let mut kept = |number: u64| match keep {
        None => true,
        Some(runs) => {
            while runs.get(run).is_some_and(|&(first, count)| first.saturating_add(count) <= number) {
                run += 1;
            }
            runs.get(run).is_some_and(|&(first, _)| first <= number)
        }
    };
    let mut failed = None;
    while next < to {
        if cancel.load(Ordering::Relaxed) {
            return Err(ExportError::Cancelled);
        }
        let k = seeker.checkpoint_for(&SeekTarget::Element(next));
        let mut more = false;
        // The index decodes with the speculation view on (its records are
        // not numbered), so the records are there to keep or leave out.
        seeker.run_events_from(k, |number, ev| {
            let item = match ev {
                Event::Element { element, .. } => Item::Element(element),
                Event::Spec { record, .. } if speculation && record.state != SpecState::Committed => Item::Spec(record),
                _ => return true,
            };
            if number < next {
                return true;
            }
            if number >= to {
                return false;
            }
            let is_element = matches!(item, Item::Element(_));
            // A speculation record goes with the element it precedes.
            if kept(number) {
                if let Err(e) = on(number, item) {
                    failed = Some(e);
                    return false;
                }
                written += u64::from(is_element);
            }
            if !is_element {
                return true;
            }
            next = number + 1;
            if (next - from).is_multiple_of(CHECK_EVERY) {
                progress.store(next - from, Ordering::Relaxed);
                if cancel.load(Ordering::Relaxed) {
                    failed = Some(ExportError::Cancelled);
                    return false;
                }
                if seeker.checkpoint_for(&SeekTarget::Element(next)) >= k + CHECKPOINTS_PER_RUN {
                    more = true;
                    return false;
                }
            }
            true
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        if !more {
            break;
        }
    }
    Ok(written)
}
