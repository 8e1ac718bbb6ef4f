//! What the viewer shows, as plain data: rows of elements and of speculation
//! records, built on the worker thread from decoded elements, and rendered by
//! the draw functions without further decoding.

use crate::element::{Element, ElementKind, InstrSubtype, InstrType, Isa, PeContext, Security};
use crate::protocol::etm4::decoder::{SpecRecord, SpecState};

/// Elements per page: what one request to the worker decodes.
pub const PAGE: u64 = 128;

/// Which rows the list shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum View {
    /// The committed stream: what trc_pkt_lister prints.
    Committed,
    /// The committed stream with every speculative element that did not
    /// simply commit (canceled, corrected, discarded, lost, unresolved)
    /// shown where its fate was decided.
    Speculation,
}

/// The fate of a row, shown as a column and a color.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowState {
    /// Not a speculative element (time, context, gaps, ...).
    Plain,
    Committed,
    /// Still speculative when the trace ended.
    Speculative,
    Canceled,
    /// An atom flipped by a Mispredict before it committed: the range shown is
    /// the corrected path.
    Corrected,
    Discarded,
    /// Lost when a transaction failed or the decoder lost synchronisation.
    Lost,
}

impl RowState {
    /// The state column: readable without color.
    pub fn tag(self) -> &'static str {
        match self {
            RowState::Plain => "    ",
            RowState::Committed => "cmt ",
            RowState::Speculative => "spec",
            RowState::Canceled => "canc",
            RowState::Corrected => "corr",
            RowState::Discarded => "disc",
            RowState::Lost => "lost",
        }
    }

    pub fn from_spec(s: SpecState) -> RowState {
        match s {
            SpecState::Committed => RowState::Committed,
            SpecState::CorrectedByMispredict => RowState::Corrected,
            SpecState::Canceled => RowState::Canceled,
            SpecState::Discarded => RowState::Discarded,
            SpecState::LostToError => RowState::Lost,
            SpecState::Unresolved => RowState::Speculative,
        }
    }
}

/// What kind of element a row is (for colors and navigation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowKind {
    Range,
    NoPath,
    Exception,
    ExceptionReturn,
    /// No sync, trace on, end of trace, overflow: a gap in the trace.
    Gap,
    /// Address not accessible or unknown: decode could not follow the code.
    Nacc,
    Context,
    Time,
    Other,
}

/// One element, ready to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct ElemRow {
    pub number: u64,
    pub trace_id: u8,
    /// Byte offset of the packet that produced it.
    pub offset: u64,
    pub timestamp: Option<u64>,
    pub cycles: u64,
    pub kind: RowKind,
    pub state: RowState,
    /// Exception level and security state as last reported (`EL1N`), if known.
    pub context: Option<String>,
    pub addr: Option<u64>,
    /// End of an instruction range (exclusive).
    pub end: Option<u64>,
    pub isa: Isa,
    pub instructions: u32,
    /// The cycles a cycle count gives this range: its own (ETMv3, PTM), or
    /// that of the Cycle Count element after it, which counts every range
    /// committed since the previous count (ETE/ETMv4: a count belongs to
    /// the most recent commit, ARM ARM D4.3.7.1). Shown on the last range
    /// it counts.
    pub range_cycles: Option<u64>,
    /// A range counted by the cycle count shown on a later range.
    pub cycles_below: bool,
    /// A cycle count whose count is on the ranges it counts (its row can
    /// go: nothing is lost).
    pub count_folded: bool,
    /// A range ending in an executed call: where its return lands.
    pub call_return: Option<u64>,
    /// A range ending in an executed return.
    pub is_return: bool,
    pub function: Option<String>,
    /// The element as text, without OpenCSD's index/ID prefix.
    pub text: String,
    /// A shorter text for narrow screens (ranges without what the address
    /// and function columns already say).
    pub brief: String,
}

/// A speculative element whose fate was not a plain commit.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecRow {
    pub trace_id: u8,
    pub seq: u64,
    pub state: RowState,
    pub what: String,
    pub created: u64,
    pub resolved: Option<u64>,
}

/// An element, the decoder messages reported just before it, and the
/// speculation records decided just before it.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub notes: Vec<String>,
    pub pre: Vec<SpecRow>,
    pub row: ElemRow,
}

/// Short name of a context: exception level and security state.
pub fn context_name(c: &PeContext) -> String {
    let sec = match c.security {
        Security::Secure => "S",
        Security::NonSecure => "N",
        Security::Root => "Root",
        Security::Realm => "R",
    };
    if c.el_valid {
        format!("EL{}{sec}", c.el)
    } else {
        sec.to_string()
    }
}

pub fn spec_row(r: &SpecRecord) -> SpecRow {
    SpecRow {
        trace_id: r.trace_id,
        seq: r.seq,
        state: RowState::from_spec(r.state),
        what: r.kind.name().to_string(),
        created: r.created,
        resolved: r.resolved,
    }
}

/// Build the row of an element. `speculative` says whether the source's P0
/// elements go through commits (ETE/ETMv4), so ranges and exceptions are
/// marked committed; `context` is the last context seen on its ID.
pub fn elem_row(number: u64, e: &Element, speculative: bool, context: Option<&PeContext>) -> ElemRow {
    use ElementKind as K;
    let (kind, addr, end, instructions) = match e.kind {
        K::InstrRange { start, end, count, .. } => (RowKind::Range, Some(start), Some(end), count),
        K::RangeNoPath { start, next, count } => (RowKind::NoPath, Some(start), Some(next), count),
        K::Exception { ret_addr, .. } => (RowKind::Exception, ret_addr, None, 0),
        K::ExceptionReturn => (RowKind::ExceptionReturn, None, None, 0),
        K::NoSync(_) | K::TraceOn(_) | K::EndOfTrace(_) => (RowKind::Gap, None, None, 0),
        K::AddrNotAccessible { addr, .. } => (RowKind::Nacc, Some(addr), None, 0),
        K::AddrUnknown => (RowKind::Nacc, None, None, 0),
        K::PeContext(_) => (RowKind::Context, None, None, 0),
        K::Timestamp { .. } | K::CycleCount | K::TimestampMarker { .. } => (RowKind::Time, None, None, 0),
        _ => (RowKind::Other, None, None, 0),
    };
    let p0 = matches!(kind, RowKind::Range | RowKind::NoPath | RowKind::Exception | RowKind::ExceptionReturn);
    let state = if speculative && p0 { RowState::Committed } else { RowState::Plain };
    let (call_return, is_return) = match e.kind {
        K::InstrRange { end, last_type, last_subtype, executed: true, .. } => (
            (last_subtype == InstrSubtype::BranchLink
                && matches!(last_type, InstrType::Branch | InstrType::IndirectBranch))
            .then_some(end),
            matches!(last_subtype, InstrSubtype::Return | InstrSubtype::ImpliedReturn),
        ),
        _ => (None, false),
    };
    let mut text = String::new();
    crate::element::write_opencsd_element(&mut text, e);
    let text = text.strip_prefix("OCSD_GEN_TRC_ELEM_").map(str::to_string).unwrap_or(text);
    let brief = match e.kind {
        K::InstrRange { start, end, count, last_type, executed, .. } => {
            let t = match last_type {
                InstrType::Branch => "BR",
                InstrType::IndirectBranch => "iBR",
                InstrType::Isb => "ISB",
                InstrType::DsbDmb => "DSB",
                InstrType::WfiWfe => "WFI",
                InstrType::Tstart => "TSTART",
                InstrType::Other => "--",
            };
            format!("[{start:#x},{end:#x}) {count}i {t} {}", if executed { 'E' } else { 'N' })
        }
        _ => text.clone(),
    };
    let context = match e.kind {
        K::PeContext(c) => Some(context_name(&c)),
        _ => context.map(context_name),
    };
    ElemRow {
        number,
        trace_id: e.trace_id,
        offset: e.index,
        timestamp: e.time.timestamp,
        cycles: e.time.total_cycles,
        kind,
        state,
        context,
        addr,
        end,
        isa: e.isa,
        instructions,
        range_cycles: match e.kind {
            K::InstrRange { .. } | K::RangeNoPath { .. } => e.cycle_count.map(u64::from),
            _ => None,
        },
        cycles_below: false,
        count_folded: false,
        call_return,
        is_return,
        function: None,
        text,
        brief,
    }
}

/// Each index segment is cut into this many equal runs of elements for the
/// lanes, so that a small capture (a segment or two) still shows its shape.
pub const LANE_SUB: usize = 32;
