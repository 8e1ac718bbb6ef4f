//! Drawing: a pure function of the app state. It reads only what the
//! workers already delivered; rows not yet decoded show as placeholders.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use std::sync::Arc;

use super::app::{App, Axis, Mode, Pos};
use super::model::{ElemRow, RowKind, RowState, View};
use super::sourceview::SourceStatus;
use super::model::LANE_SUB;
pub use super::style::Palette;
use super::style::{block, thousands};

pub fn draw(app: &App, f: &mut Frame<'_>) {
    let pal = Palette::from_env();
    draw_with(app, f, pal)
}

/// Below this size the panes cannot show a row whole: say so instead.
pub const MIN_SIZE: (u16, u16) = (50, 12);

pub fn draw_with(app: &App, f: &mut Frame<'_>, pal: Palette) {
    let full = f.area();
    if full.width < MIN_SIZE.0 || full.height < MIN_SIZE.1 {
        let text = vec![
            Line::from("terminal too small"),
            Line::from(format!("{}x{}, needs {}x{}", full.width, full.height, MIN_SIZE.0, MIN_SIZE.1)),
            Line::from("q quits"),
        ];
        let p = Paragraph::new(text).alignment(ratatui::layout::Alignment::Center).wrap(ratatui::widgets::Wrap { trim: true });
        f.render_widget(p, full);
        return;
    }
    let a = super::layout::areas(full, app.lanes_shown());
    draw_timeline(app, f, a.timeline, pal);
    draw_list(app, f, a.list, pal);
    draw_source(app, f, a.source, pal);
    draw_status(app, f, a.status, pal);
    match &app.mode {
        Mode::Help => draw_help(app, f, pal),
        Mode::Search { .. } => draw_search(app, f, a.list, pal),
        Mode::Export { .. } => draw_export(app, f, pal),
        Mode::Stats => super::statspane::draw(app, f, a.list.union(a.source), pal),
        _ => {}
    }
}

// ---- timeline ---------------------------------------------------------------

const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Per column of the timeline: instructions, exceptions, gaps, speculation
/// that did not commit; from per-segment values spread over the columns each
/// segment covers on the axis.
/// Each segment is given as `sub` equal parts (`value` takes segment × `sub`
/// plus part), placed along the segment's span of the axis.
///
/// [`bin_columns`] for a timeline line, kept in the app for the frames
/// after (the same columns, zoom and lanes bin to the same columns).
fn density_columns(
    app: &App,
    cols: usize,
    view: (f64, f64),
    sub: usize,
    lane: Option<u8>,
    value: &dyn Fn(usize) -> (u64, u64, u64, u64),
) -> Arc<Vec<super::app::DensityBin>> {
    let key = (cols, view.0.to_bits(), view.1.to_bits(), app.axis() as u8, sub, lane);
    if let Some(b) = app.density.borrow().get(&key) {
        return b.clone();
    }
    let b = Arc::new(bin_columns(app, cols, view, sub, value));
    let mut cache = app.density.borrow_mut();
    // Zooming and resizing make new keys: keep a screenful of lanes' worth.
    if cache.len() >= 64 {
        cache.clear();
    }
    cache.insert(key, b.clone());
    b
}

fn bin_columns(
    app: &App,
    cols: usize,
    (vlo, vhi): (f64, f64),
    sub: usize,
    value: &dyn Fn(usize) -> (u64, u64, u64, u64),
) -> Vec<(f64, u64, u64, u64)> {
    let mut bins = vec![(0f64, 0u64, 0u64, 0u64); cols];
    let Some(ix) = &app.indexed else { return bins };
    if cols == 0 {
        return bins;
    }
    let axis = app.axis();
    let col_w = (vhi - vlo) / cols as f64;
    for (k, s) in ix.segments.iter().enumerate() {
        let span = match axis {
            Axis::Timestamp => s.ts,
            Axis::Cycles => s.cc,
            Axis::Elements => Some((s.elements_before, s.elements_before + s.elements)),
        };
        let Some((sa, sb)) = span else { continue };
        let step = (sb as f64 - sa as f64) / sub as f64;
        for j in 0..sub {
            let a = sa as f64 + step * j as f64;
            let b = (a + step).max(a + 1e-9);
            if b < vlo || a > vhi {
                continue;
            }
            let (instr, exc, gaps, spec) = value(k * sub + j);
            let c0 = (((a - vlo) / col_w).floor().max(0.0) as usize).min(cols - 1);
            let c1 = (((b - vlo) / col_w).floor().max(0.0) as usize).min(cols - 1);
            let n = (c1 - c0 + 1) as f64;
            for bin in &mut bins[c0..=c1] {
                bin.0 += instr as f64 / n;
            }
            bins[c0].1 += exc;
            bins[c0].2 += gaps;
            bins[c0].3 += spec;
        }
    }
    bins
}

fn density_line(label: &str, bins: &[(f64, u64, u64, u64)], pal: Palette) -> Line<'static> {
    let max = bins.iter().map(|b| b.0).fold(0.0, f64::max).max(1.0);
    let mut spans = vec![Span::styled(label.to_string(), Style::default().add_modifier(Modifier::DIM))];
    for b in bins {
        let level = if b.0 > 0.0 { 1 + ((b.0 / max) * 7.0).round() as usize } else { 0 };
        let style = if b.1 > 0 { pal.fg(Color::Cyan) } else { pal.fg(Color::Green) };
        spans.push(Span::styled(BARS[level.min(8)].to_string(), style));
    }
    Line::from(spans)
}

fn draw_timeline(app: &App, f: &mut Frame<'_>, area: Rect, pal: Palette) {
    let Some(ix) = &app.indexed else {
        let done = app.progress.index.done();
        let total = app.progress.index.total().max(app.progress.index_total.load(std::sync::atomic::Ordering::Relaxed)).max(1);
        let pct = done as f64 * 100.0 / total as f64;
        let w = area.width.saturating_sub(4) as usize;
        let filled = ((w as f64) * pct / 100.0) as usize;
        let bar = format!("{}{}", "█".repeat(filled.min(w)), "░".repeat(w - filled.min(w)));
        let p = Paragraph::new(vec![Line::from(format!(" indexing {pct:.0}% ({} of {} MiB)", done >> 20, total >> 20)), Line::from(format!(" {bar}"))])
            .block(block(" timeline ".into()));
        f.render_widget(p, area);
        return;
    };
    let axis = app.axis();
    let (lo, hi) = app.axis_range().unwrap_or((0, 1));
    let (zl, zh) = app.zoom;
    let vlo = lo as f64 + zl * (hi - lo) as f64;
    let vhi = lo as f64 + zh * (hi - lo) as f64;
    // A perf.data labels its lanes by CPU even when one CPU traced.
    let per_id = ix.ids.len() > 1 || app.has_cpus() && !ix.ids.is_empty();
    let title = format!(
        " timeline · {} {}–{} · zoom {:.0}×{} ",
        axis.name(),
        vlo as u64,
        vhi as u64,
        1.0 / (zh - zl).max(1e-9),
        if per_id && app.lanes.is_empty() { " · per-ID lanes after the background pass" } else { "" }
    );
    // Several trace IDs: a labelled lane each.
    let label_w = if per_id { 5 } else { 0 };
    let inner_w = (area.width.saturating_sub(2) as usize).saturating_sub(label_w);
    if inner_w == 0 {
        return;
    }
    let view = (vlo, vhi);
    let all = density_columns(app, inner_w, view, 1, None, &|k| {
        let s = &ix.segments[k];
        (s.instructions, s.exceptions, s.gaps, s.spec)
    });
    let lane_bins = |lane: &super::worker::Lane| {
        density_columns(app, inner_w, view, LANE_SUB, Some(lane.trace_id), &|i| {
            let b = lane.bins.get(i).copied().unwrap_or_default();
            (b.instructions, b.exceptions as u64, b.gaps as u64, 0)
        })
    };
    let title = super::chart::title(app, title);
    let mut lines = Vec::new();
    let pad = " ".repeat(label_w);
    let mut hidden = String::new();
    if let Some(chart) = super::chart::lines(app, inner_w, view, if per_id { label_w } else { 0 }, pal) {
        lines = chart;
    } else if per_id && !app.lanes.is_empty() {
        // Every lane has a line when they fit, else a window of them that
        // the timeline cursor scrolls; the title says how many are hidden.
        let (shown, n_hidden) = super::viewdraw::lane_window(app, (area.height as usize).saturating_sub(4));
        hidden = super::viewdraw::hidden_note(&shown, app.lanes.len(), n_hidden);
        for lane in &app.lanes[shown] {
            // A perf.data names each lane by its CPU.
            let label = match app.cpu_of(lane.trace_id) {
                Some(c) => format!("cpu{c:<2}"),
                None => format!("{:02x}  ", lane.trace_id),
            };
            // The lanes of a trace ID filter are marked, the others dimmed.
            let kept = super::viewdraw::lane_kept(app, lane.trace_id);
            let label = if kept && !app.filter.trace_ids.is_empty() { format!("{}•", &label[..label.len() - 1]) } else { label };
            let line = density_line(&label.chars().take(label_w).collect::<String>(), &lane_bins(lane), pal);
            lines.push(if kept { line } else { line.patch_style(Style::default().add_modifier(Modifier::DIM)) });
        }
    } else if let [lane] = app.lanes.as_slice() {
        // One trace ID: its lane is the finer picture of the whole.
        lines.push(density_line("", &lane_bins(lane), pal));
    } else {
        lines.push(density_line(if per_id { "all  " } else { "" }, &all, pal));
    }
    let mut marks = vec![Span::raw(pad.clone())];
    for b in all.iter() {
        marks.push(if b.2 > 0 {
            Span::styled("×", pal.fg(Color::Red).add_modifier(Modifier::BOLD))
        } else if b.1 > 0 {
            Span::styled("!", pal.fg(Color::Cyan))
        } else if b.3 > 0 {
            Span::styled("~", pal.fg(Color::Magenta))
        } else {
            Span::raw(" ")
        });
    }
    lines.push(Line::from(marks));
    // The list's viewport, the cursor and the timeline cursor.
    let vis = app.visible();
    let mut row: Vec<char> = vec![' '; inner_w];
    let col = |n: u64| -> Option<usize> {
        let fr = app.fraction_of(n)?;
        if fr < zl || fr > zh {
            return None;
        }
        Some((((fr - zl) / (zh - zl)) * inner_w as f64) as usize).map(|c| c.min(inner_w - 1))
    };
    if let (Some(a), Some(b)) = (vis.first().and_then(|p| col(p.number)), vis.last().and_then(|p| col(p.number))) {
        for ch in row.iter_mut().take(b + 1).skip(a) {
            *ch = '━';
        }
    }
    if let Some(c) = col(app.cursor.number) {
        row[c] = '▲';
    }
    let mut viewport = vec![Span::raw(pad), Span::styled(row.into_iter().collect::<String>(), pal.accent())];
    if let Some(tc) = app.timeline_cursor {
        let c = ((tc * inner_w as f64) as usize).min(inner_w - 1);
        let text: String = viewport[1].content.chars().enumerate().map(|(i, ch)| if i == c { '◆' } else { ch }).collect();
        viewport[1] = Span::styled(text, pal.accent().add_modifier(Modifier::BOLD));
    }
    lines.push(Line::from(viewport));
    let h = area.height.saturating_sub(2) as usize;
    if lines.len() > h {
        // Keep the first lanes and the viewport row when space is short.
        let last = lines.pop();
        lines.truncate(h.saturating_sub(1));
        lines.extend(last);
    }
    // The hidden lanes first: a long axis range must not push them out.
    let mut b = block(if hidden.is_empty() { title } else { title.replacen(" timeline · ", &format!(" timeline · {hidden}"), 1) });
    if app.timeline_cursor.is_some() {
        b = b.border_style(pal.accent().add_modifier(Modifier::BOLD));
    }
    f.render_widget(Paragraph::new(lines).block(b), area);
}

// ---- element list -----------------------------------------------------------

fn draw_list(app: &App, f: &mut Frame<'_>, area: Rect, pal: Palette) {
    let total = app.total();
    let view = match app.view {
        View::Committed => "committed",
        View::Speculation => "speculation",
    };
    let title = match total {
        _ if !app.filter.is_all() => super::viewdraw::list_title(app, view),
        Some(t) if app.indexed.is_none() => {
            format!(" elements · {view} view · {} of ≥{} (indexing) ", thousands(app.cursor.number), thousands(t.saturating_sub(1)))
        }
        Some(t) => format!(" elements · {view} view · {} of {} ", thousands(app.cursor.number), thousands(t)),
        None => format!(" elements · {view} view "),
    };
    let inner_w = area.width.saturating_sub(2) as usize;
    let wide = inner_w >= 110;
    let num_w = total.map_or(6, |t| thousands(t).len()).max(5);
    let addr_col = inner_w >= 100;
    let func_w = function_width(app, inner_w, num_w, wide, addr_col);
    let mut lines = Vec::new();
    let mut header = format!("{:<4} {:>num_w$} ", "st", "elem");
    if wide {
        header.push_str(&format!("{:>14} {:>10} ", "time", if app.zero.is_some() { "Δ from z" } else { "Δ" }));
    }
    if app.has_cycles() {
        header.push_str(&format!("{:>CYC_W$} ", "cycles"));
    }
    // Narrow screens drop the address column: the brief range text has it.
    if app.has_cpus() {
        header.push_str("cpu ");
    }
    header.push_str(&format!("{:<2} {:<5} ", "id", "ctx"));
    if addr_col {
        header.push_str(&format!("{:<12} ", "address"));
    }
    header.push_str(&format!("{:<func_w$} element", "function"));
    lines.push(Line::from(Span::styled(header, Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED))));
    let selection = app.selection().filter(|_| app.anchor.is_some() || matches!(app.mode, Mode::Export { .. }));
    let visible = app.visible();
    for &p in &visible {
        let mut line = fit_line(row_line(app, p, num_w, func_w, wide, addr_col, pal), inner_w);
        let selected = selection.is_some_and(|(a, b)| p.number >= a && p.number < b);
        if selected {
            line = line.patch_style(if pal.color { Style::default().bg(Color::DarkGray) } else { Style::default().add_modifier(Modifier::UNDERLINED) });
        }
        if p == app.cursor {
            line = line.patch_style(Style::default().add_modifier(Modifier::REVERSED));
        }
        lines.push(line);
    }
    // The end of the trace is a row of its own, saying why when the decode
    // stopped early (a truncated trace, an error that ends the stream).
    let at_end = match (&app.indexed, visible.last()) {
        (Some(_), Some(p)) => app.at_view_end(*p),
        (Some(ix), None) => ix.elements == 0,
        _ => false,
    };
    if at_end && visible.len() < app.list_height() {
        let line = match app.indexed.as_ref().and_then(|ix| ix.stop.as_deref()) {
            Some(stop) => Line::from(Span::styled(format!("{:<4} {:>num_w$} ⚠ decode stopped: {stop}", "err", ""), pal.kind(RowKind::Gap))),
            None => Line::from(Span::styled(format!("{:<4} {:>num_w$} — end of trace —", "", ""), Style::default().add_modifier(Modifier::DIM))),
        };
        lines.push(fit_line(line, inner_w));
    }
    f.render_widget(Paragraph::new(lines).block(block(title)), area);
}

/// The blank time, delta and cycles columns of rows that have none.
fn time_pad(app: &App, wide: bool) -> String {
    let cyc = if app.has_cycles() { " ".repeat(CYC_W + 1) } else { String::new() };
    if wide {
        format!("{:>14} {:>10} {cyc}", "", "")
    } else {
        cyc
    }
}

/// Width of the cycles column.
const CYC_W: usize = 7;

/// The delta column: this row's time less the zero mark's (`z`), else the
/// element before's. Timestamps when both rows have one (as time with
/// `--ts-freq`, else in ticks), otherwise cycle counts; empty when the
/// other row is not loaded or neither is known.
pub fn delta_text(app: &App, r: &ElemRow) -> String {
    if app.zero == Some(r.number) {
        return "z".into();
    }
    let from = match app.zero {
        Some(z) => z,
        None => match app.prev_elem(r.number) {
            Some(p) => p,
            None => return String::new(),
        },
    };
    let Some(o) = app.entry(from).map(|e| &e.row) else { return String::new() };
    let sign = |later: bool| if later { "+" } else { "-" };
    match (r.timestamp, o.timestamp) {
        // Same time and same cycles: no unit says more than 0.
        (Some(a), Some(b)) if a == b && r.cycles == o.cycles => "0".into(),
        (Some(a), Some(b)) if a != b => {
            let d = a.abs_diff(b);
            match app.ts_freq {
                Some(hz) => format!("{}{}", sign(a >= b), human_time(d as f64 / hz)),
                None => format!("{}{d}t", sign(a >= b)),
            }
        }
        _ if r.cycles > 0 || o.cycles > 0 => format!("{}{}cc", sign(r.cycles >= o.cycles), r.cycles.abs_diff(o.cycles)),
        _ => String::new(),
    }
}

/// Seconds in the unit that keeps three or four significant digits.
fn human_time(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3}s")
    } else if s >= 1e-3 {
        format!("{:.3}ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3}µs", s * 1e6)
    } else {
        format!("{:.1}ns", s * 1e9)
    }
}

/// Columns of a row before the function column.
fn lead_width(app: &App, num_w: usize, wide: bool, addr_col: bool) -> usize {
    5 + num_w + 1 + if wide { 26 } else { 0 } + if app.has_cycles() { CYC_W + 1 } else { 0 } + if app.has_cpus() { 4 } else { 0 } + 9 + if addr_col { 13 } else { 0 }
}

/// The function column shares the row with the element text: at least what
/// it had before (14, or 24 on wide lists) when its names need it, more
/// when the element texts on screen leave room, never more than the
/// longest name.
fn function_width(app: &App, inner_w: usize, num_w: usize, wide: bool, addr_col: bool) -> usize {
    let base = if inner_w >= 100 { 24 } else { 14 };
    let avail = inner_w.saturating_sub(lead_width(app, num_w, wide, addr_col) + 1);
    let (mut names, mut texts) = (0, 0);
    for p in app.visible() {
        if let Some(e) = app.entry(p.number) {
            names = names.max(e.row.function.as_deref().map_or(0, |f| f.chars().count()));
            let text = if wide { &e.row.text } else { &e.row.brief };
            texts = texts.max(text.chars().count() + 2);
        }
    }
    let names = names.max(8);
    let least = base.min(names);
    avail.saturating_sub(texts).clamp(least, names).min(avail)
}

/// Cut a line to `w` columns, marking the cut with `…` so that a number cut
/// short never reads as another number.
fn fit_line(line: Line<'static>, w: usize) -> Line<'static> {
    if line.width() <= w {
        return line;
    }
    let style = line.style;
    let mut left = w.saturating_sub(1);
    let mut spans = Vec::new();
    for sp in line.spans {
        if left == 0 {
            break;
        }
        let n = sp.content.chars().count();
        if n <= left {
            left -= n;
            spans.push(sp);
        } else {
            spans.push(Span::styled(sp.content.chars().take(left).collect::<String>(), sp.style));
            left = 0;
        }
    }
    let last = spans.last().map(|s| s.style).unwrap_or_default();
    spans.push(Span::styled("…", last));
    Line::from(spans).style(style)
}

fn fit(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        format!("{s:<w$}")
    } else {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn row_line(app: &App, p: Pos, num_w: usize, func_w: usize, wide: bool, addr_col: bool, pal: Palette) -> Line<'static> {
    let Some(entry) = app.entry(p.number) else {
        return Line::from(Span::styled(format!("{:<4} {:>num_w$} …", "", p.number), Style::default().add_modifier(Modifier::DIM)));
    };
    let notes = entry.notes.len() as u32;
    if p.sub < notes {
        let text = format!("{:<4} {:>num_w$} ⚠ {}", "err", "", entry.notes[p.sub as usize]);
        return Line::from(Span::styled(text, pal.kind(RowKind::Gap)));
    }
    let pre = notes + if app.view == View::Speculation { entry.pre.len() as u32 } else { 0 };
    if p.sub < pre {
        let r = &entry.pre[(p.sub - notes) as usize];
        let resolved = r.resolved.map_or("end of trace".to_string(), |o| format!("@{o}"));
        let text = format!(
            "{} {:>num_w$} {}{:02x} ↳ speculative {} #{} traced @{} → {} {}",
            r.state.tag(),
            "",
            time_pad(app, wide),
            r.trace_id,
            r.what,
            r.seq,
            r.created,
            state_word(r.state),
            resolved
        );
        return Line::from(Span::styled(text, pal.state(r.state)));
    }
    if p.sub > pre {
        let i = (p.sub - pre - 1) as usize;
        let Some(l) = app.expanded.as_ref().and_then(|(_, ls)| ls.get(i)) else {
            return Line::from("");
        };
        let lead = format!("{:<4} {:>num_w$} {}", "", "", time_pad(app, wide));
        let sym = l.symbol.as_ref().map(|s| format!(" <{s}>")).unwrap_or_default();
        return Line::from(vec![
            Span::raw(lead),
            Span::styled(format!("   {:#x}  ", l.addr), pal.fg(Color::Blue)),
            Span::raw(format!("{:<12} {}{}", l.bytes, l.text, sym)),
        ]);
    }
    let r = &entry.row;
    let mut spans = vec![
        Span::styled(r.state.tag().to_string(), pal.state(r.state)),
        Span::raw(format!(" {:>num_w$} ", r.number)),
    ];
    if wide {
        // A timestamp when the trace has one, else the cycles counted so far;
        // nothing when neither is known (not a misleading 0).
        let t = match r.timestamp {
            Some(ts) => format!("{ts:>14} "),
            None if r.cycles > 0 => format!("{:>12}cc ", r.cycles),
            None => format!("{:>14} ", ""),
        };
        spans.push(Span::styled(t, Style::default().add_modifier(Modifier::DIM)));
        spans.push(Span::styled(format!("{:>10} ", delta_text(app, r)), pal.fg(Color::Cyan)));
    }
    if app.has_cycles() {
        spans.push(Span::styled(format!("{:>CYC_W$} ", fit(&super::cycles::column(r), CYC_W).trim_end()), pal.fg(Color::Yellow)));
    }
    let addr = r.addr.map(|a| format!("{a:#x}")).unwrap_or_default();
    if app.has_cpus() {
        spans.push(Span::raw(format!("{:>3} ", app.cpu_of(r.trace_id).map(|c| c.to_string()).unwrap_or_default())));
    }
    spans.push(Span::raw(format!("{:02x} {:<5} ", r.trace_id, fit(r.context.as_deref().unwrap_or("?"), 5))));
    if addr_col {
        spans.push(Span::raw(format!("{:<12} ", fit(&addr, 12))));
    }
    let indent = super::folding::indent(app, r.number, func_w / 2);
    spans.push(Span::styled(fit(&format!("{indent}{}", r.function.as_deref().unwrap_or("")), func_w), pal.accent()));
    spans.push(Span::raw(" "));
    let style = if r.state == RowState::Plain || r.state == RowState::Committed { pal.kind(r.kind) } else { pal.state(r.state) };
    let marker = match &app.expanded {
        Some((n, _)) if *n == r.number => "▾ ",
        _ if r.kind == RowKind::Range => "▸ ",
        _ => "",
    };
    // OpenCSD's text when it fits whole; else the compact form, which keeps
    // the branch type that a cut would lose.
    let room = lead_width(app, num_w, wide, addr_col) + func_w + 1;
    let fits = |t: &str| room + marker.chars().count() + t.chars().count() <= app.list_inner_width();
    let text = if wide && fits(&r.text) { &r.text } else { &r.brief };
    // A folded call shows what it cost; a folded loop how often it ran.
    if let Some(folded) = super::folding::folded_text(app, r.number) {
        spans.push(Span::styled(folded, pal.accent().add_modifier(Modifier::BOLD)));
        return Line::from(spans);
    }
    let times = super::folding::run_suffix(app, r.number).unwrap_or_default();
    spans.push(Span::styled(format!("{marker}{text}{times}"), style));
    Line::from(spans)
}

fn state_word(s: RowState) -> &'static str {
    match s {
        RowState::Plain => "",
        RowState::Committed => "committed",
        RowState::Speculative => "unresolved at",
        RowState::Canceled => "canceled",
        RowState::Corrected => "corrected by mispredict",
        RowState::Discarded => "discarded",
        RowState::Lost => "lost",
    }
}

// ---- source -----------------------------------------------------------------

fn draw_source(app: &App, f: &mut Frame<'_>, area: Rect, pal: Palette) {
    let h = area.height.saturating_sub(2) as usize;
    // A row without an address (time, context, a gap) has no source: the
    // pane follows the cursor rather than keep the last address's file.
    if app.entry(app.cursor.number).is_some() && app.cursor_addr().is_none() {
        let title = if app.show_disasm { " disassembly · no address " } else { " source · no address " };
        let p = Paragraph::new(Line::from(Span::styled(" this row has no address", Style::default().add_modifier(Modifier::DIM))));
        f.render_widget(p.block(block(title.into())), area);
        return;
    }
    let Some((view, disasm)) = &app.source else {
        f.render_widget(Paragraph::new("").block(block(" source ".into())), area);
        return;
    };
    if app.mixed {
        return super::mixed::draw(f, area, view, disasm, pal);
    }
    if app.show_disasm {
        let title = format!(" disassembly · {} ", view.function.as_deref().unwrap_or("?"));
        let cur = disasm.iter().position(|l| l.current).unwrap_or(0);
        let skip = cur.saturating_sub(h / 3);
        let lines: Vec<Line> = disasm
            .iter()
            .skip(skip)
            .take(h)
            .map(|l| {
                let sym = l.symbol.as_ref().map(|s| format!(" <{s}>")).unwrap_or_default();
                let line = Line::from(vec![
                    Span::styled(format!("{:#x}  ", l.addr), pal.fg(Color::Blue)),
                    Span::raw(format!("{:<12} {}{}", l.bytes, l.text, sym)),
                ]);
                if l.current {
                    line.patch_style(Style::default().add_modifier(Modifier::REVERSED))
                } else {
                    line
                }
            })
            .collect();
        f.render_widget(Paragraph::new(lines).block(block(title)), area);
        return;
    }
    let title = match (&view.status, &view.file, view.line) {
        (SourceStatus::Ok, Some(file), Some(line)) => format!(" {}:{} ", short_path(file), line),
        (SourceStatus::SourceNotFound { file, .. }, _, _) => format!(" source not found: {} ", short_path(file)),
        (SourceStatus::NoDebugInfo, _, _) => " no debug info ".to_string(),
        (SourceStatus::NoSymbols, _, _) => " no symbols for this address ".to_string(),
        _ => " source ".to_string(),
    };
    let mut lines = Vec::new();
    let mut head = vec![Span::styled(view.function.clone().unwrap_or_else(|| format!("{:#x}", view.addr)), pal.accent())];
    if view.inline_chain.len() > 1 {
        let chain: Vec<String> = view.inline_chain.iter().map(|fr| fr.function.clone()).collect();
        head.push(Span::styled(format!("  inlined: {}", chain.join(" ← ")), Style::default().add_modifier(Modifier::DIM)));
    }
    lines.push(Line::from(head));
    // The call stack at the cursor, outermost first.
    if let Some(b) = super::folding::breadcrumb(app, area.width.saturating_sub(3) as usize) {
        lines.insert(0, Line::from(Span::styled(b, Style::default().add_modifier(Modifier::DIM))));
    }
    let body = h.saturating_sub(lines.len());
    if let (SourceStatus::SourceNotFound { file, tried }, true) = (&view.status, view.lines.is_empty()) {
        // Where it was looked for, so the user knows which option to give.
        let dim = Style::default().add_modifier(Modifier::DIM);
        lines.push(Line::from(format!("{file} not found; tried:")));
        for t in tried.iter().take(body.saturating_sub(2)) {
            lines.push(Line::from(Span::styled(format!("  {}", t.display()), dim)));
        }
        lines.push(Line::from(Span::styled("give --source-root DIR or --substitute-path OLD=NEW", dim)));
        f.render_widget(Paragraph::new(lines).block(block(title)), area);
        return;
    }
    let cur = view.lines.iter().position(|l| l.current).unwrap_or(0);
    let skip = cur.saturating_sub(body / 2).min(view.lines.len().saturating_sub(body));
    for l in view.lines.iter().skip(skip).take(body) {
        let count = if l.count > 0 { format!("{:>6}", l.count) } else { format!("{:>6}", "") };
        let line = Line::from(vec![
            Span::styled(count, pal.fg(Color::Yellow)),
            Span::styled(format!(" {:>5} ", l.number), Style::default().add_modifier(Modifier::DIM)),
            Span::raw(l.text.replace('\t', "    ")),
        ]);
        lines.push(if l.current { line.patch_style(Style::default().add_modifier(Modifier::REVERSED)) } else { line });
    }
    f.render_widget(Paragraph::new(lines).block(block(title)), area);
}

fn short_path(p: &str) -> String {
    let parts: Vec<&str> = p.rsplit('/').take(2).collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

// ---- status and overlays ------------------------------------------------------

fn draw_status(app: &App, f: &mut Frame<'_>, area: Rect, pal: Palette) {
    use std::sync::atomic::Ordering;
    let left = match &app.mode {
        Mode::Goto { input } => format!("go to: {}  (N · ts:T · cc:C · off:B · addr:HEX · fn:NAME; Enter, Esc)", with_caret(input, app.text_at)),
        Mode::TextSearch { input } => format!("search text: {}  (any case; Enter finds the next, n N repeat, Esc)", with_caret(input, app.text_at)),
        Mode::Filter { input } => format!("view: {}  (id:HEX · cpu:N · ctx:HEX · vmid:N · merge; empty shows all)", with_caret(input, app.text_at)),
        Mode::Mark { set: true } => "set mark: press a letter".into(),
        Mode::Mark { set: false } => "jump to mark: press a letter".into(),
        _ => {
            if let Some(e) = &app.error {
                format!("error: {e}")
            } else if app.filtering() && app.message.is_empty() {
                super::viewdraw::filter_status(app)
            } else if let Some((_, label)) = &app.finding {
                format!("searching {label}… element {} (Esc stops)", thousands(app.progress.find_at.load(Ordering::Relaxed)))
            } else if let Some(p) = &app.exporting {
                let d = app.progress.export_done.load(Ordering::Relaxed);
                let t = app.progress.export_total.load(Ordering::Relaxed).max(1);
                format!("exporting {} {:.0}% (Esc cancels)", p.display(), d as f64 * 100.0 / t as f64)
            } else if !app.message.is_empty() {
                app.message.clone()
            } else {
                "? help · / function · g go to · s speculation · q quit".into()
            }
        }
    };
    let mut right = String::new();
    if let Some(info) = &app.info {
        let name = info.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        right = format!(" {} · {} ", name, info.buffer);
    }
    if let Some(n) = app.info.as_ref().map(|i| i.warnings.len()).filter(|n| *n > 0) {
        right = format!(" ⚠ {n} warning{} ·{right}", if n == 1 { "" } else { "s" });
    }
    if app.indexed.as_ref().is_some_and(|i| i.unsaved.is_some()) {
        right = format!(" index in memory ·{right}");
    }
    if let Some(note) = super::folding::status_note(app) {
        right = format!(" {note} ·{right}");
    }
    if let Some(a) = app.anchor {
        right = format!(" sel {}–{} ·{right}", a.min(app.cursor.number), a.max(app.cursor.number));
    }
    let w = area.width as usize;
    let rw = right.chars().count().min(w);
    let lw = w - rw;
    let line = Line::from(vec![
        Span::styled(fit(&left, lw), Style::default().add_modifier(Modifier::BOLD)),
        Span::styled(right, if pal.color { Style::default().fg(Color::Black).bg(Color::Cyan) } else { Style::default().add_modifier(Modifier::REVERSED) }),
    ]);
    f.render_widget(Paragraph::new(line), area);
}

pub use super::style::{help_layout, KEYS};
use super::style::HELP_KEY_W;

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(area.x + (area.width - w) / 2, area.y + (area.height - h) / 2, w, h)
}


const HELP_STATES: [&str; 2] = [" states: cmt committed · spec unresolved · canc canceled", " · corr corrected · disc discarded · lost"];

fn draw_help(app: &App, f: &mut Frame<'_>, pal: Palette) {
    let screen = f.area();
    let (cols, shown) = help_layout((screen.width, screen.height));
    let longest = super::style::help_desc_width();
    let width = if cols == 1 { (HELP_KEY_W + longest + 2) as u16 } else { screen.width };
    let area = centered(screen, width, shown as u16 + 2 + (3 - cols as u16));
    let col_w = (area.width.saturating_sub(2) as usize) / cols;
    let first = if cols == 1 { app.help_top.min(KEYS.len().saturating_sub(shown)) } else { 0 };
    let rows = if cols == 1 { shown } else { KEYS.len().div_ceil(2) };
    let mut lines: Vec<Line> = Vec::new();
    for r in 0..shown {
        let mut spans = Vec::new();
        for c in 0..cols {
            if let Some((k, d)) = KEYS.get(first + c * rows + r) {
                spans.push(Span::styled(format!(" {k:<w$}", w = HELP_KEY_W - 1), pal.accent().add_modifier(Modifier::BOLD)));
                spans.push(Span::raw(fit(&format!(" {d}"), col_w.saturating_sub(HELP_KEY_W))));
            }
        }
        lines.push(Line::from(spans));
    }
    let states = if cols == 2 { vec![HELP_STATES.concat()] } else { vec![HELP_STATES[0].to_string(), format!("        {}", HELP_STATES[1])] };
    for t in states {
        lines.push(Line::from(Span::styled(fit(&t, area.width.saturating_sub(2) as usize), Style::default().add_modifier(Modifier::DIM))));
    }
    let title = if cols == 1 && shown < KEYS.len() {
        format!(" keys {}–{} of {} (↑↓ PgDn PgUp scroll · Esc closes) ", first + 1, first + shown, KEYS.len())
    } else {
        " keys (Esc closes) ".to_string()
    };
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(lines).block(block(title)), area);
}

fn draw_search(app: &App, f: &mut Frame<'_>, list: Rect, pal: Palette) {
    let Mode::Search { input, hits, selected } = &app.mode else { return };
    let area = centered(list, list.width.saturating_sub(4).min(90), list.height.saturating_sub(2).max(5));
    let h = area.height.saturating_sub(3) as usize;
    let mut lines = vec![Line::from(format!(" / {}", with_caret(input, app.text_at)))];
    let skip = selected.saturating_sub(h.saturating_sub(1));
    for (i, hit) in hits.iter().enumerate().skip(skip).take(h) {
        let func = &app.functions[hit.function];
        let count = match func.count {
            Some(c) => format!("{:>9} ", thousands(c)),
            None => format!("{:>9} ", "…"),
        };
        let mut spans = vec![Span::styled(count, pal.fg(Color::Yellow)), Span::raw(" ")];
        for (ci, ch) in func.name.chars().enumerate() {
            let st = if hit.positions.contains(&ci) { pal.accent().add_modifier(Modifier::BOLD | Modifier::UNDERLINED) } else { Style::default() };
            spans.push(Span::styled(ch.to_string(), st));
        }
        let mut line = Line::from(spans);
        if i == *selected {
            line = line.patch_style(Style::default().add_modifier(Modifier::REVERSED));
        }
        lines.push(line);
    }
    if hits.is_empty() {
        lines.push(Line::from(if app.functions.is_empty() { " no symbols: open with --image ELF" } else { " no match" }));
    }
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(lines).block(block(" functions · entries · Enter goes to the first ".into())), area);
}

/// A prompt's text with the caret (`▏`) at char `at`.
fn with_caret(text: &str, at: usize) -> String {
    let at = at.min(text.chars().count());
    let mut s: String = text.chars().take(at).collect();
    s.push('▏');
    s.extend(text.chars().skip(at));
    s
}

/// The directory an export named `file` goes to, absolute: a relative name
/// is relative to where the viewer was started, which the user may not
/// remember.
fn export_dir(file: &str) -> String {
    let p = std::path::Path::new(file.trim());
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).map(std::path::Path::to_path_buf);
    let dir = match dir {
        Some(d) if d.is_absolute() => d,
        Some(d) => std::env::current_dir().map(|c| c.join(&d)).unwrap_or(d),
        None => std::env::current_dir().unwrap_or_default(),
    };
    dir.display().to_string()
}

fn draw_export(app: &App, f: &mut Frame<'_>, pal: Palette) {
    let Mode::Export { format, file, from, to } = &app.mode else { return };
    let area = centered(f.area(), 70, 8);
    let formats: Vec<Span> = crate::export::ExportFormat::ALL
    .into_iter()
    .map(|x| {
        if x == *format {
            Span::styled(format!(" [{}] ", x.name()), pal.accent().add_modifier(Modifier::BOLD | Modifier::REVERSED))
        } else {
            Span::raw(format!("  {}  ", x.name()))
        }
    })
    .collect();
    let lines = vec![
        Line::from(format!(" elements {} to {} ({} elements)", thousands(*from), thousands(to - 1), thousands(to - from))),
        Line::from(formats),
        Line::from(format!(" file: {}", with_caret(file, app.text_at))),
        Line::from(Span::styled(format!(" in {}", export_dir(file)), Style::default().add_modifier(Modifier::DIM))),
        match &app.export_confirm {
            Some(p) if p.as_os_str() == std::ffi::OsStr::new(file.trim()) => Line::from(Span::styled(
                " the file exists: Enter again replaces it · Esc cancels",
                pal.fg(Color::Red).add_modifier(Modifier::BOLD),
            )),
            _ => Line::from(Span::styled(" Tab format · Enter write · Esc cancel", Style::default().add_modifier(Modifier::DIM))),
        },
    ];
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(lines).block(block(" export ".into())), area);
}
