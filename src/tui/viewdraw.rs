//! Drawing for the filtered and merged views: the list title, the status
//! while a view's rows are built, and which timeline lanes show when not
//! all fit.

use std::sync::atomic::Ordering;

use super::app::App;
use super::style::thousands;

/// The list title of a filtered or merged view: what it keeps and where the
/// cursor is among its rows.
pub fn list_title(app: &App, view: &str) -> String {
    let cpus = app.cores();
    let label = app.filter.label(cpus);
    match &app.rowmap {
        Some(m) => format!(" elements · {view} view · {label} · row {} of {} ", thousands(app.row_of(app.cursor.number)), thousands(m.rows())),
        None => {
            let segs = app.indexed.as_ref().map_or(0, |i| i.segments.len()).max(1) as u64;
            let done = app.progress.map_done.load(Ordering::Relaxed).min(segs);
            format!(" elements · {view} view · {label}: finding rows {}% ", done * 100 / segs)
        }
    }
}

/// The lanes drawn when `room` lines are free for them: from the app's
/// first lane, moved back so the window is full; and how many are hidden.
pub fn lane_window(app: &App, room: usize) -> (std::ops::Range<usize>, usize) {
    let n = app.lanes.len();
    let room = room.max(1).min(n);
    let first = app.lane_top.min(n - room);
    (first..first + room, n - room)
}

/// The title's note on hidden lanes.
pub fn hidden_note(range: &std::ops::Range<usize>, total: usize, hidden: usize) -> String {
    if hidden == 0 {
        return String::new();
    }
    format!("lanes {}–{} of {total}, {hidden} hidden (t ↑↓) · ", range.start + 1, range.end)
}

/// Whether a lane's trace ID is one the view keeps (all are when the view
/// does not filter by trace ID).
pub fn lane_kept(app: &App, trace_id: u8) -> bool {
    app.filter.trace_ids.is_empty() || app.filter.trace_ids.contains(&trace_id)
}

/// The status line while a view's rows are built.
pub fn filter_status(app: &App) -> String {
    let cpus = app.cores();
    let segs = app.indexed.as_ref().map_or(0, |i| i.segments.len()).max(1) as u64;
    let done = app.progress.map_done.load(Ordering::Relaxed).min(segs);
    format!("view {}: finding its rows, {}% (f then Enter on an empty line cancels)", app.filter.label(cpus), done * 100 / segs)
}
