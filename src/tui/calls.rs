//! The function level of the viewer: call depth, folded calls and loops.
//!
//! The call stacks are the profile's own ([`crate::profile::callstack`]):
//! the finder's background pass feeds every element to one reconstruction,
//! in element order as `tracesight profile` does, and keeps a clone of its
//! state at the start of each index segment ([`CallIndex`]). A page of the
//! list, a fold or the statistics of a selection then decode only from the
//! checkpoint before them, resuming from that segment's clone: exactly what
//! the whole pass would have seen, without decoding from the start.
//!
//! How folds map list rows to element numbers: a folded call is the row of
//! the element that entered its frame (the callee's first range) and hides
//! the elements after it up to the one that ended the frame; a run of
//! identical consecutive ranges is the row of its first and hides the rest.
//! [`CallView::row_end`] and [`CallView::row_start`] give, for a row, the last
//! element it covers and, for a hidden element, the row that hides it, so
//! the list still walks element numbers and pages stay pages of elements.
//! A call's end is found by looking for the first segment whose starting
//! stack no longer holds the frame, then decoding that one segment.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use crate::element::ElementKind;
use crate::index::{Numbered, SeekTarget, Seeker};
use crate::profile::callstack::{CallStacks, Closed, Entered, Frame, FrameKind, Left, Origin, StackListener, ThreadKey};
use crate::profile::pass::stream_of;
use crate::profile::stats::{Column, Stats};
use crate::profile::{function_name, FunctionMap};

use super::model::PAGE;
use super::model::LANE_SUB;

/// Depths the function chart keeps per bin (the outermost first).
pub const CHART_DEPTHS: usize = 8;
/// Chart key of a bin where nothing ran at that depth.
pub const NOTHING: u64 = u64::MAX - 1;
/// Chart key of an exception handler's frame.
pub const EXCEPTION: u64 = u64::MAX - 2;
/// Call-stack pages kept by the app (as many as element pages).
pub(super) const ROW_CACHE: usize = 64;

/// What the background pass found, shared by the worker threads.
#[derive(Default)]
pub struct CallIndex {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for CallIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.lock();
        write!(f, "CallIndex {{ segments passed: {}, done: {} }}", i.starts.len(), i.done)
    }
}

#[derive(Default)]
struct Inner {
    code: Arc<FunctionMap>,
    /// The reconstruction's state before the first element of each segment
    /// passed so far.
    starts: Vec<Arc<Walker>>,
    /// Statistics of the elements of each segment passed so far.
    stats: Vec<Arc<Stats>>,
    /// Every segment passed (the last one's statistics hold what was open
    /// at the end).
    done: bool,
}

impl CallIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn start(&self, k: usize) -> Option<(Walker, Arc<FunctionMap>)> {
        let i = self.lock();
        Some(((**i.starts.get(k)?).clone(), i.code.clone()))
    }

    fn snapshot(&self) -> (Vec<Arc<Walker>>, Arc<FunctionMap>, bool) {
        let i = self.lock();
        (i.starts.clone(), i.code.clone(), i.done)
    }
}

/// Listens to nothing: feeding elements only to move the stacks.
struct Quiet;
impl StackListener for Quiet {}

/// Passes everything on and notes what one element did to the frames.
struct Tap<'a> {
    inner: &'a mut dyn StackListener,
    called: Option<(ThreadKey, u64)>,
    left: Vec<(ThreadKey, Closed)>,
}

impl StackListener for Tap<'_> {
    fn entered(&mut self, thread: ThreadKey, stack: &[Frame]) {
        if let Some(top) = stack.last().filter(|f| f.entered == Entered::Call) {
            self.called = Some((thread, top.entry_element));
        }
        self.inner.entered(thread, stack)
    }
    fn left(&mut self, thread: ThreadKey, parents: &[Frame], closed: &Closed) {
        self.left.push((thread, *closed));
        self.inner.left(thread, parents, closed)
    }
    fn executed(&mut self, thread: ThreadKey, stack: &[Frame], func: u64, count: u64) {
        self.inner.executed(thread, stack, func, count)
    }
    fn cycles(&mut self, thread: ThreadKey, stack: &[Frame], func: u64, cycles: u64) {
        self.inner.cycles(thread, stack, func, cycles)
    }
    fn time(&mut self, thread: ThreadKey, stack: &[Frame], func: u64, ticks: u64) {
        self.inner.time(thread, stack, func, ticks)
    }
}

/// The profile's call stacks, plus which range made each open call (for
/// `%` from a return back to its call).
#[derive(Clone, Default)]
pub struct Walker {
    stacks: CallStacks,
    last_range: HashMap<ThreadKey, u64>,
    /// (thread, entry element of an open frame) -> the range that called it.
    call_of: HashMap<(ThreadKey, u64), u64>,
    last_number: u64,
}

impl Walker {
    /// Feed one element; the thread it belongs to and the frames it ended.
    fn feed(&mut self, code: &FunctionMap, n: &Numbered<'_>, l: &mut dyn StackListener) -> (ThreadKey, Vec<(ThreadKey, Closed)>) {
        let stream = stream_of(n);
        let before = self.stacks.thread_of(stream);
        let prev = self.last_range.get(&before).copied();
        let mut tap = Tap { inner: l, called: None, left: Vec::new() };
        self.stacks.feed(code, Origin { stream, thread: None }, n.number, n.element, &mut tap);
        let (called, left) = (tap.called, tap.left);
        for (t, c) in &left {
            self.call_of.remove(&(*t, c.frame.entry_element));
        }
        if let (Some((t, e)), Some(p)) = (called, prev) {
            self.call_of.insert((t, e), p);
        }
        let key = self.stacks.thread_of(stream);
        if matches!(n.element.kind, ElementKind::InstrRange { .. }) {
            self.last_range.insert(key, n.number);
        }
        self.last_number = n.number;
        (key, left)
    }

    fn finish(&mut self, l: &mut dyn StackListener) -> Vec<(ThreadKey, Closed)> {
        let mut tap = Tap { inner: l, called: None, left: Vec::new() };
        self.stacks.finish(self.last_number, &mut tap);
        tap.left
    }

    fn row(&self, key: ThreadKey, number: u64) -> CallRow {
        let frames: Vec<RowFrame> = self
            .stacks
            .stack(&key)
            .iter()
            .map(|f| RowFrame { kind: f.kind, entry: f.entry_element, call: self.call_of.get(&(key, f.entry_element)).copied() })
            .collect();
        let enters = frames.last().is_some_and(|f| f.entry == number);
        CallRow { thread: key, frames, enters, run: None }
    }
}

/// A frame open at an element, for the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowFrame {
    pub kind: FrameKind,
    /// The element that entered it.
    pub entry: u64,
    /// The range whose call entered it, when seen.
    pub call: Option<u64>,
}

/// The call stack at one element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRow {
    pub thread: ThreadKey,
    /// Open frames, outermost first.
    pub frames: Vec<RowFrame>,
    /// This element entered the innermost frame.
    pub enters: bool,
    /// The run of identical consecutive ranges it belongs to (first and
    /// last element), when there are two or more.
    pub run: Option<(u64, u64)>,
}

impl CallRow {
    pub fn depth(&self) -> usize {
        self.frames.len()
    }
}

/// A folded call: one row for the whole frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Fold {
    /// The element that entered the frame (the row shown).
    pub entry: u64,
    /// The last element hidden by the fold.
    pub end: u64,
    /// The trace ID of the element that closed the frame (none when the
    /// trace ended with it open).
    pub trace_id: Option<u8>,
    /// Bit per trace ID with elements in `streams_from..=end`: the part of
    /// the fold its worker decoded (all of it for a call that entered in
    /// the index segment where it ends).
    pub streams: u128,
    pub streams_from: u64,
    pub name: String,
    pub instructions: u64,
    pub cycles: u64,
    pub time: Option<u64>,
    pub left: Left,
}

/// Which frame to fold: its thread, its place on the stack and the element
/// that entered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoldTarget {
    pub thread: ThreadKey,
    pub depth: usize,
    pub entry: u64,
}

/// The span a statistics table covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    Whole,
    /// Index segments `a..=b` (the timeline's zoom).
    Segments(usize, usize),
    /// Elements `from..to` (the selection).
    Elements(u64, u64),
}

/// One function of a statistics table.
#[derive(Clone, Debug, PartialEq)]
pub struct StatRow {
    pub key: u64,
    pub name: String,
    pub stats: crate::profile::stats::FunctionStats,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StatsTable {
    pub span: Span,
    pub rows: Vec<StatRow>,
    /// Calls whose end is not known (a gap, the end of the span).
    pub unknown_ends: u64,
}

/// Per trace ID and lane bin, the function running at each depth (the one
/// with the most instructions in the bin).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chart {
    pub lanes: Vec<(u8, Vec<[u64; CHART_DEPTHS]>)>,
    pub names: HashMap<u64, String>,
}

pub enum CallsRequest {
    /// The call stacks of element pages `first..first + count`.
    Rows { first: u64, count: u64 },
    Fold(Vec<FoldTarget>),
    Stats(Span),
}

pub enum CallsResponse {
    /// The background pass is done: call stacks can be asked for.
    Ready(Chart),
    Rows { pages: Vec<(u64, Vec<CallRow>)>, names: HashMap<u64, String> },
    Folded(Vec<Result<Fold, (u64, String)>>),
    Stats(Result<StatsTable, String>),
}

// ---- the background pass ------------------------------------------------------

/// The finder's background pass, for calls: feeds every element to the
/// reconstruction and keeps per segment its starting state, its statistics
/// and the chart's bins.
pub struct PassCalls {
    shared: Arc<CallIndex>,
    code: Arc<FunctionMap>,
    walker: Walker,
    stats: Stats,
    /// (trace ID, bin, depth, function) -> instructions, for the segment
    /// being passed.
    hist: HashMap<(u8, usize, usize, u64), u64>,
    chart: BTreeMap<u8, Vec<[u64; CHART_DEPTHS]>>,
    bins: usize,
}

impl PassCalls {
    pub fn new(cap: &crate::capture::Capture, shared: Arc<CallIndex>, segments: usize) -> PassCalls {
        let code = Arc::new(cap.symbols.as_ref().map(|s| FunctionMap::from_table(&s.function_table())).unwrap_or_default());
        {
            let mut i = shared.lock();
            *i = Inner { code: code.clone(), ..Inner::default() };
        }
        PassCalls {
            shared,
            code,
            walker: Walker::default(),
            stats: Stats::default(),
            hist: HashMap::new(),
            chart: BTreeMap::new(),
            bins: segments * LANE_SUB,
        }
    }

    /// Segment `k` starts.
    pub fn begin(&mut self, k: usize) {
        let mut i = self.shared.lock();
        if i.starts.len() == k {
            i.starts.push(Arc::new(self.walker.clone()));
        }
    }

    /// An element of the segment, in lane bin `bin`.
    pub fn feed(&mut self, n: &Numbered<'_>, bin: usize) {
        let (key, _) = self.walker.feed(&self.code, n, &mut self.stats);
        if let ElementKind::InstrRange { count, .. } = n.element.kind {
            for (d, f) in self.walker.stacks.stack(&key).iter().take(CHART_DEPTHS).enumerate() {
                let fk = match f.kind {
                    FrameKind::Function(k) => k,
                    FrameKind::Exception(_) => EXCEPTION,
                };
                *self.hist.entry((n.element.trace_id, bin, d, fk)).or_default() += count as u64;
            }
        }
    }

    /// Segment `k` is done; `last` when it was the last one.
    pub fn end(&mut self, last: bool) {
        if last {
            self.walker.finish(&mut self.stats);
        }
        let bins = self.bins;
        let mut best: HashMap<(u8, usize, usize), (u64, u64)> = HashMap::new();
        for ((id, bin, d, f), n) in self.hist.drain() {
            let b = best.entry((id, bin, d)).or_insert((f, n));
            if n > b.1 || (n == b.1 && f < b.0) {
                *b = (f, n);
            }
        }
        for ((id, bin, d), (f, _)) in best {
            let lane = self.chart.entry(id).or_insert_with(|| vec![[NOTHING; CHART_DEPTHS]; bins]);
            if let Some(b) = lane.get_mut(bin) {
                b[d] = f;
            }
        }
        let mut i = self.shared.lock();
        i.stats.push(Arc::new(std::mem::take(&mut self.stats)));
        i.done |= last;
    }

    /// What the app is told when the pass is done.
    pub fn ready(&self) -> CallsResponse {
        let mut names = HashMap::new();
        for lane in self.chart.values() {
            for b in lane {
                for k in b {
                    names.entry(*k).or_insert_with(|| key_name(&self.code, *k));
                }
            }
        }
        let lanes = self.chart.iter().map(|(id, b)| (*id, b.clone())).collect();
        CallsResponse::Ready(Chart { lanes, names })
    }
}

fn key_name(code: &FunctionMap, k: u64) -> String {
    match k {
        NOTHING => String::new(),
        EXCEPTION => "[exception]".into(),
        k => function_name(code, k),
    }
}

fn frame_name(code: &FunctionMap, kind: FrameKind) -> String {
    match kind {
        FrameKind::Function(k) => function_name(code, k),
        FrameKind::Exception(n) => format!("[exception {n}]"),
    }
}

// ---- answering requests (on a worker thread) --------------------------------

/// Answer a request about calls; `None` when there is nothing to say yet.
pub fn serve(seeker: &Seeker<'_>, index: &CallIndex, r: CallsRequest) -> Option<CallsResponse> {
    Some(match r {
        CallsRequest::Rows { first, count } => rows(seeker, index, first, count)?,
        CallsRequest::Fold(targets) => CallsResponse::Folded(folds(seeker, index, &targets)),
        CallsRequest::Stats(span) => CallsResponse::Stats(stats(seeker, index, span)),
    })
}

/// First element of segment `k`, and the first of the one after.
fn segment_bounds(seeker: &Seeker<'_>, k: usize) -> (u64, u64) {
    let ix = seeker.index();
    let a = ix.checkpoint(k).elements_before;
    let b = if k + 1 < ix.len() { ix.checkpoint(k + 1).elements_before } else { ix.totals().elements };
    (a, b)
}

fn rows(seeker: &Seeker<'_>, index: &CallIndex, first: u64, count: u64) -> Option<CallsResponse> {
    let from = first * PAGE;
    let to = from + count * PAGE;
    let k = seeker.checkpoint_for(&SeekTarget::Element(from));
    let (mut w, code) = index.start(k)?;
    let nseg = seeker.index().len();
    let mut seg = k;
    let (seg_first, mut seg_end) = segment_bounds(seeker, k);
    let mut out: Vec<CallRow> = Vec::with_capacity((to - from) as usize);
    let mut names = HashMap::new();
    // The run of identical ranges the last element is in: its first
    // element and what the ranges are. Runs never cross a segment start,
    // so every decode, from whichever checkpoint, cuts them alike.
    let mut run: Option<(u64, (u8, u64, u64))> = None;
    let mut run_last: HashMap<u64, u64> = HashMap::new();
    let mut last = None;
    let _ = seeker.run_from(k, |n| {
        if n.number < seg_first {
            return true;
        }
        while n.number >= seg_end && seg + 1 < nseg {
            seg += 1;
            seg_end = segment_bounds(seeker, seg).1;
            if n.number == seeker.index().checkpoint(seg).elements_before {
                run = None;
            }
        }
        let what = match n.element.kind {
            ElementKind::InstrRange { start, end, .. } => Some((n.element.trace_id, start, end)),
            _ => None,
        };
        let head = match (run, what) {
            (Some((h, r)), Some(x)) if r == x && last == Some(n.number.wrapping_sub(1)) => Some(h),
            _ => None,
        };
        last = Some(n.number);
        if n.number >= to && head.is_none() {
            return false;
        }
        match (head, what) {
            (Some(h), _) => {
                run_last.insert(h, n.number);
            }
            (None, Some(x)) => run = Some((n.number, x)),
            (None, None) => run = None,
        }
        let (key, _) = w.feed(&code, &n, &mut Quiet);
        if n.number >= from && n.number < to {
            let mut row = w.row(key, n.number);
            row.run = run.map(|(h, _)| (h, h));
            for f in &row.frames {
                if let FrameKind::Function(k) = f.kind {
                    names.entry(k).or_insert_with(|| function_name(&*code, k));
                }
            }
            out.push(row);
        }
        true
    });
    for r in &mut out {
        if let Some((h, _)) = r.run {
            r.run = run_last.get(&h).map(|l| (h, *l));
        }
    }
    let mut pages: Vec<(u64, Vec<CallRow>)> = (0..count).map(|p| (first + p, Vec::new())).collect();
    for (i, r) in out.into_iter().enumerate() {
        if let Some(p) = pages.get_mut(i / PAGE as usize) {
            p.1.push(r);
        }
    }
    Some(CallsResponse::Rows { pages, names })
}

fn open_at(w: &Walker, t: &FoldTarget) -> bool {
    w.stacks.stack(&t.thread).get(t.depth).is_some_and(|f| f.entry_element == t.entry)
}

/// Where each target frame ends: the first segment whose starting stack no
/// longer holds it is decoded (once for all targets ending there).
fn folds(seeker: &Seeker<'_>, index: &CallIndex, targets: &[FoldTarget]) -> Vec<Result<Fold, (u64, String)>> {
    let (starts, code, done) = index.snapshot();
    let mut out = Vec::new();
    let mut by_segment: BTreeMap<usize, Vec<FoldTarget>> = BTreeMap::new();
    for t in targets {
        let mut k = seeker.checkpoint_for(&SeekTarget::Element(t.entry));
        while k + 1 < starts.len() && open_at(&starts[k + 1], t) {
            k += 1;
        }
        if k >= starts.len() || (k + 1 == starts.len() && !done && k + 1 < seeker.index().len()) {
            out.push(Err((t.entry, "the background pass has not reached this call's end yet".to_string())));
            continue;
        }
        by_segment.entry(k).or_default().push(*t);
    }
    for (k, mut want) in by_segment {
        let mut w = (*starts[k]).clone();
        let (first, end) = segment_bounds(seeker, k);
        // Per target, the trace IDs of the elements after its entry that
        // this segment's decode passes (all of them when the call entered
        // in this segment).
        let mut seen: HashMap<u64, u128> = want.iter().map(|t| (t.entry, 0)).collect();
        let mut found = Vec::new();
        let mut take = |left: Vec<(ThreadKey, Closed)>, want: &mut Vec<FoldTarget>, seen: &HashMap<u64, u128>, trace_id: Option<u8>| {
            for (t, c) in left {
                if let Some(i) = want.iter().position(|x| x.thread == t && x.entry == c.frame.entry_element) {
                    let t = want.swap_remove(i);
                    let mut f = fold_of(&code, &c, trace_id);
                    f.streams = seen.get(&t.entry).copied().unwrap_or(0);
                    f.streams_from = first.max(t.entry + 1);
                    found.push(f);
                }
            }
        };
        let r = seeker.run_from(k, |n| {
            if n.number < first {
                return true;
            }
            if n.number >= end {
                return false;
            }
            for t in &want {
                if n.number > t.entry {
                    *seen.entry(t.entry).or_default() |= 1u128 << (n.element.trace_id & 0x7f);
                }
            }
            let (_, left) = w.feed(&code, &n, &mut Quiet);
            take(left, &mut want, &seen, Some(n.element.trace_id));
            !want.is_empty()
        });
        if let Err(e) = r {
            out.extend(want.iter().map(|t| Err((t.entry, e.to_string()))));
            continue;
        }
        if !want.is_empty() && k + 1 >= seeker.index().len() {
            let left = w.finish(&mut Quiet);
            take(left, &mut want, &seen, None);
        }
        out.extend(found.into_iter().map(Ok));
        out.extend(want.iter().map(|t| Err((t.entry, "the call's end was not found".to_string()))));
    }
    out
}

fn fold_of(code: &FunctionMap, c: &Closed, trace_id: Option<u8>) -> Fold {
    // A return's element is the callee's last; any other end (an unwind, a
    // tail call, a gap) is an element that is not the frame's own.
    let end = match c.left {
        Left::Return | Left::End => c.exit_element,
        _ => c.exit_element.saturating_sub(1),
    };
    Fold {
        entry: c.frame.entry_element,
        end: end.max(c.frame.entry_element),
        trace_id,
        streams: 0,
        streams_from: c.frame.entry_element + 1,
        name: frame_name(code, c.frame.kind),
        instructions: c.instructions,
        cycles: c.cycles,
        time: c.time,
        left: c.left,
    }
}

fn stats(seeker: &Seeker<'_>, index: &CallIndex, span: Span) -> Result<StatsTable, String> {
    let (code, total) = {
        let i = index.lock();
        let mut total = Stats::default();
        let (a, b) = match span {
            Span::Whole if !i.done => return Err(format!("the background pass is at segment {} of {}", i.stats.len(), seeker.index().len())),
            Span::Whole => (0, i.stats.len()),
            Span::Segments(a, b) if b < i.stats.len() => (a, b + 1),
            Span::Segments(..) => return Err("the background pass has not reached the zoomed span yet".into()),
            Span::Elements(..) => (0, 0),
        };
        for s in i.stats.get(a..b).unwrap_or(&[]) {
            total.merge(s);
        }
        (i.code.clone(), total)
    };
    let total = match span {
        Span::Elements(from, to) => {
            let k = seeker.checkpoint_for(&SeekTarget::Element(from));
            let (mut w, _) = index.start(k).ok_or("the background pass has not reached the selection yet")?;
            let mut st = Stats::default();
            let first = segment_bounds(seeker, k).0;
            seeker
                .run_from(k, |n| {
                    if n.number < first {
                        return true;
                    }
                    if n.number >= to {
                        return false;
                    }
                    if n.number < from {
                        w.feed(&code, &n, &mut Quiet);
                    } else {
                        w.feed(&code, &n, &mut st);
                    }
                    true
                })
                .map_err(|e| e.to_string())?;
            w.finish(&mut st);
            st
        }
        _ => total,
    };
    let rows = total
        .functions
        .iter()
        .map(|((_, k), f)| StatRow { key: *k, name: function_name(&*code, *k), stats: *f })
        .collect();
    Ok(StatsTable { span, rows, unknown_ends: total.unknown_ends })
}

// ---- the statistics pane's state ----

/// What the pane covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    #[default]
    Whole,
    Zoom,
    Selection,
}

impl Scope {
    pub(super) fn next(self) -> Scope {
        match self {
            Scope::Whole => Scope::Zoom,
            Scope::Zoom => Scope::Selection,
            Scope::Selection => Scope::Whole,
        }
    }
}

/// The pane's state.
#[derive(Clone, Debug, PartialEq)]
pub struct StatsPane {
    pub scope: Scope,
    pub sort: Column,
    pub selected: usize,
    pub table: Option<StatsTable>,
    pub pending: bool,
    pub error: Option<String>,
    /// The span last asked for: an older answer still on its way is not
    /// shown for it.
    pub(super) asked: Option<Span>,
    /// The table's row indices in display order for `order_by`, kept so
    /// that a frame does not sort a table of many thousand functions.
    order: Vec<usize>,
    order_by: Option<Column>,
}

impl Default for StatsPane {
    fn default() -> Self {
        StatsPane {
            scope: Scope::Whole,
            sort: Column::SelfInstructions,
            selected: 0,
            table: None,
            pending: false,
            error: None,
            asked: None,
            order: Vec::new(),
            order_by: None,
        }
    }
}

impl StatsPane {
    /// Sort the rows again after the table or the sorted column changed.
    pub fn resort(&mut self) {
        self.order = sorted_indices(self);
        self.order_by = Some(self.sort);
    }
}

fn sorted_indices(pane: &StatsPane) -> Vec<usize> {
    let Some(t) = &pane.table else { return Vec::new() };
    let mut order: Vec<usize> = (0..t.rows.len()).collect();
    let r = &t.rows;
    order.sort_by(|&a, &b| pane.sort.value(&r[b].stats).cmp(&pane.sort.value(&r[a].stats)).then_with(|| r[a].name.cmp(&r[b].name)));
    order
}

/// The table's rows in display order: largest first, ties by name.
pub fn sorted(pane: &StatsPane) -> Vec<&StatRow> {
    let Some(t) = &pane.table else { return Vec::new() };
    let fresh = pane.order_by == Some(pane.sort) && pane.order.len() == t.rows.len();
    let order = if fresh { std::borrow::Cow::Borrowed(&pane.order) } else { std::borrow::Cow::Owned(sorted_indices(pane)) };
    order.iter().filter_map(|&i| t.rows.get(i)).collect()
}

// ---- the app side -------------------------------------------------------------

/// The list's call state, held by the app.
#[derive(Default)]
pub struct CallView {
    /// The background pass is done: call stacks can be asked for.
    pub ready: bool,
    pub rows: HashMap<u64, Arc<Vec<CallRow>>>,
    pub(super) order: VecDeque<u64>,
    pub(super) pending: HashSet<u64>,
    pub names: HashMap<u64, String>,
    /// Folded calls by the element that entered them.
    pub folds: BTreeMap<u64, Fold>,
    /// The outermost folds (entry -> end): nested folds hide nothing more.
    pub(super) outer: BTreeMap<u64, u64>,
    pub fold_pending: HashSet<u64>,
    /// Runs of identical ranges opened by `+` (by their first element).
    pub(super) opened_runs: HashSet<u64>,
    /// Calls unfolded by `+` that `_` must not fold again.
    pub(super) opened_calls: HashSet<u64>,
    /// `_`: frames deeper than this fold as they come into view.
    pub fold_below: Option<usize>,
    pub chart: Chart,
    /// The timeline shows the function chart instead of the density.
    pub show_chart: bool,
    /// The chart's depth (0: outermost frames).
    pub chart_depth: usize,
    /// The function statistics pane (`F`).
    pub stats: StatsPane,
}

impl CallView {
    pub fn row(&self, number: u64) -> Option<&CallRow> {
        self.rows.get(&(number / PAGE))?.get((number % PAGE) as usize)
    }

    pub(super) fn run_of(&self, number: u64) -> Option<(u64, u64)> {
        self.row(number)?.run.filter(|(h, _)| !self.opened_runs.contains(h))
    }

    /// The last element the row of element `n` covers.
    pub fn row_end(&self, n: u64) -> u64 {
        if let Some(e) = self.outer.get(&n) {
            return *e;
        }
        match self.run_of(n) {
            Some((h, l)) if h == n => l,
            _ => n,
        }
    }

    fn outer_head(&self, n: u64) -> Option<u64> {
        let (h, e) = self.outer.range(..n).next_back()?;
        (*e >= n).then_some(*h)
    }

    /// The row that shows element `n`: itself, or the fold or run hiding it.
    pub fn row_start(&self, n: u64) -> u64 {
        let n = self.outer_head(n).unwrap_or(n);
        match self.run_of(n) {
            Some((h, _)) if h < n => self.outer_head(h).unwrap_or(h),
            _ => n,
        }
    }

    pub(super) fn rebuild_outer(&mut self) {
        self.outer.clear();
        let mut last_end: Option<u64> = None;
        for (h, f) in &self.folds {
            if last_end.is_some_and(|e| *h <= e) {
                continue;
            }
            self.outer.insert(*h, f.end);
            last_end = Some(f.end);
        }
    }

    /// Open the folds and runs that hide element `n` (a jump lands there).
    pub fn reveal(&mut self, n: u64) {
        let hiding: Vec<u64> = self.folds.range(..n).filter(|(_, f)| f.end >= n).map(|(h, _)| *h).collect();
        for h in hiding {
            self.folds.remove(&h);
            self.opened_calls.insert(h);
        }
        self.rebuild_outer();
        if let Some((h, _)) = self.run_of(n).filter(|(h, _)| *h < n) {
            self.opened_runs.insert(h);
        }
    }

    /// The call depth at element `n` (open frames), when loaded.
    pub fn depth(&self, n: u64) -> Option<usize> {
        self.row(n).map(CallRow::depth)
    }
}
