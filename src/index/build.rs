//! Building an index, on all cores.
//!
//! The buffer is cut into parts at checkpoint positions and each part is
//! decoded by a decoder that starts there unsynchronised ([`Runner::starting_at`]),
//! all at once (rayon). Such a decoder does not know what came before: its
//! counts start at zero, and until it meets a sync point its state differs
//! from the state a decode from the start has at the same place. So the
//! decoder of each part, after its own part, goes on into the next one,
//! saving its state at each checkpoint, until that state equals the one the
//! next part's decoder saved there except for the counters that run from the
//! start (see [`super::marks`]). From that checkpoint on, both decoders do the
//! same work, and the later one's checkpoints, once its counters are shifted
//! by the difference, are what a decode from the start gives. A part whose
//! decoder never matches is simply decoded again by the earlier one, so the
//! result is always that of one pass from the start, byte for byte; only the
//! speed depends on where the decoders meet (usually one checkpoint after the
//! part starts).
//!
//! Segment summaries are gathered per part with the counters left unshifted
//! and put together in buffer order at the end, when the shifts are known.
//!
//! Buffers whose state cannot be saved (TPIU and DSTREAM framing) and builds
//! on one thread take the same code on one decoder from the start.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rayon::prelude::*;

use super::format::{self, Checkpoint, IdSummary, IndexData, Release};
use crate::session::marks::{self, Kind, Mark, Shift};
use super::spill::{Spill, StateRef, States};
use super::{IndexOptions, Maxima, SegmentStats};
use crate::element::{Element, ElementKind, Time};
use crate::frame::FrameMode;
use crate::protocol::etm4::decoder::SpecState;
use crate::session::tally::Tally;
use crate::session::{BufferPlan, Counts, ElementBatch, Event, Fragment, RunOptions, Runner, Source};

/// How far an index build is, readable from any thread while it runs.
#[derive(Debug, Default)]
pub struct BuildProgress {
    done: AtomicU64,
    total: AtomicU64,
    finished: AtomicBool,
    parts: AtomicU64,
    redone: AtomicU64,
}

impl BuildProgress {
    pub fn new() -> BuildProgress {
        BuildProgress::default()
    }

    /// Bytes of the buffer decoded so far (all threads together).
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Bytes to decode (0 until the build has started).
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Done as a fraction of the total, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        let t = self.total();
        if t == 0 {
            0.0
        } else {
            (self.done() as f64 / t as f64).min(1.0)
        }
    }

    /// True once the build has ended.
    pub fn finished(&self) -> bool {
        self.finished.load(Ordering::Relaxed)
    }

    /// Parts the buffer was decoded in (1: one pass from the start).
    pub fn parts(&self) -> u64 {
        self.parts.load(Ordering::Relaxed)
    }

    /// Bytes decoded twice: by the decoder of a part going on into the next
    /// one until the two decoders' states matched.
    pub fn redone(&self) -> u64 {
        self.redone.load(Ordering::Relaxed)
    }

    fn add(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
}

/// One trace ID's share of a segment, with cycle counts as the part's decoder
/// saw them; `(n, cycles)` pairs hold the element's place in the segment.
#[derive(Clone, Copy, Debug)]
struct IdSeg {
    trace_id: u8,
    elements: u64,
    instructions: u64,
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    first_any: (u64, u64),
    last_any: (u64, u64),
    first_pos: Option<(u64, u64)>,
    last_pos: Option<(u64, u64)>,
    max_cc: u64,
}

/// What one decoder saw from one checkpoint to the next.
#[derive(Clone, Debug, Default)]
struct Seg {
    first_ts: Option<u64>,
    last_ts: Option<u64>,
    max_ts: Option<u64>,
    max_index: Option<u64>,
    instructions: u64,
    exceptions: u64,
    gaps: u64,
    spec_canceled: u64,
    n: u64,
    ids: Vec<IdSeg>,
    /// Everything the decoder reported, per source, when the build gathers it
    /// (a `decode --summary`).
    tally: Option<Box<Tally>>,
}

impl Seg {
    /// A tallying segment takes what the runner counted instead of sending
    /// as events ([`Runner::take_tally`]).
    fn take_counts(&mut self, r: &mut Runner<'_>) {
        if let Some(t) = &mut self.tally {
            t.add(&r.take_tally());
        }
    }

    // Once per element of an index build: out of line, its entry and exit
    // were a fifth of its cost.
    #[inline(always)]
    fn element(&mut self, e: &Element) {
        // Ranges first: most elements are, and a well-predicted test is
        // cheaper than the jump table of a full match.
        let instr = if let ElementKind::InstrRange { count, .. } = e.kind {
            count as u64
        } else {
            match e.kind {
                ElementKind::RangeNoPath { count, .. } => count as u64,
                ElementKind::Exception { .. } => {
                    self.exceptions += 1;
                    0
                }
                // Every trace-on follows a gap: trace off, an overflow or a restart.
                ElementKind::NoSync(_) | ElementKind::TraceOn(_) => {
                    self.gaps += 1;
                    0
                }
                _ => 0,
            }
        };
        self.account(e.trace_id, e.index, &e.time, 1, instr);
    }

    /// `k` elements in a row, none of them an exception or a gap, that share
    /// trace ID and time context, with `instr` instructions between them and
    /// `index` the greatest of theirs: what [`Seg::element`] does for each,
    /// done once.
    fn batch(&mut self, b: &ElementBatch) {
        let k = b.elements();
        if k > 0 {
            self.account(b.trace_id, b.index, &b.time, k, b.instructions);
        }
    }

    /// The share of `k` (at least one) elements of `trace_id` in a row.
    #[inline(always)]
    fn account(&mut self, trace_id: u8, index: u64, time: &Time, k: u64, instr: u64) {
        if let Some(t) = time.timestamp {
            self.first_ts.get_or_insert(t);
            self.last_ts = Some(t);
            self.max_ts = Some(self.max_ts.map_or(t, |m| m.max(t)));
        }
        self.max_index = Some(self.max_index.map_or(index, |m| m.max(index)));
        self.instructions += instr;
        let n = self.n;
        self.n += k;
        let cc = time.total_cycles;
        // Elements come in runs per trace ID: the last one's share first.
        let last = self.ids.len().wrapping_sub(1);
        let found = match self.ids.get(last) {
            Some(s) if s.trace_id == trace_id => Some(last),
            _ => self.ids.iter().position(|s| s.trace_id == trace_id),
        };
        let id = match found {
            Some(i) => &mut self.ids[i],
            None => {
                self.ids.push(IdSeg {
                    trace_id,
                    elements: 0,
                    instructions: 0,
                    first_ts: None,
                    last_ts: None,
                    first_any: (n, cc),
                    last_any: (n, cc),
                    first_pos: None,
                    last_pos: None,
                    max_cc: 0,
                });
                self.ids.last_mut().unwrap()
            }
        };
        // The last of the `k`.
        let end = n + (k - 1);
        id.elements += k;
        id.instructions += instr;
        if let Some(t) = time.timestamp {
            id.first_ts.get_or_insert(t);
            id.last_ts = Some(t);
        }
        id.last_any = (end, cc);
        id.max_cc = id.max_cc.max(cc);
        if cc > 0 {
            id.first_pos.get_or_insert((n, cc));
            id.last_pos = Some((end, cc));
        }
    }

    /// Add the segment that follows this one, as if one decoder had seen both.
    fn append(&mut self, next: &Seg) {
        self.first_ts = self.first_ts.or(next.first_ts);
        self.last_ts = next.last_ts.or(self.last_ts);
        self.max_ts = self.max_ts.max(next.max_ts);
        self.max_index = self.max_index.max(next.max_index);
        self.instructions += next.instructions;
        self.exceptions += next.exceptions;
        self.gaps += next.gaps;
        self.spec_canceled += next.spec_canceled;
        let base = self.n;
        let later = |p: (u64, u64)| (p.0 + base, p.1);
        for o in &next.ids {
            match self.ids.iter_mut().find(|i| i.trace_id == o.trace_id) {
                Some(i) => {
                    i.elements += o.elements;
                    i.instructions += o.instructions;
                    i.first_ts = i.first_ts.or(o.first_ts);
                    i.last_ts = o.last_ts.or(i.last_ts);
                    i.last_any = later(o.last_any);
                    i.first_pos = i.first_pos.or(o.first_pos.map(later));
                    i.last_pos = o.last_pos.map(later).or(i.last_pos);
                    i.max_cc = i.max_cc.max(o.max_cc);
                }
                None => self.ids.push(IdSeg {
                    first_any: later(o.first_any),
                    last_any: later(o.last_any),
                    first_pos: o.first_pos.map(later),
                    last_pos: o.last_pos.map(later),
                    ..*o
                }),
            }
        }
        self.n += next.n;
        if let Some(t) = &next.tally {
            self.tally.get_or_insert_with(Default::default).add(t);
        }
    }

    #[inline]
    fn event(&mut self, sources: &[Source], ev: Event<'_>) {
        // A tallying build is a summary: nothing reads its index statistics.
        if let Some(t) = &mut self.tally {
            t.event(sources, &ev);
            return;
        }
        match ev {
            Event::Element { element, .. } => self.element(element),
            Event::Batch { batch, .. } => self.batch(batch),
            Event::Spec { record, .. } if record.state != SpecState::Committed => self.spec_canceled += 1,
            _ => {}
        }
    }
}

/// A checkpoint as one decoder saved it, and the segment after it.
struct Cp {
    offset: u64,
    counts: Counts,
    state: StateRef,
    /// Where its counters are ([`marks::to_bytes`], in the spill).
    marks: Option<StateRef>,
    seg: Seg,
}

/// How a decoder's run ended.
enum End {
    /// At the buffer's end (after end-of-trace processing when the whole
    /// buffer was accepted) or where the data path stopped: the index ends
    /// here, with these totals and this reason for stopping.
    Last { counts: Counts, stop: Option<String> },
    /// Still going: its state at `offset`, to compare or to resume from.
    Open { offset: u64, state: StateRef, marks: Option<StateRef> },
}

/// What is shared by the threads of a build.
struct Ctx<'a> {
    /// The whole mapped trace; only `frag` of it is decoded.
    data: &'a [u8],
    frag: Fragment,
    opts: &'a RunOptions,
    interval: usize,
    /// End of the accepted part of the fragment (an offset in `data`).
    accepted: usize,
    /// Whether checkpoints need their counters located (parallel builds).
    marked: bool,
    progress: &'a BuildProgress,
    release: Option<Release<'a>>,
    /// Where the saved states go (see [`super::spill`]).
    spill: &'a Arc<Spill>,
    /// Whether segments gather a [`Tally`].
    tally: bool,
}

/// Asked at each checkpoint (offset, saved state, its counters) whether the
/// decoder of a later part, by how much behind, is in that state there.
type Join<'j> = &'j mut dyn FnMut(u64, &[u8], Option<&[Mark]>) -> Option<(usize, Shift)>;

/// How [`Ctx::advance`] stopped.
enum Step {
    Reached,
    Stopped,
    Joined(u64, usize, Shift),
}

impl Ctx<'_> {
    /// An empty segment, gathering a tally when the build does.
    fn seg(&self) -> Seg {
        Seg { tally: self.tally.then(Default::default), ..Seg::default() }
    }

    /// Decode from the runner's offset (a checkpoint position) to `to`,
    /// saving a checkpoint before each block while the state can be saved.
    /// `join` is asked at each checkpoint whether another decoder takes over
    /// from there. `count` says whether the bytes count as progress.
    fn advance(
        &self,
        r: &mut Runner<'_>,
        to: usize,
        cps: &mut Vec<Cp>,
        count: bool,
        join: Join<'_>,
    ) -> Step {
        let sources = &r.plan().sources;
        let mut released = r.offset() as usize;
        let mut resumable = true;
        loop {
            let pos = r.offset() as usize;
            if pos >= to {
                return Step::Reached;
            }
            let saved = if !resumable {
                None
            } else if self.marked {
                r.save_state_marked()
            } else {
                r.save_state().map(|s| (s, None))
            };
            match saved {
                Some((state, marks)) => {
                    if let Some((part, shift)) = join(pos as u64, &state, marks.as_deref()) {
                        return Step::Joined(pos as u64, part, shift);
                    }
                    let state = self.spill.put(&state);
                    let marks = marks.map(|m| self.spill.put_marks(&m));
                    cps.push(Cp { offset: pos as u64, counts: r.counts, state, marks, seg: self.seg() });
                }
                None if resumable => {
                    // From here on the segment of the last checkpoint grows to
                    // the end, as in a decode that cannot save its state.
                    resumable = false;
                    if cps.is_empty() {
                        cps.push(Cp { offset: self.frag.start, counts: r.counts, state: StateRef::empty(), marks: None, seg: self.seg() });
                    }
                }
                None => {}
            }
            let end = (pos + self.interval).min(self.accepted);
            let seg = &mut cps.last_mut().expect("a checkpoint before the first block").seg;
            let ok = r.feed(&self.data[pos..end], &mut |ev| seg.event(sources, ev));
            seg.take_counts(r);
            if count {
                self.progress.add((end - pos) as u64);
            }
            if let Some(release) = self.release {
                // Each part is read once, front to back; the next decoder
                // going on into it is a few pages of page cache away.
                if end >= released + (16 << 20) || end >= to {
                    release(released, end);
                    released = end;
                }
            }
            if !ok {
                return Step::Stopped;
            }
        }
    }

    /// The end of a run that reached the end of the accepted data or stopped:
    /// end-of-trace processing when the whole buffer was accepted.
    fn last(&self, r: &mut Runner<'_>, cps: &mut Vec<Cp>, stopped: bool) -> End {
        if !stopped && self.accepted as u64 == self.frag.end {
            if cps.is_empty() {
                cps.push(Cp { offset: self.frag.start, counts: r.counts, state: StateRef::empty(), marks: None, seg: self.seg() });
            }
            let seg = &mut cps.last_mut().unwrap().seg;
            let sources = &r.plan().sources;
            r.finish(&mut |ev| {
                if let Some(t) = &mut seg.tally {
                    t.event(sources, &ev);
                    return;
                }
                // Only elements: the speculation records of the flush are not
                // part of any segment's count.
                match ev {
                    Event::Element { element, .. } => seg.element(element),
                    Event::Batch { batch, .. } => seg.batch(batch),
                    _ => {}
                }
            });
            seg.take_counts(r);
        }
        let summary = r.summary(self.frag.len() as u64);
        let stop = summary
            .fatal
            .clone()
            .or_else(|| summary.frame_error.as_ref().map(|e| e.to_string()))
            .or_else(|| summary.fatal_at_end.as_ref().map(|f| format!("at the end of the trace: {f}")));
        End::Last { counts: r.counts, stop }
    }

    /// The end of a run that stopped at `to` ([`Step::Reached`] or
    /// [`Step::Stopped`]).
    fn end(&self, r: &mut Runner<'_>, cps: &mut Vec<Cp>, step: &Step, to: usize) -> Option<End> {
        match step {
            Step::Reached if to < self.accepted => {
                let (state, marks) = r.save_state_marked()?;
                let marks = marks.map(|m| self.spill.put_marks(&m));
                Some(End::Open { offset: to as u64, state: self.spill.put(&state), marks })
            }
            _ => Some(self.last(r, cps, matches!(step, Step::Stopped))),
        }
    }
}

impl Ctx<'_> {
    /// A decoder for the part from `start`, started where its state will soon
    /// match that of a decode from the start, and brought to the part's
    /// first checkpoint after that. A parser that starts on bytes before a
    /// sync point reports them as unsynchronised and keeps a trace of that in
    /// its state for good, which the decode from the start never has when
    /// that began at a sync point; so an unformatted ETMv4/ETE buffer is
    /// entered at the part's first A-sync.
    fn lead_in<'p>(&self, plan: &'p BufferPlan, start: usize, to: usize) -> Runner<'p> {
        let raw = self.frag.raw_source.is_some() || plan.frame_mode(self.opts.dstream).is_none();
        let etm4 = raw
            && matches!(
                plan.sources.get(self.frag.raw_source.unwrap_or(0)).map(|s| &s.kind),
                Some(crate::session::SourceKind::Etm4(_))
            );
        let Some(at) = etm4.then(|| a_sync(&self.data[start..to])).flatten().map(|i| start + i) else {
            return Runner::starting_at(plan, self.opts, &self.frag, start as u64);
        };
        // Checkpoints and blocks are placed from the fragment's start.
        let base = self.frag.start as usize;
        let first = (base + (at - base).next_multiple_of(self.interval)).min(to);
        let mut r = Runner::starting_at(plan, self.opts, &self.frag, at as u64);
        // Blocks after the first stay at the offsets a decode from the start
        // gives them.
        let aligned = (base + (at - base).next_multiple_of(1024)).min(first);
        if r.feed(&self.data[at..aligned], &mut |_| {}) {
            r.feed(&self.data[aligned..first], &mut |_| {});
        }
        // What the lead-in counted belongs to the part before.
        r.take_tally();
        self.progress.add((first - start) as u64);
        r
    }

    /// Fresh decoders at the fragment's start.
    fn fresh<'p>(&self, plan: &'p BufferPlan) -> Runner<'p> {
        Runner::for_fragment(plan, self.opts, &self.frag)
    }
}

/// States up to this size are kept in the index at every checkpoint.
const SMALL_STATE: usize = 64 << 10;
/// Larger states (a speculation window kept open for long: up to 2^16
/// elements) are kept only where the trace bytes since the last kept one are
/// this many times their size, so that the states of an index never add up
/// to more than a quarter of the trace, whatever it holds.
const STATE_DENSITY: u64 = 4;

/// Whether a state of `len` bytes is kept at `pos`, the last one having been
/// kept at `last`.
fn dense_enough(last: Option<u64>, pos: u64, len: usize) -> bool {
    match last {
        None => true,
        Some(at) => len <= SMALL_STATE || (len as u64).saturating_mul(STATE_DENSITY) <= pos.saturating_sub(at),
    }
}

/// Where the first ETMv4/ETE A-sync packet (eleven 0x00 bytes, then 0x80)
/// of `bytes` starts.
fn a_sync(bytes: &[u8]) -> Option<usize> {
    let mut zeros = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            0 => zeros += 1,
            0x80 if zeros >= 11 => return Some(i - 11),
            _ => zeros = 0,
        }
    }
    None
}

/// A plan that can go to another thread: the program image is copied (its
/// regions are shared, its lookup cache is not), and put back into a plan on
/// the thread that decodes.
pub(crate) struct PlanCopy {
    buffer: crate::input::TraceBuffer,
    sources: Vec<crate::session::Source>,
    image: crate::image::memory::MemoryImage,
}

impl PlanCopy {
    pub(crate) fn of(plan: &BufferPlan) -> PlanCopy {
        PlanCopy { buffer: plan.buffer.clone(), sources: plan.sources.clone(), image: (*plan.image).clone() }
    }

    // The image is not shared with any other thread: each decoder gets its own.
    #[allow(clippy::arc_with_non_send_sync)]
    pub(crate) fn plan(self) -> BufferPlan {
        BufferPlan { buffer: self.buffer, sources: self.sources, notes: Vec::new(), image: Arc::new(self.image) }
    }
}

/// Intervals a part's decoder goes on past its part before its state is
/// compared with the next decoder's. The next decoder has usually met a
/// sync point by its checkpoint one interval into its part (its lead-in
/// brings an unformatted one there from the part's first A-sync; a
/// formatted one starts unsynchronised at the part's start), so one is
/// enough; where the states differ there, the merge takes this decoder on
/// until they meet. Two, as before, decoded 0.75 MiB more of every 16 MiB
/// on 2 cores (001-ack_test, texit-poe2, juno_r1_1) for no more joins.
const LOOKAHEAD: usize = 1;

/// One part of a parallel build: its decoder's checkpoints in the part and
/// how that ended; when it did not end the decode, the checkpoints it saved
/// going on into the next part, and how that ended.
struct Part {
    cps: Vec<Cp>,
    end: End,
    ahead: Vec<Cp>,
    ahead_end: Option<End>,
}

/// Build the index of `data` (already set up: `opts` are the index's run
/// options), its saved states going to `spill`.
#[allow(clippy::too_many_arguments)]
pub(super) fn build(
    plan: &BufferPlan,
    data: &[u8],
    frag: Fragment,
    opts: &RunOptions,
    iopts: &IndexOptions,
    progress: &BuildProgress,
    release: Option<Release<'_>>,
    spill: &Arc<Spill>,
    tally: bool,
) -> IndexData {
    // The decoders work on copies of the plan (see PlanCopy).
    let copy = PlanCopy::of(plan);
    let plan = &copy.plan();
    let interval = (iopts.interval.max(1024).div_ceil(1024) * 1024) as usize;
    let probe = Runner::for_fragment(plan, opts, &frag);
    let start = frag.start as usize;
    let len = super::accepted_len(&probe, frag.bytes(data).unwrap_or(&[]));
    let accepted = start + len;
    let splittable = matches!(probe.frame_mode(), None | Some(FrameMode::MemAligned));
    drop(probe);
    progress.total.store(len as u64, Ordering::Relaxed);
    let threads = match iopts.threads {
        0 => rayon::current_num_threads(),
        n => n,
    };
    let part_len = match iopts.part {
        0 => (len / (threads * 8)).clamp(16 * interval, 256 * interval),
        n => n as usize,
    }
    .div_ceil(interval)
    .max(1)
        * interval;
    let mut ctx = Ctx { data, frag, opts, interval, accepted, marked: false, progress, release, spill, tally };
    let mut out = None;
    if splittable && threads > 1 && len > part_len {
        ctx.marked = true;
        let pool = if iopts.threads == 0 { None } else { rayon::ThreadPoolBuilder::new().num_threads(threads).build().ok() };
        out = parallel(&ctx, plan, part_len, pool.as_ref());
        ctx.marked = false;
    }
    let out = out.unwrap_or_else(|| {
        progress.done.store(0, Ordering::Relaxed);
        progress.redone.store(0, Ordering::Relaxed);
        progress.parts.store(1, Ordering::Relaxed);
        let mut r = ctx.fresh(plan);
        let mut cps = Vec::new();
        let step = ctx.advance(&mut r, accepted, &mut cps, true, &mut |_, _, _| None);
        let end = ctx.last(&mut r, &mut cps, matches!(step, Step::Stopped));
        let part = Part { cps, end, ahead: Vec::new(), ahead_end: None };
        merge(&ctx, plan, &[part], len.max(1)).expect("one part needs no shifting")
    });
    progress.done.store(len as u64, Ordering::Relaxed);
    progress.finished.store(true, Ordering::Relaxed);
    out
}

fn parallel(ctx: &Ctx<'_>, plan: &BufferPlan, part_len: usize, pool: Option<&rayon::ThreadPool>) -> Option<IndexData> {
    let first = ctx.frag.start as usize;
    let jobs: Vec<(usize, PlanCopy)> =
        (first..ctx.accepted).step_by(part_len).map(|s| (s, PlanCopy::of(plan))).collect();
    ctx.progress.parts.store(jobs.len() as u64, Ordering::Relaxed);
    let work = || -> Vec<Option<Part>> { jobs
        .into_par_iter()
        .map(|(start, copy)| {
            let plan = copy.plan();
            let to = (start + part_len).min(ctx.accepted);
            let mut r = if start == first { ctx.fresh(&plan) } else { ctx.lead_in(&plan, start, to) };
            let mut cps = Vec::new();
            let step = ctx.advance(&mut r, to, &mut cps, true, &mut |_, _, _| None);
            let end = ctx.end(&mut r, &mut cps, &step, to)?;
            let mut ahead = Vec::new();
            let mut ahead_end = None;
            if matches!(end, End::Open { .. }) {
                let further = (to + LOOKAHEAD * ctx.interval).min(ctx.accepted);
                let step = ctx.advance(&mut r, further, &mut ahead, false, &mut |_, _, _| None);
                ctx.progress.redone.fetch_add((r.offset() as usize).saturating_sub(to) as u64, Ordering::Relaxed);
                ahead_end = Some(ctx.end(&mut r, &mut ahead, &step, further)?);
            }
            Some(Part { cps, end, ahead, ahead_end })
        })
        .collect() };
    let parts = match pool {
        Some(p) => p.install(work),
        None => work(),
    };
    let parts: Vec<Part> = parts.into_iter().collect::<Option<_>>()?;
    merge(ctx, plan, &parts, part_len)
}

/// Put the parts together in buffer order: from part 0, follow each decoder
/// until its state matches a later one's, and from there that one's
/// checkpoints with its counters shifted. A decoder that matches none within
/// its look-ahead is resumed here and goes on until one does (or to the end).
/// `None` when a shift cannot be applied (the caller then decodes in one pass).
fn merge(ctx: &Ctx<'_>, plan: &BufferPlan, parts: &[Part], part_len: usize) -> Option<IndexData> {
    let raw = ctx.frag.raw_source.is_some() || plan.frame_mode(ctx.opts.dstream).is_none();
    let mut acc = Acc {
        raw,
        start: ctx.frag.start,
        shift: Shift::default(),
        checkpoints: Vec::new(),
        states: Vec::new(),
        ids: Vec::new(),
        max: Maxima::default(),
        spill: ctx.spill.clone(),
        pending: None,
        tally: None,
    };
    let (mut k, mut from) = (0usize, 0u64);
    loop {
        // Whether the decoder of part `k`, at `offset`, is in the state the
        // decoder of a later part saved there.
        // The later part's checkpoint at `offset`, if any.
        let later_cp = |offset: u64| -> Option<(usize, &Cp)> {
            let m = (offset - ctx.frag.start) as usize / part_len;
            let later = parts.get(m).filter(|_| m > k)?;
            let i = later.cps.binary_search_by_key(&offset, |c| c.offset).ok()?;
            Some((m, &later.cps[i]))
        };
        let shift_to = |state: &[u8], marks: &[Mark], (m, cp): (usize, &Cp)| -> Option<(usize, Shift)> {
            let theirs = ctx.spill.get(cp.state).ok()?;
            Some((m, marks::shift_between(state, marks, &theirs, &ctx.spill.get_marks(cp.marks?)?)?))
        };
        let meets = |offset: u64, state: &[u8], marks: Option<&[Mark]>| shift_to(state, marks?, later_cp(offset)?);
        // The same for a state of ours in the spill, read only when the later
        // part has a checkpoint there.
        let meets_saved = |offset: u64, state: StateRef, marks: Option<StateRef>| -> Option<(usize, Shift)> {
            let there = later_cp(offset)?;
            shift_to(&ctx.spill.get(state).ok()?, &ctx.spill.get_marks(marks?)?, there)
        };
        let part = &parts[k];
        for cp in part.cps.iter().filter(|c| c.offset >= from) {
            acc.emit(cp)?;
        }
        let mut met = None;
        let mut end = &part.end;
        if matches!(part.end, End::Open { .. }) {
            for cp in &part.ahead {
                met = meets_saved(cp.offset, cp.state, cp.marks).map(|(m, s)| (cp.offset, m, s));
                if met.is_some() {
                    break;
                }
                acc.emit(cp)?;
            }
            end = part.ahead_end.as_ref()?;
        }
        if met.is_none() {
            match end {
                End::Last { counts, stop } => return Some(acc.finish(counts, stop.clone())),
                End::Open { offset, state, marks } => {
                    met = meets_saved(*offset, *state, *marks).map(|(m, s)| (*offset, m, s));
                    if met.is_none() {
                        // No match yet: this decoder goes on, here.
                        let state = ctx.spill.get(*state).ok()?;
                        let mut r = Runner::resume_fragment(plan, ctx.opts, &ctx.frag, &state).ok()?;
                        let mut cps = Vec::new();
                        let mut join = |o: u64, st: &[u8], mk: Option<&[Mark]>| meets(o, st, mk);
                        let step = ctx.advance(&mut r, ctx.accepted, &mut cps, false, &mut join);
                        ctx.progress.redone.fetch_add(r.offset().saturating_sub(*offset), Ordering::Relaxed);
                        let last = match step {
                            Step::Joined(o, m, s) => {
                                met = Some((o, m, s));
                                None
                            }
                            _ => Some(ctx.last(&mut r, &mut cps, matches!(step, Step::Stopped))),
                        };
                        for cp in &cps {
                            acc.emit(cp)?;
                        }
                        if let Some(End::Last { counts, stop }) = last {
                            return Some(acc.finish(&counts, stop));
                        }
                    }
                }
            }
        }
        let (offset, m, s) = met?;
        acc.shift = acc.shift.then(&s);
        if !acc.shift.consistent() {
            return None;
        }
        k = m;
        from = offset;
    }
}

/// The index as it is put together, in buffer order.
struct Acc {
    raw: bool,
    /// Where the fragment starts (the checkpoint of an empty decode).
    start: u64,
    shift: Shift,
    checkpoints: Vec<Checkpoint>,
    states: Vec<StateRef>,
    ids: Vec<IdSummary>,
    max: Maxima,
    spill: Arc<Spill>,
    /// The last checkpoint kept, its state and its segment so far (later
    /// segments join it while their checkpoints are dropped).
    pending: Option<(Checkpoint, StateRef, Seg)>,
    /// The tallies of the segments put in so far.
    tally: Option<Tally>,
}

impl Acc {
    fn counts(&self, c: &Counts) -> Counts {
        Counts {
            packets: c.packets + self.shift.get(Kind::Packets, 0),
            elements: c.elements + self.shift.get(Kind::Elements, 0),
            instructions: c.instructions + self.shift.get(Kind::Instructions, 0),
        }
    }

    /// Add a checkpoint and its segment, shifted to the decode from the start.
    /// A large state that follows the last checkpoint kept too closely (see
    /// [`dense_enough`]) is dropped, its segment joining the one before: the
    /// decision depends only on the checkpoints in buffer order, so the index
    /// is the same whatever the number of threads.
    fn emit(&mut self, cp: &Cp) -> Option<()> {
        let keep = dense_enough(self.pending.as_ref().map(|p| p.0.offset), cp.offset, cp.state.len as usize);
        let kept = if keep {
            let mut state = cp.state;
            if self.shift != Shift::default() {
                let mut bytes = self.spill.get(state).ok()?;
                let marks = self.spill.get_marks(cp.marks?)?;
                self.shift.apply(&mut bytes, &marks);
                state = self.spill.put(&bytes);
            }
            Some((Checkpoint::new(cp.offset, &self.counts(&cp.counts), &self.max, state), state))
        } else {
            None
        };
        let seg = self.shifted(&cp.seg);
        match (kept, &mut self.pending) {
            (Some((c, state)), _) => {
                self.flush();
                self.pending = Some((c, state, seg));
            }
            (None, Some(p)) => p.2.append(&seg),
            (None, None) => unreachable!("the first checkpoint is always kept"),
        }
        Some(())
    }

    /// `s` with the cycle counts of the decode from the start (an ID shifted
    /// by more than 0 counts every element: its cycle counts are positive);
    /// the totals and maxima take it into account.
    fn shifted(&mut self, s: &Seg) -> Seg {
        let mut out = s.clone();
        for i in &mut out.ids {
            let d = self.shift.get(Kind::Cycles, if self.raw { 0 } else { i.trace_id });
            if d > 0 {
                i.first_pos = Some(i.first_any);
                i.last_pos = Some(i.last_any);
            }
            let add = |p: (u64, u64)| (p.0, p.1 + d);
            i.first_any = add(i.first_any);
            i.last_any = add(i.last_any);
            i.first_pos = i.first_pos.map(add);
            i.last_pos = i.last_pos.map(add);
            if i.max_cc + d > 0 {
                i.max_cc += d;
                self.max.cc = Some(self.max.cc.map_or(i.max_cc, |m| m.max(i.max_cc)));
            }
            let id = match self.ids.iter().position(|x| x.trace_id == i.trace_id as u64) {
                Some(p) => &mut self.ids[p],
                None => {
                    self.ids.push(IdSummary { trace_id: i.trace_id as u64, ..IdSummary::default() });
                    self.ids.last_mut().unwrap()
                }
            };
            id.elements += i.elements;
            id.instructions += i.instructions;
            if let (Some(a), Some(b)) = (i.first_ts, i.last_ts) {
                if id.first_ts == format::NONE {
                    id.first_ts = a;
                }
                id.last_ts = b;
            }
            if let (Some(a), Some(b)) = (i.first_pos, i.last_pos) {
                if id.first_cc == format::NONE {
                    id.first_cc = a.1;
                }
                id.last_cc = b.1;
            }
        }
        if let Some(t) = s.max_ts {
            self.max.ts = Some(self.max.ts.map_or(t, |m| m.max(t)));
        }
        if let Some(i) = s.max_index {
            self.max.index = Some(self.max.index.map_or(i, |m| m.max(i)));
        }
        out
    }

    /// Put the checkpoint kept last into the index, with its segment.
    fn flush(&mut self) {
        let Some((mut c, state, s)) = self.pending.take() else { return };
        if let Some(t) = &s.tally {
            self.tally.get_or_insert_with(Default::default).add(t);
        }
        let mut seg = SegmentStats {
            first_ts: s.first_ts,
            last_ts: s.last_ts,
            instructions: s.instructions,
            exceptions: s.exceptions,
            gaps: s.gaps,
            spec_canceled: s.spec_canceled,
            ..SegmentStats::default()
        };
        // The cycle counts of the first and last counted element.
        let first = s.ids.iter().filter_map(|i| i.first_pos).min_by_key(|p| p.0);
        let last = s.ids.iter().filter_map(|i| i.last_pos).max_by_key(|p| p.0);
        seg.first_cc = first.map(|f| f.1);
        seg.last_cc = last.map(|l| l.1);
        c.set_segment(&seg);
        self.checkpoints.push(c);
        self.states.push(state);
    }

    fn finish(mut self, counts: &Counts, stop: Option<String>) -> IndexData {
        self.flush();
        if self.checkpoints.is_empty() {
            self.checkpoints.push(Checkpoint::new(self.start, &Counts::default(), &Maxima::default(), StateRef::empty()));
            self.states.push(StateRef::empty());
        }
        self.ids.sort_by_key(|s| s.trace_id);
        let totals = self.counts(counts);
        let mut states = States::new(self.spill.clone());
        for r in self.states {
            states.push(r);
        }
        IndexData { checkpoints: self.checkpoints, states, ids: self.ids, totals, stop, tally: self.tally }
    }
}

/// Build the index of a capture made of several fragments, each decoded from
/// fresh decoders: each fragment's index is built on its own (several at once
/// when there are many), then they are put one after the other, with the
/// counts of the fragments before added and the maxima carried on. The
/// checkpoint at each fragment's start is a restart point with no state.
/// With `tally`, the segments count what the decoders report instead
/// ([`super::tally_fragments`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn build_fragments(
    plan: &BufferPlan,
    data: &[u8],
    fragments: &[Fragment],
    opts: &RunOptions,
    iopts: &IndexOptions,
    progress: &BuildProgress,
    release: Option<Release<'_>>,
    tally: bool,
) -> IndexData {
    // The segments count only the speculative elements that did not commit:
    // the decoders need not report the commits (one record per atom).
    let mut opts = opts.clone();
    opts.decoder.spec_losses_only = true;
    // Nor need they build the ranges of committed atoms one by one, and
    // nothing reads the packets.
    opts.batched = true;
    opts.quiet_packets = true;
    let opts = &opts;
    let spill = Arc::new(Spill::new());
    if let [frag] = fragments {
        let mut out = build(plan, data, *frag, opts, iopts, progress, release, &spill, tally);
        if !tally {
            format::hash_segments(&mut out.checkpoints, data, release);
        }
        return out;
    }
    let total: u64 = fragments.iter().map(|f| f.len() as u64).sum();
    progress.total.store(total, Ordering::Relaxed);
    progress.done.store(0, Ordering::Relaxed);
    progress.parts.store(fragments.len().max(1) as u64, Ordering::Relaxed);
    let threads = match iopts.threads {
        0 => rayon::current_num_threads(),
        n => n,
    };
    let one = |copy: PlanCopy, frag: &Fragment, inner: &IndexOptions| {
        let plan = copy.plan();
        let p = BuildProgress::new();
        let d = build(&plan, data, *frag, opts, inner, &p, release, &spill, tally);
        progress.add(frag.len() as u64);
        d
    };
    let built: Vec<IndexData> = if fragments.len() >= 2 * threads && threads > 1 {
        // Many fragments: one thread each, all cores busy.
        let inner = IndexOptions { threads: 1, ..iopts.clone() };
        let jobs: Vec<(PlanCopy, Fragment)> = fragments.iter().map(|f| (PlanCopy::of(plan), *f)).collect();
        let work = || jobs.into_par_iter().map(|(c, f)| one(c, &f, &inner)).collect();
        match (iopts.threads != 0).then(|| rayon::ThreadPoolBuilder::new().num_threads(threads).build().ok()).flatten() {
            Some(pool) => pool.install(work),
            None => work(),
        }
    } else {
        fragments.iter().map(|f| one(PlanCopy::of(plan), f, iopts)).collect()
    };
    let mut out = concatenate(fragments, built, &spill);
    // Over the whole capture: a segment runs to the next checkpoint, which
    // may lie in the next fragment.
    if !tally {
        format::hash_segments(&mut out.checkpoints, data, release);
    }
    progress.done.store(total, Ordering::Relaxed);
    progress.finished.store(true, Ordering::Relaxed);
    out
}

/// The indexes of consecutive fragments as one: counts before each
/// checkpoint run on from the fragments before; the maxima before a
/// checkpoint take those of earlier fragments into account (an upper bound
/// from their segment summaries, which only makes a seek start earlier).
fn concatenate(fragments: &[Fragment], parts: Vec<IndexData>, spill: &Arc<Spill>) -> IndexData {
    let states = States::new(spill.clone());
    let mut out = IndexData { checkpoints: Vec::new(), states, ids: Vec::new(), totals: Counts::default(), stop: None, tally: None };
    let none = |v: u64| (v != format::NONE).then_some(v);
    let mut max = Maxima::default();
    let bigger = |m: Option<u64>, v: Option<u64>| match (m, v) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    for (frag, d) in fragments.iter().zip(parts) {
        let before = out.totals;
        let mut frag_max = max;
        for (mut c, &s) in d.checkpoints.into_iter().zip(d.states.refs()) {
            c.elements_before += before.elements;
            c.instructions_before += before.instructions;
            c.packets_before += before.packets;
            c.max_ts_before = bigger(max.ts, none(c.max_ts_before)).unwrap_or(format::NONE);
            c.max_cc_before = bigger(max.cc, none(c.max_cc_before)).unwrap_or(format::NONE);
            c.max_index_before = bigger(max.index, none(c.max_index_before)).unwrap_or(format::NONE);
            frag_max.ts = bigger(bigger(frag_max.ts, none(c.max_ts_before)), bigger(none(c.first_ts), none(c.last_ts)));
            frag_max.cc = bigger(bigger(frag_max.cc, none(c.max_cc_before)), bigger(none(c.first_cc), none(c.last_cc)));
            out.checkpoints.push(c);
            out.states.push(s);
        }
        if d.totals.elements > 0 {
            // Every element of the fragment lies inside it.
            frag_max.index = bigger(frag_max.index, Some(frag.end.saturating_sub(1)));
        }
        max = frag_max;
        out.totals.elements += d.totals.elements;
        out.totals.instructions += d.totals.instructions;
        out.totals.packets += d.totals.packets;
        for i in d.ids {
            match out.ids.iter_mut().find(|x| x.trace_id == i.trace_id) {
                None => out.ids.push(i),
                Some(x) => {
                    x.elements += i.elements;
                    x.instructions += i.instructions;
                    for (first, last, f, l) in
                        [(&mut x.first_ts, &mut x.last_ts, i.first_ts, i.last_ts), (&mut x.first_cc, &mut x.last_cc, i.first_cc, i.last_cc)]
                    {
                        if *first == format::NONE {
                            *first = f;
                        }
                        if l != format::NONE {
                            *last = l;
                        }
                    }
                }
            }
        }
        if let Some(t) = &d.tally {
            out.tally.get_or_insert_with(Default::default).add(t);
        }
        if out.stop.is_none() {
            out.stop = d.stop.map(|s| format!("fragment at 0x{:x}: {s}", frag.start));
        }
    }
    if out.checkpoints.is_empty() {
        out.checkpoints.push(Checkpoint::new(0, &Counts::default(), &Maxima::default(), StateRef::empty()));
        out.states.push(StateRef::empty());
    }
    out.ids.sort_by_key(|s| s.trace_id);
    out
}
