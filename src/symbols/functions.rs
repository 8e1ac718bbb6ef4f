//! The function table for the viewer's search: every function of every
//! image with its address ranges and how many times the trace entered it
//! (filled by the decoder), searchable through [`FuzzyMatcher`], a small
//! trait so the matching algorithm can be swapped.

use std::ops::Range;

use super::demangle::demangle_or_raw;
use super::elfsyms::SymbolKind;
use super::Symbolizer;

/// One function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionEntry {
    /// Demangled name.
    pub name: String,
    /// Name as stored in the symbol table or DWARF.
    pub raw_name: String,
    /// Index of the image in the symbolizer.
    pub image: usize,
    /// Run-time address ranges, the main one first (a function split into
    /// hot and cold parts has several).
    pub ranges: Vec<Range<u64>>,
    /// Other symbols at the same address (aliases).
    pub aliases: Vec<String>,
    /// How many times the trace entered the function; filled by the decoder.
    pub entries: u64,
}

impl FunctionEntry {
    /// Start of the main range.
    pub fn start(&self) -> u64 {
        self.ranges.first().map_or(0, |r| r.start)
    }

    pub fn contains(&self, addr: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(&addr))
    }
}

/// The result of matching one text against a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuzzyMatch {
    /// Higher is better.
    pub score: i64,
    /// Indices (in chars) of the matched characters, for highlighting.
    pub positions: Vec<usize>,
}

/// A fuzzy matching algorithm.
pub trait FuzzyMatcher {
    /// Match `pattern` against `text`; `None` when it does not match.
    fn fuzzy_match(&self, text: &str, pattern: &str) -> Option<FuzzyMatch>;
}

/// The skim algorithm (as in the `skim` fuzzy finder), from `fuzzy-matcher`.
/// Smart case: a pattern with capitals matches case-sensitively.
pub struct SkimMatcher {
    inner: fuzzy_matcher::skim::SkimMatcherV2,
}

impl Default for SkimMatcher {
    fn default() -> Self {
        SkimMatcher { inner: fuzzy_matcher::skim::SkimMatcherV2::default().smart_case() }
    }
}

impl SkimMatcher {
    pub fn new() -> Self {
        Self::default()
    }
}

impl FuzzyMatcher for SkimMatcher {
    fn fuzzy_match(&self, text: &str, pattern: &str) -> Option<FuzzyMatch> {
        use fuzzy_matcher::FuzzyMatcher as _;
        let (score, positions) = self.inner.fuzzy_indices(text, pattern)?;
        Some(FuzzyMatch { score, positions })
    }
}

/// One search result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchHit {
    /// Index into [`FunctionTable::functions`].
    pub index: usize,
    pub score: i64,
    /// Matched character positions in the function's name.
    pub positions: Vec<usize>,
}

/// Every function of a program.
#[derive(Clone, Debug, Default)]
pub struct FunctionTable {
    pub functions: Vec<FunctionEntry>,
    /// (start, end, function) over all ranges, sorted by start.
    index: Vec<(u64, u64, u32)>,
}

impl FunctionTable {
    /// Functions from the symbol tables (STT_FUNC, with aliases merged) and,
    /// where there is DWARF, the extra ranges of split functions and the
    /// functions the symbol table does not have.
    pub fn from_symbolizer(sym: &Symbolizer) -> FunctionTable {
        let mut functions: Vec<FunctionEntry> = Vec::new();
        for (ii, im) in sym.images().iter().enumerate() {
            let bias = im.bias();
            let elf = im.elf();
            let first = functions.len();
            let mut by_start: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
            for si in elf.functions_by_address() {
                let s = &elf.symbols[si];
                if !matches!(s.kind, SymbolKind::Function | SymbolKind::IndirectFunction) {
                    continue;
                }
                let start = s.address.wrapping_add(bias);
                let end = start.wrapping_add(s.size.max(1));
                if let Some(&fi) = by_start.get(&start) {
                    let f: &mut FunctionEntry = &mut functions[fi];
                    // Prefer a global name over a local alias.
                    f.aliases.push(s.name().to_string());
                    if f.ranges[0].end < end {
                        f.ranges[0].end = end;
                    }
                    continue;
                }
                by_start.insert(start, functions.len());
                #[allow(clippy::single_range_in_vec_init)]
                functions.push(FunctionEntry {
                    name: s.name().to_string(),
                    raw_name: s.raw_name.to_string(),
                    image: ii,
                    ranges: vec![start..end],
                    aliases: Vec::new(),
                    entries: 0,
                });
            }
            if let Some(d) = im.debug() {
                for (raw, _lang, ranges) in d.subprograms() {
                    let main = ranges[0].0.wrapping_add(bias);
                    let found = by_start
                        .get(&main)
                        .copied()
                        .or_else(|| ranges.iter().find_map(|r| by_start.get(&r.0.wrapping_add(bias)).copied()));
                    match found {
                        Some(fi) => {
                            // Add the parts the symbol does not cover (`.cold`).
                            for &(lo, hi) in &ranges {
                                let r = lo.wrapping_add(bias)..hi.wrapping_add(bias);
                                let f = &mut functions[fi];
                                if !f.ranges.iter().any(|x| x.start <= r.start && r.end <= x.end) {
                                    f.ranges.push(r);
                                }
                            }
                        }
                        None => {
                            by_start.insert(main, functions.len());
                            functions.push(FunctionEntry {
                                name: demangle_or_raw(&raw).into_owned(),
                                raw_name: raw,
                                image: ii,
                                ranges: ranges
                                    .iter()
                                    .map(|&(lo, hi)| lo.wrapping_add(bias)..hi.wrapping_add(bias))
                                    .collect(),
                                aliases: Vec::new(),
                                entries: 0,
                            });
                        }
                    }
                }
                // A `.cold` symbol now covered by its parent's ranges is dropped.
                let mut drop = Vec::new();
                for (i, f) in functions[first..].iter().enumerate() {
                    if f.raw_name.contains(".cold") {
                        let covered = functions[first..].iter().enumerate().any(|(j, g)| {
                            j != i && g.ranges.iter().skip(1).any(|r| r.start <= f.start() && f.ranges[0].end <= r.end)
                        });
                        if covered {
                            drop.push(first + i);
                        }
                    }
                }
                for i in drop.into_iter().rev() {
                    functions.remove(i);
                }
            }
        }
        FunctionTable::new(functions)
    }

    /// A table from given entries.
    pub fn new(functions: Vec<FunctionEntry>) -> FunctionTable {
        let mut index: Vec<(u64, u64, u32)> = functions
            .iter()
            .enumerate()
            .flat_map(|(i, f)| f.ranges.iter().map(move |r| (r.start, r.end, i as u32)))
            .collect();
        index.sort_unstable();
        FunctionTable { functions, index }
    }

    pub fn len(&self) -> usize {
        self.functions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// The function whose ranges contain `addr` (the innermost when ranges
    /// nest).
    pub fn function_at(&self, addr: u64) -> Option<usize> {
        let end = self.index.partition_point(|e| e.0 <= addr);
        self.index[..end].iter().rev().take(16).find(|e| addr < e.1).map(|e| e.2 as usize)
    }

    /// Count one entry into the function containing `addr`.
    pub fn record_entry(&mut self, addr: u64) -> Option<usize> {
        let i = self.function_at(addr)?;
        self.functions[i].entries += 1;
        Some(i)
    }

    /// Functions matching `pattern`, best first (then most entered, then by
    /// name). An empty pattern lists every function, most entered first.
    pub fn search(&self, matcher: &dyn FuzzyMatcher, pattern: &str) -> Vec<SearchHit> {
        let mut hits: Vec<SearchHit> = if pattern.is_empty() {
            (0..self.functions.len()).map(|index| SearchHit { index, score: 0, positions: Vec::new() }).collect()
        } else {
            self.functions
                .iter()
                .enumerate()
                .filter_map(|(index, f)| {
                    matcher.fuzzy_match(&f.name, pattern).map(|m| SearchHit {
                        index,
                        score: m.score,
                        positions: m.positions,
                    })
                })
                .collect()
        };
        hits.sort_by(|a, b| {
            let (fa, fb) = (&self.functions[a.index], &self.functions[b.index]);
            b.score.cmp(&a.score).then(fb.entries.cmp(&fa.entries)).then_with(|| fa.name.cmp(&fb.name))
        });
        hits
    }
}
