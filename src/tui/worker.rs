//! The viewer's background threads. All decoding happens here, never on the
//! draw path: the pager builds or opens the index and decodes pages of rows
//! and source views on request; the finder runs searches (which may decode
//! far) and counts function entries, so a long search never delays a page.
//!
//! A capture's decoder state is not shareable between threads, so each thread
//! opens the capture itself; the index, once built, is shared by both (it
//! may live in memory only, when no directory takes its file).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use crate::capture::{Capture, CaptureOptions};
use crate::element::{ElementKind, PeContext};
use crate::index::format::{IndexFile, NONE};
use crate::index::{Index, IndexOptions, SeekTarget, Seeker};
use crate::protocol::etm4::decoder::SpecState;
use crate::session::{Event, SourceKind};

pub use super::model::LANE_SUB;
pub use super::search::{FindWhat, FunctionInfo};
use super::model::{self, Entry, View, PAGE};

/// Counters the draw functions read without asking the worker.
#[derive(Default, Debug)]
pub struct Progress {
    /// The index build (bytes decoded of the trace's size).
    pub index: crate::index::BuildProgress,
    /// Size of the trace, known before the build starts.
    pub index_total: AtomicU64,
    /// Elements written by the running export.
    pub export_done: AtomicU64,
    pub export_total: AtomicU64,
    pub export_cancel: AtomicBool,
    /// The newest search; older ones give up when they see it change.
    pub find_generation: AtomicU64,
    /// Element number a running search has reached.
    pub find_at: AtomicU64,
    /// The app sent the finder a request it has not taken yet: the idle-time
    /// entry count gives way (channels cannot be peeked).
    pub request_waiting: AtomicBool,
    /// The call stacks and statistics of the background pass.
    pub calls: Arc<super::calls::CallIndex>,
    /// Index segments the view's row map has read (see [`super::rowmap`]).
    pub map_done: AtomicU64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Forward,
    Backward,
}

pub enum Request {
    /// Pages `first..first + count` of a view.
    Pages { view: View, first: u64, count: u64 },
    Source { addr: u64, window: Vec<super::sourceview::ExecutedRange>, disasm: Option<super::sourceview::ExecutedRange> },
    /// The instructions of a range, disassembled.
    Expand { number: u64, range: super::sourceview::ExecutedRange },
    /// `view`: the rows of a filtered view, when it has them; a hit it
    /// does not show is passed over.
    Find { generation: u64, from: u64, dir: Dir, what: FindWhat, label: String, view: Option<Arc<super::rowmap::RowMap>> },
    Export { request: crate::export::ExportRequest },
    Calls(super::calls::CallsRequest),
    /// Build the row map of a filtered or merged view (replaces the one
    /// being built).
    Map { generation: u64, filter: super::rowmap::Filter },
    Quit,
}

/// What the capture is, for the status bar and the timeline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CaptureInfo {
    pub path: PathBuf,
    pub buffer: String,
    pub bytes: u64,
    pub sources: Vec<(u8, String)>,
    /// The CPU of each trace ID, when the capture says (a perf.data): the
    /// list's CPU column and lane names.
    pub cpus: Vec<(u8, u32)>,
    /// The CPUs a view can filter by (`f cpu:N`): a perf.data's, or the
    /// cores a snapshot's `[core_trace_sources]` names.
    pub cores: Vec<(u8, u32)>,
    pub symbols: Vec<String>,
    pub warnings: Vec<String>,
}

/// One index segment, for the timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Segment {
    pub elements_before: u64,
    pub elements: u64,
    pub ts: Option<(u64, u64)>,
    pub cc: Option<(u64, u64)>,
    pub instructions: u64,
    pub exceptions: u64,
    pub gaps: u64,
    pub spec: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdSpan {
    pub trace_id: u8,
    pub elements: u64,
    pub instructions: u64,
    pub ts: Option<(u64, u64)>,
    pub cc: Option<(u64, u64)>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Indexed {
    pub elements: u64,
    pub instructions: u64,
    pub segments: Vec<Segment>,
    pub ids: Vec<IdSpan>,
    pub stop: Option<String>,
    /// The index could not be written and lives in memory only: why.
    pub unsaved: Option<String>,
}

pub enum Response {
    Opened(CaptureInfo),
    Indexed(Indexed),
    Page { view: View, page: u64, entries: Vec<Entry> },
    Source(super::sourceview::SourceView, Vec<super::sourceview::DisasmLine>),
    Expanded { number: u64, lines: Vec<super::sourceview::DisasmLine> },
    Found { generation: u64, result: Option<u64>, label: String },
    Functions(Vec<FunctionInfo>),
    /// Per trace ID activity per index segment (after the background pass).
    Lanes(Vec<Lane>),
    Exported(Result<crate::export::ExportSummary, crate::export::ExportError>),
    Calls(super::calls::CallsResponse),
    /// The row map of the view asked for with this generation.
    Map { generation: u64, map: Arc<super::rowmap::RowMap> },
    Error(String),
}

fn span(a: u64, b: u64) -> Option<(u64, u64)> {
    (a != NONE).then_some((a, b))
}

pub fn indexed_summary(f: &IndexFile) -> Indexed {
    let t = f.totals();
    let n = f.len();
    let segments = (0..n)
        .map(|k| {
            let c = f.checkpoint(k);
            let next = if k + 1 < n { f.checkpoint(k + 1).elements_before } else { t.elements };
            Segment {
                elements_before: c.elements_before,
                elements: next.saturating_sub(c.elements_before),
                ts: span(c.first_ts, c.last_ts),
                cc: span(c.first_cc, c.last_cc),
                instructions: c.instructions,
                exceptions: c.exceptions,
                gaps: c.gaps,
                spec: c.spec_not_committed,
            }
        })
        .collect();
    let ids = f
        .id_summaries()
        .iter()
        .map(|s| IdSpan {
            trace_id: s.trace_id as u8,
            elements: s.elements,
            instructions: s.instructions,
            ts: span(s.first_ts, s.last_ts),
            cc: span(s.first_cc, s.last_cc),
        })
        .collect();
    Indexed { elements: t.elements, instructions: t.instructions, segments, ids, stop: f.stop().map(str::to_string), unsaved: None }
}

/// Decode the rows of one page (elements `page*PAGE ..`), with function
/// names and, in the speculation view, the records decided before each.
/// Pages `first..first + count`, decoded in one pass from the checkpoint
/// before the first (a screen often spans two pages).
pub fn build_pages(cap: &Capture, seeker: &Seeker<'_>, view: View, first: u64, count: u64) -> Result<Vec<Vec<Entry>>, super::TuiError> {
    let k = seeker.checkpoint_for(&SeekTarget::Element(first * PAGE));
    let mut result = Ok(());
    let pages = page_rows(cap, view, first, count, &mut |on| result = seeker.run_events_from(k, on));
    Ok(result.map(|_| pages)?)
}

pub fn build_page(cap: &Capture, seeker: &Seeker<'_>, view: View, page: u64) -> Result<Vec<Entry>, super::TuiError> {
    build_pages(cap, seeker, view, page, 1).map(|mut v| v.pop().unwrap_or_default())
}

/// Pages decoded from the start of the trace, before there is an index.
pub fn build_pages_unindexed(cap: &Capture, view: View, first: u64, count: u64) -> Vec<Vec<Entry>> {
    page_rows(cap, view, first, count, &mut |on| crate::index::run_fragment_events_from_start(&cap.plan, cap.file.bytes(), &cap.fragments, &cap.opts, on))
}

type EventSink<'s> = &'s mut dyn FnMut(u64, &Event<'_>) -> bool;

/// Rows of page `page` from a run that `run` starts (from a checkpoint or
/// from the start) and feeds to the sink it is given.
fn page_rows(cap: &Capture, view: View, first_page: u64, count: u64, run: &mut dyn FnMut(EventSink<'_>)) -> Vec<Vec<Entry>> {
    let first = first_page * PAGE;
    let last = first + count * PAGE;
    let mut entries: Vec<Entry> = Vec::with_capacity((count * PAGE) as usize);
    let mut pre = Vec::new();
    let mut notes = Vec::new();
    // Atoms committed per (trace ID, packet offset), oldest first, true when
    // a Mispredict corrected it: the ranges of that packet take them in turn
    // (the decoder reports an atom's fate just before the range it yields).
    let mut atoms: HashMap<(u8, u64), std::collections::VecDeque<bool>> = HashMap::new();
    let mut contexts: HashMap<u8, PeContext> = HashMap::new();
    let speculative: HashMap<u8, bool> = cap
        .plan
        .sources
        .iter()
        .filter_map(|s| Some((s.trace_id?, matches!(s.kind, SourceKind::Etm4(_)))))
        .collect();
    let mut cursor = cap.symbols.as_ref().map(|s| s.cursor());
    let mut counted = super::cycles::Counted::default();
    run(&mut |number, ev| {
            if number >= last {
                // On until the ranges of the pages have their cycle counts,
                // which come after them.
                if let Event::Element { element, .. } = ev {
                    counted.take(&mut entries, false, element);
                }
                return counted.waiting() && number < last + super::cycles::LOOK_AHEAD;
            }
            match ev {
                Event::Element { element, .. } => {
                    if let ElementKind::PeContext(c) = element.kind {
                        contexts.insert(element.trace_id, c);
                    }
                    let corrected = match element.kind {
                        ElementKind::InstrRange { .. } => atoms
                            .get_mut(&(element.trace_id, element.index))
                            .and_then(|q| q.pop_front())
                            .unwrap_or(false),
                        _ => false,
                    };
                    if number >= first {
                        let spec = speculative.get(&element.trace_id).copied().unwrap_or(false);
                        let mut row = model::elem_row(number, element, spec, contexts.get(&element.trace_id));
                        if corrected {
                            row.state = model::RowState::Corrected;
                        }
                        // A perf.data gap says which recorded binary was not
                        // found, as `decode` does; first, since a narrow
                        // column cuts the end.
                        if let Some(m) = cap.perf.as_ref().and_then(|p| p.missing_image(element)) {
                            row.text = format!("[{m}] {}", row.text);
                            row.brief = format!("[{m}] {}", row.brief);
                        }
                        if let (Some(c), Some(a)) = (cursor.as_mut(), row.addr) {
                            let loc = c.locate(a);
                            row.function = match loc.function {
                                Some(f) if loc.offset == 0 => Some(f.name().to_string()),
                                Some(f) => Some(format!("{}+{:#x}", f.name(), loc.offset)),
                                None => cap.symbols.as_ref().and_then(|s| s.stripped_label(&loc, a)),
                            };
                        }
                        entries.push(Entry { notes: std::mem::take(&mut notes), pre: std::mem::take(&mut pre), row });
                    }
                    counted.take(&mut entries, number >= first, element);
                }
                Event::Spec { record, .. } => {
                    if let crate::protocol::etm4::decoder::SpecKind::Atom { .. } = record.kind {
                        if matches!(record.state, SpecState::Committed | SpecState::CorrectedByMispredict) {
                            let q = atoms.entry((record.trace_id, record.created)).or_default();
                            q.push_back(record.state == SpecState::CorrectedByMispredict);
                        }
                    }
                    if number >= first && view == View::Speculation && record.state != SpecState::Committed {
                        pre.push(model::spec_row(record));
                    }
                }
                // Decoder errors are rows of their own, before the element
                // that follows them.
                Event::Message { text, .. } if number >= first => notes.push(text.trim_end().to_string()),
                _ => {}
            }
            true
        });
    let mut pages: Vec<Vec<Entry>> = (0..count).map(|_| Vec::new()).collect();
    for e in entries {
        let k = ((e.row.number - first) / PAGE) as usize;
        pages[k].push(e);
    }
    pages
}

/// The pager thread: opens the capture, builds or opens the index, then
/// answers page and source requests.
pub fn pager(path: PathBuf, copts: CaptureOptions, progress: Arc<Progress>, rx: Receiver<Request>, tx: Sender<Response>, ready: Sender<Arc<Index>>) {
    let cap = match Capture::open(&path, &copts) {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(Response::Error(e.to_string()));
            return;
        }
    };
    let info = CaptureInfo {
        path: cap.path.clone(),
        buffer: match (&cap.perf, copts.cpu) {
            (Some(_), Some(c)) => format!("CPU {c}"),
            (Some(p), None) => p.cpus_label(),
            (None, _) => cap.plan.buffer.name.clone(),
        },
        bytes: cap.file.bytes().len() as u64,
        sources: cap
            .plan
            .sources
            .iter()
            .filter_map(|s| Some((s.trace_id?, s.protocol_name())))
            .collect(),
        cpus: cap.plan.sources.iter().filter_map(|s| Some((s.trace_id?, s.cpu?))).collect(),
        cores: cap
            .plan
            .sources
            .iter()
            .filter_map(|s| Some((s.trace_id?, s.cpu.or_else(|| cap.snapshot.as_ref()?.cpu_for_source(&s.name))?)))
            .collect(),
        symbols: cap.symbols.as_ref().map(|s| s.images().iter().map(|i| i.path().display().to_string()).collect()).unwrap_or_default(),
        warnings: cap.warnings.clone(),
    };
    progress.index_total.store(info.bytes, Ordering::Relaxed);
    let _ = tx.send(Response::Opened(info));
    // The index is built on a thread of its own so that the start of the
    // trace can be browsed meanwhile (decoded from the start, page by page).
    let (built_tx, built_rx) = std::sync::mpsc::channel::<Result<Index, crate::capture::CaptureError>>();
    {
        let (p, c, pr) = (path.clone(), copts.clone(), progress.clone());
        std::thread::Builder::new()
            .name("tracesight-indexer".into())
            .spawn(move || {
                // An index that cannot be saved is kept in memory: the
                // viewer goes on with it and says so.
                let iopts = IndexOptions { keep_unsaved: true, ..IndexOptions::default() };
                let r = Capture::open(&p, &c).and_then(|cap| cap.open_index(&iopts, false, &pr.index));
                let _ = built_tx.send(r);
            })
            .expect("spawning a thread");
    }
    // Shared with the finder: an index in memory only cannot be reopened.
    let mut index: Option<Arc<Index>> = None;
    let mut ready = Some(ready);
    let mut resolver = super::sourceview::default_resolver(&cap.path, &copts.source_roots, &copts.substitutions);
    loop {
        if index.is_none() {
            match built_rx.try_recv() {
                Ok(Ok(i)) => {
                    let mut summary = indexed_summary(&i.file);
                    summary.unsaved = i.unsaved.clone();
                    let _ = tx.send(Response::Indexed(summary));
                    let i = Arc::new(i);
                    if let Some(r) = ready.take() {
                        let _ = r.send(i.clone());
                    }
                    index = Some(i);
                }
                Ok(Err(e)) => {
                    let _ = tx.send(Response::Error(format!("index: {e}")));
                    return;
                }
                Err(_) => {}
            }
        }
        let req = match rx.recv_timeout(std::time::Duration::from_millis(if index.is_none() { 20 } else { 1000 })) {
            Ok(r) => r,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(_) => break,
        };
        let resp = match req {
            Request::Quit => break,
            Request::Pages { view, first, count } => {
                let pages = match &index {
                    Some(i) => build_pages(&cap, &cap.seeker(&i.file), view, first, count),
                    None => Ok(build_pages_unindexed(&cap, view, first, count)),
                };
                match pages {
                    Ok(pages) => {
                        let mut gone = false;
                        for (k, entries) in pages.into_iter().enumerate() {
                            gone |= tx.send(Response::Page { view, page: first + k as u64, entries }).is_err();
                        }
                        if gone {
                            break;
                        }
                        continue;
                    }
                    Err(e) => Response::Error(e.to_string()),
                }
            }
            Request::Source { addr, window, disasm } => {
                let space = crate::element::MemSpace::ANY;
                let view = super::sourceview::source_view(cap.symbols.as_ref(), &mut resolver, &cap.plan.image, space, addr, &window, 40);
                let mut lines = disasm
                    .map(|r| super::sourceview::disassemble(&cap.plan.image, space, cap.symbols.as_ref(), &r, Some(addr), 64))
                    .unwrap_or_default();
                super::mixed::annotate(cap.symbols.as_ref(), &mut resolver, &mut lines);
                Response::Source(view, lines)
            }
            Request::Expand { number, range } => {
                let space = crate::element::MemSpace::ANY;
                let lines = super::sourceview::disassemble(&cap.plan.image, space, cap.symbols.as_ref(), &range, None, 4096);
                Response::Expanded { number, lines }
            }
            Request::Calls(r) => match index.as_ref().and_then(|i| super::calls::serve(&cap.seeker(&i.file), &progress.calls, r).map(Response::Calls)) {
                Some(resp) => resp,
                None => continue,
            },
            Request::Find { .. } | Request::Export { .. } | Request::Map { .. } => continue,
        };
        if tx.send(resp).is_err() {
            break;
        }
    }
}

/// The finder thread: searches and exports, after the pager has the index.
pub fn finder(path: PathBuf, copts: CaptureOptions, progress: Arc<Progress>, rx: Receiver<Request>, tx: Sender<Response>, ready: Receiver<Arc<Index>>) {
    let Ok(index) = ready.recv() else { return };
    let cap = match Capture::open(&path, &copts) {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(Response::Error(e.to_string()));
            return;
        }
    };
    let seeker = cap.seeker(&index.file);
    let mut functions = function_list(&cap);
    if !functions.is_empty() {
        let _ = tx.send(Response::Functions(functions.clone()));
    }
    // One background pass over the trace, a segment at a time between
    // requests: function entry counts and the timeline's per-ID lanes.
    let calls = super::calls::PassCalls::new(&cap, progress.calls.clone(), index.file.len());
    let mut pass = Pass::new(&functions, index.file.len(), calls);
    // A view's row map, when one is asked for: built before the pass goes on.
    let mut map: Option<super::rowmap::MapBuild> = None;
    loop {
        if let Some(m) = map.as_mut() {
            match rx.try_recv() {
                Ok(r) => {
                    if !handle_finder(r, &cap, &seeker, &index, &progress, &tx, &mut map) {
                        break;
                    }
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    if !m.step(&seeker) {
                        let _ = tx.send(Response::Error("filtering: the index no longer fits the trace".into()));
                        m.next = m.segments;
                    }
                    progress.map_done.store(m.next as u64, Ordering::Relaxed);
                    if m.done() {
                        if let Some(m) = map.take() {
                            let generation = m.generation;
                            let _ = tx.send(Response::Map { generation, map: Arc::new(m.finish()) });
                        }
                    }
                }
                Err(_) => break,
            }
            continue;
        }
        let req = if pass.done() {
            match rx.recv() {
                Ok(r) => r,
                Err(_) => break,
            }
        } else {
            match rx.try_recv() {
                Ok(r) => r,
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    if !pass.step(&seeker) {
                        let _ = tx.send(Response::Error("counting function entries: the index no longer fits the trace".into()));
                        pass.next = pass.lanes_len;
                    }
                    if pass.done() {
                        for (f, c) in functions.iter_mut().zip(&pass.counts) {
                            f.count = Some(*c);
                        }
                        if !functions.is_empty() {
                            let _ = tx.send(Response::Functions(functions.clone()));
                        }
                        let _ = tx.send(Response::Calls(pass.calls.ready()));
                        let _ = tx.send(Response::Lanes(pass.lanes()));
                    }
                    continue;
                }
                Err(_) => break,
            }
        };
        if !handle_finder(req, &cap, &seeker, &index, &progress, &tx, &mut map) {
            break;
        }
    }
}

/// One request to the finder. False when it should stop.
fn handle_finder(
    req: Request,
    cap: &Capture,
    seeker: &Seeker<'_>,
    index: &Index,
    progress: &Progress,
    tx: &Sender<Response>,
    map: &mut Option<super::rowmap::MapBuild>,
) -> bool {
    progress.request_waiting.store(false, Ordering::Relaxed);
    match req {
        Request::Quit => return false,
        Request::Map { generation, filter } => {
            progress.map_done.store(0, Ordering::Relaxed);
            // Every element: nothing to build (a build under way stops).
            *map = (!filter.is_all()).then(|| super::rowmap::MapBuild::new(generation, filter, index.file.len()));
        }
        Request::Find { generation, from, dir, what, label, view } => {
            let result = find(seeker, progress, generation, from, dir, &what, view.as_deref());
            if progress.find_generation.load(Ordering::Relaxed) == generation {
                let _ = tx.send(Response::Found { generation, result, label });
            }
        }
        Request::Export { request } => {
            progress.export_cancel.store(false, Ordering::Relaxed);
            progress.export_done.store(0, Ordering::Relaxed);
            progress.export_total.store(request.to.saturating_sub(request.from), Ordering::Relaxed);
            let r = crate::export::export(cap, seeker, &request, &progress.export_done, &progress.export_cancel);
            let _ = tx.send(Response::Exported(r));
        }
        Request::Calls(r) => {
            if let Some(resp) = super::calls::serve(seeker, &progress.calls, r).map(Response::Calls) {
                let _ = tx.send(resp);
            }
        }
        Request::Pages { .. } | Request::Source { .. } | Request::Expand { .. } => {}
    }
    true
}

fn function_list(cap: &Capture) -> Vec<FunctionInfo> {
    let Some(sym) = &cap.symbols else { return Vec::new() };
    let mut list: Vec<FunctionInfo> = sym
        .function_table()
        .functions
        .iter()
        .map(|f| FunctionInfo { name: f.name.clone(), entries: f.ranges.iter().map(|r| r.start).collect(), count: None, inline: Vec::new() })
        .collect();
    super::search::add_inline_instances(&mut list, sym.inline_instances());
    list
}

/// The background pass: per function, how often the trace enters it; per
/// trace ID and index segment, instructions, exceptions and gaps.
struct Pass {
    by_addr: HashMap<u64, usize>,
    /// Inlined instances' starts and their function, sorted.
    inline: Vec<(u64, usize)>,
    counts: Vec<u64>,
    lanes: std::collections::BTreeMap<u8, Vec<LaneBin>>,
    next: usize,
    lanes_len: usize,
    calls: super::calls::PassCalls,
}


/// A run of elements of one trace ID (a [`LANE_SUB`]th of an index segment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneBin {
    /// Elements of every kind (a fold checks that no other stream's run
    /// inside it).
    pub elements: u32,
    pub instructions: u64,
    pub exceptions: u32,
    pub gaps: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    pub trace_id: u8,
    /// `LANE_SUB` bins per entry of [`Indexed::segments`], in order.
    pub bins: Vec<LaneBin>,
}

impl Pass {
    fn new(functions: &[FunctionInfo], segments: usize, calls: super::calls::PassCalls) -> Pass {
        let mut by_addr = HashMap::new();
        let mut inline = Vec::new();
        for (i, f) in functions.iter().enumerate() {
            for a in &f.entries {
                by_addr.insert(*a, i);
            }
            inline.extend(f.inline.iter().map(|a| (*a, i)));
        }
        inline.sort_unstable();
        Pass { by_addr, inline, counts: vec![0; functions.len()], lanes: Default::default(), next: 0, lanes_len: segments, calls }
    }

    fn done(&self) -> bool {
        self.next >= self.lanes_len
    }

    /// Decode the next segment. False when the index cannot be used.
    fn step(&mut self, seeker: &Seeker<'_>) -> bool {
        let k = self.next;
        let index = seeker.index();
        let start = index.checkpoint(k).elements_before;
        let end = if k + 1 < index.len() { index.checkpoint(k + 1).elements_before } else { index.totals().elements };
        let len = (end - start).max(1);
        let n = self.lanes_len * LANE_SUB;
        self.calls.begin(k);
        let r = seeker.run_from(k, |e| {
            if e.number >= end {
                return false;
            }
            let sub = (((e.number - start) as u128 * LANE_SUB as u128 / len as u128) as usize).min(LANE_SUB - 1);
            if e.number >= start {
                self.calls.feed(&e, k * LANE_SUB + sub);
            }
            let bin = &mut self.lanes.entry(e.element.trace_id).or_insert_with(|| vec![LaneBin::default(); n])[k * LANE_SUB + sub];
            bin.elements = bin.elements.saturating_add(1);
            match e.element.kind {
                ElementKind::InstrRange { start, end, count, .. } => {
                    bin.instructions += count as u64;
                    if let Some(&i) = self.by_addr.get(&start) {
                        self.counts[i] += 1;
                    }
                    // Inlined code is entered by running into it.
                    let from = self.inline.partition_point(|x| x.0 < start);
                    for &(_, i) in self.inline[from..].iter().take_while(|x| x.0 < end) {
                        if !self.by_addr.contains_key(&start) || self.by_addr[&start] != i {
                            self.counts[i] += 1;
                        }
                    }
                }
                ElementKind::RangeNoPath { count, .. } => bin.instructions += count as u64,
                ElementKind::Exception { .. } => bin.exceptions += 1,
                ElementKind::NoSync(_) | ElementKind::TraceOn(_) | ElementKind::AddrNotAccessible { .. } => bin.gaps += 1,
                _ => {}
            }
            true
        });
        self.next += 1;
        self.calls.end(self.next >= self.lanes_len);
        r.is_ok()
    }

    fn lanes(&self) -> Vec<Lane> {
        self.lanes.iter().map(|(id, bins)| Lane { trace_id: *id, bins: bins.clone() }).collect()
    }
}

fn matches(what: &FindWhat, e: &crate::element::Element) -> bool {
    use ElementKind as K;
    match what {
        FindWhat::Exception => matches!(e.kind, K::Exception { .. }),
        FindWhat::Gap => matches!(e.kind, K::NoSync(_) | K::TraceOn(_) | K::EndOfTrace(_) | K::AddrNotAccessible { .. } | K::AddrUnknown),
        FindWhat::Entry(starts) => matches!(e.kind, K::InstrRange { start, .. } if starts.contains(&start)),
        FindWhat::Address(a) => matches!(e.kind, K::InstrRange { start, end, .. } if start <= *a && *a < end),
        FindWhat::Visit { entries, inline } => match e.kind {
            K::InstrRange { start, end, .. } => entries.contains(&start) || super::search::runs_into(inline, start, end),
            _ => false,
        },
        FindWhat::Text(t) => super::search::text_has(e, t),
        _ => false,
    }
}

/// Search from element `from` (exclusive) in `dir`, for a hit that `view`
/// shows (every element when it is `None`).
fn find(seeker: &Seeker<'_>, progress: &Progress, generation: u64, from: u64, dir: Dir, what: &FindWhat, view: Option<&super::rowmap::RowMap>) -> Option<u64> {
    let stale = || progress.find_generation.load(Ordering::Relaxed) != generation;
    let shown = |n: u64| view.is_none_or(|m| m.row_of(n).is_some());
    if let FindWhat::Target(t) = what {
        let r = seeker
            .find_polling(t, |number| {
                progress.find_at.store(number, Ordering::Relaxed);
                !stale()
            })
            .ok()
            .flatten()?;
        // A position (element, time, offset) is where the view's nearest
        // row is; an execution the view hides (another CPU's, another
        // process's) is not the one asked for: the search goes on from it.
        let rest = match t {
            _ if shown(r) => return Some(r),
            SeekTarget::Entry(a) => FindWhat::Entry(a.clone()),
            SeekTarget::Address(a) => FindWhat::Address(*a),
            _ => return Some(r),
        };
        return find(seeker, progress, generation, r, Dir::Forward, &rest, view);
    }
    let index = seeker.index();
    let n = index.len();
    let k0 = seeker.checkpoint_for(&SeekTarget::Element(from));
    match dir {
        Dir::Forward => {
            let mut found = None;
            let mut depth = 0i64;
            let mut checked = 0u64;
            let _ = seeker.run_events_from(k0, |number, ev| {
                checked += 1;
                if checked.is_multiple_of(4096) {
                    progress.find_at.store(number, Ordering::Relaxed);
                    if stale() {
                        return false;
                    }
                }
                if number <= from {
                    return true;
                }
                let hit = match (what, ev) {
                    (FindWhat::Speculation, Event::Spec { record, .. }) => record.state != SpecState::Committed,
                    (FindWhat::Return { trace_id, addr }, Event::Element { element, .. }) if element.trace_id == *trace_id => {
                        match element.kind {
                            ElementKind::InstrRange { start, .. } if start == *addr && depth <= 0 => true,
                            ElementKind::InstrRange { end, last_subtype, executed: true, .. } => {
                                use crate::element::InstrSubtype as S;
                                match last_subtype {
                                    S::BranchLink if end != *addr => depth += 1,
                                    S::Return | S::ImpliedReturn => depth -= 1,
                                    _ => {}
                                }
                                false
                            }
                            _ => false,
                        }
                    }
                    (_, Event::Element { element, .. }) => matches(what, element),
                    _ => false,
                } && shown(number);
                if hit {
                    found = Some(number);
                }
                !hit
            });
            found
        }
        Dir::Backward => {
            // Segment by segment towards the start: the last hit before
            // `from` in the nearest segment that has one.
            let mut k = k0 as i64;
            while k >= 0 {
                let ku = k as usize;
                let end = if ku + 1 < n { index.checkpoint(ku + 1).elements_before } else { u64::MAX };
                let mut last = None;
                let mut checked = 0u64;
                let mut gone = false;
                let _ = seeker.run_events_from(ku, |number, ev| {
                    if number >= from || number >= end {
                        return false;
                    }
                    checked += 1;
                    if checked.is_multiple_of(4096) && stale() {
                        gone = true;
                        return false;
                    }
                    let hit = match (what, ev) {
                        (FindWhat::Speculation, Event::Spec { record, .. }) => record.state != SpecState::Committed,
                        (_, Event::Element { element, .. }) => matches(what, element),
                        _ => false,
                    } && shown(number);
                    if hit {
                        last = Some(number);
                    }
                    true
                });
                if gone {
                    return None;
                }
                if last.is_some() {
                    return last;
                }
                progress.find_at.store(index.checkpoint(ku).elements_before, Ordering::Relaxed);
                if stale() {
                    return None;
                }
                k -= 1;
            }
            None
        }
    }
}
