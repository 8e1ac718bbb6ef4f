//! The function level: call stacks rebuilt from decoded elements, function
//! statistics, and profiles for compilers and flame graphs.
//!
//! The profile code takes elements with where they come from
//! ([`callstack::Origin`]) and looks code up through [`CodeMap`] (functions)
//! and [`autofdo::BinaryMap`] (binaries, for file-relative addresses), so it
//! does not care whether the elements come from a snapshot directory, a
//! perf.data file or a test.
//!
//! - [`callstack`]: per-thread call stacks, streaming, gaps never guessed;
//! - [`stats`]: per function and caller→callee pair: calls, instructions,
//!   cycles, time, per-call extremes; text and JSON;
//! - [`callgraph`]: the call tree (JSON), also the source of [`folded`]
//!   stacks for flame graphs;
//! - [`autofdo`] and [`bolt`]: range and branch counts for AutoFDO
//!   (`create_llvm_prof --profiler text`) and BOLT (`perf2bolt --pa`);
//! - [`merge`]: sums profiles of one format;
//! - [`pass`]: one pass over a capture (serial or on all cores) and the
//!   profile written from it, as `tracesight profile` runs it.

pub mod autofdo;
pub mod bolt;
pub mod callgraph;
pub mod callstack;
pub mod pass;
pub mod folded;
pub mod merge;
pub mod stats;

use std::path::PathBuf;

use crate::element::Element;
use crate::symbols::FunctionTable;

pub use callstack::{CallStacks, Origin, ThreadKey};

/// Where functions are.
pub trait CodeMap {
    /// The function holding `addr`: its entry address and the end of the
    /// range holding `addr` (exclusive).
    fn function_at(&self, addr: u64) -> Option<(u64, u64)>;
    /// The name of the function entered at `entry`.
    fn name(&self, entry: u64) -> Option<String>;
}

/// No symbols: every function is named by its address.
pub struct NoCode;

impl CodeMap for NoCode {
    fn function_at(&self, _addr: u64) -> Option<(u64, u64)> {
        None
    }
    fn name(&self, _entry: u64) -> Option<String> {
        None
    }
}

/// Functions as sorted, non-overlapping address ranges.
#[derive(Clone, Debug, Default)]
pub struct FunctionMap {
    /// (start, end, entry, name index), sorted by start.
    ranges: Vec<(u64, u64, u64, u32)>,
    names: Vec<String>,
    /// Entry address -> name index, sorted.
    entries: Vec<(u64, u32)>,
}

impl FunctionMap {
    /// From (name, entry, ranges) triples. Overlapping ranges keep the one
    /// that starts first (a later one is cut to begin after it).
    pub fn new(functions: impl IntoIterator<Item = (String, u64, Vec<std::ops::Range<u64>>)>) -> FunctionMap {
        let mut m = FunctionMap::default();
        for (name, entry, ranges) in functions {
            let ni = m.names.len() as u32;
            m.names.push(name);
            m.entries.push((entry, ni));
            for r in ranges {
                if r.end > r.start {
                    m.ranges.push((r.start, r.end, entry, ni));
                }
            }
        }
        m.ranges.sort_by_key(|r| (r.0, std::cmp::Reverse(r.1)));
        let mut out: Vec<(u64, u64, u64, u32)> = Vec::with_capacity(m.ranges.len());
        for mut r in m.ranges.drain(..) {
            if let Some(last) = out.last() {
                if r.0 < last.1 {
                    r.0 = last.1;
                }
            }
            if r.1 > r.0 {
                out.push(r);
            }
        }
        m.ranges = out;
        m.entries.sort();
        m.entries.dedup_by_key(|e| e.0);
        m
    }

    /// The functions of a symbol table.
    pub fn from_table(table: &FunctionTable) -> FunctionMap {
        FunctionMap::new(table.functions.iter().map(|f| (f.name.clone(), f.start(), f.ranges.clone())))
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

impl CodeMap for FunctionMap {
    fn function_at(&self, addr: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        let r = self.ranges.get(i.checked_sub(1)?)?;
        (addr < r.1).then_some((r.2, r.1))
    }

    fn name(&self, entry: u64) -> Option<String> {
        let i = self.entries.binary_search_by_key(&entry, |e| e.0).ok()?;
        Some(self.names[self.entries[i].1 as usize].clone())
    }
}

/// The display name of a function key.
pub fn function_name(code: &dyn CodeMap, key: u64) -> String {
    if key == callstack::UNKNOWN {
        return "[unknown]".to_string();
    }
    code.name(key).unwrap_or_else(|| format!("0x{key:x}"))
}

/// Why profiling failed.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Reading or writing a file failed.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, #[source] error: std::io::Error },
    /// A profile file could not be read: where and what was expected.
    #[error("{}:{line}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, message: String },
    /// Nothing was given to merge.
    #[error("no profiles to merge")]
    NoProfiles,
    /// Profiles of different formats were given to merge.
    #[error(
        "{} looks like {found:?} but {} like {expected:?}: give --format, or merge profiles of one format",
        path.display(),
        first.display()
    )]
    MixedFormats { path: PathBuf, found: merge::MergeFormat, first: PathBuf, expected: merge::MergeFormat },
    /// `profile` without a capture (and not `merge`).
    #[error("give a capture, or 'merge'")]
    NoCapture,
    /// Writing the profile to standard output failed.
    #[error("writing output: {0}")]
    Stdout(#[source] std::io::Error),
    #[error("--symdir {}: not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error("--binary {pattern}: {source}")]
    BadPattern { pattern: String, source: regex::Error },
    /// The capture could not be opened or indexed, or a position in it
    /// not read.
    #[error("{0}")]
    Capture(#[from] crate::capture::CaptureError),
    /// A `--from`/`--to` position that does not parse (`flag` is `from` or `to`).
    #[error(transparent)]
    Position(#[from] crate::capture::PositionError),
    #[error("--from {position}: no element there (the trace has {total} elements)")]
    NoElementAt { position: String, total: u64 },
    #[error("--to: element {to} comes before the --from element {from}")]
    Backwards { from: u64, to: u64 },
    /// The decode through the index failed.
    #[error("{0}")]
    Index(#[from] crate::index::IndexError),
    /// A binary's segments could not be read.
    #[error("{0}")]
    Image(#[from] crate::image::ImageError),
    /// AutoFDO and BOLT profiles name binaries; none were given or found.
    #[error("{}: --format {format:?} needs the traced binaries (--image or --symdir)", path.display())]
    NeedsBinaries { path: PathBuf, format: pass::Format },
}

/// Add without overflow; true when the sum saturated.
#[inline]
pub fn add_saturating(dest: &mut u64, add: u64) -> bool {
    match dest.checked_add(add) {
        Some(v) => {
            *dest = v;
            false
        }
        None => {
            *dest = u64::MAX;
            true
        }
    }
}

/// Everything a profile run collects, fed element by element.
pub struct Collector<'c> {
    pub code: &'c dyn CodeMap,
    pub stacks: CallStacks,
    pub stats: stats::Stats,
    pub tree: Option<callgraph::CallTree>,
    pub branches: Option<autofdo::BranchCounts>,
    /// Instructions seen (ranges and ranges without path).
    pub instructions: u64,
    last_number: u64,
}

impl<'c> Collector<'c> {
    /// `tree` for folded stacks and the call graph, `branches` for AutoFDO
    /// and BOLT.
    pub fn new(code: &'c dyn CodeMap, group: stats::Group, tree: bool, branches: bool) -> Collector<'c> {
        Collector {
            code,
            stacks: CallStacks::new(),
            stats: stats::Stats::new(group),
            tree: tree.then(callgraph::CallTree::new),
            branches: branches.then(autofdo::BranchCounts::default),
            instructions: 0,
            last_number: 0,
        }
    }

    pub fn feed(&mut self, origin: Origin, number: u64, e: &Element) {
        use crate::element::ElementKind as K;
        if let K::InstrRange { count, .. } | K::RangeNoPath { count, .. } = e.kind {
            self.instructions += count as u64;
        }
        self.last_number = number;
        if let Some(b) = &mut self.branches {
            b.feed(origin.stream, e);
        }
        let mut fan = Fan { stats: &mut self.stats, tree: self.tree.as_mut() };
        self.stacks.feed(self.code, origin, number, e, &mut fan);
    }

    /// Close what is open at the end of input.
    pub fn finish(&mut self) {
        let mut fan = Fan { stats: &mut self.stats, tree: self.tree.as_mut() };
        self.stacks.finish(self.last_number, &mut fan);
    }
}

/// One listener feeding several.
struct Fan<'a> {
    stats: &'a mut stats::Stats,
    tree: Option<&'a mut callgraph::CallTree>,
}

impl callstack::StackListener for Fan<'_> {
    fn entered(&mut self, thread: ThreadKey, stack: &[callstack::Frame]) {
        self.stats.entered(thread, stack);
        if let Some(t) = &mut self.tree {
            t.entered(thread, stack);
        }
    }
    fn left(&mut self, thread: ThreadKey, parents: &[callstack::Frame], closed: &callstack::Closed) {
        self.stats.left(thread, parents, closed);
        if let Some(t) = &mut self.tree {
            t.left(thread, parents, closed);
        }
    }
    fn executed(&mut self, thread: ThreadKey, stack: &[callstack::Frame], func: u64, count: u64) {
        self.stats.executed(thread, stack, func, count);
        if let Some(t) = &mut self.tree {
            t.executed(thread, stack, func, count);
        }
    }
    fn cycles(&mut self, thread: ThreadKey, stack: &[callstack::Frame], func: u64, cycles: u64) {
        self.stats.cycles(thread, stack, func, cycles);
        if let Some(t) = &mut self.tree {
            t.cycles(thread, stack, func, cycles);
        }
    }
    fn time(&mut self, thread: ThreadKey, stack: &[callstack::Frame], func: u64, ticks: u64) {
        self.stats.time(thread, stack, func, ticks);
    }
}
