//! The source pane's mixed mode (`D`): the instructions of the range under
//! the cursor with, before each run of instructions from one source line,
//! that line (`file:line  text`), as `objdump -S` interleaves them.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::symbols::{SourceResolver, Symbolizer};

use super::style::{block, Palette};
use super::sourceview::{DisasmLine, SourceView};

/// Give each instruction that starts a new source line that line's text
/// (on the worker thread: it reads DWARF and source files).
pub fn annotate(sym: Option<&Symbolizer>, resolver: &mut SourceResolver, lines: &mut [DisasmLine]) {
    let Some(sym) = sym else { return };
    let mut cursor = sym.cursor();
    let mut last: Option<(String, u32)> = None;
    for l in lines.iter_mut() {
        let loc = cursor.locate(l.addr);
        let Some(file) = loc.file else {
            last = None;
            continue;
        };
        let here = (file.to_string(), loc.line);
        if last.as_ref() == Some(&here) {
            continue;
        }
        let short = file.rsplit('/').next().unwrap_or(file);
        let text = resolver.line(file, loc.line).map(|t| t.trim().to_string()).unwrap_or_else(|_| "(source not found)".into());
        l.source = Some(format!("{short}:{}  {text}", loc.line));
        last = Some(here);
    }
}

/// Draw the mixed pane: source lines dimmed above their instructions, the
/// current instruction highlighted and kept in view.
pub fn draw(f: &mut Frame<'_>, area: Rect, view: &SourceView, disasm: &[DisasmLine], pal: Palette) {
    let h = area.height.saturating_sub(2) as usize;
    let title = format!(" source + disassembly · {} ", view.function.as_deref().unwrap_or("?"));
    let mut lines: Vec<Line> = Vec::new();
    let mut current = 0;
    for l in disasm {
        if let Some(s) = &l.source {
            lines.push(Line::from(Span::styled(s.replace('\t', "    "), pal.fg(Color::Yellow).add_modifier(Modifier::DIM))));
        }
        if l.current {
            current = lines.len();
        }
        let sym = l.symbol.as_ref().map(|s| format!(" <{s}>")).unwrap_or_default();
        let line = Line::from(vec![
            Span::styled(format!("  {:#x}  ", l.addr), pal.fg(Color::Blue)),
            Span::raw(format!("{:<12} {}{}", l.bytes, l.text, sym)),
        ]);
        lines.push(if l.current { line.patch_style(Style::default().add_modifier(Modifier::REVERSED)) } else { line });
    }
    let skip = current.saturating_sub(h / 3);
    let shown: Vec<Line> = lines.into_iter().skip(skip).take(h).collect();
    f.render_widget(Paragraph::new(shown).block(block(title)), area);
}
