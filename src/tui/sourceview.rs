//! What the viewer's source pane and disassembly view show, as plain data.
//!
//! The viewer computes these on its worker thread and only draws them, so
//! nothing here knows about the terminal: a [`SourceView`] is the source
//! file around an address with per-line execution counts over a window of
//! executed ranges, a [`DisasmLine`] one decoded instruction.

use std::path::{Path, PathBuf};

use yaxpeax_arch::{Decoder, U8Reader};
use yaxpeax_arm::armv7;
use yaxpeax_arm::armv8::a64;

use crate::element::{Element, ElementKind, InstrType, Isa, MemSpace};
use crate::image::instr::{self, t32_is_32bit, DecodeOptions, ItState};
use crate::image::memory::MemoryImage;
use crate::symbols::{SourceLookup, SourceResolver, Symbolizer};

/// Why the source pane shows what it shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceStatus {
    /// The file was read; `lines` holds it around the current line.
    Ok,
    /// No image covers the address.
    NoSymbols,
    /// An image covers the address but has no line information for it
    /// (`function` may still be known from the symbol table).
    NoDebugInfo,
    /// The debug information names `file` but it was not found; `tried`
    /// lists every place looked at, for the message that suggests a source
    /// root.
    SourceNotFound { file: String, tried: Vec<PathBuf> },
}

/// One line of the source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLine {
    /// 1-based.
    pub number: u32,
    pub text: String,
    /// Instructions of the window executed on this line.
    pub count: u64,
    /// The line of the address the view is for.
    pub current: bool,
}

/// One frame of the inline chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineFrame {
    /// `??` when the debug information does not name it.
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// The source pane for one address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceView {
    pub addr: u64,
    pub status: SourceStatus,
    /// The symbol table function, `name` or `name+0xoff`.
    pub function: Option<String>,
    /// The file as the debug information names it (innermost frame).
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Innermost first; the last frame is the function the code belongs to.
    pub inline_chain: Vec<InlineFrame>,
    /// The file's lines around `line`; empty unless `status` is `Ok`.
    pub lines: Vec<SourceLine>,
}

/// A range of executed instructions `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExecutedRange {
    pub start: u64,
    /// Exclusive.
    pub end: u64,
    pub isa: Isa,
}

impl ExecutedRange {
    /// The range of an instruction-range element; `None` for other elements.
    pub fn from_element(e: &Element) -> Option<ExecutedRange> {
        match e.kind {
            ElementKind::InstrRange { start, end, .. } => Some(ExecutedRange { start, end, isa: e.isa }),
            _ => None,
        }
    }
}

/// One line of the disassembly view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisasmLine {
    pub addr: u64,
    /// The encoding as objdump prints it: one 32-bit word for A64 and A32,
    /// one or two halfwords for T32; empty when memory could not be read.
    pub bytes: String,
    /// Mnemonic and operands; direct branch and PC-relative targets as
    /// absolute addresses, with `<function+0xoff>` when symbols know them.
    pub text: String,
    /// `function+0xoff` on the first line and `function` where one starts.
    pub symbol: Option<String>,
    pub current: bool,
    /// In the mixed view: the source line this instruction starts
    /// (`file:line  text`), on the first instruction of each line.
    pub source: Option<String>,
}

/// The most instructions taken from one range: a corrupt range spanning
/// megabytes must not stall the worker.
pub const MAX_RANGE_INSTRUCTIONS: usize = 1 << 16;

/// The source pane for `addr`: the file of the innermost frame, `context_lines`
/// lines either side of the current one, and for each line the number of
/// instructions of `window` that the line table puts on it. `image` and
/// `space` give T32 instruction sizes; A64 and A32 ranges need no memory.
///
/// The resolver is `&mut` because it caches the files it has read.
pub fn source_view(
    sym: Option<&Symbolizer>,
    resolver: &mut SourceResolver,
    image: &MemoryImage,
    space: MemSpace,
    addr: u64,
    window: &[ExecutedRange],
    context_lines: usize,
) -> SourceView {
    let mut view = SourceView {
        addr,
        status: SourceStatus::NoSymbols,
        function: None,
        file: None,
        line: None,
        inline_chain: Vec::new(),
        lines: Vec::new(),
    };
    let Some(sym) = sym else { return view };
    if sym.image_at(addr).is_none() {
        return view;
    }
    view.status = SourceStatus::NoDebugInfo;
    view.function = sym.function(addr).map(|h| h.to_string());
    let s = sym.symbolize(addr);
    view.inline_chain = s
        .frames
        .iter()
        .map(|f| InlineFrame {
            function: f.function.clone().unwrap_or_else(|| "??".into()),
            file: f.file.as_deref().map(str::to_string),
            line: (f.line != 0).then_some(f.line),
        })
        .collect();
    let Some(file) = view.inline_chain.first().and_then(|f| f.file.clone()) else { return view };
    view.file = Some(file.clone());
    view.line = view.inline_chain[0].line;
    let text = match resolver.load(&file) {
        Ok(t) => t,
        Err(e) => {
            let tried = match e {
                SourceLookup::NotFound { tried, .. } => tried,
                SourceLookup::Found(p) => vec![p],
            };
            view.status = SourceStatus::SourceNotFound { file, tried };
            return view;
        }
    };
    view.status = SourceStatus::Ok;
    let n = text.line_count() as u64;
    if n == 0 {
        return view;
    }
    // Code at line 0 (compiler-made) has no place in the file: show its top.
    let centre = view.line.map_or(1, u64::from).min(n);
    let ctx = context_lines as u64;
    let first = centre.saturating_sub(ctx).max(1);
    let last = centre.saturating_add(ctx).min(n);
    view.lines = (first..=last)
        .map(|k| SourceLine {
            number: k as u32,
            text: text.line(k as u32).unwrap_or_default().to_string(),
            count: 0,
            current: view.line == Some(k as u32),
        })
        .collect();
    let mut cursor = sym.cursor();
    for r in window {
        for a in instruction_addresses(image, space, r, MAX_RANGE_INSTRUCTIONS) {
            let l = cursor.locate(a);
            if l.file != Some(file.as_str()) {
                continue;
            }
            let k = u64::from(l.line);
            if (first..=last).contains(&k) {
                view.lines[(k - first) as usize].count += 1;
            }
        }
    }
    view
}

/// A resolver with the user's roots and rewrites (tried first), that then
/// finds sources next to a capture: under the capture directory, its parents
/// up to three levels up (a snapshot kept inside the project it traces, as
/// the bundled demo is) and the current directory.
pub fn default_resolver(capture_dir: &Path, roots: &[PathBuf], substitutions: &[(String, String)]) -> SourceResolver {
    let mut r = SourceResolver::new();
    for d in roots {
        r.add_root(d);
    }
    for (old, new) in substitutions {
        r.add_substitution(old, new);
    }
    // Relative parents run out at "" (the current directory, added anyway).
    let dir = capture_dir.canonicalize().unwrap_or_else(|_| capture_dir.to_path_buf());
    for d in dir.ancestors().take(4) {
        r.add_root(d);
    }
    if let Ok(cwd) = std::env::current_dir() {
        r.add_root(cwd);
    }
    r
}

/// The addresses of the instructions of `range`, at most `max`. T32 sizes
/// come from the first halfword of each instruction; a T32 range stops where
/// memory cannot be read, since the size of what follows is unknown.
pub fn instruction_addresses(image: &MemoryImage, space: MemSpace, range: &ExecutedRange, max: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let mut a = range.start;
    while a < range.end && out.len() < max {
        out.push(a);
        let size = match range.isa {
            Isa::T32 => match image.read_u16(a, space) {
                Some(h) if t32_is_32bit(h) => 4,
                Some(_) => 2,
                None => break,
            },
            _ => 4,
        };
        a = match a.checked_add(size) {
            Some(n) => n,
            None => break,
        };
    }
    out
}

/// One decoded instruction before symbols are added.
struct Decoded {
    size: u64,
    bytes: String,
    text: String,
    /// Where a direct branch or PC-relative operand points.
    target: Option<u64>,
}

/// The disassembly of `range`, at most `max_lines` lines.
pub fn disassemble(
    image: &MemoryImage,
    space: MemSpace,
    sym: Option<&Symbolizer>,
    range: &ExecutedRange,
    current: Option<u64>,
    max_lines: usize,
) -> Vec<DisasmLine> {
    let mut out = Vec::new();
    let mut addr = range.start;
    while addr < range.end && out.len() < max_lines {
        let symbol = sym.and_then(|s| s.function(addr)).and_then(|h| {
            let starts_here = h.offset == 0 && h.inside;
            (out.is_empty() || starts_here).then(|| h.to_string())
        });
        let line = |bytes: String, text: String| DisasmLine {
            addr,
            bytes,
            text,
            symbol: symbol.clone(),
            current: current == Some(addr),
            source: None,
        };
        let d = match decode_one(image, space, range.isa, addr) {
            Ok(d) => d,
            Err(why) => {
                out.push(line(String::new(), why.to_string()));
                break;
            }
        };
        let mut text = d.text;
        if let Some(t) = d.target {
            text = with_target(&text, t);
            // Beyond a function's size the nearest symbol before says
            // nothing (an ADRP into data lands after the last function).
            if let Some(h) = sym.and_then(|s| s.function(t)).filter(|h| h.inside || h.offset == 0) {
                text.push_str(&format!(" <{h}>"));
            }
        }
        out.push(line(d.bytes, text));
        addr = match addr.checked_add(d.size) {
            Some(n) => n,
            None => break,
        };
    }
    out
}

/// `text` with yaxpeax's relative operand (`$+0x10`, `$-0x8`) replaced by
/// the absolute address it means.
fn with_target(text: &str, target: u64) -> String {
    let Some(i) = text.find('$') else { return format!("{text} 0x{target:x}") };
    let rest = &text[i + 1..];
    let len = rest.find(|c: char| !(c.is_ascii_hexdigit() || c == 'x' || c == '+' || c == '-')).unwrap_or(rest.len());
    format!("{}0x{target:x}{}", &text[..i], &rest[len..])
}

fn decode_one(image: &MemoryImage, space: MemSpace, isa: Isa, addr: u64) -> Result<Decoded, super::TuiError> {
    let unreadable = || super::TuiError::Unmapped { addr };
    match isa {
        Isa::A64 => {
            let w = image.read_u32(addr, space).ok_or_else(unreadable)?;
            let (text, target) = match a64::InstDecoder::default().decode(&mut U8Reader::new(&w.to_le_bytes())) {
                Ok(inst) => {
                    let target = inst.operands.iter().find_map(|o| match *o {
                        // ADRP counts in pages from the instruction's page.
                        a64::Operand::PCOffset(off) if inst.opcode == a64::Opcode::ADRP => {
                            Some((addr & !0xfff).wrapping_add(off as u64))
                        }
                        a64::Operand::PCOffset(off) => Some(addr.wrapping_add(off as u64)),
                        _ => None,
                    });
                    (inst.to_string(), target)
                }
                Err(_) => (format!(".word 0x{w:08x}"), None),
            };
            Ok(Decoded { size: 4, bytes: format!("{w:08x}"), text, target })
        }
        Isa::A32 => {
            let w = image.read_u32(addr, space).ok_or_else(unreadable)?;
            let text = match armv7::InstDecoder::default().decode(&mut U8Reader::new(&w.to_le_bytes())) {
                Ok(inst) => inst.to_string(),
                Err(_) => format!(".word 0x{w:08x}"),
            };
            Ok(Decoded { size: 4, bytes: format!("{w:08x}"), text, target: arm_target(Isa::A32, w, 0, addr) })
        }
        Isa::T32 => {
            let first = image.read_u16(addr, space).ok_or_else(unreadable)?;
            let second = if t32_is_32bit(first) {
                Some(image.read_u16(addr.wrapping_add(2), space).ok_or_else(unreadable)?)
            } else {
                None
            };
            let mut raw = first.to_le_bytes().to_vec();
            raw.extend(second.map(u16::to_le_bytes).into_iter().flatten());
            let decoded = armv7::InstDecoder::default_thumb().decode(&mut U8Reader::new(&raw));
            let (bytes, fallback) = match second {
                Some(s) => (format!("{first:04x} {s:04x}"), format!(".word 0x{first:04x}{s:04x}")),
                None => (format!("{first:04x}"), format!(".hword 0x{first:04x}")),
            };
            let text = decoded.map(|i| i.to_string()).unwrap_or(fallback);
            let target = arm_target(Isa::T32, u32::from(first), second.unwrap_or(0), addr);
            Ok(Decoded { size: if second.is_some() { 4 } else { 2 }, bytes, text, target })
        }
        isa => Err(super::TuiError::NoDisassembler { isa }),
    }
}

/// The direct branch target from the decoder's own classifier, which
/// computes it as the trace decode does (yaxpeax's A32/T32 offsets follow
/// per-encoding conventions that would need undoing here).
fn arm_target(isa: Isa, op: u32, second: u16, addr: u64) -> Option<u64> {
    let info = instr::decode(isa, op, second, addr, &DecodeOptions::default(), &mut ItState::default()).ok()?;
    (info.itype == InstrType::Branch).then_some(info.target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_operands_become_absolute() {
        assert_eq!(with_target("b.gt $+0x3c0", 0x400904), "b.gt 0x400904");
        assert_eq!(with_target("cbz x0, $-0x8", 0x1000), "cbz x0, 0x1000");
        assert_eq!(with_target("tbz w1, #0x3, $+0x10 ", 0x20), "tbz w1, #0x3, 0x20 ");
        assert_eq!(with_target("bl", 0x20), "bl 0x20");
    }
}
