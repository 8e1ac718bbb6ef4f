//! The list's call structure on the app side: asking the workers for the
//! call stacks of the rows shown, folding and unfolding calls and runs,
//! `%` between a call and its return, and the text the list and source
//! pane draw from it. The data it works on ([`super::calls::CallView`]) is
//! kept below the app, so that the app holds it without naming this file.

use std::sync::Arc;

use crate::profile::callstack::{FrameKind, Left};

use super::app::{Action, App, Pos};
use super::calls::{CallRow, CallsRequest, CallsResponse, FoldTarget, CHART_DEPTHS, ROW_CACHE};
use super::model::PAGE;
use super::worker::Request;

impl App {
    /// Ask for the call stacks of the pages the list shows.
    pub(super) fn request_calls(&mut self) {
        request_visible(self)
    }

    pub(super) fn on_calls_response(&mut self, r: CallsResponse) {
        on_response(self, r)
    }

    /// Fold, unfold and `%` from a return; the chart keys.
    pub(super) fn on_calls_action(&mut self, a: Action) {
        on_action(self, a)
    }

    /// `%` on a return: back to the range that made the call. False when
    /// the cursor is not on a return whose call is known.
    pub(super) fn return_to_call(&mut self) -> bool {
        return_to_call(self)
    }
}

fn request_visible(app: &mut App) {
    if !app.calls.ready {
        return;
    }
    let mut pages: Vec<u64> = app.visible().iter().map(|p| p.number / PAGE).collect();
    pages.dedup();
    if let Some(l) = pages.last().copied() {
        if app.total().is_some_and(|t| (l + 1) * PAGE < t) {
            pages.push(l + 1);
        }
    }
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for p in pages {
        if app.calls.rows.contains_key(&p) || app.calls.pending.contains(&p) {
            continue;
        }
        app.calls.pending.insert(p);
        match runs.last_mut() {
            Some((a, n)) if *a + *n == p => *n += 1,
            _ => runs.push((p, 1)),
        }
    }
    for (first, count) in runs {
        let _ = app.chans.pager.send(Request::Calls(CallsRequest::Rows { first, count }));
    }
}

fn send_folds(app: &mut App, targets: Vec<FoldTarget>) {
    let targets: Vec<FoldTarget> = targets.into_iter().filter(|t| app.calls.fold_pending.insert(t.entry)).collect();
    if !targets.is_empty() {
        let _ = app.chans.pager.send(Request::Calls(CallsRequest::Fold(targets)));
    }
}

/// `_`: the frames entered on page `page` below the fold depth.
fn auto_folds(app: &App, page: u64) -> Vec<FoldTarget> {
    let (Some(d), Some(rows)) = (app.calls.fold_below, app.calls.rows.get(&page)) else { return Vec::new() };
    rows.iter()
        .enumerate()
        .filter(|(_, r)| r.enters && r.depth() == d + 1)
        .map(|(i, r)| (page * PAGE + i as u64, r))
        .filter(|(n, _)| !app.calls.folds.contains_key(n) && !app.calls.opened_calls.contains(n))
        .map(|(n, r)| FoldTarget { thread: r.thread, depth: d, entry: n })
        .collect()
}

/// Keep the cursor and the top of the list on rows that are shown.
fn fix_positions(app: &mut App) {
    let c = app.calls.row_start(app.cursor.number);
    if c != app.cursor.number {
        app.cursor = Pos { number: c, sub: app.elem_sub(c) };
    }
    let t = app.calls.row_start(app.top.number);
    if t != app.top.number {
        app.top = Pos { number: t, sub: 0 };
    }
}

fn on_response(app: &mut App, r: CallsResponse) {
    match r {
        CallsResponse::Ready(chart) => {
            app.calls.ready = true;
            app.calls.names.extend(chart.names.iter().map(|(k, v)| (*k, v.clone())));
            app.calls.chart = chart;
            request_visible(app);
        }
        CallsResponse::Rows { pages, names } => {
            app.calls.names.extend(names);
            let mut wanted = Vec::new();
            for (p, rows) in pages {
                app.calls.pending.remove(&p);
                app.calls.order.retain(|x| *x != p);
                app.calls.rows.insert(p, Arc::new(rows));
                app.calls.order.push_back(p);
                wanted.extend(auto_folds(app, p));
            }
            while app.calls.order.len() > ROW_CACHE {
                if let Some(old) = app.calls.order.pop_front() {
                    app.calls.rows.remove(&old);
                }
            }
            send_folds(app, wanted);
            // The cursor was put on an element that turns out to be inside
            // a run of ranges: the run opens, the cursor stays.
            let c = app.cursor.number;
            if let Some((h, _)) = app.calls.run_of(c).filter(|(h, _)| *h < c) {
                app.calls.opened_runs.insert(h);
            }
            fix_positions(app);
            app.request_visible();
        }
        CallsResponse::Folded(folds) => {
            for f in folds {
                match f {
                    Ok(f) => {
                        app.calls.fold_pending.remove(&f.entry);
                        if let Some(other) = stream_inside(app, &f) {
                            let cpus = app.cores();
                            let own = f.trace_id.or_else(|| app.entry(f.entry).map(|e| e.row.trace_id)).unwrap_or(0);
                            let view = super::rowmap::Filter { trace_ids: vec![own], ..Default::default() }.label(cpus);
                            let other = super::rowmap::Filter { trace_ids: vec![other], ..Default::default() }.label(cpus);
                            app.message = format!(
                                "not folded: {other} runs inside the call at element {} and would be hidden; fold it in its stream's view (f {view})",
                                f.entry
                            );
                            continue;
                        }
                        app.calls.folds.insert(f.entry, f);
                    }
                    Err((entry, why)) => {
                        app.calls.fold_pending.remove(&entry);
                        app.message = format!("cannot fold the call at element {entry}: {why}");
                    }
                }
            }
            app.calls.rebuild_outer();
            fix_positions(app);
            app.request_visible();
        }
        CallsResponse::Stats(t) => super::statspane::on_table(app, t),
    }
}

fn on_action(app: &mut App, a: Action) {
    if !app.calls.ready && matches!(a, Action::Fold | Action::FoldBelow) {
        app.message = "call depth is known after the background pass: the list is flat until then".into();
        return;
    }
    let n = app.cursor.number;
    match a {
        Action::Fold => {
            let Some(row) = app.calls.row(n).cloned() else {
                app.message = "the call stack here is not loaded yet".into();
                return;
            };
            // On a call, its callee; on a folded call, the call around it;
            // elsewhere the innermost call holding the cursor.
            let call_target = app.entry(n).filter(|e| e.row.call_return.is_some()).and_then(|_| callee_of(app, n, &row));
            let depth = row.depth();
            let d = match (call_target, app.calls.folds.contains_key(&n)) {
                (Some(t), _) => return send_folds(app, vec![t]),
                (None, true) => depth.checked_sub(2),
                (None, false) => depth.checked_sub(1),
            };
            match d.and_then(|d| row.frames.get(d).map(|f| (d, f))) {
                Some((d, f)) => send_folds(app, vec![FoldTarget { thread: row.thread, depth: d, entry: f.entry }]),
                None => app.message = "no call to fold here (outermost code)".into(),
            }
        }
        Action::Unfold => {
            if app.calls.folds.remove(&n).is_some() {
                app.calls.opened_calls.insert(n);
                app.calls.rebuild_outer();
            } else if let Some((h, _)) = app.calls.run_of(n).filter(|(h, l)| *h == n && *l > n) {
                app.calls.opened_runs.insert(h);
            } else {
                app.message = "nothing folded here: - folds a call, _ every call below this depth".into();
            }
            app.request_visible();
        }
        Action::FoldBelow => {
            if app.calls.fold_below.is_some() {
                app.calls.fold_below = None;
                app.calls.folds.clear();
                app.calls.opened_calls.clear();
                app.calls.rebuild_outer();
                app.message = "every call unfolded".into();
                app.request_visible();
                return;
            }
            let Some(d) = app.calls.depth(n) else {
                app.message = "the call stack here is not loaded yet".into();
                return;
            };
            app.calls.fold_below = Some(d);
            app.calls.opened_calls.clear();
            let pages: Vec<u64> = app.calls.rows.keys().copied().collect();
            let targets = pages.into_iter().flat_map(|p| auto_folds(app, p)).collect();
            send_folds(app, targets);
            app.message = format!("calls deeper than {d} fold as they come into view (_ again unfolds all)");
        }
        Action::Chart => {
            app.calls.show_chart = !app.calls.show_chart;
            app.message = match (app.calls.show_chart, app.calls.ready) {
                (true, true) => format!("function chart at depth {} (< > change it; f: density)", app.calls.chart_depth),
                (true, false) => "function chart: after the background pass".into(),
                (false, _) => "timeline density".into(),
            };
        }
        Action::ChartDeeper | Action::ChartShallower => {
            let d = app.calls.chart_depth;
            app.calls.chart_depth = if a == Action::ChartDeeper { (d + 1).min(CHART_DEPTHS - 1) } else { d.saturating_sub(1) };
            app.calls.show_chart = true;
            app.message = format!("function chart at depth {}", app.calls.chart_depth);
        }
        _ => {}
    }
}

/// The frame a call range made, from the loaded call stacks after it.
fn callee_of(app: &App, call: u64, row: &CallRow) -> Option<FoldTarget> {
    let d = row.depth();
    (call + 1..call + 4 * PAGE).map_while(|m| app.calls.row(m).map(|r| (m, r))).find_map(|(m, r)| {
        let f = r.frames.get(d)?;
        (r.thread == row.thread && f.call == Some(call) && f.entry == m).then_some(FoldTarget { thread: r.thread, depth: d, entry: m })
    })
}

fn return_to_call(app: &mut App) -> bool {
    let n = app.cursor.number;
    if !app.entry(n).is_some_and(|e| e.row.is_return) {
        return false;
    }
    let Some(call) = app.calls.row(n).and_then(|r| r.frames.last()).and_then(|f| f.call) else { return false };
    app.jump_to(call, true);
    app.message = format!("the call of this return: element {call}");
    true
}

/// Another trace ID the view shows with elements inside the fold's span:
/// folding would hide them with the call's own (the span is in element
/// numbers, which interleave the streams of a formatted buffer). Exact for
/// the part of the call the worker decoded; for the index segments before
/// it, read from the background pass's lane bins, so there a stream in a
/// bin that the fold only partly covers counts too.
fn stream_inside(app: &App, f: &super::calls::Fold) -> Option<u8> {
    use super::model::LANE_SUB;
    if f.end <= f.entry {
        return None;
    }
    let own = f.trace_id.or_else(|| app.entry(f.entry).map(|e| e.row.trace_id))?;
    let shown = |id: u8| app.filter.trace_ids.is_empty() || app.filter.trace_ids.contains(&id);
    if let Some(id) = (0..128u8).find(|&id| id != own && f.streams >> id & 1 == 1 && shown(id)) {
        return Some(id);
    }
    if f.streams_from <= f.entry + 1 {
        return None;
    }
    let segments = &app.indexed.as_ref()?.segments;
    // As the pass bins them: a segment's elements cut in LANE_SUB parts.
    let bin = |n: u64| -> usize {
        let k = segments.partition_point(|s| s.elements_before <= n).saturating_sub(1);
        let s = &segments[k.min(segments.len().saturating_sub(1))];
        let sub = (n.saturating_sub(s.elements_before) as u128 * LANE_SUB as u128 / s.elements.max(1) as u128) as usize;
        k * LANE_SUB + sub.min(LANE_SUB - 1)
    };
    if segments.is_empty() {
        return None;
    }
    let (a, b) = (bin(f.entry + 1), bin(f.streams_from - 1));
    app.lanes
        .iter()
        .filter(|l| l.trace_id != own && shown(l.trace_id))
        .find(|l| l.bins.get(a..=b.min(l.bins.len().saturating_sub(1))).is_some_and(|bins| bins.iter().any(|x| x.elements > 0)))
        .map(|l| l.trace_id)
}

// ---- drawing helpers ----------------------------------------------------------

/// Indentation of a row's function column: a space per level below the
/// outermost, at most `max`.
pub fn indent(app: &App, n: u64, max: usize) -> String {
    let d = app.calls.depth(n).unwrap_or(0).saturating_sub(1);
    if d > max {
        format!("{:<max$}", format!("{d}›"))
    } else {
        " ".repeat(d)
    }
}

/// The element text of a folded row: a folded call or a run of ranges.
pub fn folded_text(app: &App, n: u64) -> Option<String> {
    if let Some(f) = app.calls.folds.get(&n).filter(|_| app.calls.outer.contains_key(&n)) {
        let mut s = format!("⊞ {} · {} instr", f.name, f.instructions);
        if f.cycles > 0 {
            s.push_str(&format!(" · {} cyc", f.cycles));
        }
        if let Some(t) = f.time.filter(|t| *t > 0) {
            match app.ts_freq {
                Some(hz) => s.push_str(&format!(" · {:.3}µs", t as f64 / hz * 1e6)),
                None => s.push_str(&format!(" · {t}t")),
            }
        }
        let how = match f.left {
            Left::Return => "",
            Left::Unwound => " · unwound",
            Left::TailCall => " · tail call",
            Left::Gap => " · ended by a gap",
            Left::End => " · open at the end",
        };
        s.push_str(&format!(" · {} elements{how}", f.end - f.entry + 1));
        return Some(s);
    }
    None
}

/// `×34` after the first range of a folded run.
pub fn run_suffix(app: &App, n: u64) -> Option<String> {
    let (h, l) = app.calls.run_of(n)?;
    (h == n && l > n).then(|| format!(" ×{}", l - h + 1))
}

/// The call stack at the cursor, outermost first, for the source pane.
pub fn breadcrumb(app: &App, width: usize) -> Option<String> {
    let row = app.calls.row(app.cursor.number)?;
    let names: Vec<String> = row
        .frames
        .iter()
        .map(|f| match f.kind {
            FrameKind::Function(k) => app.calls.names.get(&k).cloned().unwrap_or_else(|| format!("{k:#x}")),
            FrameKind::Exception(n) => format!("[exception {n}]"),
        })
        .collect();
    if names.is_empty() {
        return None;
    }
    let mut s = names.join(" › ");
    // Cut from the outside: the innermost frames matter most.
    if s.chars().count() > width {
        let skip = s.chars().count() - width.saturating_sub(1);
        s = format!("…{}", s.chars().skip(skip).collect::<String>());
    }
    Some(s)
}

/// What the status bar says about calls while they are not known.
pub fn status_note(app: &App) -> Option<&'static str> {
    (app.indexed.is_some() && !app.calls.ready).then_some("flat: call depth after the background pass")
}
