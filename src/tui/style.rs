//! The drawing primitives every pane shares: the palette, a bordered block
//! and number formatting; and the key list with the help overlay's layout,
//! which the app needs to scroll the help. Kept apart from `draw` so that the panes drawn by
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

/// Every key, for the help overlay and the README.
pub const KEYS: &[(&str, &str)] = &[
    ("j k ↓ ↑", "move one line"),
    ("PgDn PgUp", "move one screen"),
    ("Home End", "first / last element"),
    ("Enter", "expand a range into instructions / collapse"),
    ("s", "committed view / speculation view"),
    ("d", "source / disassembly"),
    ("D", "source lines mixed into the disassembly / off"),
    ("g", "go to: N, instr:N, ts:T, cc:C, off:B, addr:HEX, fn:NAME"),
    ("/", "search functions (fuzzy); Enter goes to the first entry"),
    ("\\", "search the elements' text; n N repeat"),
    ("n N", "next / previous execution of what was searched"),
    ("x X", "next / previous exception"),
    ("o O", "next / previous gap (no sync, overflow, unreadable code)"),
    ("c C", "next / previous speculation event"),
    ("%", "from a call to its return / a return to its call"),
    ("- +", "fold / unfold the call (or loop ×N) under the cursor"),
    ("_", "fold every call deeper than the cursor (again: unfold all)"),
    ("F", "function statistics: ← → sort, s span, Enter first entry"),
    ("b < >", "timeline: function chart / density; chart depth"),
    ("z", "Δ column counts from here (again: from the row before)"),
    ("p P", "next / previous execution of this address"),
    ("m a-z", "set a mark"),
    ("' a-z", "jump to a mark"),
    ("[ ]", "back / forward through jumps"),
    ("v", "anchor a selection (again: drop it)"),
    ("w", "export the selection (or marks a..b)"),
    ("f", "view: id:HEX cpu:N ctx:HEX vmid:N merge (empty: all)"),
    ("M", "time-merged view of every stream on / off"),
    ("y", "cycle count rows shown / only in the cycles column"),
    ("= 0", "timeline zoom in / all (t, then + - zoom in / out)"),
    ("H L", "timeline pan left / right"),
    ("t", "timeline cursor: ← → move it, Enter jumps there"),
    ("mouse", "wheel scrolls; click selects; click on the timeline jumps"),
    ("Esc", "cancel a search, an export or the selection"),
    ("?", "this help"),
    ("q", "quit"),
];

/// Width of the help's key column.
pub const HELP_KEY_W: usize = 10;

/// Width of the help's description column: the longest description and
/// the space before it.
pub fn help_desc_width() -> usize {
    KEYS.iter().map(|(_, d)| d.chars().count() + 1).max().unwrap_or(0)
}

/// The help overlay's columns and how many keys it shows at a time, for a
/// screen of `size`: two columns where both fit every description whole and
/// one column would not fit every key, else one column that scrolls when
/// the screen is too short (descriptions cut at 80 columns were unreadable).
pub fn help_layout(size: (u16, u16)) -> (usize, usize) {
    let (w, h) = (size.0 as usize, size.1 as usize);
    let longest = help_desc_width();
    // Borders, and the states under the keys: one line across two columns,
    // two lines under one.
    let two_fit = w.saturating_sub(2) / 2 >= HELP_KEY_W + longest;
    if KEYS.len() > h.saturating_sub(4) && two_fit {
        (2, KEYS.len().div_ceil(2).min(h.saturating_sub(3)))
    } else {
        (1, KEYS.len().min(h.saturating_sub(4)))
    }
}
