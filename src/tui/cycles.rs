//! Cycle counts folded into the ranges they count.
//!
//! ETE and ETMv4 report cycles as Cycle Count elements of their own: each
//! belongs to the most recent Commit and counts the cycles since the
//! previous Commit that had a count (Arm ARM D4.3.7.1, rules BZQWX and
//! VZXNN). OpenCSD emits the ranges a commit commits and then the count, so
//! a count covers the ranges of its trace ID since the previous count. The
//! page builder gives it to the last of those ranges and marks the others;
//! the list shows it in a cycles column and hides the count's own row
//! unless asked (`y`). ETMv3 and PTM put a count on the range itself.

use std::collections::HashMap;

use crate::element::{Element, ElementKind};

use super::model::Entry;

/// Elements decoded past the last page, at most, to find the counts of its
/// last ranges.
pub const LOOK_AHEAD: u64 = 4 * super::model::PAGE;

/// Per trace ID, the ranges (indices into the page entries; `None` for
/// those decoded before the pages) since its last cycle count.
#[derive(Default)]
pub struct Counted {
    open: HashMap<u8, Vec<Option<usize>>>,
}

impl Counted {
    /// Take an element; `pushed` when it is the last of `entries` (those
    /// before the pages are not rows, those after only bring counts).
    pub fn take(&mut self, entries: &mut [Entry], pushed: bool, e: &Element) {
        match e.kind {
            ElementKind::InstrRange { .. } if e.cycle_count.is_none() => {
                let at = (pushed && !entries.is_empty()).then(|| entries.len() - 1);
                self.open.entry(e.trace_id).or_default().push(at);
            }
            ElementKind::CycleCount => {
                let Some(ranges) = self.open.remove(&e.trace_id) else { return };
                let Some(c) = e.cycle_count else { return };
                if let Some((&l, rest)) = ranges.split_last() {
                    if let Some(l) = l {
                        entries[l].row.range_cycles = Some(u64::from(c));
                    }
                    for &i in rest.iter().flatten() {
                        entries[i].row.cycles_below = true;
                    }
                    if let (true, Some(own)) = (pushed, entries.last_mut()) {
                        own.row.count_folded = true;
                    }
                }
            }
            // After a gap a count no longer covers what came before it.
            ElementKind::NoSync(_) | ElementKind::TraceOn(_) | ElementKind::EndOfTrace(_) => {
                self.open.remove(&e.trace_id);
            }
            _ => {}
        }
    }

    /// Whether some range of the pages still waits for its count.
    pub fn waiting(&self) -> bool {
        self.open.values().any(|v| v.last().is_some_and(Option::is_some))
    }
}

/// The cycles column of a row: its count, `·` for a range counted by the
/// count shown on a later range, else empty.
pub fn column(row: &super::model::ElemRow) -> String {
    match (row.range_cycles, row.cycles_below) {
        (Some(c), _) => c.to_string(),
        (None, true) => "·".into(),
        _ => String::new(),
    }
}

/// A Cycle Count element's row, hidden unless shown (`y`) when its count is
/// on the ranges. Not a count of no range (ETMv3 counts cycles without
/// instructions too), nor when lines hang on it that would go with it:
/// decoder messages, or in the speculation view the records decided before
/// it.
pub fn is_count_row(e: &Entry, view: super::model::View) -> bool {
    e.row.count_folded
        && e.notes.is_empty()
        && (view == super::model::View::Committed || e.pre.is_empty())
}
