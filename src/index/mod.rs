//! The checkpoint index of one trace buffer: where a decode can restart, and
//! what it needs to give there exactly what a decode from the start gives.
//!
//! One pass decodes the buffer in blocks of [`IndexOptions::interval`] bytes
//! and saves the whole decode state (frame demultiplexer, every packet
//! parser and element decoder, see [`Runner::save_state`]) before each block.
//! A restart from a checkpoint therefore reproduces the full decode bit for
//! bit, speculation state included, rather than only from the next Trace Info
//! or I-sync. Each checkpoint also records the counts before it and a summary
//! of the segment up to the next one, which is what seeks search and the
//! timeline draws.
//!
//! The index is a file of fixed-width little-endian records (see
//! [`format`]), written beside the trace (or in the user cache directory when
//! that is not writable), memory-mapped when opened again, and validated
//! against the trace: its size, modification time and a hash of its first and
//! last 64 KiB, and a fingerprint of the decode options and program images.
//! A stale, truncated, corrupt or foreign file is ignored and rebuilt.
//!
//! Buffers whose state cannot be saved (TPIU and DSTREAM framing) get one
//! checkpoint at offset 0: seeks then decode from the start.

mod build;
pub mod spill;
pub mod format;

use std::path::{Path, PathBuf};

use crate::element::{Element, ElementKind};
use crate::input::TraceFile;
use crate::session::{BufferPlan, Event, Fragment, RunOptions, Runner, Source};

pub use build::BuildProgress;
pub use format::Release;
pub use format::{Checkpoint, IdSummary, IndexFile};

/// How an index is built.
#[derive(Clone, Debug)]
pub struct IndexOptions {
    /// Bytes between checkpoints; rounded up to a multiple of 1024 (the
    /// block size of unformatted buffers, a multiple of the frame size).
    pub interval: u64,
    /// Threads to build with (0: all cores). The index is the same whatever
    /// the number.
    pub threads: usize,
    /// Bytes per part of a parallel build, rounded up to a multiple of the
    /// interval (0: chosen from the size and the threads).
    pub part: u64,
    /// Check the whole trace against an existing index before using it
    /// (reads all of it; seeks check only the segments they decode).
    pub verify: bool,
    /// When no place takes the index file (read-only trace directory and
    /// cache), keep the built index in memory instead of failing (the
    /// viewer: the build is not wasted, only not saved).
    pub keep_unsaved: bool,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions { interval: 256 * 1024, threads: 0, part: 0, verify: false, keep_unsaved: false }
    }
}

/// Why an index could not be built, read or used. The index file's own
/// checks (`format`) say what was expected and what was found; the callers
/// add the file's path.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Writing the index file failed (both beside the trace and in the cache).
    #[error("{}: cannot write the index: {error}", path.display())]
    Write { path: PathBuf, #[source] error: Box<IndexError> },
    /// A checkpoint's saved state could not be restored.
    #[error("index checkpoint {checkpoint}: saved decode state is unusable: {error}")]
    BadState { checkpoint: usize, #[source] error: Box<IndexError> },
    /// The trace bytes a seek decodes are not those the index was built
    /// from (changed in place, size and modification time kept): rebuild.
    #[error("the index no longer matches the trace: {0}")]
    TraceChanged(#[source] Box<IndexError>),
    /// The decode ended before the elements the index promised (its totals
    /// are wrong): rebuild.
    #[error("the index promised {expected} elements here but the decode gave {got}: the index is wrong")]
    Short { expected: u64, got: u64 },
    /// Creating, mapping or writing the file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Neither place for the index could be written.
    #[error("no place to write it")]
    NoPlace,
    /// The saved states do not fit in memory.
    #[error("index states too large")]
    StatesTooLarge,
    /// Copying the saved states into an in-memory index failed.
    #[error("index states: {0}")]
    StatesCopy(#[source] std::io::Error),
    #[error("{len} bytes is too short for an index header")]
    TooShort { len: usize },
    #[error("not a tracesight index (bad magic)")]
    BadMagic,
    #[error("index version {found} (this tracesight writes {})", format::VERSION)]
    Version { found: u64 },
    /// The fingerprint of options and images differs.
    #[error("built with other decode options or program images")]
    OtherOptions,
    /// Size, modification time or end bytes of the trace differ.
    #[error("the trace file changed since the index was built")]
    FileChanged,
    #[error("header counts out of range ({checkpoints} checkpoints, {ids} trace IDs, {stop_len}-byte stop text)")]
    HeaderCounts { checkpoints: u64, ids: u64, stop_len: u64 },
    #[error("{file_len} bytes cannot hold {checkpoints} checkpoints (truncated or corrupt)")]
    CannotHold { file_len: u64, checkpoints: u64 },
    #[error("{file_len} bytes, expected {expected} (truncated or extended)")]
    Length { file_len: u64, expected: u64 },
    #[error("header or records do not match their checksum (corrupt)")]
    Checksum,
    #[error("checkpoint 0 does not start the counts at zero")]
    FirstCheckpoint,
    #[error("checkpoint {checkpoint} is inconsistent")]
    Inconsistent { checkpoint: usize },
    #[error("segment hashes do not match the trace hash (corrupt)")]
    TraceHash,
    #[error("totals ({elements} elements, {by_id} by trace ID) disagree with the checkpoints (corrupt)")]
    Totals { elements: u64, by_id: u64 },
    #[error("stop text is not UTF-8 (corrupt)")]
    StopText,
    /// The bytes `start..end` of the trace hash differently than when the
    /// index was built.
    #[error("trace bytes {start}..{end} (segment of checkpoint {checkpoint}) changed since the index was built")]
    SegmentChanged { start: usize, end: u64, checkpoint: usize },
    #[error("state does not match its checksum")]
    StateChecksum,
    /// A saved state did not restore.
    #[error("{0}")]
    Session(#[from] crate::session::SessionError),
}

impl IndexError {
    /// True when the index no longer describes the trace (changed bytes,
    /// wrong totals) and a rebuild fixes it. A state that fails its own
    /// checksum stays an error naming the checkpoint (`index --rebuild`).
    pub fn needs_rebuild(&self) -> bool {
        matches!(self, IndexError::TraceChanged(_) | IndexError::Short { .. })
    }
}

/// What the trace file is, for validating an index against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceIdentity {
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch (0 if unknown).
    pub mtime_ns: u64,
    /// FNV-1a of the first and last 64 KiB.
    pub ends_hash: u64,
}

impl TraceIdentity {
    pub fn of(path: &Path, data: &[u8]) -> TraceIdentity {
        let mtime_ns = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        const END: usize = 64 * 1024;
        let mut h = format::Fnv::new();
        h.write(&data[..data.len().min(END)]);
        h.write(&data[data.len().saturating_sub(END)..]);
        TraceIdentity { size: data.len() as u64, mtime_ns, ends_hash: h.finish() }
    }
}

/// A fingerprint of everything besides the trace bytes that changes the
/// decode: run options, the sources' configuration and the program image.
pub fn fingerprint(plan: &BufferPlan, opts: &RunOptions) -> u64 {
    fingerprint_fragments(plan, &[], opts)
}

/// [`fingerprint`] of a capture cut into `fragments` (none: one buffer read
/// whole, as a snapshot is).
pub fn fingerprint_fragments(plan: &BufferPlan, fragments: &[Fragment], opts: &RunOptions) -> u64 {
    let mut h = format::Fnv::new();
    h.write(&format::VERSION.to_le_bytes());
    h.write(format!("{:?}|{:?}|{:?}", opts.ids, opts.dstream, opts.decoder).as_bytes());
    if opts.quiet_ends {
        h.write(b"quiet-ends");
    }
    for s in &plan.sources {
        h.write(format!("{}|{:?}|{:?}", s.name, s.trace_id, s.kind).as_bytes());
    }
    for r in plan.image.regions() {
        // The same capture opened by another spelling of its path (relative,
        // through a symbolic link, `dir/../dir`) has the same index.
        let path = std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone());
        h.write(format!("{:x}-{:x}|{:?}|{}", r.start, r.last, r.space, path.display()).as_bytes());
        if let Ok(m) = std::fs::metadata(&r.path) {
            h.write(&m.len().to_le_bytes());
            if let Ok(t) = m.modified().map(|t| t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default()) {
                h.write(&t.as_nanos().to_le_bytes());
            }
        }
    }
    for f in fragments {
        h.write(format!("{}-{}|{:?}", f.start, f.end, f.raw_source).as_bytes());
    }
    h.finish()
}

/// Where the index of `trace` with `fingerprint` lives: beside the trace, and
/// the user cache directory as the fallback.
pub fn index_paths(trace: &Path, fingerprint: u64) -> Vec<PathBuf> {
    let name = trace.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "trace".into());
    let mut v = vec![trace.with_file_name(format!("{name}.{fingerprint:016x}.tsidx"))];
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(c) = cache {
        let full = trace.canonicalize().unwrap_or_else(|_| trace.to_path_buf());
        let mut h = format::Fnv::new();
        h.write(full.to_string_lossy().as_bytes());
        v.push(c.join("tracesight").join(format!("{name}.{:016x}.{fingerprint:016x}.tsidx", h.finish())));
    }
    v
}

/// Totals gathered while decoding a segment.
#[derive(Clone, Copy, Debug, Default)]
struct SegmentStats {
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    first_cc: Option<u64>,
    last_cc: Option<u64>,
    instructions: u64,
    exceptions: u64,
    gaps: u64,
    /// Speculative elements not committed (canceled, corrected, discarded,
    /// lost, unresolved).
    spec_canceled: u64,
}

/// Running maxima before a checkpoint, for monotone searches.
#[derive(Clone, Copy, Debug, Default)]
struct Maxima {
    ts: Option<u64>,
    cc: Option<u64>,
    index: Option<u64>,
}

/// The run options an index is built with: elements always, and the
/// speculation view for the segment summaries (its records are not numbered
/// elements, so element numbers do not change).
pub fn index_run_options(opts: &RunOptions) -> RunOptions {
    let mut o = opts.clone();
    o.elements = true;
    o.after_reset = false;
    o.decoder.speculation = true;
    o
}

/// How a run over `data` ends: the length trc_pkt_lister accepts, and
/// whether end-of-trace processing happens (as [`crate::session::run`]).
fn accepted_len(runner: &Runner<'_>, data: &[u8]) -> usize {
    match runner.frame_mode() {
        Some(m) => m.lister_accepted_len(data.len() as u64) as usize,
        None => data.len(),
    }
}

/// Build the index of `data` (the buffer's bytes) in memory, on
/// [`IndexOptions::threads`] threads, reporting into `progress` (readable
/// from other threads) and giving back the pages of the trace behind each
/// decoder with `release`.
pub fn build(
    plan: &BufferPlan,
    data: &[u8],
    opts: &RunOptions,
    iopts: &IndexOptions,
    progress: &BuildProgress,
    release: Option<Release<'_>>,
) -> format::IndexData {
    build::build_fragments(plan, data, &[Fragment::whole(data.len())], &index_run_options(opts), iopts, progress, release, false)
}

/// [`build`] for a capture cut into fragments, each decoded from fresh
/// decoders (see [`Fragment`]); element numbers run on across them.
pub fn build_fragments(
    plan: &BufferPlan,
    data: &[u8],
    fragments: &[Fragment],
    opts: &RunOptions,
    iopts: &IndexOptions,
    progress: &BuildProgress,
    release: Option<Release<'_>>,
) -> format::IndexData {
    build::build_fragments(plan, data, fragments, &index_run_options(opts), iopts, progress, release, false)
}

/// Decode `fragments` of `data` with `opts` (elements always) on
/// [`IndexOptions::threads`] threads, the way an index is built, and count
/// what the decoders report per source ([`IndexData::tally`](format::IndexData::tally)):
/// the same counts as one decode from the start, in a fraction of the time.
/// The checkpoints are those of an index built with these options (the
/// segments are not hashed: the result is not meant to be written).
pub fn tally_fragments(
    plan: &BufferPlan,
    data: &[u8],
    fragments: &[Fragment],
    opts: &RunOptions,
    iopts: &IndexOptions,
) -> format::IndexData {
    let opts = RunOptions { elements: true, count_only: true, ..opts.clone() };
    build::build_fragments(plan, data, fragments, &opts, iopts, &BuildProgress::new(), None, true)
}

/// An index, opened from its file or freshly built, for one buffer.
pub struct Index {
    pub file: IndexFile,
    /// Where it was read from or written to.
    pub path: PathBuf,
    /// True when it was built by this call (not reused).
    pub built: bool,
    /// Why an existing file was not used, when it was not.
    pub rejected: Vec<String>,
    /// Kept in memory only ([`IndexOptions::keep_unsaved`]): why no file
    /// could be written (`path` is the last place tried).
    pub unsaved: Option<String>,
}

/// Open the index of a buffer, building (and saving) it when there is none,
/// it is stale or broken, or `rebuild` is set; a build reports into
/// `progress` and gives back pages with `release` (see [`build`]).
pub fn open_or_build(
    plan: &BufferPlan,
    data: &[u8],
    opts: &RunOptions,
    iopts: &IndexOptions,
    rebuild: bool,
    progress: &BuildProgress,
    release: Option<Release<'_>>,
) -> Result<Index, IndexError> {
    open_or_build_fragments(plan, data, &[Fragment::whole(data.len())], opts, iopts, rebuild, progress, release)
}

/// [`open_or_build`] for a capture cut into fragments.
#[allow(clippy::too_many_arguments)]
pub fn open_or_build_fragments(
    plan: &BufferPlan,
    data: &[u8],
    fragments: &[Fragment],
    opts: &RunOptions,
    iopts: &IndexOptions,
    rebuild: bool,
    progress: &BuildProgress,
    release: Option<Release<'_>>,
) -> Result<Index, IndexError> {
    let opts = index_run_options(opts);
    let whole = fragments == [Fragment::whole(data.len())];
    let fp = fingerprint_fragments(plan, if whole { &[] } else { fragments }, &opts);
    let ident = TraceIdentity::of(&plan.buffer.path, data);
    let paths = index_paths(&plan.buffer.path, fp);
    let mut rejected = Vec::new();
    if !rebuild {
        for p in &paths {
            if !p.exists() {
                continue;
            }
            match IndexFile::open(p, &ident, fp).and_then(|f| {
                if iopts.verify {
                    f.check_trace(data)?;
                }
                Ok(f)
            }) {
                Ok(f) => return Ok(Index { file: f, path: p.clone(), built: false, rejected, unsaved: None }),
                Err(why) => rejected.push(format!("{}: {why}; rebuilt", p.display())),
            }
        }
    }
    let built = build::build_fragments(plan, data, fragments, &opts, iopts, progress, release, false);
    let mut last_err = None;
    for p in &paths {
        match format::write(p, &built, &ident, fp) {
            Ok(()) => match IndexFile::open(p, &ident, fp) {
                Ok(f) => return Ok(Index { file: f, path: p.clone(), built: true, rejected, unsaved: None }),
                Err(e) => last_err = Some((p.clone(), e)),
            },
            Err(e) => last_err = Some((p.clone(), e)),
        }
    }
    let (path, error) = last_err.unwrap_or_else(|| (PathBuf::from("."), IndexError::NoPlace));
    if iopts.keep_unsaved {
        let file = format::IndexFile::in_memory(&built, &ident, fp)
            .map_err(|e| IndexError::Write { path: path.clone(), error: Box::new(e) })?;
        let unsaved = Some(format!("{}: {error}", path.display()));
        return Ok(Index { file, path, built: true, rejected, unsaved });
    }
    Err(IndexError::Write { path, error: Box::new(error) })
}

/// Bytes a seek reads before it gives their pages back.
const RELEASE_STEP: usize = 8 << 20;

/// Checks each range of trace bytes before it is decoded.
type Check<'c> = &'c mut dyn FnMut(usize, usize) -> Result<(), IndexError>;

/// Feed the fragment `frag` of `data` from `pos` to a runner, numbering
/// elements from `number`, until `on` returns false or the fragment ends;
/// returns how far it read, whether `on` wants more and the next number.
/// `check` vets each block before it is fed.
fn drive<F>(
    mut r: Runner<'_>,
    data: &[u8],
    frag: &Fragment,
    mut pos: usize,
    mut number: u64,
    check: Check<'_>,
    on: &mut F,
) -> Result<(usize, bool, u64), IndexError>
where
    F: FnMut(u64, &Event<'_>) -> bool,
{
    let Some(bytes) = frag.bytes(data) else { return Ok((pos, true, number)) };
    let accepted = frag.start as usize + accepted_len(&r, bytes);
    let end = frag.end as usize;
    let more = std::cell::Cell::new(true);
    let block = 64 * 1024;
    let mut handler = |ev: Event<'_>| {
        if more.get() {
            more.set(on(number, &ev));
        }
        if let Event::Element { .. } = ev {
            number += 1;
        }
    };
    let mut stopped = false;
    while more.get() && pos < accepted {
        let end = (pos + block).min(accepted);
        check(pos, end)?;
        if !r.feed(&data[pos..end], &mut handler) {
            stopped = true;
            break;
        }
        pos = end;
    }
    if more.get() && !stopped && accepted == end {
        r.finish(&mut handler);
    }
    Ok((pos, more.get(), number))
}

/// Decode the fragments from `first` on, from `r` (set up at `pos` in
/// fragment `first`) and then fresh decoders for each next fragment;
/// returns the byte ranges read, or the first failed check.
#[allow(clippy::too_many_arguments)]
fn drive_on<'p, F>(
    plan: &'p BufferPlan,
    opts: &RunOptions,
    data: &[u8],
    fragments: &[Fragment],
    first: usize,
    r: Runner<'p>,
    pos: usize,
    number: u64,
    check: Check<'_>,
    on: &mut F,
) -> Result<Vec<(usize, usize)>, IndexError>
where
    F: FnMut(u64, &Event<'_>) -> bool,
{
    let mut read = Vec::new();
    let Some(frag) = fragments.get(first) else { return Ok(read) };
    let (end, mut more, mut number) = drive(r, data, frag, pos, number, check, on)?;
    read.push((pos, end));
    for frag in &fragments[first + 1..] {
        if !more {
            break;
        }
        let r = Runner::for_fragment(plan, opts, frag);
        let start = frag.start as usize;
        let (end, m, n) = drive(r, data, frag, start, number, check, on)?;
        read.push((start, end));
        (more, number) = (m, n);
    }
    Ok(read)
}

/// Decode from the start without an index, numbering elements as a seek
/// does: what a viewer can show while the index is still being built.
pub fn run_events_from_start<F>(plan: &BufferPlan, data: &[u8], opts: &RunOptions, on: F)
where
    F: FnMut(u64, &Event<'_>) -> bool,
{
    run_fragment_events_from_start(plan, data, &[Fragment::whole(data.len())], opts, on)
}

/// [`run_events_from_start`] over a capture cut into fragments.
pub fn run_fragment_events_from_start<F>(plan: &BufferPlan, data: &[u8], fragments: &[Fragment], opts: &RunOptions, mut on: F)
where
    F: FnMut(u64, &Event<'_>) -> bool,
{
    let opts = index_run_options(opts);
    let Some(first) = fragments.first() else { return };
    let r = Runner::for_fragment(plan, &opts, first);
    let _ = drive_on(plan, &opts, data, fragments, 0, r, first.start as usize, 0, &mut |_, _| Ok(()), &mut on);
}

/// Where a seek goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeekTarget {
    /// Element number (all trace IDs together, from 0).
    Element(u64),
    /// First element whose instruction count reaches this instruction number
    /// (instructions numbered from 0 in decode order).
    Instruction(u64),
    /// First element at or after this timestamp.
    Timestamp(u64),
    /// First element at or after this cycle count.
    Cycles(u64),
    /// First element produced at or after this byte offset.
    Offset(u64),
    /// First instruction range that executes this address.
    Address(u64),
    /// First instruction range starting at one of these addresses (a
    /// function's entry points).
    Entry(Vec<u64>),
}

/// An element delivered by a seek, with the number a full decode gives it.
#[derive(Clone, Copy, Debug)]
pub struct Numbered<'a> {
    pub number: u64,
    pub source: &'a Source,
    pub element: &'a Element,
}

/// Decoding from checkpoints of an index.
pub struct Seeker<'p> {
    plan: &'p BufferPlan,
    data: &'p [u8],
    /// The fragments of `data` the capture decodes, in order.
    fragments: std::borrow::Cow<'p, [Fragment]>,
    opts: RunOptions,
    index: &'p IndexFile,
    /// The mapped trace, whose pages are given back after each seek so that
    /// browsing a capture does not make all of it resident.
    file: Option<&'p TraceFile>,
}

/// A seeker taken apart to go to another thread: the program image of a
/// plan keeps a lookup cache that is not shared between threads, so the
/// plan travels as a copy ([`build::PlanCopy`]) and is put back together on
/// the thread that decodes ([`SeekerParts::with`]). Seeks through it give
/// what the original seeker gives.
pub struct SeekerParts<'p> {
    plan: build::PlanCopy,
    data: &'p [u8],
    fragments: std::borrow::Cow<'p, [Fragment]>,
    opts: RunOptions,
    index: &'p IndexFile,
    file: Option<&'p TraceFile>,
}

impl<'p> SeekerParts<'p> {
    /// Run `f` with a seeker made of these parts, on the current thread.
    pub fn with<R>(self, f: impl FnOnce(&Seeker<'_>) -> R) -> R {
        let plan = self.plan.plan();
        let s = Seeker { plan: &plan, data: self.data, fragments: self.fragments, opts: self.opts, index: self.index, file: self.file };
        f(&s)
    }
}

impl<'p> Seeker<'p> {
    pub fn new(plan: &'p BufferPlan, data: &'p [u8], opts: &RunOptions, index: &'p IndexFile) -> Seeker<'p> {
        let fragments = vec![Fragment::whole(data.len())].into();
        Seeker { plan, data, fragments, opts: index_run_options(opts), index, file: None }
    }

    /// A seeker over a capture cut into `fragments` of `data`.
    pub fn with_fragments(
        plan: &'p BufferPlan,
        data: &'p [u8],
        fragments: &'p [Fragment],
        opts: &RunOptions,
        index: &'p IndexFile,
    ) -> Seeker<'p> {
        Seeker { plan, data, fragments: fragments.into(), opts: index_run_options(opts), index, file: None }
    }

    /// Give back the pages read after each seek (see [`Seeker::over_file`]).
    pub fn releasing(mut self, file: &'p TraceFile) -> Seeker<'p> {
        self.file = Some(file);
        self
    }

    /// A seeker over a mapped trace file, releasing the pages it read after
    /// each seek (they stay in the page cache, so a revisit is cheap).
    pub fn over_file(plan: &'p BufferPlan, file: &'p TraceFile, opts: &RunOptions, index: &'p IndexFile) -> Seeker<'p> {
        Seeker::new(plan, file.bytes(), opts, index).releasing(file)
    }

    /// The checkpoint to start from for `target` (the last one that cannot be
    /// past it).
    pub fn checkpoint_for(&self, target: &SeekTarget) -> usize {
        let n = self.index.len();
        let before = |pred: &dyn Fn(&Checkpoint) -> bool| -> usize {
            // Checkpoints satisfying `pred` form a prefix.
            let mut lo = 0;
            let mut hi = n;
            while lo < hi {
                let mid = (lo + hi) / 2;
                if pred(&self.index.checkpoint(mid)) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo.saturating_sub(1)
        };
        match target {
            SeekTarget::Element(e) => before(&|c| c.elements_before <= *e),
            SeekTarget::Instruction(i) => before(&|c| c.instructions_before <= *i),
            SeekTarget::Timestamp(t) => before(&|c| c.max_ts_before == format::NONE || c.max_ts_before < *t),
            SeekTarget::Cycles(v) => before(&|c| c.max_cc_before == format::NONE || c.max_cc_before < *v),
            SeekTarget::Offset(o) => before(&|c| c.max_index_before == format::NONE || c.max_index_before < *o),
            SeekTarget::Address(_) | SeekTarget::Entry(_) => 0,
        }
    }

    /// Decode from checkpoint `k`, calling `on` with every element (and its
    /// number) until it returns false or the trace ends.
    pub fn run_from<F>(&self, k: usize, mut on: F) -> Result<(), IndexError>
    where
        F: FnMut(Numbered<'_>) -> bool,
    {
        self.run_events_from(k, |number, ev| match ev {
            Event::Element { source, element } => on(Numbered { number, source, element }),
            _ => true,
        })
    }

    /// Decode from checkpoint `k`, calling `on` with every event of the run
    /// (speculation records, messages, ... as well as elements) until it
    /// returns false or the trace ends. The number given is the element's for
    /// an element, else the number the next element will have.
    pub fn run_events_from<F>(&self, k: usize, mut on: F) -> Result<(), IndexError>
    where
        F: FnMut(u64, &Event<'_>) -> bool,
    {
        let cp = self.index.checkpoint(k);
        let bad = |e: IndexError| IndexError::BadState { checkpoint: k, error: Box::new(e) };
        let state = self.index.state(k).map_err(bad)?;
        // The fragment the checkpoint lies in (the last starting at or before it).
        let f = self.fragments.partition_point(|f| f.start <= cp.offset).saturating_sub(1);
        let Some(frag) = self.fragments.get(f) else { return Ok(()) };
        let r = if cp.offset == frag.start && state.is_empty() {
            Runner::for_fragment(self.plan, &self.opts, frag)
        } else {
            Runner::resume_fragment(self.plan, &self.opts, frag, state)
                .map_err(|e| bad(e.into()))?
        };
        // Each segment's bytes are checked against the index before the
        // first of them is decoded (only what this seek reads).
        let mut next = k;
        let mut checked_to = cp.offset as usize;
        let index = self.index;
        let data = self.data;
        let file = self.file;
        let mut released_to = cp.offset as usize;
        let mut check = |start: usize, end: usize| -> Result<(), IndexError> {
            while checked_to < end && next < index.len() {
                index.check_segment(next, data).map_err(|e| IndexError::TraceChanged(Box::new(e)))?;
                next += 1;
                checked_to = if next < index.len() { index.checkpoint(next).offset as usize } else { data.len() };
            }
            // A long run (a search that finds nothing reads the whole trace)
            // gives back what it has read as it goes, not only at its end,
            // so its resident memory stays small. Pages touched again are
            // read from the file again: nothing is lost.
            if let Some(file) = file {
                if start >= released_to.saturating_add(RELEASE_STEP) {
                    file.release(released_to, start);
                    released_to = start;
                }
            }
            Ok(())
        };
        let read = drive_on(
            self.plan,
            &self.opts,
            self.data,
            &self.fragments,
            f,
            r,
            cp.offset as usize,
            cp.elements_before,
            &mut check,
            &mut on,
        )?;
        if let Some(file) = self.file {
            for (a, b) in read {
                file.release(a, b);
            }
        }
        Ok(())
    }

    /// This seeker, to be used on another thread.
    pub fn for_thread(&self) -> SeekerParts<'p> {
        SeekerParts {
            plan: build::PlanCopy::of(self.plan),
            data: self.data,
            fragments: self.fragments.clone(),
            opts: self.opts.clone(),
            index: self.index,
            file: self.file,
        }
    }

    /// The index the seeker reads.
    pub fn index(&self) -> &IndexFile {
        self.index
    }

    /// The number of the first element that meets `target`, if any.
    pub fn find(&self, target: &SeekTarget) -> Result<Option<u64>, IndexError> {
        self.find_polling(target, |_| true)
    }

    /// As [`Seeker::find`], calling `poll` with the element number reached
    /// every few thousand elements; when it returns false the search stops
    /// and finds nothing (a viewer's search that was cancelled).
    pub fn find_polling(&self, target: &SeekTarget, mut poll: impl FnMut(u64) -> bool) -> Result<Option<u64>, IndexError> {
        if let SeekTarget::Element(e) = target {
            return Ok((*e < self.index.totals().elements).then_some(*e));
        }
        let k = self.checkpoint_for(target);
        let mut found = None;
        let mut instr_before = self.index.checkpoint(k).instructions_before;
        self.run_from(k, |n| {
            if n.number % 4096 == 0 && !poll(n.number) {
                return false;
            }
            let e = n.element;
            let hit = match target {
                SeekTarget::Element(_) => unreachable!(),
                SeekTarget::Instruction(i) => {
                    let count = match e.kind {
                        ElementKind::InstrRange { count, .. } | ElementKind::RangeNoPath { count, .. } => count as u64,
                        _ => 0,
                    };
                    instr_before += count;
                    instr_before > *i
                }
                SeekTarget::Timestamp(t) => e.time.timestamp.is_some_and(|v| v >= *t),
                SeekTarget::Cycles(c) => e.time.total_cycles >= *c,
                SeekTarget::Offset(o) => e.index >= *o,
                SeekTarget::Address(a) => {
                    matches!(e.kind, ElementKind::InstrRange { start, end, .. } if start <= *a && *a < end)
                }
                SeekTarget::Entry(starts) => {
                    matches!(e.kind, ElementKind::InstrRange { start, .. } if starts.contains(&start))
                }
            };
            if hit {
                found = Some(n.number);
            }
            !hit
        })?;
        Ok(found)
    }

    /// Up to `count` elements from element number `start`, as a full decode
    /// gives them (what a viewer fetches for the rows on screen).
    pub fn window(&self, start: u64, count: usize) -> Result<Vec<(usize, Element)>, IndexError> {
        let mut out = Vec::with_capacity(count.min(1 << 16));
        if count == 0 {
            return Ok(out);
        }
        let k = self.checkpoint_for(&SeekTarget::Element(start));
        let sources = &self.plan.sources;
        self.run_from(k, |n| {
            if n.number >= start {
                let si = sources.iter().position(|s| std::ptr::eq(s, n.source)).unwrap_or(0);
                out.push((si, *n.element));
            }
            out.len() < count
        })?;
        self.delivered(start, count as u64, out.len() as u64)?;
        Ok(out)
    }

    /// Call `on` with up to `count` elements from element number `start`.
    pub fn each<F: FnMut(Numbered<'_>)>(&self, start: u64, count: u64, mut on: F) -> Result<(), IndexError> {
        if count == 0 {
            return Ok(());
        }
        let k = self.checkpoint_for(&SeekTarget::Element(start));
        let mut left = count;
        self.run_from(k, |n| {
            if n.number >= start {
                on(n);
                left -= 1;
            }
            left > 0
        })?;
        self.delivered(start, count, count - left)
    }

    /// A seek that gave fewer elements than the index's totals promise
    /// means the totals are wrong (issue 15, finding 3): say so rather than
    /// print nothing and succeed.
    fn delivered(&self, start: u64, count: u64, got: u64) -> Result<(), IndexError> {
        let expected = self.index.totals().elements.saturating_sub(start).min(count);
        if got < expected {
            return Err(IndexError::Short { expected, got });
        }
        Ok(())
    }
}
