//! Terminal events to actions. Which keys mean what depends on the mode: in
//! a prompt every printable key is text.

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEventKind};

use super::app::{Action, Mode};

#[derive(Default)]
pub struct Keymap;

impl Keymap {
    pub fn action(&mut self, ev: &Event, mode: &Mode) -> Option<Action> {
        match ev {
            Event::Key(k) if k.kind != KeyEventKind::Release => key_action(k, mode),
            Event::Mouse(m) => match m.kind {
                MouseEventKind::ScrollDown => Some(Action::Scroll(3)),
                MouseEventKind::ScrollUp => Some(Action::Scroll(-3)),
                MouseEventKind::Down(MouseButton::Left) => Some(Action::Click(m.column, m.row)),
                _ => None,
            },
            _ => None,
        }
    }
}

pub fn key_action(k: &KeyEvent, mode: &Mode) -> Option<Action> {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(k.code, KeyCode::Char('c')) {
        return Some(Action::Quit);
    }
    let text_mode = matches!(mode, Mode::Goto { .. } | Mode::Search { .. } | Mode::Export { .. } | Mode::Mark { .. } | Mode::Filter { .. } | Mode::TextSearch { .. });
    if text_mode {
        if ctrl && matches!(k.code, KeyCode::Char('u')) {
            return Some(Action::ClearLine);
        }
        return match k.code {
            KeyCode::Left => Some(Action::Left),
            KeyCode::Right => Some(Action::Right),
            KeyCode::Home => Some(Action::Top),
            KeyCode::End => Some(Action::Bottom),
            KeyCode::Char(c) => Some(Action::Input(c)),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Enter => Some(Action::Submit),
            KeyCode::Esc => Some(Action::Cancel),
            KeyCode::Tab => Some(Action::NextField),
            KeyCode::Down => Some(Action::Down),
            KeyCode::Up => Some(Action::Up),
            _ => None,
        };
    }
    Some(match k.code {
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('j') | KeyCode::Down => Action::Down,
        KeyCode::Char('k') | KeyCode::Up => Action::Up,
        KeyCode::PageDown | KeyCode::Char(' ') => Action::PageDown,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::Home => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        KeyCode::Enter => Action::Expand,
        KeyCode::Char('s') => Action::ToggleView,
        KeyCode::Char('d') => Action::ToggleDisasm,
        KeyCode::Char('g') => Action::Goto,
        KeyCode::Char('/') => Action::Search,
        KeyCode::Char('n') => Action::NextMatch,
        KeyCode::Char('N') => Action::PrevMatch,
        KeyCode::Char('x') => Action::NextException,
        KeyCode::Char('X') => Action::PrevException,
        KeyCode::Char('o') => Action::NextGap,
        KeyCode::Char('O') => Action::PrevGap,
        KeyCode::Char('c') => Action::NextSpec,
        KeyCode::Char('C') => Action::PrevSpec,
        KeyCode::Char('%') => Action::CallReturn,
        KeyCode::Char('z') => Action::ZeroMark,
        KeyCode::Char('p') => Action::NextVisit,
        KeyCode::Char('P') => Action::PrevVisit,
        KeyCode::Char('m') => Action::SetMark,
        KeyCode::Char('\'') => Action::JumpMark,
        KeyCode::Char('[') => Action::Back,
        KeyCode::Char(']') => Action::Forward,
        KeyCode::Char('v') => Action::Anchor,
        KeyCode::Char('w') => Action::Export,
        KeyCode::Char('?') | KeyCode::F(1) => Action::Help,
        KeyCode::Char('=') => Action::ZoomIn,
        KeyCode::Char('+') => Action::Unfold,
        KeyCode::Char('-') => Action::Fold,
        KeyCode::Char('_') => Action::FoldBelow,
        KeyCode::Char('F') => Action::Stats,
        KeyCode::Char('b') => Action::Chart,
        KeyCode::Char('>') => Action::ChartDeeper,
        KeyCode::Char('<') => Action::ChartShallower,
        KeyCode::Char('0') => Action::ZoomReset,
        KeyCode::Char('H') => Action::PanLeft,
        KeyCode::Char('t') => Action::Timeline,
        KeyCode::Left | KeyCode::Char('h') => Action::Left,
        KeyCode::Right | KeyCode::Char('l') => Action::Right,
        KeyCode::Char('L') => Action::PanRight,
        KeyCode::Esc => Action::Cancel,
        KeyCode::Char('f') => Action::Filter,
        KeyCode::Char('M') => Action::ToggleMerge,
        KeyCode::Char('y') => Action::ToggleCycleRows,
        KeyCode::Char('D') => Action::ToggleMixed,
        KeyCode::Char('\\') => Action::TextSearch,
        _ => return None,
    })
}
