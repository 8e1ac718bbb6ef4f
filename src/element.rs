//! The decoded trace element model: what the core did, as a sequence of
//! elements (instruction ranges, exceptions, context changes, time, gaps).
//!
//! It covers everything OpenCSD's generic elements carry
//! (`../shared/spec/opencsd-generic-elements.txt`), so the `opencsd` text form
//! can be printed from it exactly, and adds what tracesight shows beyond that.

use std::fmt::Write;

use crate::textout;

/// Instruction set of a range or context.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Isa {
    A32,
    T32,
    #[default]
    A64,
    ThumbEE,
    Jazelle,
    Custom,
    Unknown,
}

impl Isa {
    /// The short name OpenCSD prints (`A64`, `T32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Isa::A32 => "A32",
            Isa::T32 => "T32",
            Isa::A64 => "A64",
            Isa::ThumbEE => "TEE",
            Isa::Jazelle => "Jaz",
            Isa::Custom => "Cst",
            Isa::Unknown => "Unk",
        }
    }
}

/// The kind of the last instruction of a range: what ended it.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum InstrType {
    #[default]
    Other,
    Branch,
    IndirectBranch,
    Isb,
    DsbDmb,
    WfiWfe,
    Tstart,
}

/// Refinement of [`InstrType`].
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum InstrSubtype {
    #[default]
    None,
    /// Branch with link (a call).
    BranchLink,
    /// A64 RET (and its pointer-authenticated forms).
    Return,
    /// A64 ERET.
    ExceptionReturn,
    /// A32/T32 instruction that is a return by convention (BX LR, POP {..,PC}).
    ImpliedReturn,
}

/// Security state of a context.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Security {
    #[default]
    Secure,
    NonSecure,
    Root,
    Realm,
}

/// Processing-element context.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PeContext {
    pub security: Security,
    pub el: u8,
    pub el_valid: bool,
    pub aarch64: bool,
    pub vmid: Option<u32>,
    pub context_id: Option<u32>,
}

/// Why a trace stream is not synchronised (or ended).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum UnsyncReason {
    #[default]
    Undefined,
    InitDecoder,
    ResetDecoder,
    Overflow,
    Discard,
    BadPacket,
    BadImage,
    EndOfTrace,
    /// Recovery mode only (not an OpenCSD reason): the decoder met an error
    /// at which OpenCSD stops the whole data path, dropped what it held and
    /// waits for the next sync point instead.
    FatalError,
}

impl UnsyncReason {
    pub fn text(self) -> &'static str {
        match self {
            UnsyncReason::Undefined => "undefined",
            UnsyncReason::InitDecoder => "init-decoder",
            UnsyncReason::ResetDecoder => "reset-decoder",
            UnsyncReason::Overflow => "overflow",
            UnsyncReason::Discard => "discard",
            UnsyncReason::BadPacket => "bad-packet",
            UnsyncReason::BadImage => "bad-program-image",
            UnsyncReason::EndOfTrace => "end-of-trace",
            UnsyncReason::FatalError => "fatal-error-resync",
        }
    }

    /// OpenCSD's `unsync_info_t` value (`ocsd_gen_trc_elem_t` payload); 8
    /// for [`UnsyncReason::FatalError`], which OpenCSD does not have.
    pub fn code(self) -> u32 {
        match self {
            UnsyncReason::Undefined => 0,
            UnsyncReason::InitDecoder => 1,
            UnsyncReason::ResetDecoder => 2,
            UnsyncReason::Overflow => 3,
            UnsyncReason::Discard => 4,
            UnsyncReason::BadPacket => 5,
            UnsyncReason::BadImage => 6,
            UnsyncReason::EndOfTrace => 7,
            UnsyncReason::FatalError => 8,
        }
    }

    /// The reason of a [`UnsyncReason::code`]; unknown values are `Undefined`.
    pub fn from_code(code: u32) -> UnsyncReason {
        match code {
            1 => UnsyncReason::InitDecoder,
            2 => UnsyncReason::ResetDecoder,
            3 => UnsyncReason::Overflow,
            4 => UnsyncReason::Discard,
            5 => UnsyncReason::BadPacket,
            6 => UnsyncReason::BadImage,
            7 => UnsyncReason::EndOfTrace,
            8 => UnsyncReason::FatalError,
            _ => UnsyncReason::Undefined,
        }
    }
}

/// Why trace (re)started.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TraceOnReason {
    #[default]
    Normal,
    Overflow,
    DebugRestart,
}

/// Transactional memory events (FEAT_TME).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemTrans {
    /// Trace started inside a transaction.
    TraceInit,
    Start,
    Commit,
    Fail,
}

/// The memory space an address belongs to (OpenCSD's `ocsd_mem_space_acc`
/// bit values, which appear in its output).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemSpace(pub u8);

impl MemSpace {
    pub const NONE: MemSpace = MemSpace(0);
    pub const EL1S: MemSpace = MemSpace(0x01);
    pub const EL1N: MemSpace = MemSpace(0x02);
    pub const EL2: MemSpace = MemSpace(0x04);
    pub const EL3: MemSpace = MemSpace(0x08);
    pub const EL2S: MemSpace = MemSpace(0x10);
    pub const EL1R: MemSpace = MemSpace(0x20);
    pub const EL2R: MemSpace = MemSpace(0x40);
    pub const ROOT: MemSpace = MemSpace(0x80);
    /// Any secure space.
    pub const S: MemSpace = MemSpace(0x19);
    /// Any non-secure space.
    pub const N: MemSpace = MemSpace(0x06);
    /// Any realm space.
    pub const R: MemSpace = MemSpace(0x60);
    pub const ANY: MemSpace = MemSpace(0xff);

    /// Name as OpenCSD prints it.
    pub fn name(self) -> &'static str {
        match self.0 {
            0x00 => "None",
            0x01 => "EL1S",
            0x02 => "EL1N",
            0x04 => "EL2",
            0x08 => "EL3",
            0x10 => "EL2S",
            0x20 => "EL1R",
            0x40 => "EL2R",
            0x80 => "Root",
            0x19 => "Any S",
            0x06 => "Any NS",
            0x60 => "Any R",
            0xff => "Any",
            _ => "Unknown",
        }
    }

    /// True when an image registered for `self` serves a read in `other`.
    pub fn overlaps(self, other: MemSpace) -> bool {
        self.0 & other.0 != 0
    }
}

/// What an element says.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementKind {
    /// Not synchronised to the stream (start, after an error or overflow).
    NoSync(UnsyncReason),
    /// Tracing started or resumed.
    TraceOn(TraceOnReason),
    /// Context of the core changed (or is first known).
    PeContext(PeContext),
    /// A range of executed instructions `[start, end)`, the last of which is
    /// described by `last`.
    InstrRange {
        start: u64,
        end: u64,
        count: u32,
        last_type: InstrType,
        last_subtype: InstrSubtype,
        last_size: u8,
        /// The last instruction executed (E atom) or not (N atom).
        executed: bool,
        conditional: bool,
    },
    /// Instructions executed with no path information (ETE Q elements).
    RangeNoPath { start: u64, next: u64, count: u32 },
    /// No program image at this address: decode cannot follow the code.
    AddrNotAccessible { addr: u64, space: MemSpace },
    /// An exception; `ret_addr` is the preferred return address.
    Exception { number: u32, ret_addr: Option<u64>, ret_addr_is_branch_target: bool, m_tail_chain: bool },
    ExceptionReturn,
    Timestamp { value: u64 },
    CycleCount,
    /// A numbered event (ETMv4/ETE event packets).
    Event { number: u16 },
    /// The trace unit's trigger fired (ETMv3/PTM trigger packets).
    Trigger,
    /// Trace resumed with the current address unknown (ETMv3): ranges wait
    /// for the next address.
    AddrUnknown,
    TimestampMarker { value: u32 },
    MemTrans(MemTrans),
    Instrumentation { el: u8, value: u64 },
    EndOfTrace(UnsyncReason),
}

/// One decoded element.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Element {
    /// Offset in the trace buffer of the packet that produced the element.
    pub index: u64,
    /// CoreSight trace ID of the source.
    pub trace_id: u8,
    pub kind: ElementKind,
    /// Instruction set of ranges and contexts.
    pub isa: Isa,
    /// Cycle count carried by the element, when it has one.
    pub cycle_count: Option<u32>,
    /// Where the element sits in time (what a timeline plots).
    pub time: Time,
}

/// Time context of an element: derived by the decoder, not carried by the
/// element's own packet.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Time {
    /// Cycles counted on this trace ID up to and including this element (the
    /// sum of every cycle count reported since the decoder started).
    pub total_cycles: u64,
    /// The last timestamp seen on this trace ID at or before this element.
    pub timestamp: Option<u64>,
}

impl InstrType {
    fn opencsd(self) -> &'static str {
        match self {
            InstrType::Other => "--- ",
            InstrType::Branch => "BR  ",
            InstrType::IndirectBranch => "iBR ",
            InstrType::Isb => "ISB ",
            InstrType::DsbDmb => "DSB.DMB",
            InstrType::WfiWfe => "WFI.WFE",
            InstrType::Tstart => "TSTART",
        }
    }
}

impl InstrSubtype {
    fn opencsd(self) -> &'static str {
        match self {
            InstrSubtype::None => "",
            InstrSubtype::BranchLink => "b+link ",
            InstrSubtype::Return => "A64:ret ",
            InstrSubtype::ExceptionReturn => "A64:eret ",
            InstrSubtype::ImpliedReturn => "V7:impl ret",
        }
    }
}

/// Append the trc_pkt_lister line for `e` (with a newline).
pub fn write_opencsd_line(out: &mut String, e: &Element) {
    out.push_str("Idx:");
    textout::dec(out, e.index);
    out.push_str("; ID:");
    textout::hex(out, e.trace_id as u64, 0);
    out.push_str("; ");
    write_opencsd_element(out, e);
    out.push('\n');
}

/// `OCSD_GEN_TRC_ELEM_<TYPE>(<payload>)`, as OpenCSD's `OcsdTraceElement::toString`.
pub fn write_opencsd_element(out: &mut String, e: &Element) {
    use ElementKind as K;
    let name = match e.kind {
        K::NoSync(_) => "NO_SYNC",
        K::TraceOn(_) => "TRACE_ON",
        K::PeContext(_) => "PE_CONTEXT",
        K::InstrRange { .. } => "INSTR_RANGE",
        K::RangeNoPath { .. } => "I_RANGE_NOPATH",
        K::AddrNotAccessible { .. } => "ADDR_NACC",
        K::Exception { .. } => "EXCEPTION",
        K::ExceptionReturn => "EXCEPTION_RET",
        K::Timestamp { .. } => "TIMESTAMP",
        K::CycleCount => "CYCLE_COUNT",
        K::Event { .. } | K::Trigger => "EVENT",
        K::AddrUnknown => "ADDR_UNKNOWN",
        K::TimestampMarker { .. } => "SYNC_MARKER",
        K::MemTrans(_) => "MEMTRANS",
        K::Instrumentation { .. } => "INSTRUMENTATION",
        K::EndOfTrace(_) => "EO_TRACE",
    };
    out.push_str("OCSD_GEN_TRC_ELEM_");
    out.push_str(name);
    out.push('(');
    match e.kind {
        K::NoSync(r) | K::EndOfTrace(r) => {
            let _ = write!(out, " [{}]", r.text());
        }
        K::TraceOn(r) => out.push_str(match r {
            TraceOnReason::Normal => " [begin or filter]",
            TraceOnReason::Overflow => " [overflow]",
            TraceOnReason::DebugRestart => " [debug restart]",
        }),
        K::PeContext(c) => {
            let _ = write!(out, "(ISA={}) ", e.isa.name());
            if c.el_valid {
                let _ = write!(out, "EL{}", c.el);
            }
            out.push_str(match c.security {
                Security::Secure => "S; ",
                Security::NonSecure => "N; ",
                Security::Root => "Root; ",
                Security::Realm => "Realm; ",
            });
            out.push_str(if c.aarch64 { "64-bit; " } else { "32-bit; " });
            if let Some(v) = c.vmid {
                let _ = write!(out, "VMID=0x{v:x}; ");
            }
            if let Some(c) = c.context_id {
                let _ = write!(out, "CTXTID=0x{c:x}; ");
            }
        }
        K::InstrRange { start, end, count, last_type, last_subtype, last_size, executed, conditional } => {
            out.push_str("exec range=0x");
            textout::hex(out, start, 0);
            out.push_str(":[0x");
            textout::hex(out, end, 0);
            out.push_str("] num_i(");
            textout::dec(out, count as u64);
            out.push_str(") last_sz(");
            textout::dec(out, last_size as u64);
            out.push_str(") (ISA=");
            out.push_str(e.isa.name());
            out.push_str(if executed { ") E " } else { ") N " });
            out.push_str(last_type.opencsd());
            out.push_str(last_subtype.opencsd());
            if conditional {
                out.push_str(" <cond>");
            }
        }
        K::RangeNoPath { start, next, count } => {
            let _ = write!(out, "first 0x{start:x}:[next 0x{next:x}] num_i({count}) ");
        }
        K::AddrNotAccessible { addr, space } => {
            out.push_str(" 0x");
            textout::hex(out, addr, 0);
            out.push_str("; Memspace [0x");
            textout::hex(out, space.0 as u64, 0);
            out.push(':');
            out.push_str(space.name());
            out.push_str("] ");
        }
        K::Exception { number, ret_addr, ret_addr_is_branch_target, m_tail_chain } => {
            if let Some(a) = ret_addr {
                let _ = write!(out, "pref ret addr:0x{a:x}");
                if ret_addr_is_branch_target {
                    out.push_str(" [addr also prev br tgt]");
                }
                out.push_str("; ");
            } else if m_tail_chain {
                out.push_str("M tail chain; ");
            }
            let _ = write!(out, "excep num (0x{number:02x}) ");
        }
        K::ExceptionReturn | K::CycleCount => {}
        K::Timestamp { value } => {
            let _ = write!(out, " [ TS=0x{value:012x}]; ");
        }
        K::Event { number } => {
            let _ = write!(out, " Numbered:{number}; ");
        }
        K::Trigger => out.push_str(" Trigger; "),
        K::AddrUnknown => {}
        K::TimestampMarker { value } => {
            let _ = write!(out, " [Timestamp marker(0x{value:08x})]");
        }
        K::MemTrans(t) => out.push_str(match t {
            MemTrans::TraceInit => "Init",
            MemTrans::Start => "Start",
            MemTrans::Commit => "Commit",
            MemTrans::Fail => "Fail",
        }),
        K::Instrumentation { el, value } => {
            let _ = write!(out, "EL{el}; 0x{value:016x}");
        }
    }
    if let Some(cc) = e.cycle_count {
        out.push_str(" [CC=");
        textout::dec(out, cc as u64);
        out.push_str("]; ");
    }
    out.push(')');
}

/// Append `text` as a JSON string literal.
pub fn write_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Every element kind's name as JSON and CSV exports give it, in the order of
/// [`kind_index`].
pub const KIND_NAMES: [&str; 17] = [
    "no_sync",
    "trace_on",
    "pe_context",
    "instr_range",
    "range_no_path",
    "addr_not_accessible",
    "exception",
    "exception_return",
    "timestamp",
    "cycle_count",
    "event",
    "trigger",
    "addr_unknown",
    "timestamp_marker",
    "memtrans",
    "instrumentation",
    "end_of_trace",
];

/// [`ElementKind::InstrRange`]'s place in [`KIND_NAMES`].
pub const KIND_INSTR_RANGE: usize = 3;
/// [`ElementKind::AddrNotAccessible`]'s place in [`KIND_NAMES`].
pub const KIND_ADDR_NACC: usize = 5;
/// [`ElementKind::ExceptionReturn`]'s place in [`KIND_NAMES`].
pub const KIND_EXCEPTION_RETURN: usize = 7;
/// [`ElementKind::CycleCount`]'s place in [`KIND_NAMES`].
pub const KIND_CYCLE_COUNT: usize = 9;

/// The element kind's place in [`KIND_NAMES`] (for tables of counts).
pub fn kind_index(kind: &ElementKind) -> usize {
    use ElementKind as K;
    match kind {
        K::NoSync(_) => 0,
        K::TraceOn(_) => 1,
        K::PeContext(_) => 2,
        K::InstrRange { .. } => KIND_INSTR_RANGE,
        K::RangeNoPath { .. } => 4,
        K::AddrNotAccessible { .. } => KIND_ADDR_NACC,
        K::Exception { .. } => 6,
        K::ExceptionReturn => KIND_EXCEPTION_RETURN,
        K::Timestamp { .. } => 8,
        K::CycleCount => KIND_CYCLE_COUNT,
        K::Event { .. } => 10,
        K::Trigger => 11,
        K::AddrUnknown => 12,
        K::TimestampMarker { .. } => 13,
        K::MemTrans(_) => 14,
        K::Instrumentation { .. } => 15,
        K::EndOfTrace(_) => 16,
    }
}

/// The element kind as JSON and CSV exports name it (`instr_range`, ...).
pub fn kind_name(kind: &ElementKind) -> &'static str {
    KIND_NAMES[kind_index(kind)]
}

/// One JSON object (no newline) with the element's typed fields. Addresses
/// are hex strings (`"0x400530"`), as in CSV: many JSON readers hold numbers
/// as doubles, exact only below 2^53, and kernel addresses are above it.
pub fn write_json(out: &mut String, e: &Element) {
    use ElementKind as K;
    let _ = write!(out, "{{\"index\":{},\"id\":{},\"type\":", e.index, e.trace_id);
    let _ = write!(out, "\"{}\"", kind_name(&e.kind));
    match e.kind {
        K::NoSync(r) | K::EndOfTrace(r) => {
            let _ = write!(out, ",\"reason\":\"{}\"", r.text());
        }
        K::TraceOn(r) => {
            let r = match r {
                TraceOnReason::Normal => "begin_or_filter",
                TraceOnReason::Overflow => "overflow",
                TraceOnReason::DebugRestart => "debug_restart",
            };
            let _ = write!(out, ",\"reason\":\"{r}\"");
        }
        K::PeContext(c) => {
            let sec = match c.security {
                Security::Secure => "secure",
                Security::NonSecure => "non_secure",
                Security::Root => "root",
                Security::Realm => "realm",
            };
            let _ = write!(out, ",\"isa\":\"{}\",\"security\":\"{sec}\",\"aarch64\":{}", e.isa.name(), c.aarch64);
            if c.el_valid {
                let _ = write!(out, ",\"el\":{}", c.el);
            }
            if let Some(v) = c.vmid {
                let _ = write!(out, ",\"vmid\":{v}");
            }
            if let Some(v) = c.context_id {
                let _ = write!(out, ",\"context_id\":{v}");
            }
        }
        K::InstrRange { start, end, count, last_type, last_subtype, last_size, executed, conditional } => {
            let _ = write!(
                out,
                ",\"isa\":\"{}\",\"start\":\"{start:#x}\",\"end\":\"{end:#x}\",\"count\":{count},\"last_type\":\"{:?}\",\"last_subtype\":\"{:?}\",\"last_size\":{last_size},\"executed\":{executed},\"conditional\":{conditional}",
                e.isa.name(),
                last_type,
                last_subtype
            );
        }
        K::RangeNoPath { start, next, count } => {
            let _ = write!(out, ",\"start\":\"{start:#x}\",\"next\":\"{next:#x}\",\"count\":{count}");
        }
        K::AddrNotAccessible { addr, space } => {
            let _ = write!(out, ",\"addr\":\"{addr:#x}\",\"mem_space\":\"{}\"", space.name());
        }
        K::Exception { number, ret_addr, ret_addr_is_branch_target, .. } => {
            let _ = write!(out, ",\"number\":{number}");
            if let Some(a) = ret_addr {
                let _ = write!(out, ",\"ret_addr\":\"{a:#x}\",\"ret_addr_is_branch_target\":{ret_addr_is_branch_target}");
            }
        }
        K::Timestamp { value } => {
            let _ = write!(out, ",\"timestamp\":{value}");
        }
        K::Event { number } => {
            let _ = write!(out, ",\"number\":{number}");
        }
        K::TimestampMarker { value } => {
            let _ = write!(out, ",\"value\":{value}");
        }
        K::MemTrans(t) => {
            let _ = write!(out, ",\"transaction\":\"{t:?}\"");
        }
        K::Instrumentation { el, value } => {
            let _ = write!(out, ",\"el\":{el},\"value\":{value}");
        }
        K::ExceptionReturn | K::CycleCount | K::Trigger | K::AddrUnknown => {}
    }
    if let Some(cc) = e.cycle_count {
        let _ = write!(out, ",\"cycle_count\":{cc}");
    }
    let _ = write!(out, ",\"total_cycles\":{}", e.time.total_cycles);
    if let Some(ts) = e.time.timestamp {
        let _ = write!(out, ",\"last_timestamp\":{ts}");
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: ElementKind, isa: Isa, cc: Option<u32>) -> String {
        let mut s = String::new();
        write_opencsd_line(&mut s, &Element { index: 27, trace_id: 2, kind, isa, cycle_count: cc, time: Time::default() });
        s
    }

    #[test]
    fn opencsd_text_of_each_kind() {
        // Lines as trc_pkt_lister 1.8.0 prints them in the reference goldens.
        let r = ElementKind::InstrRange {
            start: 0x3c1d4,
            end: 0x3c1dc,
            count: 2,
            last_type: InstrType::IndirectBranch,
            last_subtype: InstrSubtype::ExceptionReturn,
            last_size: 4,
            executed: true,
            conditional: false,
        };
        assert_eq!(
            line(r, Isa::A64, None),
            "Idx:27; ID:2; OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=0x3c1d4:[0x3c1dc] num_i(2) last_sz(4) (ISA=A64) E iBR A64:eret )\n"
        );
        let r = ElementKind::InstrRange {
            start: 0x1a9548,
            end: 0x1a9568,
            count: 8,
            last_type: InstrType::IndirectBranch,
            last_subtype: InstrSubtype::ImpliedReturn,
            last_size: 4,
            executed: true,
            conditional: true,
        };
        assert!(line(r, Isa::A32, None).ends_with("(ISA=A32) E iBR V7:impl ret <cond>)\n"));
        let c = PeContext {
            security: Security::NonSecure,
            el: 1,
            el_valid: true,
            aarch64: true,
            vmid: Some(0),
            context_id: Some(0),
        };
        assert!(line(ElementKind::PeContext(c), Isa::A64, None)
            .ends_with("PE_CONTEXT((ISA=A64) EL1N; 64-bit; VMID=0x0; CTXTID=0x0; )\n"));
        assert!(line(ElementKind::CycleCount, Isa::A64, Some(0)).ends_with("CYCLE_COUNT( [CC=0]; )\n"));
        assert!(line(ElementKind::Timestamp { value: 0x2f150c0 }, Isa::A64, None)
            .ends_with("TIMESTAMP( [ TS=0x000002f150c0]; )\n"));
        let x = ElementKind::Exception { number: 0xc, ret_addr: Some(0x7f87372bdc), ret_addr_is_branch_target: true, m_tail_chain: false };
        assert!(line(x, Isa::A64, None)
            .ends_with("EXCEPTION(pref ret addr:0x7f87372bdc [addr also prev br tgt]; excep num (0x0c) )\n"));
        assert!(line(ElementKind::AddrNotAccessible { addr: 0x2ebc, space: MemSpace::EL3 }, Isa::A64, None)
            .ends_with("ADDR_NACC( 0x2ebc; Memspace [0x8:EL3] )\n"));
        assert!(line(ElementKind::NoSync(UnsyncReason::InitDecoder), Isa::A64, None)
            .ends_with("NO_SYNC( [init-decoder])\n"));
        assert!(line(ElementKind::Instrumentation { el: 1, value: 0xfffff }, Isa::A64, None)
            .ends_with("INSTRUMENTATION(EL1; 0x00000000000fffff)\n"));
        assert!(line(ElementKind::TimestampMarker { value: 0 }, Isa::A64, None)
            .ends_with("SYNC_MARKER( [Timestamp marker(0x00000000)])\n"));
        assert!(line(ElementKind::RangeNoPath { start: 0x6951c, next: 0x63830, count: 4 }, Isa::A64, None)
            .ends_with("I_RANGE_NOPATH(first 0x6951c:[next 0x63830] num_i(4) )\n"));
    }
}
