//! `decode --summary`: decode everything, keep only counts. This is the
//! muted decode trc_pkt_lister runs with `-decode -profile` (its printers
//! count element types and print nothing else), so whole-process speed can
//! be compared with it: the work is the decode, not the text.

use std::fmt::Write as _;

use crate::element::{self, KIND_NAMES};
use crate::index::{self, IndexOptions};
use crate::session::tally::{SourceTally, Tally};
use crate::session::{count_fragments, BufferPlan, Fragment, RunOptions, RunSummary, Source};

/// Counts for one trace source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceCounts {
    /// The source's name in the snapshot (`ETM_0`, `cpu3`, ...).
    pub name: String,
    /// Its device type (`ETM4`, `ETE`, `PTM1.1`, `ETM3.5`).
    pub device_type: String,
    /// The trace ID it is configured with, if any.
    pub trace_id: Option<u8>,
    /// Bytes of its packets (after the frame layer).
    pub bytes: u64,
    pub packets: u64,
    /// Elements per kind, indexed as [`KIND_NAMES`].
    pub elements: [u64; KIND_NAMES.len()],
    /// Instructions the ranges cover (with and without path information).
    pub instructions: u64,
    /// Decoder and parser messages (OpenCSD's error lines).
    pub errors: u64,
}

impl SourceCounts {
    fn new(s: &Source) -> SourceCounts {
        SourceCounts::zero(s.name.clone(), s.device_type.clone(), s.trace_id)
    }

    fn zero(name: String, device_type: String, trace_id: Option<u8>) -> SourceCounts {
        SourceCounts {
            name,
            device_type,
            trace_id,
            bytes: 0,
            packets: 0,
            elements: [0; KIND_NAMES.len()],
            instructions: 0,
            errors: 0,
        }
    }

    /// All elements, whatever their kind.
    pub fn element_total(&self) -> u64 {
        self.elements.iter().sum()
    }

    fn add(&mut self, o: &SourceCounts) {
        self.bytes += o.bytes;
        self.packets += o.packets;
        for (a, b) in self.elements.iter_mut().zip(o.elements.iter()) {
            *a += b;
        }
        self.instructions += o.instructions;
        self.errors += o.errors;
    }
}

/// What a summarised decode saw, over one or more runs (buffers or perf.data
/// fragments) of the same plan's sources.
#[derive(Clone, Debug, Default)]
pub struct DecodeCounts {
    /// One entry per source of the plan, in the plan's order; sources that
    /// saw no data have zero counts.
    pub sources: Vec<SourceCounts>,
    /// Bytes handed to the decoders (trc_pkt_lister's "processed N bytes").
    pub bytes_processed: u64,
    /// Why decodes stopped early (frame errors, fatal decoder errors), in
    /// the order they happened.
    pub stops: Vec<String>,
    /// Trace IDs with data that no source decodes, and why.
    pub skipped: Vec<(u8, String)>,
}

impl DecodeCounts {
    /// The counts of every source together.
    pub fn total(&self) -> SourceCounts {
        let mut t = SourceCounts::zero("total".into(), String::new(), None);
        for s in &self.sources {
            t.add(s);
        }
        t
    }

    /// Decode `fragments` of `data` as `plan` describes, in one pass on this
    /// thread, adding what was seen. Runs of several buffers of one snapshot
    /// add up by source name.
    pub fn count(&mut self, plan: &BufferPlan, data: &[u8], fragments: &[Fragment], opts: &RunOptions) -> RunSummary {
        let mut tally = Tally::new(plan.sources.len());
        let (summary, counted) = count_fragments(plan, data, fragments, opts, |ev| tally.event(&plan.sources, &ev));
        tally.add(&counted);
        self.absorb(plan, &tally);
        self.bytes_processed += summary.bytes_processed;
        if let Some(e) = &summary.frame_error {
            self.stops.push(format!("frame error: {e}"));
        }
        for f in summary.fatal.iter().chain(summary.fatal_at_end.iter()) {
            self.stops.push(f.clone());
        }
        summary
    }

    /// [`DecodeCounts::count`] on all cores (`iopts.threads`, 0 for all):
    /// when `opts` asks for elements, the buffer is cut into parts decoded at
    /// once and put together as the index build does
    /// ([`index::tally_fragments`]), which gives the counts of one pass from
    /// the start. A decode that stops early is counted again in one pass, for
    /// the exact place and reason of the stop.
    pub fn count_parallel(&mut self, plan: &BufferPlan, data: &[u8], fragments: &[Fragment], opts: &RunOptions, iopts: &IndexOptions) {
        if !opts.elements {
            // Packets only: the parser alone, quick enough on one core, and
            // the build always decodes elements. Counted in the chains, and
            // gathered across IDs: without decoders nothing stops a run but
            // an empty block, before which the deformatter delivers all it
            // gathered, so the counts and the stop are those in order.
            self.count(plan, data, fragments, &RunOptions { count_only: true, gather_ids: true, ..opts.clone() });
            return;
        }
        let iopts = summary_parts(iopts, fragments);
        // Counts do not depend on the order across IDs, and a stop is counted
        // again in order below.
        let gathered = RunOptions { gather_ids: true, ..opts.clone() };
        let built = index::tally_fragments(plan, data, fragments, &gathered, &iopts);
        match built.tally {
            Some(t) if built.stop.is_none() => {
                self.absorb(plan, &t);
                self.bytes_processed += fragments.iter().map(|f| f.len() as u64).sum::<u64>();
            }
            _ => {
                self.count(plan, data, fragments, opts);
            }
        }
    }

    /// Add a run's tally, by source name and trace ID.
    fn absorb(&mut self, plan: &BufferPlan, tally: &Tally) {
        let none = SourceTally::default();
        for (i, s) in plan.sources.iter().enumerate() {
            // A parallel build's tally ends at the last source that had data.
            let t = tally.sources.get(i).unwrap_or(&none);
            let mut c = SourceCounts::new(s);
            c.bytes = t.bytes;
            c.packets = t.packets;
            c.elements = t.elements;
            c.instructions = t.instructions;
            c.errors = t.messages;
            match self.sources.iter_mut().find(|x| x.name == c.name && x.trace_id == c.trace_id) {
                Some(x) => x.add(&c),
                None => self.sources.push(c),
            }
        }
        for s in &tally.skipped {
            if !self.skipped.iter().any(|(id, _)| *id == s.0) {
                self.skipped.push(s.clone());
            }
        }
    }

    /// Sources that saw any data.
    fn active(&self) -> impl Iterator<Item = &SourceCounts> {
        self.sources.iter().filter(|s| s.bytes > 0 || s.packets > 0)
    }

    /// A text report: one row per source and the total, the elements per
    /// kind (kinds that occur) per source, then how long it took.
    pub fn write_text(&self, out: &mut String, seconds: f64) {
        let total = self.total();
        let active: Vec<&SourceCounts> = self.active().collect();
        let id = |s: &SourceCounts| s.trace_id.map(|i| format!("0x{i:02x}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{:<6} {:<12} {:<8} {:>14} {:>14} {:>14} {:>16} {:>8}",
            "ID", "source", "type", "bytes", "packets", "elements", "instructions", "errors"
        );
        for s in active.iter().copied().chain(std::iter::once(&total)) {
            let _ = writeln!(
                out,
                "{:<6} {:<12} {:<8} {:>14} {:>14} {:>14} {:>16} {:>8}",
                if std::ptr::eq(s, &total) { String::new() } else { id(s) },
                s.name,
                s.device_type,
                s.bytes,
                s.packets,
                s.element_total(),
                s.instructions,
                s.errors
            );
        }
        out.push('\n');
        let _ = write!(out, "{:<20}", "elements");
        for s in &active {
            let _ = write!(out, " {:>14}", id(s));
        }
        let _ = writeln!(out, " {:>14}", "total");
        for (k, name) in KIND_NAMES.iter().enumerate() {
            if total.elements[k] == 0 {
                continue;
            }
            let _ = write!(out, "{name:<20}");
            for s in &active {
                let _ = write!(out, " {:>14}", s.elements[k]);
            }
            let _ = writeln!(out, " {:>14}", total.elements[k]);
        }
        out.push('\n');
        for (id, why) in &self.skipped {
            let _ = writeln!(out, "skipped trace ID 0x{id:02x}: {why}");
        }
        for s in &self.stops {
            let _ = writeln!(out, "stopped: {s}");
        }
        let mib = self.bytes_processed as f64 / (1024.0 * 1024.0);
        let (rate, elems) = if seconds > 0.0 {
            (mib / seconds, total.element_total() as f64 / seconds / 1e6)
        } else {
            (0.0, 0.0)
        };
        let _ = writeln!(
            out,
            "decoded {} bytes in {seconds:.3} s: {rate:.1} MiB/s, {elems:.2} M elements/s",
            self.bytes_processed
        );
    }

    /// The same as one JSON object (one line): `sources` with per-kind
    /// element counts, `total`, `bytes_processed`, `seconds`, `stops`.
    pub fn write_json(&self, out: &mut String, seconds: f64) {
        fn counts(out: &mut String, s: &SourceCounts) {
            out.push_str("{\"name\":");
            element::write_json_string(out, &s.name);
            out.push_str(",\"type\":");
            element::write_json_string(out, &s.device_type);
            match s.trace_id {
                Some(i) => {
                    let _ = write!(out, ",\"trace_id\":{i}");
                }
                None => out.push_str(",\"trace_id\":null"),
            }
            let _ = write!(
                out,
                ",\"bytes\":{},\"packets\":{},\"instructions\":{},\"errors\":{},\"elements\":{{",
                s.bytes, s.packets, s.instructions, s.errors
            );
            let mut first = true;
            for (k, name) in KIND_NAMES.iter().enumerate() {
                if s.elements[k] > 0 {
                    let _ = write!(out, "{}\"{name}\":{}", if first { "" } else { "," }, s.elements[k]);
                    first = false;
                }
            }
            out.push_str("}}");
        }
        out.push_str("{\"sources\":[");
        for (i, s) in self.active().enumerate() {
            if i > 0 {
                out.push(',');
            }
            counts(out, s);
        }
        out.push_str("],\"total\":");
        counts(out, &self.total());
        let _ = write!(out, ",\"bytes_processed\":{},\"seconds\":{seconds:.6},\"stops\":[", self.bytes_processed);
        for (i, s) in self.stops.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            element::write_json_string(out, s);
        }
        out.push_str("]}\n");
    }
}

/// The parts of a summary's parallel decode, unless `iopts` chooses them:
/// one per thread. A summary keeps only the counts, so its parts serve only
/// to share the work, and each join between two parts costs the decode of
/// one checkpoint interval twice (the part before decodes on to the later
/// one's first checkpoint) and a part whose atom memo and walk cache start
/// empty. An index's parts (4 MiB or more, eight per thread) made that
/// about 5% of the work of a 16 MiB summary on two cores.
fn summary_parts(iopts: &IndexOptions, fragments: &[Fragment]) -> IndexOptions {
    if iopts.part != 0 {
        return iopts.clone();
    }
    let threads = match iopts.threads {
        0 => rayon::current_num_threads(),
        n => n,
    }
    .max(1) as u64;
    let total: u64 = fragments.iter().map(|f| f.len() as u64).sum();
    IndexOptions { part: total.div_ceil(threads).max(iopts.interval), ..iopts.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_decodes_in_one_part_per_thread_unless_told() {
        let whole = [Fragment::whole(16 << 20)];
        let auto = IndexOptions { threads: 2, ..IndexOptions::default() };
        assert_eq!(summary_parts(&auto, &whole).part, 8 << 20);
        assert_eq!(summary_parts(&IndexOptions { threads: 3, ..auto.clone() }, &whole).part, (16 << 20) / 3 + 1);
        // Fragments add up; a tiny buffer still gets a whole interval.
        let two = [Fragment::whole(6 << 20), Fragment::whole(2 << 20)];
        assert_eq!(summary_parts(&auto, &two).part, 4 << 20);
        assert_eq!(summary_parts(&auto, &[Fragment::whole(100)]).part, auto.interval);
        let told = IndexOptions { part: 4096, ..auto };
        assert_eq!(summary_parts(&told, &whole).part, 4096);
    }
}
