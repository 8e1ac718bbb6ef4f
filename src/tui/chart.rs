//! The function chart (`b` in the timeline): for the zoomed span, which
//! function ran at the chosen depth, per lane, as colored segments named
//! where the name fits. Drawn from the bins of the background pass
//! ([`super::calls::Chart`]: per lane bin and depth, the function with the
//! most instructions), so a frame decodes nothing.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::app::{App, Axis};
use super::calls::{CHART_DEPTHS, NOTHING};
use super::style::Palette;
use super::model::LANE_SUB;

const COLORS: [Color; 6] = [Color::Blue, Color::Magenta, Color::Green, Color::Yellow, Color::Cyan, Color::Red];

fn color_of(key: u64) -> Color {
    // Fibonacci hashing: neighbouring entry addresses get distant colors.
    COLORS[((key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 59) % COLORS.len() as u64) as usize]
}

/// Each index segment with its span on the timeline's axis (segments
/// without a value on the axis left out).
pub fn segment_spans(app: &App) -> Vec<(usize, f64, f64)> {
    let Some(ix) = &app.indexed else { return Vec::new() };
    let axis = app.axis();
    ix.segments
        .iter()
        .enumerate()
        .filter_map(|(k, s)| {
            let (a, b) = match axis {
                Axis::Timestamp => s.ts?,
                Axis::Cycles => s.cc?,
                Axis::Elements => (s.elements_before, s.elements_before + s.elements),
            };
            Some((k, a as f64, b as f64))
        })
        .collect()
}

/// The lane bin under each of `cols` columns of the axis span `view`.
fn column_bins(app: &App, cols: usize, (vlo, vhi): (f64, f64)) -> Vec<Option<usize>> {
    let spans = segment_spans(app);
    let w = (vhi - vlo) / cols.max(1) as f64;
    (0..cols)
        .map(|c| {
            let mid = vlo + (c as f64 + 0.5) * w;
            let i = spans.partition_point(|s| s.1 <= mid).checked_sub(1)?;
            let (k, a, b) = spans[i];
            if mid > b && i + 1 < spans.len() {
                return None;
            }
            let within = if b > a { ((mid - a) / (b - a) * LANE_SUB as f64).floor() as usize } else { 0 };
            Some(k * LANE_SUB + within.min(LANE_SUB - 1))
        })
        .collect()
}

/// The chart's lines (one per lane), or `None` when the density shows.
pub fn lines(app: &App, cols: usize, view: (f64, f64), label_w: usize, pal: Palette) -> Option<Vec<Line<'static>>> {
    if !app.calls.show_chart {
        return None;
    }
    let dim = Style::default().add_modifier(Modifier::DIM);
    if !app.calls.ready {
        return Some(vec![Line::from(Span::styled(" function chart: after the background pass (f: density)", dim))]);
    }
    let depth = app.calls.chart_depth.min(CHART_DEPTHS - 1);
    let bins = column_bins(app, cols, view);
    let mut out = Vec::new();
    for (id, lane) in &app.calls.chart.lanes {
        let label = if label_w == 0 {
            String::new()
        } else {
            let l = match app.cpu_of(*id) {
                Some(c) => format!("cpu{c:<2}"),
                None => format!("{id:02x}  "),
            };
            l.chars().take(label_w).collect()
        };
        let keys: Vec<u64> = bins.iter().map(|b| b.and_then(|b| lane.get(b)).map_or(NOTHING, |k| k[depth])).collect();
        let mut spans = vec![Span::styled(label, dim)];
        let mut c = 0;
        while c < keys.len() {
            let key = keys[c];
            let run = keys[c..].iter().take_while(|k| **k == key).count();
            c += run;
            if key == NOTHING {
                spans.push(Span::raw(" ".repeat(run)));
                continue;
            }
            // A name shows where three letters of it fit, never a lone
            // letter that reads as another name.
            let name = app.calls.chart.names.get(&key).map_or("", String::as_str);
            let name = if run >= 4 { name } else { "" };
            let text: String = if pal.color {
                name.chars().chain(std::iter::repeat(' ')).take(run).collect()
            } else {
                // Without color a bar starts each segment.
                std::iter::once('▏').chain(name.chars()).chain(std::iter::repeat(' ')).take(run).collect()
            };
            let style = if pal.color { Style::default().bg(color_of(key)).fg(Color::Black) } else { Style::default().add_modifier(Modifier::UNDERLINED) };
            spans.push(Span::styled(text, style));
        }
        out.push(Line::from(spans));
    }
    if out.is_empty() {
        out.push(Line::from(Span::styled(" no functions ran", dim)));
    }
    Some(out)
}

/// The timeline's title when the chart shows.
pub fn title(app: &App, title: String) -> String {
    if app.calls.show_chart {
        title.replacen(" timeline", &format!(" function chart · depth {} (< >)", app.calls.chart_depth), 1)
    } else {
        title
    }
}
