//! Call stacks rebuilt from decoded elements, one pass, streaming.
//!
//! Elements arrive with the stream they belong to (trace ID or CPU) and,
//! when the input knows it, the thread. Each thread (else each context ID
//! and VMID of a stream) has a stack of its own; a context change switches
//! stacks, it does not close frames.
//!
//! How the stack moves (facts from the Arm ARM's branch instructions and
//! from the element model of OpenCSD, `../shared/spec/opencsd-generic-elements.txt`):
//!
//! - A range whose last instruction is an executed branch with link is a
//!   call: the next range enters a frame returning to the address after
//!   that instruction. A branch with link to the next instruction reads the
//!   PC and is no call.
//! - An executed return (`RET`, A32/T32 `BX LR`, `POP {..,PC}`) leaves the
//!   innermost function frame (when the code after it starts, so that cycle
//!   counts reported after the return still count in the frame). When the next range does not start at that
//!   frame's return address (longjmp, a C++ exception unwinder), frames are
//!   unwound down to an open call returning there, or else down to the
//!   innermost frame of the function that holds the landing address.
//! - An indirect branch that is not a return, to the return address of an
//!   open call, is a return through another register (`BR X30`, glibc's
//!   longjmp): the frames down to that call end.
//! - A branch without link to the entry of another function is a tail call:
//!   the callee takes the frame's place and returns where it would have.
//! - An exception opens a frame of its own, ended with everything inside it
//!   by the next exception return; a call in flight when it was taken is
//!   resumed after it.
//! - Gaps (no sync, trace on, overflow, unreachable code, an unknown
//!   address, ranges without path) close every open frame of the stream's
//!   current stack as [`Left::Gap`]: what happened in between is unknown and
//!   is never guessed. Code seen while no function frame is open enters one
//!   marked [`Entered::Unknown`] (its caller was not seen).
//!
//! Memory is bounded by the depth ([`MAX_DEPTH`]) times the threads seen.

use std::collections::HashMap;

use super::CodeMap;
use crate::element::{Element, ElementKind, InstrSubtype, InstrType, Isa};

/// Nesting deeper than this closes the stack (a stack switch that never
/// returns would otherwise grow it without bound).
pub const MAX_DEPTH: usize = 1024;

/// Function key for code that no symbol and no open frame accounts for.
pub const UNKNOWN: u64 = u64::MAX;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKind {
    /// A function, keyed by its entry address (the symbol's start, or the
    /// address the frame was entered at when no symbol covers it).
    Function(u64),
    /// An exception handler, by exception number.
    Exception(u32),
}

/// How a frame was entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entered {
    Call,
    TailCall,
    /// Taken exception.
    Exception,
    /// The caller was not seen (trace start, after a gap, after a return
    /// out of the outermost known frame).
    Unknown,
}

/// How a frame ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Left {
    /// Its return (or exception return) was seen.
    Return,
    /// A frame further out was returned to (longjmp, exception unwinding).
    Unwound,
    /// Replaced by a tail call.
    TailCall,
    /// A gap in the trace: the end is unknown.
    Gap,
    /// The input ended with the frame open.
    End,
}

/// One open frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    pub entered: Entered,
    /// Where the caller continues, when known.
    pub ret: Option<u64>,
    /// Number of the element that entered the frame.
    pub entry_element: u64,
    /// The thread's instruction, cycle and time counters at entry.
    pub instructions_at_entry: u64,
    pub cycles_at_entry: u64,
    pub time_at_entry: Option<u64>,
    /// For an exception frame: the return address of a call taken just
    /// before the exception, resumed after it.
    pending_call: Option<u64>,
}

/// A frame that ended, with what it cost (itself and everything it called).
#[derive(Clone, Copy, Debug)]
pub struct Closed {
    pub frame: Frame,
    pub left: Left,
    pub exit_element: u64,
    pub instructions: u64,
    pub cycles: u64,
    /// Timestamp ticks between entry and exit, when both are known.
    pub time: Option<u64>,
}

/// Which stack: a stream, and the thread (or context) on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ThreadKey {
    pub stream: u32,
    pub context: Option<u64>,
}

/// Where an element comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Origin {
    /// Trace ID, or CPU for per-CPU captures.
    pub stream: u32,
    /// The thread, when the input knows it (perf switch records); else the
    /// context ID and VMID of the stream's context elements are used.
    pub thread: Option<u64>,
}

/// What the reconstruction reports. Every method has an empty default.
pub trait StackListener {
    /// A frame was entered; it is the last of `stack`.
    fn entered(&mut self, _thread: ThreadKey, _stack: &[Frame]) {}
    /// A frame ended; `parents` is what remains open.
    fn left(&mut self, _thread: ThreadKey, _parents: &[Frame], _closed: &Closed) {}
    /// `count` instructions of the function `func` (by address) ran with
    /// `stack` open.
    fn executed(&mut self, _thread: ThreadKey, _stack: &[Frame], _func: u64, _count: u64) {}
    /// Cycles counted while `func` ran last.
    fn cycles(&mut self, _thread: ThreadKey, _stack: &[Frame], _func: u64, _cycles: u64) {}
    /// Timestamp ticks passed while `func` ran last.
    fn time(&mut self, _thread: ThreadKey, _stack: &[Frame], _func: u64, _ticks: u64) {}
}

/// How the last range of a thread left its code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Exit {
    #[default]
    Other,
    /// An executed call, returning to the address given.
    Call(u64),
    /// An executed branch without link that is not a return instruction.
    Jump { indirect: bool },
    /// An executed return whose frame is still open: it ends when the code
    /// after it starts (or anything else happens), so that cycles and time
    /// reported after the return instruction still count in it.
    Returning { at: u64 },
}

#[derive(Clone, Default)]
struct Thread {
    frames: Vec<Frame>,
    exit: Exit,
    instructions: u64,
    cycles: u64,
    time: Option<u64>,
    last_func: u64,
}

#[derive(Clone, Default)]
struct Stream {
    context: Option<u64>,
}

/// The reconstruction over any number of streams and threads. Cloning it
/// keeps its whole state, so a decode resumed from a clone goes on exactly
/// as the original would (the viewer keeps one per index segment).
#[derive(Clone, Default)]
pub struct CallStacks {
    threads: HashMap<ThreadKey, Thread>,
    streams: HashMap<u32, Stream>,
}

fn returns_to(stack: &[Frame], addr: u64) -> Option<usize> {
    for (i, f) in stack.iter().enumerate().rev() {
        match f.kind {
            FrameKind::Function(_) if f.ret == Some(addr) => return Some(i),
            FrameKind::Exception(_) => return None,
            _ => {}
        }
    }
    None
}

fn top_function(stack: &[Frame]) -> Option<u64> {
    match stack.last()?.kind {
        FrameKind::Function(k) => Some(k),
        FrameKind::Exception(_) => None,
    }
}

impl CallStacks {
    pub fn new() -> CallStacks {
        CallStacks::default()
    }

    /// Feed one element (numbered as a full decode numbers it).
    pub fn feed(&mut self, code: &dyn CodeMap, origin: Origin, number: u64, e: &Element, l: &mut dyn StackListener) {
        let stream = self.streams.entry(origin.stream).or_default();
        if let Some(t) = origin.thread {
            stream.context = Some(t);
        } else if let ElementKind::PeContext(c) = e.kind {
            if let Some(id) = c.context_id {
                stream.context = Some((c.vmid.unwrap_or(0) as u64) << 32 | id as u64);
            }
        }
        let key = ThreadKey { stream: origin.stream, context: stream.context };
        let t = self.threads.entry(key).or_default();
        use ElementKind as K;
        match e.kind {
            K::InstrRange { start, end, count, last_type, last_subtype, executed, .. } => {
                range(code, key, t, number, e, start, end, count, e.isa, l);
                let exit = if !executed {
                    Exit::Other
                } else {
                    match (last_type, last_subtype) {
                        (_, InstrSubtype::BranchLink) => Exit::Call(end),
                        (_, InstrSubtype::Return | InstrSubtype::ImpliedReturn) => Exit::Returning { at: number },
                        (InstrType::Branch, InstrSubtype::None) => Exit::Jump { indirect: false },
                        (InstrType::IndirectBranch, InstrSubtype::None) => Exit::Jump { indirect: true },
                        _ => Exit::Other,
                    }
                };
                t.exit = exit;
            }
            K::Exception { number: n, .. } => {
                settle(key, t, number, l);
                let pending_call = match std::mem::take(&mut t.exit) {
                    Exit::Call(r) => Some(r),
                    _ => None,
                };
                push(key, t, number, FrameKind::Exception(n), Entered::Exception, None, pending_call, l);
            }
            K::ExceptionReturn => {
                settle(key, t, number, l);
                if t.frames.iter().any(|f| matches!(f.kind, FrameKind::Exception(_))) {
                    while let Some(top) = t.frames.last() {
                        if let FrameKind::Exception(_) = top.kind {
                            let f = pop(key, t, number, Left::Return, l);
                            t.exit = f.pending_call.map_or(Exit::Other, Exit::Call);
                            break;
                        }
                        pop(key, t, number, Left::Unwound, l);
                    }
                } else {
                    // Taken before the trace (or the stack) started: where it
                    // returns to is not known.
                    close_all(key, t, number, Left::Gap, l);
                }
            }
            K::RangeNoPath { start, count, .. } => {
                settle(key, t, number, l);
                close_all(key, t, number, Left::Gap, l);
                let f = function_key(code, &t.frames, start);
                t.instructions += count as u64;
                t.last_func = f;
                l.executed(key, &t.frames, f, count as u64);
            }
            K::NoSync(_) | K::TraceOn(_) | K::AddrNotAccessible { .. } | K::AddrUnknown => {
                settle(key, t, number, l);
                close_all(key, t, number, Left::Gap, l)
            }
            K::EndOfTrace(_) => {
                settle(key, t, number, l);
                close_all(key, t, number, Left::End, l)
            }
            _ => {}
        }
        if let Some(c) = e.cycle_count {
            t.cycles += c as u64;
            l.cycles(key, &t.frames, t.last_func, c as u64);
        }
        if let Some(ts) = e.time.timestamp {
            if let Some(prev) = t.time {
                if ts > prev {
                    l.time(key, &t.frames, t.last_func, ts - prev);
                }
            }
            t.time = Some(t.time.map_or(ts, |p| p.max(ts)));
        }
    }

    /// End of input: every open frame ends as [`Left::End`].
    pub fn finish(&mut self, number: u64, l: &mut dyn StackListener) {
        let mut keys: Vec<ThreadKey> = self.threads.keys().copied().collect();
        keys.sort();
        for k in keys {
            if let Some(t) = self.threads.get_mut(&k) {
                settle(k, t, number, l);
                close_all(k, t, number, Left::End, l);
            }
        }
    }

    /// The thread a stream's next element belongs to (its last context).
    pub fn thread_of(&self, stream: u32) -> ThreadKey {
        ThreadKey { stream, context: self.streams.get(&stream).and_then(|s| s.context) }
    }

    /// The open frames of a thread (innermost last).
    pub fn stack(&self, key: &ThreadKey) -> &[Frame] {
        self.threads.get(key).map_or(&[], |t| &t.frames)
    }
}

/// The function key of `addr`: its symbol, else the innermost frame when
/// that frame is itself in code no symbol covers (bare addresses trust the
/// stack), else [`UNKNOWN`].
fn function_key(code: &dyn CodeMap, stack: &[Frame], addr: u64) -> u64 {
    if let Some((entry, _)) = code.function_at(addr) {
        return entry;
    }
    match top_function(stack) {
        Some(k) if code.function_at(k).is_none() => k,
        _ => UNKNOWN,
    }
}

/// The key a frame entered at `addr` gets.
fn entry_key(code: &dyn CodeMap, addr: u64) -> u64 {
    code.function_at(addr).map_or(addr, |(entry, _)| entry)
}

#[allow(clippy::too_many_arguments)]
fn range(
    code: &dyn CodeMap,
    key: ThreadKey,
    t: &mut Thread,
    number: u64,
    _e: &Element,
    start: u64,
    end: u64,
    count: u32,
    isa: Isa,
    l: &mut dyn StackListener,
) {
    match std::mem::take(&mut t.exit) {
        Exit::Call(ret) if ret != start => {
            push(key, t, number, FrameKind::Function(entry_key(code, start)), Entered::Call, Some(ret), None, l);
        }
        Exit::Returning { at } => {
            let expected = match top_function(&t.frames) {
                Some(_) => pop(key, t, at, Left::Return, l).ret,
                None => None,
            };
            if expected == Some(start) {
                // Back where the call was made.
            } else if let Some(depth) = returns_to(&t.frames, start) {
                unwind_to(key, t, number, depth, l);
            } else if let Some((entry, _)) = code.function_at(start) {
                // Landed inside a function that is open further out (a
                // C++ landing pad): the frames above it were unwound.
                let pos = t.frames.iter().rposition(|f| f.kind == FrameKind::Function(entry));
                let stop = t.frames.iter().rposition(|f| matches!(f.kind, FrameKind::Exception(_)));
                if let Some(p) = pos.filter(|p| stop.is_none_or(|s| s < *p)) {
                    while t.frames.len() > p + 1 {
                        pop(key, t, number, Left::Unwound, l);
                    }
                }
            }
        }
        Exit::Jump { indirect } => {
            let back = if indirect { returns_to(&t.frames, start) } else { None };
            if let Some(depth) = back {
                unwind_to(key, t, number, depth, l);
            } else if let (Some(top), Some((entry, _))) = (top_function(&t.frames), code.function_at(start)) {
                if entry == start && top != start {
                    let old = pop(key, t, number, Left::TailCall, l);
                    push(key, t, number, FrameKind::Function(start), Entered::TailCall, old.ret, None, l);
                }
            }
        }
        _ => {}
    }
    if top_function(&t.frames).is_none() {
        push(key, t, number, FrameKind::Function(entry_key(code, start)), Entered::Unknown, None, None, l);
    }
    // Instructions by address: a range that runs on past the end of its
    // function (fall-through into the next symbol) is split where A64's
    // fixed size makes the count of each part known.
    let mut at = start;
    let mut left = count as u64;
    while left > 0 {
        let f = function_key(code, &t.frames, at);
        let n = match code.function_at(at) {
            Some((_, fend)) if isa == Isa::A64 && fend > at && fend < end && end - start == 4 * count as u64 => {
                ((fend - at).div_ceil(4)).min(left)
            }
            _ => left,
        };
        t.instructions += n;
        t.last_func = f;
        l.executed(key, &t.frames, f, n);
        left -= n;
        at += 4 * n;
    }
}

/// End the frame of a return seen last, before anything else happens.
fn settle(key: ThreadKey, t: &mut Thread, _number: u64, l: &mut dyn StackListener) {
    if let Exit::Returning { at } = t.exit {
        t.exit = Exit::Other;
        if top_function(&t.frames).is_some() {
            pop(key, t, at, Left::Return, l);
        }
    }
}

/// Pop frames down to and including the frame at `depth` (which returned).
fn unwind_to(key: ThreadKey, t: &mut Thread, number: u64, depth: usize, l: &mut dyn StackListener) {
    while t.frames.len() > depth + 1 {
        pop(key, t, number, Left::Unwound, l);
    }
    if t.frames.len() == depth + 1 {
        pop(key, t, number, Left::Return, l);
    }
}

#[allow(clippy::too_many_arguments)]
fn push(
    key: ThreadKey,
    t: &mut Thread,
    number: u64,
    kind: FrameKind,
    entered: Entered,
    ret: Option<u64>,
    pending_call: Option<u64>,
    l: &mut dyn StackListener,
) {
    if t.frames.len() >= MAX_DEPTH {
        close_all(key, t, number, Left::Gap, l);
    }
    t.frames.push(Frame {
        kind,
        entered,
        ret,
        entry_element: number,
        instructions_at_entry: t.instructions,
        cycles_at_entry: t.cycles,
        time_at_entry: t.time,
        pending_call,
    });
    l.entered(key, &t.frames);
}

fn pop(key: ThreadKey, t: &mut Thread, number: u64, left: Left, l: &mut dyn StackListener) -> Frame {
    let frame = t.frames.pop().expect("pop on a non-empty stack");
    let closed = Closed {
        frame,
        left,
        exit_element: number,
        instructions: t.instructions - frame.instructions_at_entry,
        cycles: t.cycles - frame.cycles_at_entry,
        time: match (frame.time_at_entry, t.time) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        },
    };
    l.left(key, &t.frames, &closed);
    frame
}

fn close_all(key: ThreadKey, t: &mut Thread, number: u64, left: Left, l: &mut dyn StackListener) {
    while !t.frames.is_empty() {
        pop(key, t, number, left, l);
    }
    t.exit = Exit::Other;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::{PeContext, Time, TraceOnReason};
    use crate::profile::stats::{Group, Stats};
    use crate::profile::FunctionMap;

    /// f at 0x1000, g at 0x2000, h at 0x3000, 0x100 bytes each.
    fn code() -> FunctionMap {
        FunctionMap::new(["f", "g", "h"].iter().enumerate().map(|(i, n)| {
            let a = 0x1000 * (i as u64 + 1);
            let range = a..a + 0x100;
            (n.to_string(), a, vec![range])
        }))
    }

    fn el(kind: ElementKind) -> Element {
        Element { index: 0, trace_id: 0x10, kind, isa: Isa::A64, cycle_count: None, time: Time::default() }
    }

    /// A range of `n` instructions at `start` ending with the given branch.
    fn r(start: u64, n: u64, t: InstrType, s: InstrSubtype) -> Element {
        el(ElementKind::InstrRange {
            start,
            end: start + 4 * n,
            count: n as u32,
            last_type: t,
            last_subtype: s,
            last_size: 4,
            executed: true,
            conditional: false,
        })
    }
    fn call(start: u64, n: u64) -> Element {
        r(start, n, InstrType::Branch, InstrSubtype::BranchLink)
    }
    fn ret(start: u64, n: u64) -> Element {
        r(start, n, InstrType::IndirectBranch, InstrSubtype::Return)
    }
    fn jump(start: u64, n: u64) -> Element {
        r(start, n, InstrType::Branch, InstrSubtype::None)
    }
    fn ijump(start: u64, n: u64) -> Element {
        r(start, n, InstrType::IndirectBranch, InstrSubtype::None)
    }

    fn run(seq: &[Element]) -> (Stats, CallStacks) {
        let code = code();
        let mut cs = CallStacks::new();
        let mut st = Stats::new(Group::All);
        for (i, e) in seq.iter().enumerate() {
            cs.feed(&code, Origin { stream: 0x10, thread: None }, i as u64, e, &mut st);
        }
        (st, cs)
    }

    fn calls(st: &Stats, f: u64) -> (u64, u64, u64) {
        let s = st.functions.get(&(None, f)).copied().unwrap_or_default();
        (s.calls, s.self_instructions, s.total_instructions)
    }

    #[test]
    fn call_and_return() {
        // f calls g at 0x1010 (returns to 0x1014); g returns; f goes on.
        let (st, cs) = run(&[call(0x1000, 5), ret(0x2000, 3), jump(0x1014, 2)]);
        assert_eq!(calls(&st, 0x2000), (1, 3, 3));
        assert_eq!(calls(&st, 0x1000), (0, 7, 0));
        assert_eq!(st.pairs.get(&(None, 0x1000, 0x2000)).map(|p| (p.calls, p.instructions)), Some((1, 3)));
        let g = st.functions[&(None, 0x2000)];
        assert_eq!((g.complete_calls, g.min_call, g.max_call), (1, 3, 3));
        let key = ThreadKey { stream: 0x10, context: None };
        assert_eq!(cs.stack(&key).len(), 1, "f stays open");
    }

    #[test]
    fn branch_with_link_to_the_next_instruction_is_no_call() {
        let (st, _) = run(&[call(0x1000, 2), jump(0x1008, 1)]);
        assert_eq!(st.pairs.len(), 0);
        assert_eq!(calls(&st, 0x1000).1, 3);
    }

    #[test]
    fn tail_call_replaces_the_frame() {
        // f calls g; g branches to h's entry; h returns to f.
        let (st, cs) = run(&[call(0x1000, 2), jump(0x2000, 2), ret(0x3000, 4), jump(0x1008, 1)]);
        assert_eq!(calls(&st, 0x2000).0, 1);
        assert_eq!(calls(&st, 0x3000), (1, 4, 4));
        assert!(st.pairs.contains_key(&(None, 0x1000, 0x3000)), "h is called from f's place");
        assert_eq!(cs.stack(&ThreadKey { stream: 0x10, context: None }).len(), 1);
        assert_eq!(st.unknown_ends, 0);
    }

    #[test]
    fn indirect_branch_to_a_return_address_returns() {
        // f calls g, g calls h, h returns with BR to f's return address
        // (glibc's longjmp): g and h end.
        let (st, cs) = run(&[call(0x1000, 2), call(0x2000, 2), ijump(0x3000, 2), jump(0x1008, 1)]);
        assert_eq!(cs.stack(&ThreadKey { stream: 0x10, context: None }).len(), 1);
        assert_eq!(st.functions[&(None, 0x2000)].complete_calls, 1);
        assert_eq!(st.functions[&(None, 0x3000)].complete_calls, 1);
    }

    #[test]
    fn return_landing_inside_an_outer_function_unwinds() {
        // f calls g, g calls h; h returns into the middle of f (a landing pad).
        let (_, cs) = run(&[call(0x1000, 2), call(0x2000, 2), ret(0x3000, 2), jump(0x1040, 1)]);
        let s = cs.stack(&ThreadKey { stream: 0x10, context: None });
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].kind, FrameKind::Function(0x1000));
    }

    #[test]
    fn exception_and_return_resume_a_pending_call() {
        let exc = el(ElementKind::Exception {
            number: 8,
            ret_addr: Some(0x2000),
            ret_addr_is_branch_target: true,
            m_tail_chain: false,
        });
        // f calls g, but an exception is taken before g's first instruction.
        let (st, cs) = run(&[
            call(0x1000, 2),
            exc,
            r(0x8000, 3, InstrType::IndirectBranch, InstrSubtype::ExceptionReturn),
            el(ElementKind::ExceptionReturn),
            ret(0x2000, 2),
            jump(0x1008, 1),
        ]);
        assert_eq!(calls(&st, 0x2000), (1, 2, 2));
        assert_eq!(cs.stack(&ThreadKey { stream: 0x10, context: None }).len(), 1);
        // The handler's code has no symbol: it counts under its own frame.
        assert_eq!(calls(&st, 0x8000).1, 3);
    }

    #[test]
    fn gaps_close_frames_as_unknown() {
        let (st, cs) = run(&[call(0x1000, 2), jump(0x2000, 2), el(ElementKind::TraceOn(TraceOnReason::Overflow)), jump(0x2010, 1)]);
        assert_eq!(st.unknown_ends, 2);
        let g = st.functions[&(None, 0x2000)];
        assert_eq!(g.complete_calls, 0, "a call cut by a gap has no known length");
        let s = cs.stack(&ThreadKey { stream: 0x10, context: None });
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].entered, Entered::Unknown);
    }

    #[test]
    fn contexts_have_stacks_of_their_own() {
        let ctx = |id| {
            el(ElementKind::PeContext(PeContext { context_id: Some(id), el_valid: true, aarch64: true, ..Default::default() }))
        };
        let (st, cs) = run(&[ctx(1), call(0x1000, 2), ctx(2), call(0x3000, 2), ctx(1), ret(0x2000, 2), jump(0x1008, 1)]);
        assert_eq!(calls(&st, 0x2000).0, 1);
        assert_eq!(cs.stack(&ThreadKey { stream: 0x10, context: Some(1) }).len(), 1);
        assert_eq!(cs.stack(&ThreadKey { stream: 0x10, context: Some(2) }).len(), 1, "context 2's call is still waiting");
    }

    #[test]
    fn runaway_nesting_is_bounded() {
        let seq: Vec<Element> = (0..3 * MAX_DEPTH as u64).map(|_| call(0x1000, 1)).collect();
        let (_, cs) = run(&seq);
        assert!(cs.stack(&ThreadKey { stream: 0x10, context: None }).len() <= MAX_DEPTH);
    }

    #[test]
    fn recursion_counts_totals_once() {
        // f (entered before the trace) calls f, which calls f; each returns.
        let (st, _) = run(&[call(0x1000, 1), call(0x1000, 1), ret(0x1000, 1), ret(0x1004, 1), ret(0x1004, 1), jump(0x1004, 1)]);
        let f = st.functions[&(None, 0x1000)];
        assert_eq!(f.calls, 2);
        assert_eq!(f.self_instructions, 6);
        // Only the outermost activation counts: all 5 instructions up to
        // its return (the inner ones are inside it).
        assert_eq!(f.total_instructions, 5);
        assert_eq!((f.complete_calls, f.min_call, f.max_call), (2, 1, 3));
    }
}
