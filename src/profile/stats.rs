//! Function statistics: per function and per caller→callee pair, for the
//! whole input or per stream or thread.
//!
//! - Self instructions are counted by address (the function holding each
//!   executed instruction), so they sum to the instructions of the input.
//! - Calls count frames entered by a call or a tail call (not frames whose
//!   caller was not seen).
//! - Totals (instructions, cycles, time of a frame and everything it called)
//!   are added once per outermost activation: a recursive function's inner
//!   calls are inside its outer one already.
//! - Per-call minimum, maximum and average cover the calls whose end was
//!   seen (returned, unwound or replaced by a tail call).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::callstack::{Closed, Entered, Frame, FrameKind, Left, StackListener, ThreadKey, UNKNOWN};
use super::{add_saturating, function_name, CodeMap};

/// How statistics are split.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Group {
    /// One table for everything.
    #[default]
    All,
    /// Per stream (trace ID or CPU).
    Stream,
    /// Per thread (context ID) of each stream.
    Thread,
}

/// Counters of one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionStats {
    pub calls: u64,
    pub self_instructions: u64,
    pub total_instructions: u64,
    pub self_cycles: u64,
    pub total_cycles: u64,
    pub self_time: u64,
    pub total_time: u64,
    /// Calls whose end was seen, and their instructions.
    pub complete_calls: u64,
    pub min_call: u64,
    pub max_call: u64,
    pub sum_call: u64,
}

impl FunctionStats {
    pub fn average_call(&self) -> f64 {
        if self.complete_calls == 0 {
            0.0
        } else {
            self.sum_call as f64 / self.complete_calls as f64
        }
    }
}

/// Counters of one caller→callee pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairStats {
    pub calls: u64,
    /// Instructions of the callee's frames entered from this caller.
    pub instructions: u64,
}

/// The scope a row belongs to: everything (`None`), a stream, or a thread.
pub type Scope = Option<ThreadKey>;

/// All statistics of a run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub group: Group,
    pub functions: BTreeMap<(Scope, u64), FunctionStats>,
    pub pairs: BTreeMap<(Scope, u64, u64), PairStats>,
    /// Frames closed by a gap or the end of input (their end is unknown).
    pub unknown_ends: u64,
    /// A counter reached u64::MAX.
    pub saturated: bool,
}

impl Stats {
    pub fn new(group: Group) -> Stats {
        Stats { group, ..Stats::default() }
    }

    fn scope(&self, t: ThreadKey) -> Scope {
        match self.group {
            Group::All => None,
            Group::Stream => Some(ThreadKey { stream: t.stream, context: None }),
            Group::Thread => Some(t),
        }
    }

    fn func(&mut self, t: ThreadKey, key: u64) -> &mut FunctionStats {
        let s = self.scope(t);
        self.functions.entry((s, key)).or_default()
    }

    /// Self instructions of all functions together.
    pub fn self_instructions(&self) -> u64 {
        self.functions.values().map(|f| f.self_instructions).sum()
    }

    /// Add another run's statistics (of the same grouping).
    pub fn merge(&mut self, other: &Stats) {
        for (k, o) in &other.functions {
            let f = self.functions.entry(*k).or_default();
            let had = f.complete_calls;
            let mut sat = false;
            for (d, s) in [
                (&mut f.calls, o.calls),
                (&mut f.self_instructions, o.self_instructions),
                (&mut f.total_instructions, o.total_instructions),
                (&mut f.self_cycles, o.self_cycles),
                (&mut f.total_cycles, o.total_cycles),
                (&mut f.self_time, o.self_time),
                (&mut f.total_time, o.total_time),
                (&mut f.complete_calls, o.complete_calls),
                (&mut f.sum_call, o.sum_call),
            ] {
                sat |= add_saturating(d, s);
            }
            if o.complete_calls > 0 {
                f.min_call = if had == 0 { o.min_call } else { f.min_call.min(o.min_call) };
                f.max_call = f.max_call.max(o.max_call);
            }
            self.saturated |= sat;
        }
        for (k, o) in &other.pairs {
            let p = self.pairs.entry(*k).or_default();
            self.saturated |= add_saturating(&mut p.calls, o.calls) | add_saturating(&mut p.instructions, o.instructions);
        }
        self.unknown_ends = self.unknown_ends.saturating_add(other.unknown_ends);
    }
}

/// Whether a frame of `func` is open: what it executes then counts in that
/// frame's total when the frame closes. What a function is given outside
/// any frame of its own (a cycle count that arrives after a gap closed its
/// frames, a range after one) counts in its total at once, or its total
/// would fall below its self count.
fn in_frame_of(stack: &[Frame], func: u64) -> bool {
    stack.iter().any(|f| f.kind == FrameKind::Function(func))
}

fn caller(parents: &[Frame]) -> u64 {
    match parents.last().map(|f| f.kind) {
        Some(FrameKind::Function(k)) => k,
        _ => UNKNOWN,
    }
}

impl StackListener for Stats {
    fn entered(&mut self, thread: ThreadKey, stack: &[Frame]) {
        let Some(top) = stack.last() else { return };
        let FrameKind::Function(k) = top.kind else { return };
        if matches!(top.entered, Entered::Call | Entered::TailCall) {
            self.saturated |= add_saturating(&mut self.func(thread, k).calls, 1);
            let s = self.scope(thread);
            let c = caller(&stack[..stack.len() - 1]);
            self.saturated |= add_saturating(&mut self.pairs.entry((s, c, k)).or_default().calls, 1);
        }
    }

    fn left(&mut self, thread: ThreadKey, parents: &[Frame], closed: &Closed) {
        let FrameKind::Function(k) = closed.frame.kind else { return };
        if matches!(closed.left, Left::Gap | Left::End) {
            self.unknown_ends += 1;
        }
        let outermost = !parents.iter().any(|f| f.kind == FrameKind::Function(k));
        let complete = matches!(closed.frame.entered, Entered::Call | Entered::TailCall)
            && matches!(closed.left, Left::Return | Left::Unwound | Left::TailCall);
        let s = self.scope(thread);
        let f = self.func(thread, k);
        let mut sat = false;
        if outermost {
            sat |= add_saturating(&mut f.total_instructions, closed.instructions);
            sat |= add_saturating(&mut f.total_cycles, closed.cycles);
            sat |= add_saturating(&mut f.total_time, closed.time.unwrap_or(0));
        }
        if complete {
            f.min_call = if f.complete_calls == 0 { closed.instructions } else { f.min_call.min(closed.instructions) };
            f.max_call = f.max_call.max(closed.instructions);
            f.complete_calls += 1;
            sat |= add_saturating(&mut f.sum_call, closed.instructions);
        }
        if matches!(closed.frame.entered, Entered::Call | Entered::TailCall) {
            let c = caller(parents);
            let p = self.pairs.entry((s, c, k)).or_default();
            sat |= add_saturating(&mut p.instructions, closed.instructions);
        }
        self.saturated |= sat;
    }

    fn executed(&mut self, thread: ThreadKey, stack: &[Frame], func: u64, count: u64) {
        let outside = !in_frame_of(stack, func);
        let f = self.func(thread, func);
        let mut sat = add_saturating(&mut f.self_instructions, count);
        if outside {
            sat |= add_saturating(&mut f.total_instructions, count);
        }
        self.saturated |= sat;
    }

    fn cycles(&mut self, thread: ThreadKey, stack: &[Frame], func: u64, cycles: u64) {
        let outside = !in_frame_of(stack, func);
        let f = self.func(thread, func);
        let mut sat = add_saturating(&mut f.self_cycles, cycles);
        if outside {
            sat |= add_saturating(&mut f.total_cycles, cycles);
        }
        self.saturated |= sat;
    }

    fn time(&mut self, thread: ThreadKey, stack: &[Frame], func: u64, ticks: u64) {
        let outside = !in_frame_of(stack, func);
        let f = self.func(thread, func);
        let mut sat = add_saturating(&mut f.self_time, ticks);
        if outside {
            sat |= add_saturating(&mut f.total_time, ticks);
        }
        self.saturated |= sat;
    }
}

/// Columns of the statistics table (what `--sort` takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Column {
    Name,
    Calls,
    SelfInstructions,
    TotalInstructions,
    SelfCycles,
    TotalCycles,
    SelfTime,
    TotalTime,
    Min,
    Max,
    Average,
}

impl Column {
    pub const ALL: [Column; 11] = [
        Column::Name,
        Column::Calls,
        Column::SelfInstructions,
        Column::TotalInstructions,
        Column::SelfCycles,
        Column::TotalCycles,
        Column::SelfTime,
        Column::TotalTime,
        Column::Min,
        Column::Max,
        Column::Average,
    ];

    fn header(self) -> &'static str {
        match self {
            Column::Name => "function",
            Column::Calls => "calls",
            Column::SelfInstructions => "self_instr",
            Column::TotalInstructions => "total_instr",
            Column::SelfCycles => "self_cycles",
            Column::TotalCycles => "total_cycles",
            Column::SelfTime => "self_time",
            Column::TotalTime => "total_time",
            Column::Min => "min_call",
            Column::Max => "max_call",
            Column::Average => "avg_call",
        }
    }

    /// The column's value for a function (0 for the name).
    pub fn value(self, f: &FunctionStats) -> u64 {
        match self {
            Column::Name => 0,
            Column::Calls => f.calls,
            Column::SelfInstructions => f.self_instructions,
            Column::TotalInstructions => f.total_instructions,
            Column::SelfCycles => f.self_cycles,
            Column::TotalCycles => f.total_cycles,
            Column::SelfTime => f.self_time,
            Column::TotalTime => f.total_time,
            Column::Min => f.min_call,
            Column::Max => f.max_call,
            Column::Average => f.average_call().round() as u64,
        }
    }
}

fn scope_name(s: &Scope) -> String {
    match s {
        None => "all".to_string(),
        Some(ThreadKey { stream, context: None }) => format!("stream 0x{stream:x}"),
        Some(ThreadKey { stream, context: Some(c) }) => format!("stream 0x{stream:x} context 0x{c:x}"),
    }
}

/// Rows in display order: by `sort` (descending; names ascending), ties by
/// name, within each scope.
fn rows<'a>(stats: &'a Stats, code: &dyn CodeMap, sort: Column) -> Vec<(&'a Scope, String, &'a FunctionStats)> {
    let mut rows: Vec<(&Scope, String, &FunctionStats)> =
        stats.functions.iter().map(|((s, k), f)| (s, function_name(code, *k), f)).collect();
    rows.sort_by(|a, b| {
        a.0.cmp(b.0).then_with(|| match sort {
            Column::Name => a.1.cmp(&b.1),
            c => c.value(b.2).cmp(&c.value(a.2)).then_with(|| a.1.cmp(&b.1)),
        })
    });
    rows
}

/// The table as text: one block per scope, a header, one row per function.
pub fn write_text(stats: &Stats, code: &dyn CodeMap, sort: Column) -> String {
    let rows = rows(stats, code, sort);
    let name_w = rows.iter().map(|r| r.1.len()).max().unwrap_or(8).clamp(8, 60);
    let mut out = String::new();
    let mut last: Option<&Scope> = None;
    for (scope, name, f) in &rows {
        if last != Some(*scope) {
            if last.is_some() {
                out.push('\n');
            }
            if stats.group != Group::All {
                let _ = writeln!(out, "# {}", scope_name(scope));
            }
            let _ = write!(out, "{:<name_w$}", Column::Name.header());
            for c in &Column::ALL[1..] {
                let _ = write!(out, " {:>12}", c.header());
            }
            out.push('\n');
            last = Some(*scope);
        }
        let _ = write!(out, "{name:<name_w$}");
        for c in &Column::ALL[1..] {
            let _ = write!(out, " {:>12}", c.value(f));
        }
        out.push('\n');
    }
    out
}

/// The statistics as one JSON document: functions (in `sort` order) and
/// caller→callee pairs.
pub fn write_json(stats: &Stats, code: &dyn CodeMap, sort: Column) -> String {
    use crate::element::write_json_string;
    let mut out = String::from("{\"functions\":[");
    for (i, (scope, name, f)) in rows(stats, code, sort).iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str("{\"name\":");
        write_json_string(&mut out, name);
        write_scope(&mut out, scope);
        let _ = write!(
            out,
            ",\"calls\":{},\"self_instructions\":{},\"total_instructions\":{},\"self_cycles\":{},\"total_cycles\":{},\"self_time\":{},\"total_time\":{},\"complete_calls\":{},\"min_call\":{},\"max_call\":{},\"avg_call\":{:.3}}}",
            f.calls,
            f.self_instructions,
            f.total_instructions,
            f.self_cycles,
            f.total_cycles,
            f.self_time,
            f.total_time,
            f.complete_calls,
            f.min_call,
            f.max_call,
            f.average_call()
        );
    }
    out.push_str("\n],\"calls\":[");
    for (i, ((scope, caller, callee), p)) in stats.pairs.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str("{\"caller\":");
        write_json_string(&mut out, &function_name(code, *caller));
        out.push_str(",\"callee\":");
        write_json_string(&mut out, &function_name(code, *callee));
        write_scope(&mut out, scope);
        let _ = write!(out, ",\"calls\":{},\"instructions\":{}}}", p.calls, p.instructions);
    }
    let _ = writeln!(out, "\n],\"unknown_ends\":{}}}", stats.unknown_ends);
    out
}

fn write_scope(out: &mut String, scope: &Scope) {
    if let Some(t) = scope {
        let _ = write!(out, ",\"stream\":{}", t.stream);
        if let Some(c) = t.context {
            let _ = write!(out, ",\"context\":{c}");
        }
    }
}
