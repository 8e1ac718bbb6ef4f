//! Per-core, per-process and time-merged views of the element list.
//!
//! The list is paged by element number, so a view that hides or reorders
//! elements needs to know, for each of its rows, which element it shows.
//! That mapping is a [`RowMap`]: runs of consecutive element numbers, in row
//! order. The finder thread builds it in the background, one index segment
//! at a time between other requests ([`MapBuild`]), and the app walks it
//! without decoding anything. Its size is the number of runs, not of
//! elements: a filter on one of several interleaved trace IDs makes a run
//! per stretch of that ID, a merge a run per stream between timestamps.

use std::collections::HashMap;

use crate::element::{Element, ElementKind};

/// What a view keeps: every list empty keeps everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Trace IDs (a perf.data's CPUs are turned into their trace IDs).
    pub trace_ids: Vec<u8>,
    /// Context IDs (the process or thread, as the kernel writes
    /// CONTEXTIDR): an element is kept when the last context reported on its
    /// trace ID has one of them.
    pub context_ids: Vec<u32>,
    /// Virtual machine IDs, likewise.
    pub vmids: Vec<u32>,
    /// Order the kept elements by timestamp across trace IDs.
    pub merge: bool,
}

/// A `f` prompt that did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FilterError {
    #[error("'{term}': expected id:HEX, cpu:N, ctx:HEX, vmid:N or merge")]
    Term { term: String },
    #[error("'{value}' is not a number")]
    Number { value: String },
    #[error("this capture does not say which CPU each trace source traces: filter by trace ID, id:HEX")]
    NoCpus,
    #[error("no trace from CPU {cpu} in this capture")]
    NoSuchCpu { cpu: u32 },
}

impl Filter {
    /// Whether the view is the plain element list.
    pub fn is_all(&self) -> bool {
        self.trace_ids.is_empty() && self.context_ids.is_empty() && self.vmids.is_empty() && !self.merge
    }

    /// Parse the `f` prompt: space-separated terms, each `id:`, `cpu:`,
    /// `ctx:` or `vmid:` with comma-separated values, or `merge`. `cpus`
    /// maps CPUs to trace IDs (empty when the capture does not say).
    pub fn parse(text: &str, cpus: &[(u8, u32)]) -> Result<Filter, FilterError> {
        let mut f = Filter::default();
        for term in text.split_whitespace() {
            if term == "merge" || term == "m" {
                f.merge = true;
                continue;
            }
            let Some((key, values)) = term.split_once(':') else {
                return Err(FilterError::Term { term: term.to_string() });
            };
            for v in values.split(',').filter(|v| !v.is_empty()) {
                // IDs and context IDs are read as hex, as they are shown;
                // CPUs and VMIDs as decimal unless written 0x...
                let hex = |v: &str| u64::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16);
                let num = |v: &str| crate::capture::parse_number(v).map_err(|_| FilterError::Number { value: v.to_string() });
                match key {
                    "id" => {
                        let id = hex(v).ok().filter(|x| *x < 0x80).ok_or_else(|| FilterError::Number { value: v.to_string() })?;
                        f.trace_ids.push(id as u8);
                    }
                    "cpu" => {
                        if cpus.is_empty() {
                            return Err(FilterError::NoCpus);
                        }
                        let c = num(v)?;
                        let ids: Vec<u8> = cpus.iter().filter(|(_, cpu)| u64::from(*cpu) == c).map(|(id, _)| *id).collect();
                        if ids.is_empty() {
                            return Err(FilterError::NoSuchCpu { cpu: c as u32 });
                        }
                        f.trace_ids.extend(ids);
                    }
                    "ctx" | "pid" | "tid" => {
                        let c = hex(v).ok().and_then(|x| u32::try_from(x).ok()).ok_or_else(|| FilterError::Number { value: v.to_string() })?;
                        f.context_ids.push(c);
                    }
                    "vmid" => f.vmids.push(u32::try_from(num(v)?).map_err(|_| FilterError::Number { value: v.to_string() })?),
                    _ => return Err(FilterError::Term { term: term.to_string() }),
                }
            }
        }
        f.trace_ids.sort_unstable();
        f.trace_ids.dedup();
        Ok(f)
    }

    /// The filter as the prompt would take it, for titles.
    pub fn label(&self, cpus: &[(u8, u32)]) -> String {
        let mut parts = Vec::new();
        if !self.trace_ids.is_empty() {
            let by_cpu: Option<Vec<String>> =
                self.trace_ids.iter().map(|id| cpus.iter().find(|(i, _)| i == id).map(|(_, c)| c.to_string())).collect();
            match by_cpu {
                Some(c) if !cpus.is_empty() => parts.push(format!("cpu:{}", c.join(","))),
                _ => parts.push(format!("id:{}", self.trace_ids.iter().map(|i| format!("{i:02x}")).collect::<Vec<_>>().join(","))),
            }
        }
        if !self.context_ids.is_empty() {
            parts.push(format!("ctx:{}", self.context_ids.iter().map(|c| format!("{c:x}")).collect::<Vec<_>>().join(",")));
        }
        if !self.vmids.is_empty() {
            parts.push(format!("vmid:{}", self.vmids.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")));
        }
        if self.merge {
            parts.push("merge".into());
        }
        parts.join(" ")
    }

    /// Whether an element is kept, given the last context reported on its
    /// trace ID (`None` before any: then a context filter drops it).
    pub fn keeps(&self, e: &Element, context: Option<(Option<u32>, Option<u32>)>) -> bool {
        if !self.trace_ids.is_empty() && !self.trace_ids.contains(&e.trace_id) {
            return false;
        }
        if !self.context_ids.is_empty() && !context.and_then(|c| c.0).is_some_and(|c| self.context_ids.contains(&c)) {
            return false;
        }
        if !self.vmids.is_empty() && !context.and_then(|c| c.1).is_some_and(|v| self.vmids.contains(&v)) {
            return false;
        }
        true
    }
}

/// Runs of element numbers in row order, and how to go both ways.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowMap {
    /// `(first element, elements)`, in row order; never empty runs.
    runs: Vec<(u64, u64)>,
    /// Rows before each run.
    rows_before: Vec<u64>,
    /// Run indices sorted by first element (for element -> row).
    by_element: Vec<usize>,
}

impl RowMap {
    /// A map from runs in row order (empty runs are dropped, touching ones
    /// joined).
    pub fn from_runs(runs: impl IntoIterator<Item = (u64, u64)>) -> RowMap {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (first, len) in runs {
            if len == 0 {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.0 + last.1 == first => last.1 += len,
                _ => out.push((first, len)),
            }
        }
        let mut rows_before = Vec::with_capacity(out.len());
        let mut n = 0u64;
        for r in &out {
            rows_before.push(n);
            n += r.1;
        }
        let mut by_element: Vec<usize> = (0..out.len()).collect();
        if !out.windows(2).all(|w| w[0].0 < w[1].0) {
            by_element.sort_by_key(|&i| out[i].0);
        }
        RowMap { runs: out, rows_before, by_element }
    }

    /// Rows in the view.
    pub fn rows(&self) -> u64 {
        self.runs.last().map_or(0, |r| self.rows_before[self.runs.len() - 1] + r.1)
    }

    /// Runs in the map (its size).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The element shown on row `row`.
    pub fn element_at(&self, row: u64) -> Option<u64> {
        let i = self.rows_before.partition_point(|&b| b <= row).checked_sub(1)?;
        let (first, len) = self.runs[i];
        let k = row - self.rows_before[i];
        (k < len).then_some(first + k)
    }

    /// The run holding element `n`, if the view shows it.
    fn run_of(&self, n: u64) -> Option<usize> {
        let j = self.runs_from(n).checked_sub(1)?;
        let i = self.by_element[j];
        let (first, len) = self.runs[i];
        (n < first + len).then_some(i)
    }

    /// How many runs start at or before element `n` (an index into
    /// `by_element`).
    fn runs_from(&self, n: u64) -> usize {
        self.by_element.partition_point(|&i| self.runs[i].0 <= n)
    }

    /// The row showing element `n`, if the view shows it.
    pub fn row_of(&self, n: u64) -> Option<u64> {
        let i = self.run_of(n)?;
        Some(self.rows_before[i] + (n - self.runs[i].0))
    }

    /// The row of element `n`, or when the view does not show it, the row
    /// of the first element after it that it shows (the last row past the
    /// end).
    pub fn nearest_row(&self, n: u64) -> Option<u64> {
        if let Some(r) = self.row_of(n) {
            return Some(r);
        }
        let j = self.runs_from(n);
        match self.by_element.get(j) {
            Some(&i) => Some(self.rows_before[i]),
            None => self.rows().checked_sub(1),
        }
    }

    /// The elements of rows `a..=b` (either order), as runs sorted by
    /// element number, touching ones joined.
    pub fn elements_between(&self, a: u64, b: u64) -> Vec<(u64, u64)> {
        let (a, b) = (a.min(b), a.max(b));
        let mut out: Vec<(u64, u64)> = Vec::new();
        let Some(i0) = self.rows_before.partition_point(|&r| r <= a).checked_sub(1) else { return out };
        for (i, &(first, len)) in self.runs.iter().enumerate().skip(i0) {
            let r0 = self.rows_before[i];
            if r0 > b {
                break;
            }
            let lo = a.max(r0) - r0;
            let hi = (b + 1).min(r0 + len) - r0;
            if hi > lo {
                out.push((first + lo, hi - lo));
            }
        }
        out.sort_unstable();
        let mut joined: Vec<(u64, u64)> = Vec::with_capacity(out.len());
        for (first, len) in out {
            match joined.last_mut() {
                Some(last) if last.0 + last.1 == first => last.1 += len,
                _ => joined.push((first, len)),
            }
        }
        joined
    }

    /// The element on the row after element `n`'s; when the view does not
    /// show `n` (the last element of a fold that other streams' elements
    /// end), the first element after it that the view shows.
    pub fn next(&self, n: u64) -> Option<u64> {
        match self.row_of(n) {
            Some(r) => self.element_at(r + 1),
            None => {
                let j = self.runs_from(n);
                self.by_element.get(j).map(|&i| self.runs[i].0)
            }
        }
    }

    /// The element on the row before element `n`'s; when the view does not
    /// show `n`, the last element before it that the view shows.
    pub fn prev(&self, n: u64) -> Option<u64> {
        match self.row_of(n) {
            Some(r) => self.element_at(r.checked_sub(1)?),
            None => {
                let j = self.runs_from(n).checked_sub(1)?;
                let (first, len) = self.runs[self.by_element[j]];
                Some(first + len - 1)
            }
        }
    }
}

/// The mapping of a view, built a segment at a time on the finder thread.
pub struct MapBuild {
    pub generation: u64,
    pub filter: Filter,
    /// The next index segment to read, and how many there are.
    pub next: usize,
    pub segments: usize,
    /// The last context (context ID, VMID) per trace ID.
    contexts: HashMap<u8, (Option<u32>, Option<u32>)>,
    /// Kept runs in element order (no merge).
    runs: Vec<(u64, u64)>,
    /// Per trace ID, runs with the timestamp they sort by (merge).
    streams: HashMap<u8, Vec<(u64, u64, u64)>>,
    /// The last timestamp seen per trace ID (merge).
    last_ts: HashMap<u8, u64>,
}

impl MapBuild {
    pub fn new(generation: u64, filter: Filter, segments: usize) -> MapBuild {
        MapBuild {
            generation,
            filter,
            next: 0,
            segments,
            contexts: HashMap::new(),
            runs: Vec::new(),
            streams: HashMap::new(),
            last_ts: HashMap::new(),
        }
    }

    pub fn done(&self) -> bool {
        self.next >= self.segments
    }

    /// Take element `number` into the map.
    pub fn take(&mut self, number: u64, e: &Element) {
        if let ElementKind::PeContext(c) = e.kind {
            self.contexts.insert(e.trace_id, (c.context_id, c.vmid));
        }
        if !self.filter.keeps(e, self.contexts.get(&e.trace_id).copied()) {
            return;
        }
        if !self.filter.merge {
            extend(&mut self.runs, number);
            return;
        }
        // An element without a timestamp of its own sorts with the last one
        // its stream reported: after it, in stream order.
        let ts = match (e.kind, e.time.timestamp) {
            (ElementKind::Timestamp { value }, _) => Some(value),
            (_, t) => t,
        };
        let key = match ts {
            Some(t) => {
                self.last_ts.insert(e.trace_id, t);
                t
            }
            None => self.last_ts.get(&e.trace_id).copied().unwrap_or(0),
        };
        let s = self.streams.entry(e.trace_id).or_default();
        match s.last_mut() {
            Some(last) if last.0 + last.1 == number && last.2 == key => last.1 += 1,
            _ => s.push((number, 1, key)),
        }
    }

    /// Decode the next segment into the map. False when the index cannot
    /// be used.
    pub fn step(&mut self, seeker: &crate::index::Seeker<'_>) -> bool {
        let k = self.next;
        let index = seeker.index();
        let end = if k + 1 < index.len() { index.checkpoint(k + 1).elements_before } else { index.totals().elements };
        let r = seeker.run_from(k, |e| {
            if e.number >= end {
                return false;
            }
            self.take(e.number, e.element);
            true
        });
        self.next += 1;
        r.is_ok()
    }

    /// The finished map.
    pub fn finish(self) -> RowMap {
        if !self.filter.merge {
            return RowMap::from_runs(self.runs);
        }
        RowMap::from_runs(merge_streams(self.streams.into_values().collect()))
    }
}

fn extend(runs: &mut Vec<(u64, u64)>, number: u64) {
    match runs.last_mut() {
        Some(last) if last.0 + last.1 == number => last.1 += 1,
        _ => runs.push((number, 1)),
    }
}

/// Merge streams of `(first, len, timestamp)` runs: each stream keeps its
/// own order, and among the streams' next runs the earliest timestamp goes
/// first (the lower element number on a tie, so equal times keep the
/// capture's order). A run is contiguous in element numbers, so no other
/// stream has an element inside it and it moves whole.
pub fn merge_streams(streams: Vec<Vec<(u64, u64, u64)>>) -> Vec<(u64, u64)> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let total: usize = streams.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(total);
    let mut heap = BinaryHeap::new();
    for (s, runs) in streams.iter().enumerate() {
        if let Some(r) = runs.first() {
            heap.push(Reverse((r.2, r.0, s, 0usize)));
        }
    }
    while let Some(Reverse((_, _, s, i))) = heap.pop() {
        let r = streams[s][i];
        out.push((r.0, r.1));
        if let Some(n) = streams[s].get(i + 1) {
            heap.push(Reverse((n.2, n.0, s, i + 1)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_elements_map_both_ways() {
        let m = RowMap::from_runs([(10, 3), (13, 2), (20, 1), (5, 2)]);
        assert_eq!(m.runs(), 3, "touching runs joined");
        assert_eq!(m.rows(), 8);
        let order: Vec<u64> = (0..m.rows()).map(|r| m.element_at(r).unwrap()).collect();
        assert_eq!(order, vec![10, 11, 12, 13, 14, 20, 5, 6]);
        for (row, n) in order.iter().enumerate() {
            assert_eq!(m.row_of(*n), Some(row as u64));
        }
        assert_eq!(m.element_at(8), None);
        assert_eq!(m.row_of(7), None);
        assert_eq!(m.nearest_row(7), Some(0), "7 is not shown: the row of 10, the next shown");
        assert_eq!(m.nearest_row(15), Some(5));
        assert_eq!(m.nearest_row(99), Some(7), "past the end: the last row");
        assert_eq!(m.next(14), Some(20));
        assert_eq!(m.next(20), Some(5), "merged order, not element order");
        assert_eq!(m.prev(5), Some(20));
        assert_eq!(m.prev(10), None);
        assert_eq!(m.next(6), None);
        // Elements the view does not show (a fold's end in another stream):
        // the next and previous shown elements by number.
        assert_eq!(m.next(7), Some(10));
        assert_eq!(m.next(16), Some(20));
        assert_eq!(m.next(21), None);
        assert_eq!(m.prev(16), Some(14));
        assert_eq!(m.prev(8), Some(6));
        assert_eq!(m.prev(4), None);
        assert_eq!(m.elements_between(1, 6), vec![(5, 1), (11, 4), (20, 1)], "rows 1..=6, by element");
        assert_eq!(m.elements_between(6, 1), m.elements_between(1, 6));
        assert_eq!(m.elements_between(0, 99), vec![(5, 2), (10, 5), (20, 1)], "past the end: to the last row");
        assert_eq!(m.elements_between(3, 3), vec![(13, 1)]);
        assert_eq!(RowMap::from_runs([]).elements_between(0, 3), vec![]);
        assert_eq!(RowMap::from_runs([]).rows(), 0);
        assert_eq!(RowMap::from_runs([]).nearest_row(3), None);
    }

    #[test]
    fn merge_orders_by_time_and_keeps_each_stream_in_order() {
        // Stream A at times 5, 9; B at 0 (untimed start), 7, then back to 3
        // (a reset): B's order is kept even so.
        let a = vec![(0, 2, 5), (4, 1, 9)];
        let b = vec![(2, 2, 0), (5, 3, 7), (8, 1, 3)];
        assert_eq!(merge_streams(vec![a.clone(), b.clone()]), vec![(2, 2), (0, 2), (5, 3), (8, 1), (4, 1)]);
        // Equal times: the capture's order.
        let c = vec![(0, 1, 4), (2, 1, 4)];
        let d = vec![(1, 1, 4)];
        assert_eq!(merge_streams(vec![c, d]), vec![(0, 1), (1, 1), (2, 1)]);
        assert_eq!(merge_streams(vec![a.clone()]), vec![(0, 2), (4, 1)]);
    }

    #[test]
    fn filter_prompt_terms() {
        let cpus = [(0x10, 0), (0x12, 1)];
        let f = Filter::parse("cpu:1 ctx:1a2,3 vmid:7 merge", &cpus).unwrap();
        assert_eq!(f, Filter { trace_ids: vec![0x12], context_ids: vec![0x1a2, 3], vmids: vec![7], merge: true });
        assert_eq!(f.label(&cpus), "cpu:1 ctx:1a2,3 vmid:7 merge");
        assert_eq!(Filter::parse("id:11,10", &[]).unwrap().trace_ids, vec![0x10, 0x11]);
        assert_eq!(Filter::parse("id:11", &[]).unwrap().label(&[]), "id:11");
        assert!(Filter::parse("", &[]).unwrap().is_all());
        assert_eq!(Filter::parse("cpu:1", &[]), Err(FilterError::NoCpus));
        assert_eq!(Filter::parse("cpu:4", &cpus), Err(FilterError::NoSuchCpu { cpu: 4 }));
        assert!(matches!(Filter::parse("core:1", &cpus), Err(FilterError::Term { .. })));
        assert!(matches!(Filter::parse("id:zz", &cpus), Err(FilterError::Number { .. })));
        assert!(matches!(Filter::parse("id:80", &cpus), Err(FilterError::Number { .. })), "trace IDs are 7 bits");
    }

    #[test]
    fn context_filter_follows_the_last_context_of_each_trace_id() {
        use crate::element::{Isa, PeContext, Time};
        let el = |trace_id: u8, kind: ElementKind| Element { index: 0, trace_id, kind, isa: Isa::A64, cycle_count: None, time: Time::default() };
        let ctx = |id: u32| ElementKind::PeContext(PeContext { context_id: Some(id), ..PeContext::default() });
        let f = Filter { context_ids: vec![0x42], ..Filter::default() };
        let mut b = MapBuild::new(1, f, 0);
        let stream = [
            el(1, ElementKind::AddrUnknown),
            el(1, ctx(0x42)),
            el(2, ctx(0x7)),
            el(1, ElementKind::ExceptionReturn),
            el(2, ElementKind::ExceptionReturn),
            el(1, ctx(0x8)),
            el(1, ElementKind::ExceptionReturn),
        ];
        for (n, e) in stream.iter().enumerate() {
            b.take(n as u64, e);
        }
        let m = b.finish();
        let kept: Vec<u64> = (0..m.rows()).filter_map(|r| m.element_at(r)).collect();
        assert_eq!(kept, vec![1, 3], "before any context, other processes and after a switch away: dropped");
    }
}
