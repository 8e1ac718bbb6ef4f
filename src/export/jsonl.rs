//! The JSON-lines form of an element, shared by `decode --format jsonl`,
//! `decode --seek` and `export --format jsonl` so the three never drift apart.

use crate::element::{self, Element, ElementKind};
use crate::symbols::{Cursor, Location};

/// One element as a JSON object (no newline): [`element::write_json`], then
/// its `number` when known, then the location of an instruction range's start
/// when a symbol cursor is given.
pub fn write_element(out: &mut String, number: Option<u64>, e: &Element, cursor: Option<&mut Cursor<'_>>) {
    element::write_json(out, e);
    if let Some(n) = number {
        if out.ends_with('}') {
            out.pop();
            out.push_str(",\"number\":");
            crate::textout::dec(out, n);
            out.push('}');
        }
    }
    if let (Some(c), ElementKind::InstrRange { start, .. }) = (cursor, &e.kind) {
        write_json_location(out, c.locate(*start));
    }
}

/// Add `function`, `offset`, `file` and `line` (those known) to a JSON
/// object just written (its closing brace is replaced).
pub fn write_json_location(out: &mut String, loc: Location<'_>) {
    if loc.function.is_none() && loc.file.is_none() {
        return;
    }
    if out.ends_with('}') {
        out.pop();
    }
    if let Some(f) = loc.function {
        out.push_str(",\"function\":");
        element::write_json_string(out, f.name());
        out.push_str(",\"offset\":");
        crate::textout::dec(out, loc.offset);
    }
    if let Some(file) = loc.file {
        out.push_str(",\"file\":");
        element::write_json_string(out, file);
        if loc.line != 0 {
            out.push_str(",\"line\":");
            crate::textout::dec(out, loc.line as u64);
        }
    }
    out.push('}');
}
