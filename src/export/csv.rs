//! CSV: a header row, then one row per element (RFC 4180 quoting), for
//! spreadsheets and dataframe libraries.

use crate::element::{self, Element, ElementKind};
use crate::symbols::Cursor;
use crate::textout;

pub const HEADER: &str = "number,trace_id,offset,kind,timestamp,total_cycles,start,end,instructions,isa,function,function_offset,file,line,text\n";

pub(super) struct CsvSink<'a> {
    pub cursor: Option<Cursor<'a>>,
    /// Scratch for fields that may need quoting.
    field: String,
    /// A capture that knows its CPUs (a perf.data) adds a `cpu` column.
    cpus: Option<super::CpuMap>,
}

impl<'a> CsvSink<'a> {
    pub fn new(cursor: Option<Cursor<'a>>, cpus: Option<super::CpuMap>) -> Self {
        CsvSink { cursor, field: String::new(), cpus }
    }
}

fn hex(out: &mut String, v: u64) {
    out.push_str("0x");
    textout::hex(out, v, 0);
}

/// Append `text` as one CSV field, quoted only when it has to be.
pub fn write_field(out: &mut String, text: &str) {
    if text.contains([',', '"', '\n', '\r']) {
        out.push('"');
        for c in text.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(text);
    }
}

impl super::Sink for CsvSink<'_> {
    fn begin(&mut self, out: &mut String) {
        out.push_str(HEADER);
        if self.cpus.is_some() {
            out.pop();
            out.push_str(",cpu\n");
        }
    }

    fn element(&mut self, out: &mut String, number: u64, e: &Element) {
        textout::dec(out, number);
        out.push(',');
        hex(out, e.trace_id as u64);
        out.push(',');
        textout::dec(out, e.index);
        out.push(',');
        out.push_str(element::kind_name(&e.kind));
        out.push(',');
        if let Some(t) = e.time.timestamp {
            textout::dec(out, t);
        }
        out.push(',');
        textout::dec(out, e.time.total_cycles);
        out.push(',');
        // start, end, instructions: the span of code an element is about.
        let (start, end, count) = match e.kind {
            ElementKind::InstrRange { start, end, count, .. } => (Some(start), Some(end), Some(count)),
            ElementKind::RangeNoPath { start, next, count } => (Some(start), Some(next), Some(count)),
            ElementKind::AddrNotAccessible { addr, .. } => (Some(addr), None, None),
            ElementKind::Exception { ret_addr, .. } => (ret_addr, None, None),
            _ => (None, None, None),
        };
        if let Some(s) = start {
            hex(out, s);
        }
        out.push(',');
        if let Some(s) = end {
            hex(out, s);
        }
        out.push(',');
        if let Some(c) = count {
            textout::dec(out, c as u64);
        }
        out.push(',');
        if matches!(e.kind, ElementKind::InstrRange { .. } | ElementKind::RangeNoPath { .. } | ElementKind::PeContext(_)) {
            out.push_str(e.isa.name());
        }
        out.push(',');
        // Located as in JSON lines: instruction ranges, by their start.
        let loc = match (&mut self.cursor, e.kind) {
            (Some(c), ElementKind::InstrRange { start, .. }) => c.locate(start),
            _ => Default::default(),
        };
        if let Some(f) = loc.function {
            write_field(out, f.name());
        }
        out.push(',');
        if loc.function.is_some() {
            textout::dec(out, loc.offset);
        }
        out.push(',');
        if let Some(f) = loc.file {
            write_field(out, f);
        }
        out.push(',');
        if loc.line != 0 {
            textout::dec(out, loc.line as u64);
        }
        out.push(',');
        self.field.clear();
        element::write_opencsd_element(&mut self.field, e);
        write_field(out, &self.field);
        if let Some(m) = &self.cpus {
            out.push(',');
            if let Some(c) = m.get(e.trace_id) {
                textout::dec(out, c as u64);
            }
        }
        out.push('\n');
    }
}
