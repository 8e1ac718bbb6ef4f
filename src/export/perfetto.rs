//! Function activations as Chrome trace-event JSON, the format
//! ui.perfetto.dev and chrome://tracing load.
//!
//! One track per trace ID (`pid` 1, `tid` = trace ID). Slices are `B`/`E`
//! pairs rebuilt from the element stream of each trace ID:
//!
//! - A range whose last instruction is an executed branch with link is a
//!   call: the next range opens a slice named after the function containing
//!   its start.
//! - A range whose last instruction is an executed return (`RET`, or an A32/T32
//!   implied return such as `BX LR`) closes the innermost function slice.
//! - A range met while no function slice is innermost (the start of the
//!   export, after a gap, after returning out of the outermost known function,
//!   at the start of an exception handler) opens a slice for its function: its
//!   caller is unknown, so it sits at the outermost level (or directly inside
//!   the exception).
//! - An exception opens a slice `exception 0xNN`, closed with everything
//!   inside it by the next exception return; a call in flight when the
//!   exception was taken is resumed after it. An exception return with no
//!   exception open (taken before the export starts) closes every slice.
//!   ERET ranges are not returns: the EXCEPTION_RET element that follows
//!   them is.
//! - Gaps close every slice: no-sync, trace-on (trace resumed after a filter,
//!   an overflow or a restart), end of trace, unreachable code (ADDR_NACC),
//!   an unknown address (ETMv3) and ranges without path information (ETE Q
//!   elements), since calls and returns inside them are not known. So does a
//!   change of context ID or VMID (another process), and a nesting deeper than
//!   [`MAX_DEPTH`] (runaway calls, such as a stack switch that never returns).
//! - At the end of the exported range every slice still open is closed at the
//!   last time of its track, so every `B` has its `E`.
//!
//! - A branch without link to the first instruction of another function (a
//!   tail call, as through a PLT stub) ends the innermost function slice and
//!   opens one for that function in its place, returning where the first one
//!   would have. This needs symbols; without them a tail call stays in the
//!   slice it came from.
//! - An indirect branch (not a call, not a return instruction) to the return
//!   address of an open call is a return through another register (`BR X30`):
//!   the slices down to that call end.
//! - A branch with link to the next instruction (reading the PC) is no call.
//!
//! Time (`ts`) is, in order of preference: the cumulative cycle count of the
//! trace ID; the timestamp, counted from the first timestamp of the exported
//! range (elements of a trace ID before its first timestamp are placed at
//! that origin); the element number. `otherData.time_base` says which and
//! `otherData.time_unit` what one unit is; the viewers read `ts` as
//! microseconds, so one cycle or tick shows as 1 µs. Cycle counts and
//! timestamps come every few (hundred) elements, so between two points where
//! the time moves, events are placed in proportion to the instructions
//! executed before them (fractional `ts`). Time never goes backwards within a
//! track (a timestamp lower than one already written is written as the
//! earlier one).

use crate::element::{self, Element, ElementKind, InstrSubtype, InstrType};
use crate::index::{IndexError, SeekTarget, Seeker};
use crate::symbols::Cursor;
use crate::textout;

/// Nesting depth beyond which a track is reset (see the module notes).
pub const MAX_DEPTH: usize = 512;

/// What `ts` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeBase {
    /// Trace timestamps minus `origin`.
    Timestamp { origin: u64 },
    /// Cumulative cycle count of the trace ID.
    Cycles,
    /// Element number.
    Element,
}

impl TimeBase {
    /// What one `ts` unit is (the viewers label it a microsecond).
    pub fn unit(self) -> &'static str {
        match self {
            TimeBase::Timestamp { .. } => "1 ts = 1 timestamp tick (shown as 1 us)",
            TimeBase::Cycles => "1 ts = 1 processor cycle (shown as 1 us)",
            TimeBase::Element => "1 ts = 1 element (shown as 1 us)",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimeBase::Timestamp { .. } => "timestamp",
            TimeBase::Cycles => "cycles",
            TimeBase::Element => "element",
        }
    }
}

/// The time base of elements `from..to`: timestamps when any element of the
/// range has one, else cycle counts when any has one, else element numbers.
/// The index finds the first timestamped element without decoding up to it;
/// from there at most the range itself is read, stopping at the first hit.
pub fn time_base(
    seeker: &Seeker<'_>,
    from: u64,
    to: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<TimeBase>, IndexError> {
    // Cycle counts are cumulative: one before the end means the range has
    // them. They come every few ranges where timestamps come every few
    // hundred, so they are preferred: with timestamps nearly every function
    // slice began and ended at the same time.
    if seeker.find(&SeekTarget::Cycles(1))?.is_some_and(|n| n < to) {
        return Ok(Some(TimeBase::Cycles));
    }
    if let Some(first) = seeker.find(&SeekTarget::Timestamp(0))? {
        if first < to {
            let at = first.max(from);
            let mut origin = None;
            let mut stop = false;
            seeker.run_from(seeker.checkpoint_for(&SeekTarget::Element(at)), |n| {
                if n.number < at {
                    return true;
                }
                if n.number >= to {
                    return false;
                }
                if cancelled() {
                    stop = true;
                    return false;
                }
                origin = n.element.time.timestamp;
                origin.is_none()
            })?;
            if stop {
                return Ok(None);
            }
            if let Some(origin) = origin {
                return Ok(Some(TimeBase::Timestamp { origin }));
            }
        }
    }
    Ok(Some(TimeBase::Element))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    /// A function activation, with the address its caller continues at
    /// (unknown for a function whose call was not seen) and the function's
    /// entry address (when a symbol covers it).
    Function { ret: Option<u64>, entry: Option<u64> },
    /// An exception, with the return address of a call in flight when it was
    /// taken.
    Exception { pending_call: Option<u64> },
}

fn is_function(f: Option<&Frame>) -> bool {
    matches!(f, Some(Frame::Function { .. }))
}

/// Where an event happens: its track and the element behind it (its time is
/// placed later, see `place`).
#[derive(Clone, Copy)]
struct At {
    tid: u8,
    number: u64,
}

/// How the last range of a track left its code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Exit {
    /// Not by a branch we follow (or nothing since the last gap).
    #[default]
    Other,
    /// An executed call, returning to the address given.
    Call(u64),
    /// An executed branch without link that is not a return instruction. An
    /// indirect one may be a return through another register (`BR X30`).
    Jump { indirect: bool },
}

/// A begin or end event waiting for its time.
struct Pending {
    ph: char,
    /// Instructions the track had executed when it happened.
    pos: u64,
    /// The event's JSON after its `ts` value.
    rest: String,
}

/// Events a track holds back at most before writing them at the last known
/// time (a trace whose time stands still for that long).
const MAX_PENDING: usize = 1 << 16;

#[derive(Default)]
struct Track {
    seen: bool,
    stack: Vec<Frame>,
    exit: Exit,
    last_ts: u64,
    /// Context ID and VMID last reported.
    context: (Option<u32>, Option<u32>),
    /// Instructions executed so far on this track.
    pos: u64,
    /// Where the time last moved: the instruction count there.
    anchor_pos: u64,
    /// Events since then, placed when the time moves again.
    pending: Vec<Pending>,
}

pub(super) struct PerfettoSink<'a> {
    cursor: Option<Cursor<'a>>,
    base: TimeBase,
    tracks: Vec<Track>,
    first: bool,
    /// Written into `otherData`.
    meta: Vec<(&'static str, String)>,
    process: String,
}

impl<'a> PerfettoSink<'a> {
    /// `process` names the one process track (the capture); `meta` goes
    /// into `otherData`.
    pub fn new(cursor: Option<Cursor<'a>>, base: TimeBase, process: String, meta: Vec<(&'static str, String)>) -> Self {
        PerfettoSink { cursor, base, tracks: (0..128).map(|_| Track::default()).collect(), first: true, meta, process }
    }

    /// Start one event object (with the separator before it).
    fn event(&mut self, out: &mut String, ph: char, tid: u8, ts: f64) {
        out.push_str(if self.first { "\n" } else { ",\n" });
        self.first = false;
        out.push_str("{\"ph\":\"");
        out.push(ph);
        out.push_str("\",\"pid\":1,\"tid\":");
        textout::dec(out, tid as u64);
        out.push_str(",\"ts\":");
        if ts.fract() == 0.0 {
            textout::dec(out, ts as u64);
        } else {
            let t = format!("{ts:.3}");
            out.push_str(t.trim_end_matches('0').trim_end_matches('.'));
        }
    }

    /// Hold an event of track `tid` until its time is known.
    fn hold(&mut self, out: &mut String, ph: char, tid: u8, rest: String) {
        let t = &mut self.tracks[tid as usize];
        t.pending.push(Pending { ph, pos: t.pos, rest });
        if t.pending.len() >= MAX_PENDING {
            self.place(out, tid, None);
        }
    }

    /// Write the held events of track `tid`. With `to` (the time the track
    /// reached now), each is placed between the last time and that one in
    /// proportion to the instructions executed before it: timestamps and
    /// cycle counts come every few hundred or few elements, and without this
    /// nearly every function slice began and ended at one time. Without
    /// `to`, all are at the last time.
    fn place(&mut self, out: &mut String, tid: u8, to: Option<(u64, u64)>) {
        let t = &mut self.tracks[tid as usize];
        let pending = std::mem::take(&mut t.pending);
        let (t0, p0) = (t.last_ts as f64, t.anchor_pos);
        for ev in pending {
            let ts = match to {
                Some((t1, p1)) if p1 > p0 => {
                    t0 + (t1 as f64 - t0) * (ev.pos.saturating_sub(p0)) as f64 / (p1 - p0) as f64
                }
                _ => t0,
            };
            self.event(out, ev.ph, tid, ts);
            out.push_str(&ev.rest);
        }
    }

    fn begin_slice(&mut self, out: &mut String, at: At, frame: Frame, name: &str, addr: Option<u64>) {
        let At { tid, number } = at;
        if self.tracks[tid as usize].stack.len() >= MAX_DEPTH {
            self.close_all(out, tid);
        }
        let mut rest = String::new();
        self.describe(&mut rest, frame, name, addr, number);
        self.hold(out, 'B', tid, rest);
        self.tracks[tid as usize].stack.push(frame);
    }

    fn describe(&self, out: &mut String, frame: Frame, name: &str, addr: Option<u64>, number: u64) {
        out.push_str(",\"name\":");
        element::write_json_string(out, name);
        out.push_str(match frame {
            Frame::Function { .. } => ",\"cat\":\"function\",\"args\":{",
            Frame::Exception { .. } => ",\"cat\":\"exception\",\"args\":{",
        });
        if let Some(a) = addr {
            out.push_str("\"address\":\"0x");
            textout::hex(out, a, 0);
            out.push_str("\",");
        }
        out.push_str("\"element\":");
        textout::dec(out, number);
        out.push_str("}}");
    }

    fn end_slice(&mut self, out: &mut String, tid: u8) -> Option<Frame> {
        let f = self.tracks[tid as usize].stack.pop()?;
        self.hold(out, 'E', tid, "}".into());
        Some(f)
    }

    fn close_all(&mut self, out: &mut String, tid: u8) {
        while self.end_slice(out, tid).is_some() {}
        self.tracks[tid as usize].exit = Exit::Other;
    }

    fn time(&self, number: u64, e: &Element) -> u64 {
        let last = self.tracks[e.trace_id as usize].last_ts;
        let t = match self.base {
            TimeBase::Timestamp { origin } => e.time.timestamp.map_or(last, |t| t.saturating_sub(origin)),
            TimeBase::Cycles => e.time.total_cycles,
            TimeBase::Element => number,
        };
        t.max(last)
    }

    fn enter_function(&mut self, out: &mut String, at: At, addr: u64, ret: Option<u64>) {
        let mut name = String::new();
        let loc = self.cursor.as_mut().map(|c| c.locate(addr)).unwrap_or_default();
        match loc.function {
            Some(f) => name.push_str(f.name()),
            None => {
                name.push_str("0x");
                textout::hex(&mut name, addr, 0);
            }
        }
        let entry = loc.function.map(|_| addr.wrapping_sub(loc.offset));
        self.begin_slice(out, at, Frame::Function { ret, entry }, &name, Some(addr));
    }

    /// Whether `addr` is the first instruction of a function other than the
    /// one of the innermost slice: a branch there is a tail call.
    fn tail_call_to(&mut self, tid: u8, addr: u64) -> bool {
        let Some(&Frame::Function { entry, .. }) = self.tracks[tid as usize].stack.last() else {
            return false;
        };
        let Some(c) = self.cursor.as_mut() else { return false };
        let loc = c.locate(addr);
        loc.function.is_some() && loc.offset == 0 && entry != Some(addr)
    }
}

/// The depth to unwind to when execution continues at `addr`: below the
/// innermost open call (inside the innermost exception) returning there.
fn returns_to(stack: &[Frame], addr: u64) -> Option<usize> {
    for (i, f) in stack.iter().enumerate().rev() {
        match f {
            Frame::Function { ret: Some(r), .. } if *r == addr => return Some(i),
            Frame::Exception { .. } => return None,
            _ => {}
        }
    }
    None
}

impl super::Sink for PerfettoSink<'_> {
    fn begin(&mut self, out: &mut String) {
        out.push_str("{\"otherData\":{");
        for (i, (k, v)) in self.meta.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            element::write_json_string(out, k);
            out.push(':');
            element::write_json_string(out, v);
        }
        out.push_str("},\"traceEvents\":[");
        self.event(out, 'M', 0, 0.0);
        out.push_str(",\"name\":\"process_name\",\"args\":{\"name\":");
        element::write_json_string(out, &self.process);
        out.push_str("}}");
    }

    fn element(&mut self, out: &mut String, number: u64, e: &Element) {
        let tid = e.trace_id & 0x7f;
        let ts = self.time(number, e);
        let track = &self.tracks[tid as usize];
        if ts > track.last_ts {
            let pos = track.pos;
            self.place(out, tid, Some((ts, pos)));
            let track = &mut self.tracks[tid as usize];
            track.anchor_pos = pos;
        }
        let track = &mut self.tracks[tid as usize];
        track.last_ts = ts;
        if !track.seen {
            track.seen = true;
            self.event(out, 'M', tid, 0.0);
            out.push_str(",\"name\":\"thread_name\",\"args\":{\"name\":\"trace ID 0x");
            textout::hex(out, tid as u64, 2);
            out.push_str("\"}}");
        }
        let at = At { tid, number };
        use ElementKind as K;
        match e.kind {
            K::InstrRange { start, end, count, executed, last_type, last_subtype, .. } => {
                let exit = std::mem::take(&mut self.tracks[tid as usize].exit);
                // A branch with link to the next instruction reads the PC; it
                // is no call.
                let call = match exit {
                    Exit::Call(ret) if ret != start => Some(ret),
                    _ => None,
                };
                if exit == (Exit::Jump { indirect: true }) {
                    // Only after an indirect branch: a direct branch to a return
                    // address is a loop in a recursive function, not a return.
                    if let Some(depth) = returns_to(&self.tracks[tid as usize].stack, start) {
                        while self.tracks[tid as usize].stack.len() > depth {
                            self.end_slice(out, tid);
                        }
                    }
                }
                if call.is_some() || !is_function(self.tracks[tid as usize].stack.last()) {
                    self.enter_function(out, at, start, call);
                } else if matches!(exit, Exit::Jump { .. }) && self.tail_call_to(tid, start) {
                    // The callee returns to the caller's caller: it takes the
                    // place of the slice it was branched to from.
                    if let Some(Frame::Function { ret, .. }) = self.end_slice(out, tid) {
                        self.enter_function(out, at, start, ret);
                    }
                }
                let t = &mut self.tracks[tid as usize];
                t.pos += count as u64;
                if executed {
                    match (last_type, last_subtype) {
                        (_, InstrSubtype::BranchLink) => t.exit = Exit::Call(end),
                        (_, InstrSubtype::Return | InstrSubtype::ImpliedReturn) if is_function(t.stack.last()) => {
                            self.end_slice(out, tid);
                        }
                        (InstrType::Branch, InstrSubtype::None) => t.exit = Exit::Jump { indirect: false },
                        (InstrType::IndirectBranch, InstrSubtype::None) => t.exit = Exit::Jump { indirect: true },
                        _ => {}
                    }
                }
            }
            K::Exception { number: n, .. } => {
                let pending_call = match std::mem::take(&mut self.tracks[tid as usize].exit) {
                    Exit::Call(ret) => Some(ret),
                    _ => None,
                };
                let name = format!("exception 0x{n:02x}");
                self.begin_slice(out, at, Frame::Exception { pending_call }, &name, None);
            }
            K::ExceptionReturn => {
                let t = &self.tracks[tid as usize];
                if t.stack.iter().any(|f| matches!(f, Frame::Exception { .. })) {
                    while let Some(f) = self.end_slice(out, tid) {
                        if let Frame::Exception { pending_call } = f {
                            self.tracks[tid as usize].exit = pending_call.map_or(Exit::Other, Exit::Call);
                            break;
                        }
                    }
                } else {
                    self.close_all(out, tid);
                }
            }
            K::PeContext(c) => {
                let t = &mut self.tracks[tid as usize];
                let changed = |a: Option<u32>, b: Option<u32>| a.is_some() && b.is_some() && a != b;
                let (ctx, vmid) = t.context;
                let other = changed(ctx, c.context_id) || changed(vmid, c.vmid);
                t.context = (c.context_id.or(ctx), c.vmid.or(vmid));
                if other {
                    self.close_all(out, tid);
                }
            }
            K::NoSync(_)
            | K::TraceOn(_)
            | K::EndOfTrace(_)
            | K::AddrNotAccessible { .. }
            | K::AddrUnknown
            | K::RangeNoPath { .. } => {
                self.close_all(out, tid);
                if let K::RangeNoPath { count, .. } = e.kind {
                    self.tracks[tid as usize].pos += count as u64;
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, out: &mut String) {
        for tid in 0..self.tracks.len() as u8 {
            self.close_all(out, tid);
            self.place(out, tid, None);
        }
        out.push_str("\n]}\n");
    }
}
