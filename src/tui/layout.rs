//! Where the viewer's panes go for a terminal size: computed by the app
//! (paging and mouse hit-tests) and by the drawing alike, so neither needs
//! the other for it.

use ratatui::layout::{Constraint, Direction, Layout, Rect};

/// Where each pane goes for a terminal size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Areas {
    pub timeline: Rect,
    pub list: Rect,
    pub source: Rect,
    pub status: Rect,
}

/// `lanes` is the number of timeline lanes shown (one per trace ID, or one
/// for all).
pub fn areas(area: Rect, lanes: u16) -> Areas {
    // Lanes, gap marks, viewport.
    let tl_h = (lanes + 4).min(area.height / 3).max(3);
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(tl_h), Constraint::Min(3), Constraint::Length(1)])
        .split(area);
    let body = rows[1];
    let (list, source) = if body.width >= 120 {
        let c = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Percentage(62), Constraint::Percentage(38)])
            .split(body);
        (c[0], c[1])
    } else {
        let src_h = (body.height / 3).max(4).min(body.height.saturating_sub(4));
        let c = Layout::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Min(4), Constraint::Length(src_h)])
            .split(body);
        (c[0], c[1])
    };
    Areas { timeline: rows[0], list, source, status: rows[2] }
}
