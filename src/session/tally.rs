//! Counts of what a run reported, per trace source: what `decode --summary`
//! prints. They live here, beside the events they count, so that the index
//! build (a layer above) can gather them per segment while it decodes on all
//! cores, and the summary (above that) can turn them into its report.
//!
//! Every count is a sum over events, so the counts of consecutive stretches
//! of a decode add up to those of the whole decode: that is what lets a
//! parallel build keep, for each stretch, the counts of the decoder whose
//! checkpoints it keeps there.

use crate::element::{self, ElementKind, KIND_NAMES};
use crate::protocol::decoder::ElementCounts;
use crate::session::{ElementBatch, Event, Source};

/// What one trace source reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceTally {
    /// Bytes of its packets (after the frame layer).
    pub bytes: u64,
    pub packets: u64,
    /// Elements per kind, indexed as [`KIND_NAMES`].
    pub elements: [u64; KIND_NAMES.len()],
    /// Instructions the ranges cover (with and without path information).
    pub instructions: u64,
    /// Decoder and parser messages.
    pub messages: u64,
}

impl SourceTally {
    pub(crate) fn add(&mut self, o: &SourceTally) {
        self.bytes += o.bytes;
        self.packets += o.packets;
        for (a, b) in self.elements.iter_mut().zip(o.elements.iter()) {
            *a += b;
        }
        self.instructions += o.instructions;
        self.messages += o.messages;
    }

    #[inline(always)]
    pub(crate) fn packet(&mut self, raw: &[u8]) {
        self.packets += 1;
        self.bytes += raw.len() as u64;
    }

    /// What a decoder counted itself (see [`crate::protocol::decoder::DecoderCore::counted`]).
    pub(crate) fn counted(&mut self, c: &ElementCounts) {
        for (a, b) in self.elements.iter_mut().zip(c.kinds.iter()) {
            *a += b;
        }
        self.instructions += c.range_instructions + c.no_path_instructions;
    }

    fn batch(&mut self, b: &ElementBatch) {
        self.elements[element::KIND_INSTR_RANGE] += b.ranges;
        self.elements[element::KIND_ADDR_NACC] += b.addr_not_accessible;
        self.elements[element::KIND_EXCEPTION_RETURN] += b.exception_returns;
        self.instructions += b.instructions;
    }

    #[inline(always)]
    fn element(&mut self, kind: &ElementKind) {
        self.elements[element::kind_index(kind)] += 1;
        if let ElementKind::InstrRange { count, .. } | ElementKind::RangeNoPath { count, .. } = *kind {
            self.instructions += count as u64;
        }
    }
}

/// Counts per source of one buffer plan, indexed as the plan's sources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub sources: Vec<SourceTally>,
    /// Trace IDs whose data was not decoded, once each, with the reason.
    pub skipped: Vec<(u8, String)>,
    /// The source the last event came from (events come in runs per source):
    /// its address and its place in the plan.
    last: Option<(usize, usize)>,
}

impl Tally {
    /// Zero counts for `n` sources.
    pub fn new(n: usize) -> Tally {
        Tally { sources: vec![SourceTally::default(); n], skipped: Vec::new(), last: None }
    }

    /// The place of `s` in `sources`, which must be the slice the run's
    /// events point into.
    #[inline(always)]
    fn slot(&mut self, sources: &[Source], s: &Source) -> Option<usize> {
        let p = s as *const Source as usize;
        if let Some((lp, i)) = self.last {
            if lp == p {
                return Some(i);
            }
        }
        let i = sources.iter().position(|x| std::ptr::eq(x, s))?;
        if i >= self.sources.len() {
            self.sources.resize(i + 1, SourceTally::default());
        }
        self.last = Some((p, i));
        Some(i)
    }

    /// Count one event of a run over a plan whose sources are `sources`.
    /// Events of a source outside that slice are not counted.
    // Once per packet and element: worth inlining into the run's handler.
    #[inline(always)]
    pub fn event(&mut self, sources: &[Source], ev: &Event<'_>) {
        match ev {
            Event::Packet { source, raw, .. } => {
                if let Some(i) = self.slot(sources, source) {
                    self.sources[i].packet(raw);
                }
            }
            Event::Element { source, element } => {
                if let Some(i) = self.slot(sources, source) {
                    self.sources[i].element(&element.kind);
                }
            }
            Event::Message { source, .. } => {
                if let Some(i) = self.slot(sources, source) {
                    self.sources[i].messages += 1;
                }
            }
            Event::Batch { source, batch } => {
                if let Some(i) = self.slot(sources, source) {
                    self.sources[i].batch(batch);
                }
            }
            Event::Skipped { trace_id, reason } => self.skip(*trace_id, reason),
            Event::Spec { .. } | Event::TransactionFailed { .. } | Event::EndOfTrace { .. } => {}
        }
    }

    fn skip(&mut self, trace_id: u8, reason: &str) {
        if !self.skipped.iter().any(|(id, _)| *id == trace_id) {
            self.skipped.push((trace_id, reason.to_string()));
        }
    }

    /// Add the counts of another stretch of the same plan's decode.
    pub fn add(&mut self, o: &Tally) {
        if self.sources.len() < o.sources.len() {
            self.sources.resize(o.sources.len(), SourceTally::default());
        }
        for (a, b) in self.sources.iter_mut().zip(o.sources.iter()) {
            a.add(b);
        }
        for (id, why) in &o.skipped {
            self.skip(*id, why);
        }
    }
}
