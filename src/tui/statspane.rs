//! The function statistics pane (`F`): the profile's statistics
//! ([`crate::profile::stats`]) of the whole capture, of the timeline's zoomed
//! span or of the selection, computed on the finder thread (per-segment
//! statistics from the background pass are summed; a selection is decoded
//! from the segment before it) and drawn from the table it sends.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span as TextSpan};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use crate::index::SeekTarget;
use crate::profile::stats::Column;

use super::app::{Action, App, LastSearch, Mode};
use super::calls::{sorted, CallsRequest, Scope, Span, StatsTable};
use super::style::{thousands, Palette};
use super::worker::{Dir, FindWhat, Request};

/// Sortable columns in the order ← → step through them, with their headers.
const COLUMNS: [(Column, &str, usize); 10] = [
    (Column::Calls, "calls", 9),
    (Column::SelfInstructions, "self instr", 12),
    (Column::TotalInstructions, "total instr", 12),
    (Column::SelfCycles, "self cyc", 11),
    (Column::TotalCycles, "total cyc", 11),
    (Column::SelfTime, "self time", 11),
    (Column::TotalTime, "total time", 11),
    (Column::Min, "min/call", 10),
    (Column::Max, "max/call", 10),
    (Column::Average, "avg/call", 10),
];

/// The span of the timeline's zoom as index segments.
fn zoom_segments(app: &App) -> Option<(usize, usize)> {
    let (lo, hi) = app.axis_range()?;
    let (zl, zh) = app.zoom;
    let vlo = lo as f64 + zl * (hi - lo) as f64;
    let vhi = lo as f64 + zh * (hi - lo) as f64;
    let inside: Vec<usize> =
        super::chart::segment_spans(app).into_iter().filter(|(_, a, b)| *b >= vlo && *a <= vhi).map(|(k, _, _)| k).collect();
    Some((*inside.first()?, *inside.last()?))
}

fn ask(app: &mut App) {
    let span = match app.calls.stats.scope {
        Scope::Whole => Some(Span::Whole),
        Scope::Zoom => zoom_segments(app).map(|(a, b)| Span::Segments(a, b)),
        Scope::Selection => app.selection().map(|(a, b)| Span::Elements(a, b)),
    };
    let pane = &mut app.calls.stats;
    pane.table = None;
    pane.selected = 0;
    match span {
        Some(s) => {
            pane.pending = true;
            pane.error = None;
            pane.asked = Some(s);
            app.progress.request_waiting.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = app.chans.finder.send(Request::Calls(CallsRequest::Stats(s)));
        }
        None => {
            pane.pending = false;
            pane.error = Some(match pane.scope {
                Scope::Selection => "no selection: v anchors one (or set marks a and b)".into(),
                _ => "the timeline has no span yet".into(),
            });
        }
    }
}

impl App {
    /// `F`: open the pane.
    pub(super) fn open_stats(&mut self) {
        open(self)
    }

    /// Keys while the pane is open.
    pub(super) fn stats_update(&mut self, a: Action) {
        update(self, a)
    }
}

fn open(app: &mut App) {
    app.mode = Mode::Stats;
    if app.anchor.is_some() {
        app.calls.stats.scope = Scope::Selection;
    }
    ask(app);
}

pub fn on_table(app: &mut App, t: Result<StatsTable, String>) {
    let pane = &mut app.calls.stats;
    if t.as_ref().is_ok_and(|t| Some(t.span) != pane.asked) {
        return;
    }
    pane.pending = false;
    match t {
        Ok(t) => {
            pane.table = Some(t);
            pane.error = None;
            pane.resort();
        }
        Err(e) => pane.error = Some(e),
    }
}

fn update(app: &mut App, a: Action) {
    let rows = sorted(&app.calls.stats).len();
    let page = app.list_height().max(2) - 1;
    let pane = &mut app.calls.stats;
    match a {
        Action::Down => pane.selected = (pane.selected + 1).min(rows.saturating_sub(1)),
        Action::Up => pane.selected = pane.selected.saturating_sub(1),
        Action::PageDown => pane.selected = (pane.selected + page).min(rows.saturating_sub(1)),
        Action::PageUp => pane.selected = pane.selected.saturating_sub(page),
        Action::Top => pane.selected = 0,
        Action::Bottom => pane.selected = rows.saturating_sub(1),
        Action::Left | Action::Right => {
            let i = COLUMNS.iter().position(|c| c.0 == pane.sort).unwrap_or(1);
            let j = if a == Action::Right { (i + 1) % COLUMNS.len() } else { (i + COLUMNS.len() - 1) % COLUMNS.len() };
            pane.sort = COLUMNS[j].0;
            pane.resort();
            pane.selected = 0;
        }
        Action::ToggleView => {
            pane.scope = pane.scope.next();
            ask(app);
        }
        Action::Expand | Action::Submit => {
            let Some((key, name)) = sorted(&app.calls.stats).get(app.calls.stats.selected).map(|r| (r.key, r.name.clone())) else { return };
            app.mode = Mode::Normal;
            // The function's entries as the search pane knows them (all its
            // ranges), else its entry address.
            let entries = app.functions.iter().find(|f| f.name == name).map_or_else(|| vec![key], |f| f.entries.clone());
            let what = FindWhat::Target(SeekTarget::Entry(entries));
            app.last_search = Some(LastSearch { what: what.clone(), label: name.clone() });
            app.start_find(0, Dir::Forward, what, name);
        }
        Action::Cancel | Action::Stats | Action::Quit | Action::Help => app.mode = Mode::Normal,
        _ => {}
    }
}

/// The pane, over the list and source panes.
pub fn draw(app: &App, f: &mut Frame<'_>, area: Rect, pal: Palette) {
    let pane = &app.calls.stats;
    let what = match (pane.scope, pane.table.as_ref().map(|t| t.span)) {
        (_, Some(Span::Elements(a, b))) => format!("selection {a}–{}", b.saturating_sub(1)),
        (_, Some(Span::Segments(a, b))) => format!("zoomed span (index segments {a}–{b})"),
        (Scope::Zoom, _) => "zoomed span".into(),
        (Scope::Selection, _) => "selection".into(),
        _ => "whole capture".into(),
    };
    let sort = COLUMNS.iter().find(|c| c.0 == pane.sort).map_or("", |c| c.1);
    let title = format!(" function statistics · {what} · by {sort} ");
    let inner_w = area.width.saturating_sub(2) as usize;
    let h = area.height.saturating_sub(2) as usize;
    // The name takes what the numbers leave, at least 16; columns that do
    // not fit are left out, the sorted one never.
    let mut cols: Vec<(Column, &str, usize)> = Vec::new();
    let sort_w = COLUMNS.iter().find(|x| x.0 == pane.sort).map_or(0, |x| x.2 + 1);
    let mut used = 16;
    for c in COLUMNS {
        // Room is kept for the sorted column until it is in.
        let sorted = c.0 == pane.sort;
        let reserve = if sorted || cols.iter().any(|x| x.0 == pane.sort) { 0 } else { sort_w };
        if sorted || used + c.2 + 1 + reserve <= inner_w {
            used += c.2 + 1;
            cols.push(c);
        }
    }
    let name_w = inner_w.saturating_sub(used - 16).max(8);
    let bold = Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED);
    let mut header = vec![TextSpan::styled(format!("{:<name_w$}", "function"), bold)];
    for (c, name, w) in &cols {
        let st = if *c == pane.sort { bold.add_modifier(Modifier::REVERSED) } else { bold };
        header.push(TextSpan::styled(format!(" {name:>w$}"), st));
    }
    let mut lines = vec![Line::from(header)];
    let rows = sorted(pane);
    let body = h.saturating_sub(2);
    if let Some(e) = &pane.error {
        lines.push(Line::from(format!(" {e}")));
    } else if pane.pending {
        lines.push(Line::from(" computing…"));
    } else if rows.is_empty() {
        lines.push(Line::from(" no functions ran here"));
    }
    let skip = pane.selected.saturating_sub(body.saturating_sub(1));
    for (i, r) in rows.iter().enumerate().skip(skip).take(body) {
        let mut name: String = r.name.chars().take(name_w).collect();
        if r.name.chars().count() > name_w {
            name = name.chars().take(name_w.saturating_sub(1)).collect::<String>() + "…";
        }
        let mut spans = vec![TextSpan::styled(format!("{name:<name_w$}"), pal.accent())];
        for (c, _, w) in &cols {
            // Per-call figures come from calls whose end was seen: with none,
            // a 0 would read as calls of no instructions.
            let per_call = matches!(c, Column::Min | Column::Max | Column::Average);
            let v = if per_call && r.stats.complete_calls == 0 { "–".to_string() } else { thousands(c.value(&r.stats)) };
            spans.push(TextSpan::raw(format!(" {v:>w$}")));
        }
        let mut line = Line::from(spans);
        if i == pane.selected {
            line = line.patch_style(Style::default().add_modifier(Modifier::REVERSED));
        }
        lines.push(line);
    }
    while lines.len() < h.saturating_sub(1) {
        lines.push(Line::from(""));
    }
    let unknown = pane.table.as_ref().map_or(0, |t| t.unknown_ends);
    lines.push(Line::from(TextSpan::styled(
        format!(
            " ↑↓ select · ← → sort · s whole/zoom/selection · Enter first entry, then n N · Esc closes{}",
            if unknown > 0 { format!(" · {unknown} calls end unseen") } else { String::new() }
        ),
        Style::default().add_modifier(Modifier::DIM),
    )));
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)), area);
}
