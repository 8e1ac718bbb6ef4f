//! The drawing primitives every pane shares: the palette, a bordered block
//! and number formatting. Kept apart from `draw` so that the panes drawn by
//! their own files (chart, statistics, mixed source) need not import the
//! frame that calls them.

use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Borders};

use super::model::{RowKind, RowState};

/// Colors, or none at all when NO_COLOR is set: every state also has a text
/// tag, so nothing depends on color alone.
#[derive(Clone, Copy, Debug)]
pub struct Palette {
    pub color: bool,
}

impl Palette {
    pub fn from_env() -> Palette {
        Palette { color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) }
    }

    pub(crate) fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    /// The named ANSI colors follow the terminal's own theme, so they read on
    /// dark and light backgrounds alike.
    pub fn state(&self, s: RowState) -> Style {
        match s {
            RowState::Plain => Style::default(),
            RowState::Committed => self.fg(Color::Green),
            RowState::Speculative => self.fg(Color::Yellow).add_modifier(Modifier::ITALIC),
            RowState::Canceled => self.fg(Color::Red).add_modifier(Modifier::CROSSED_OUT),
            RowState::Corrected => self.fg(Color::Magenta),
            RowState::Discarded => self.fg(Color::Blue).add_modifier(Modifier::DIM),
            RowState::Lost => self.fg(Color::Red).add_modifier(Modifier::BOLD),
        }
    }

    pub fn kind(&self, k: RowKind) -> Style {
        match k {
            RowKind::Exception | RowKind::ExceptionReturn => self.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            RowKind::Gap => self.fg(Color::Red).add_modifier(Modifier::BOLD),
            RowKind::Nacc => self.fg(Color::Red),
            RowKind::Time | RowKind::Context => Style::default().add_modifier(Modifier::DIM),
            _ => Style::default(),
        }
    }

    pub(crate) fn accent(&self) -> Style {
        self.fg(Color::Cyan)
    }
}

pub fn block(title: String) -> Block<'static> {
    Block::default().borders(Borders::ALL).title(title)
}

/// A count with thousands separators, as the panes print them.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
