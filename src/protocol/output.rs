//! What every protocol's element decoder reports ([`DecoderOutput`]: elements,
//! messages, the fate of speculative elements) and the options that change
//! it, below both the shared [`super::decoder::Decoder`] trait and each
//! protocol's decoder.

use crate::element::{Element, Time};

/// What a speculative (P0) element was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecKind {
    /// An atom as traced: E (branch taken / executed) or N.
    Atom { executed: bool },
    Exception,
    ExceptionReturn,
    FunctionReturn,
    /// A Q element (instructions with no path).
    Q,
    SourceAddress,
    TransactionStart,
    /// Speculative elements announced by a Trace Info before the trace started.
    Unseen,
}

/// What finally happened to a speculative element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecState {
    Committed,
    /// An atom that a Mispredict flipped before it was committed.
    CorrectedByMispredict,
    Canceled,
    Discarded,
    /// Dropped when the decoder lost synchronisation on an error.
    LostToError,
    /// Still speculative when the trace ended.
    Unresolved,
}

impl SpecState {
    pub fn name(self) -> &'static str {
        match self {
            SpecState::Committed => "committed",
            SpecState::CorrectedByMispredict => "corrected",
            SpecState::Canceled => "canceled",
            SpecState::Discarded => "discarded",
            SpecState::LostToError => "lost",
            SpecState::Unresolved => "unresolved",
        }
    }
}

impl SpecKind {
    /// How the speculation view names it.
    pub fn name(self) -> &'static str {
        match self {
            SpecKind::Atom { executed: true } => "atom E",
            SpecKind::Atom { executed: false } => "atom N",
            SpecKind::Exception => "exception",
            SpecKind::ExceptionReturn => "exception return",
            SpecKind::FunctionReturn => "function return",
            SpecKind::Q => "Q",
            SpecKind::SourceAddress => "source address",
            SpecKind::TransactionStart => "transaction start",
            SpecKind::Unseen => "unseen",
        }
    }
}

/// One speculative element of the speculation view, reported when resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecRecord {
    /// Sequence number of the P0 element in the trace ID's stream (from 0).
    pub seq: u64,
    pub trace_id: u8,
    pub kind: SpecKind,
    /// Offset of the packet that traced it.
    pub created: u64,
    /// Offset of the packet that resolved it (`None`: end of trace).
    pub resolved: Option<u64>,
    pub state: SpecState,
}

/// What the decoder reports, in order.
pub enum DecoderOutput<'a> {
    Element(&'a Element),
    /// A decoder message in OpenCSD's error format (no trailing newline: the
    /// reference tool prints it unterminated).
    Message(&'a str),
    /// The fate of a speculative element (only with [`DecoderOptions::speculation`]).
    Spec(&'a SpecRecord),
    /// A transaction failed: the committed P0 elements `first_seq..=last_seq`
    /// since its start did not take effect (Arm ARM D4.3.8).
    TransactionFailed { trace_id: u8, first_seq: u64, last_seq: u64, index: u64 },
    /// Elements made but not built, only where the decoder was asked for
    /// batches ([`crate::protocol::decoder::DecoderCore::batched`]): they
    /// come in the place of the elements they stand for.
    Batch(&'a ElementBatch),
}

/// Elements of one atom packet that an index build needs no more of than
/// their number: the instruction ranges, inaccessible addresses and
/// exception returns of atoms committed as they arrive. They all share the
/// trace ID and the time context, and none of them changes that context, so
/// a consumer can account for all of them at once as it would for each in
/// turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElementBatch {
    pub trace_id: u8,
    /// Offset of the atom packet (of the last one, where the session merged
    /// the batches of several: [`crate::session::RunOptions::quiet_packets`]).
    pub index: u64,
    /// The time context each of them would have been stamped with.
    pub time: Time,
    pub ranges: u64,
    /// Instructions in the ranges.
    pub instructions: u64,
    pub addr_not_accessible: u64,
    pub exception_returns: u64,
}

impl ElementBatch {
    /// How many elements it stands for.
    pub fn elements(&self) -> u64 {
        self.ranges + self.addr_not_accessible + self.exception_returns
    }
}

/// The longest instruction range walked when no limit is given: 2^24
/// instructions (64 MiB of A64 code without a branch), far beyond real code,
/// so that a range over an image that never branches (zero-filled memory, a
/// wrong image) costs bounded time and its count cannot wrap. Past it the
/// range ends with OpenCSD's range-limit error (OCSD_ERR_I_RANGE_LIMIT_OVERRUN)
/// and the decoder resynchronises. trc_pkt_lister has no default limit; no
/// real capture reaches this one.
pub const DEFAULT_INSTR_RANGE_LIMIT: u32 = 1 << 24;

/// Decoder options that change its output (trc_pkt_lister flags and
/// environment settings of the same names).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct DecoderOptions {
    /// Split source-address ranges on N atoms (`-src_addr_n`).
    pub src_addr_n: bool,
    /// Treat A64 opcodes with the top 16 bits clear as invalid (`-aa64_opcode_chk`).
    pub aa64_opcode_check: bool,
    /// Stop a range after this many instructions (OPENCSD_INSTR_RANGE_LIMIT);
    /// 0 = [`DEFAULT_INSTR_RANGE_LIMIT`].
    pub instr_range_limit: u32,
    /// Report the speculation view ([`DecoderOutput::Spec`]).
    pub speculation: bool,
    /// Recovery mode (`decode --recover`; not in trc_pkt_lister): where
    /// OpenCSD stops the data path on a fatal decoder error, the run calls
    /// the decoder's `recover` and goes on from the next sync point. Applies
    /// to every protocol's decoder; read by [`crate::session`].
    pub recover: bool,
    /// Take every packet through the element stack and the resolve loop,
    /// even where a shortcut gives the same output (atoms committed as they
    /// arrive): tests compare the two. Not part of a saved state.
    #[serde(skip)]
    pub long_way: bool,
    /// With [`DecoderOptions::speculation`], report only the speculative
    /// elements that did not commit (canceled, mispredicted, lost...): all
    /// the index build counts, and most of the records are commits. Not part
    /// of a saved state: a loaded decoder reports every record.
    #[serde(skip)]
    pub spec_losses_only: bool,
}
