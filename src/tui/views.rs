//! How the app walks the rows of a filtered or merged view
//! ([`super::rowmap`]): the hooks that app.rs calls where it would step
//! element numbers by one.

use std::sync::Arc;

use super::app::{App, Pos};
use super::model::PAGE;
use super::rowmap::{Filter, RowMap};
use super::worker::Request;

impl App {
    /// The element on the row after element `n`'s.
    pub fn next_elem(&self, n: u64) -> Option<u64> {
        self.skip_hidden(n, |a, k| a.next_in_view(k))
    }

    /// The element on the row before element `n`'s.
    pub fn prev_elem(&self, n: u64) -> Option<u64> {
        self.skip_hidden(n, |a, k| a.prev_in_view(k))
    }

    fn next_in_view(&self, n: u64) -> Option<u64> {
        match &self.rowmap {
            Some(m) => m.next(n),
            None => (n + 1 < self.total()?).then_some(n + 1),
        }
    }

    fn prev_in_view(&self, n: u64) -> Option<u64> {
        match &self.rowmap {
            Some(m) => m.prev(n),
            None => n.checked_sub(1),
        }
    }

    /// Whether element `n` has no row: a cycle count (its count is on the
    /// ranges) unless `y` shows them. Only decoded rows are known to be one;
    /// the cursor's row is never hidden (a search may land on a count).
    pub fn hidden(&self, n: u64) -> bool {
        !self.show_cycle_rows && n != self.cursor.number && self.entry(n).is_some_and(|e| super::cycles::is_count_row(e, self.view))
    }

    /// Step from `n` over hidden rows (a bounded number: runs of counts
    /// are short, and an undecoded row stops the walk anyway).
    fn skip_hidden(&self, n: u64, step: impl Fn(&App, u64) -> Option<u64>) -> Option<u64> {
        let mut k = step(self, n)?;
        for _ in 0..4 * PAGE {
            if !self.hidden(k) {
                return Some(k);
            }
            k = step(self, k)?;
        }
        Some(k)
    }

    /// A top line found hidden once its page came moves to the next row
    /// (unless the cursor is on it: a jump to a count shows it).
    pub fn settle_top(&mut self) {
        if self.top.sub == 0 && self.top.number != self.cursor.number && self.hidden(self.top.number) {
            if let Some(n) = self.next_elem(self.top.number) {
                self.top = Pos { number: n, sub: 0 };
            }
        }
    }

    /// `y`: the rows of cycle counts shown or hidden.
    pub fn toggle_cycle_rows(&mut self) {
        self.show_cycle_rows = !self.show_cycle_rows;
        self.message = if self.show_cycle_rows {
            "cycle count rows shown (their counts are also on the ranges)".into()
        } else {
            "cycle count rows hidden: the cycles column has their counts".into()
        };
        if self.hidden(self.cursor.number) {
            if let Some(n) = self.next_elem(self.cursor.number) {
                self.cursor = Pos { number: n, sub: self.elem_sub(n) };
            }
        }
        if self.hidden(self.top.number) {
            if let Some(n) = self.next_elem(self.top.number) {
                self.top = Pos { number: n, sub: 0 };
            }
        }
        let n = self.cursor.number;
        self.jump_to(n, false);
    }

    /// Whether the capture counts cycles (a cycles column is shown).
    pub fn has_cycles(&self) -> bool {
        self.indexed.as_ref().is_some_and(|ix| ix.segments.iter().any(|s| s.cc.is_some()))
    }

    /// The element of the view's first row.
    pub fn first_elem(&self) -> u64 {
        self.rowmap.as_ref().and_then(|m| m.element_at(0)).unwrap_or(0)
    }

    /// The element of the view's last row.
    pub fn last_elem(&self) -> Option<u64> {
        match &self.rowmap {
            Some(m) => m.element_at(m.rows().checked_sub(1)?),
            None => self.total()?.checked_sub(1),
        }
    }

    /// Rows of the view (elements when unfiltered).
    pub fn view_rows(&self) -> Option<u64> {
        match &self.rowmap {
            Some(m) => Some(m.rows()),
            None => self.total(),
        }
    }

    /// The row of element `n` in the view (its number when unfiltered).
    pub fn row_of(&self, n: u64) -> u64 {
        self.rowmap.as_ref().and_then(|m| m.nearest_row(n)).unwrap_or(n)
    }

    /// Where a line is in the view's order: a merged view is not in
    /// element order.
    pub fn row_order(&self, p: Pos) -> (u64, u32) {
        (self.row_of(p.number), p.sub)
    }

    /// Element `n` if the view shows it, else the next one it shows.
    pub fn in_view(&self, n: u64) -> Option<u64> {
        match &self.rowmap {
            Some(m) => m.element_at(m.nearest_row(n)?),
            None => Some(n),
        }
    }

    /// The top line that puts element `n` near the top third, and near the
    /// end the last screenful (with a line left for the row that says where
    /// the trace ends).
    pub fn top_for(&self, n: u64, total: u64) -> u64 {
        let h = self.list_height() as u64;
        match &self.rowmap {
            Some(m) => {
                let r = m.nearest_row(n).unwrap_or(0);
                let top = r.saturating_sub(h / 3).min(m.rows().saturating_sub(h.saturating_sub(1)));
                m.element_at(top).unwrap_or(n)
            }
            None => n.saturating_sub(h / 3).min(total.saturating_sub(h.saturating_sub(1))),
        }
    }

    /// The pages a filtered view needs for the screen (its rows may be far
    /// apart in element numbers), or `None` when unfiltered.
    pub fn view_pages(&self) -> Option<Vec<u64>> {
        let m = self.rowmap.as_ref()?;
        let top = m.nearest_row(self.top.number).unwrap_or(0);
        let h = self.list_height() as u64;
        // Twice the screen: hidden rows (cycle counts) make it reach further.
        let mut pages: Vec<u64> = (top..(top + 2 * h + 2).min(m.rows())).filter_map(|r| m.element_at(r)).map(|n| n / PAGE).collect();
        pages.push(self.cursor.number / PAGE);
        // Sorted, so neighbouring pages go in one request.
        pages.sort_unstable();
        pages.dedup();
        Some(pages)
    }

    /// Whether `p` is the view's last line.
    pub fn at_view_end(&self, p: Pos) -> bool {
        match (&self.rowmap, &self.indexed) {
            (Some(_), _) => self.next_pos(p).is_none(),
            (None, Some(ix)) => p.number + 1 >= ix.elements && self.next_pos(p).is_none(),
            (None, None) => false,
        }
    }

    /// Show the elements `f` keeps: at once for the plain list, else once
    /// the finder has built the view's rows (the list stays as it is until
    /// then).
    pub fn set_filter(&mut self, f: Filter) {
        self.map_generation += 1;
        self.rowmap = None;
        let cpus = self.cores().to_vec();
        if f.is_all() {
            let _ = self.chans.finder.send(Request::Map { generation: self.map_generation, filter: f.clone() });
            self.filter = f;
            self.message = "every element shown".into();
            let n = self.cursor.number;
            self.jump_to(n, false);
            return;
        }
        self.message = format!("view {}: finding its rows (the list shows every element until then)", f.label(&cpus));
        self.filter = f.clone();
        self.progress.map_done.store(0, std::sync::atomic::Ordering::Relaxed);
        let _ = self.chans.finder.send(Request::Map { generation: self.map_generation, filter: f });
    }

    /// Whether a view's rows are being built.
    pub fn filtering(&self) -> bool {
        !self.filter.is_all() && self.rowmap.is_none()
    }

    /// The rows of the view asked for last have come.
    pub fn on_map(&mut self, generation: u64, map: Arc<RowMap>) {
        if generation != self.map_generation {
            return;
        }
        let cpus = self.cores().to_vec();
        let label = self.filter.label(&cpus);
        if map.rows() == 0 {
            self.message = format!("no element matches {label}: every element shown");
            self.filter = Filter::default();
            return;
        }
        self.message = format!("view {label}: {} rows", map.rows());
        self.rowmap = Some(map);
        let n = self.cursor.number;
        self.jump_to(n, false);
    }
}
