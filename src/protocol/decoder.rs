//! What the ETMv4/ETE, ETMv3 and PTM element decoders have in common: the
//! [`Decoder`] trait (saving and loading state, reset, the fatal error that
//! stops the data path, recovery from it), the state every decoder keeps
//! besides its protocol's ([`DecoderCore`]: trace ID, current packet, time
//! context, message buffer), the OpenCSD error codes of decoder messages
//! ([`DecodeError`]) and the return stack ETMv4 and PTM share
//! ([`ReturnStack`]). Each protocol keeps only its packet handling.
//!
//! Every method is called on the concrete decoder type (the session holds
//! one enum variant per protocol), so packets are dispatched statically.

use std::fmt::Write;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::output::DecoderOptions;
pub use super::output::DecoderOutput;
use super::ProtocolError;
use crate::element::{Element, ElementKind, Isa, Time, UnsyncReason};
use crate::image::instr::InstrError;
use crate::image::memory::MemoryImage;

/// An element decoder for one trace ID.
///
/// The required methods are what differs between protocols; the provided
/// ones are the same for all three and follow OpenCSD's decoders: a fatal
/// error stops the decoder (OpenCSD stops the whole data path, "Data Path
/// fatal error"), [`Decoder::reset`] starts it over as between the buffers of
/// a multi-session decode, and [`Decoder::recover`] (not OpenCSD) takes it
/// past a fatal error to wait for the next synchronisation.
pub trait Decoder: Serialize + DeserializeOwned {
    /// The trace source's configuration (from its registers).
    type Config;
    /// The packets the protocol's parser hands over.
    type Packet;
    /// Prefix of the decoder's messages (`DCD_ETMV4`).
    const TAG: &'static str;
    /// The decoder's name in errors about its saved state (`ETMv3 decoder`).
    const STATE: &'static str;
    /// The packets the decoder waits for after a recovered fatal error.
    const RESYNC: &'static str;

    /// A decoder at the start of the trace. `opts` are OpenCSD's decoder
    /// switches; protocols without such switches ignore them.
    fn create(cfg: &Self::Config, image: Arc<MemoryImage>, opts: DecoderOptions) -> Self;

    fn core(&self) -> &DecoderCore;

    fn core_mut(&mut self) -> &mut DecoderCore;

    /// Decode one packet.
    fn packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Self::Packet, sink: &mut F);

    /// End of trace: flush what can be, then the end-of-trace element.
    fn finish<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F);

    /// Back to the unsynchronised start state, the next NO_SYNC element
    /// giving `why`.
    fn restart(&mut self, why: UnsyncReason);

    /// What a saved state leaves out (configuration, program image, caches),
    /// taken again from `cfg` and `image` after a load.
    fn restore(&mut self, cfg: &Self::Config, image: Arc<MemoryImage>);

    /// The bounds a loaded state must meet (see [`super::check_state`]):
    /// index files are read from disk, so every index, queue length and
    /// counter the code relies on is checked.
    fn check(&self) -> Result<(), ProtocolError> {
        Ok(())
    }

    /// At a fatal error in recovery mode: drop what is held back and say how
    /// many unresolved elements went (`None`: the protocol does not count
    /// them).
    fn drop_held<F: FnMut(DecoderOutput<'_>)>(&mut self, _sink: &mut F) -> Option<usize> {
        None
    }

    /// The decode state, for a later [`Decoder::load_state`].
    fn save_state(&self) -> Vec<u8> {
        bincode::serialize(self).unwrap_or_default()
    }

    /// A decoder continuing from a saved state, with its configuration and
    /// program image supplied again.
    fn load_state(cfg: &Self::Config, image: Arc<MemoryImage>, state: &[u8]) -> Result<Self, ProtocolError> {
        let mut d: Self = super::read_state(Self::STATE, state)?;
        d.check()?;
        d.restore(cfg, image);
        Ok(d)
    }

    /// True after an error the decoder cannot recover from.
    fn is_fatal(&self) -> bool {
        self.core().fatal
    }

    /// Back to the unsynchronised start state, as between the buffers of a
    /// multi-session decode (the next NO_SYNC says `reset-decoder`).
    fn reset(&mut self) {
        self.core_mut().fatal = false;
        self.restart(UnsyncReason::ResetDecoder);
    }

    /// Recovery mode (not OpenCSD): after a fatal error, report what is lost
    /// (a message, and a `NO_SYNC [fatal-error-resync]` element with the next
    /// packet) and wait for the next synchronisation instead of stopping.
    /// Does nothing unless [`Decoder::is_fatal`].
    fn recover<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        if !self.is_fatal() {
            return;
        }
        let dropped = self.drop_held(sink);
        let c = self.core();
        let m = super::recovery_message(Self::TAG, c.trace_id, c.index_curr, dropped, Self::RESYNC);
        sink(DecoderOutput::Message(&m));
        self.core_mut().fatal = false;
        self.restart(UnsyncReason::FatalError);
    }
}

/// The state every decoder keeps besides its protocol's.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct DecoderCore {
    pub trace_id: u8,
    /// Index of the packet being decoded.
    pub index_curr: u64,
    /// An error the decoder cannot resynchronise from: the data path stops.
    pub fatal: bool,
    /// Running time context of the trace ID.
    pub time: Time,
    /// Only a buffer reused between messages.
    #[serde(skip)]
    msg: String,
    /// Set where elements are only counted (a summary): [`DecoderCore::deliver`]
    /// counts them here instead of handing each over, and the caller takes
    /// the counts after each block. Never saved: a loaded decoder hands its
    /// elements over until told to count.
    #[serde(skip)]
    pub counted: Option<Box<ElementCounts>>,
    /// Set where a run takes the elements of committed atoms in batches
    /// ([`super::output::ElementBatch`]) instead of one by one (an index
    /// build). Ignored while `counted` is set; never saved, as `counted`.
    #[serde(skip)]
    pub batched: bool,
    /// Set with `batched` where the run merges the batches of consecutive
    /// packets into one (packets are not handed over, as in an index
    /// build): a decoder may then keep a batch open across packets, handing
    /// it over before anything else it hands over and when the caller asks
    /// at the end of each block. Never saved.
    #[serde(skip)]
    pub merge_batches: bool,
}

/// Elements a decoder counted instead of handing over (see
/// [`DecoderCore::counted`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElementCounts {
    /// Per kind, indexed as [`crate::element::KIND_NAMES`].
    pub kinds: [u64; crate::element::KIND_NAMES.len()],
    /// Instructions in instruction ranges.
    pub range_instructions: u64,
    /// Instructions in ranges without path information.
    pub no_path_instructions: u64,
}

impl ElementCounts {
    #[inline(always)]
    pub fn add(&mut self, kind: &ElementKind) {
        self.kinds[crate::element::kind_index(kind)] += 1;
        match *kind {
            ElementKind::InstrRange { count, .. } => self.range_instructions += count as u64,
            ElementKind::RangeNoPath { count, .. } => self.no_path_instructions += count as u64,
            _ => {}
        }
    }

    /// Elements of every kind.
    pub fn elements(&self) -> u64 {
        self.kinds.iter().sum()
    }
}

impl DecoderCore {
    pub fn new(trace_id: u8) -> DecoderCore {
        DecoderCore { trace_id, ..DecoderCore::default() }
    }

    /// Hand an element over, stamped with the time context after it (its
    /// cycle count added, its timestamp taken).
    pub fn deliver<F: FnMut(DecoderOutput<'_>)>(&mut self, e: &mut Element, sink: &mut F) {
        if self.count_only(&e.kind, e.cycle_count) {
            return;
        }
        self.pass_time(&e.kind, e.cycle_count);
        e.time = self.time;
        sink(DecoderOutput::Element(e));
    }

    /// In a run that only counts ([`DecoderCore::counted`]), what
    /// [`DecoderCore::deliver`] does with an element of this kind and
    /// cycle count, without the element; false (and nothing done) in any
    /// other run. A decoder that would build the element only to deliver
    /// it asks this first.
    #[inline(always)]
    pub fn count_only(&mut self, kind: &ElementKind, cycle_count: Option<u32>) -> bool {
        let Some(c) = self.counted.as_deref_mut() else { return false };
        c.add(kind);
        self.pass_time(kind, cycle_count);
        true
    }

    /// The time context after an element: its cycle count added, its
    /// timestamp taken.
    #[inline(always)]
    fn pass_time(&mut self, kind: &ElementKind, cycle_count: Option<u32>) {
        if let Some(cc) = cycle_count {
            self.time.total_cycles += cc as u64;
        }
        if let ElementKind::Timestamp { value } = *kind {
            self.time.timestamp = Some(value);
        }
    }

    /// A decoder message in OpenCSD's format: `TAG_ID : 0xCODE (NAME)
    /// [DESCRIPTION]; ` then, when the error is tied to a packet,
    /// `TrcIdx=N; CS ID=ID; `, then `text`.
    pub fn log<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, tag: &str, err: DecodeError, index: Option<u64>, text: &str) {
        self.msg.clear();
        let _ = write!(
            self.msg,
            "{tag}_{:04} : 0x{:04x} ({}) [{}]; ",
            self.trace_id,
            err.code(),
            err.name(),
            err.description()
        );
        if let Some(i) = index {
            let _ = write!(self.msg, "TrcIdx={i}; CS ID={:02x}; ", self.trace_id);
        }
        self.msg.push_str(text);
        let m = std::mem::take(&mut self.msg);
        sink(DecoderOutput::Message(&m));
        self.msg = m;
    }
}

/// OpenCSD error codes that appear in decoder messages (`ocsd_err_t`, with
/// the names and texts of OpenCSD's `ocsd_error.cpp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    BadPacketSeq,
    UnsupportedIsa,
    HwConfigUnsupported,
    UnsupportedPacket,
    BadDecodePacket,
    CommitOverrun,
    ReturnStackOverflow,
    InvalidOpcode,
    RangeLimitOverrun,
    BadImage,
}

impl DecodeError {
    pub fn code(self) -> u32 {
        match self {
            DecodeError::BadPacketSeq => 0x13,
            DecodeError::UnsupportedIsa => 0x16,
            DecodeError::HwConfigUnsupported => 0x17,
            DecodeError::UnsupportedPacket => 0x18,
            DecodeError::BadDecodePacket => 0x19,
            DecodeError::CommitOverrun => 0x1a,
            DecodeError::ReturnStackOverflow => 0x1c,
            DecodeError::InvalidOpcode => 0x2c,
            DecodeError::RangeLimitOverrun => 0x2d,
            DecodeError::BadImage => 0x2e,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DecodeError::BadPacketSeq => "OCSD_ERR_BAD_PACKET_SEQ",
            DecodeError::UnsupportedIsa => "OCSD_ERR_UNSUPPORTED_ISA",
            DecodeError::HwConfigUnsupported => "OCSD_ERR_HW_CFG_UNSUPP",
            DecodeError::UnsupportedPacket => "OCSD_ERR_UNSUPP_DECODE_PKT",
            DecodeError::BadDecodePacket => "OCSD_ERR_BAD_DECODE_PKT",
            DecodeError::CommitOverrun => "OCSD_ERR_COMMIT_PKT_OVERRUN",
            DecodeError::ReturnStackOverflow => "OCSD_ERR_RET_STACK_OVERFLOW",
            DecodeError::InvalidOpcode => "OCSD_ERR_INVALID_OPCODE",
            DecodeError::RangeLimitOverrun => "OCSD_ERR_I_RANGE_LIMIT_OVERRUN",
            DecodeError::BadImage => "OCSD_ERR_BAD_DECODE_IMAGE",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            DecodeError::BadPacketSeq => "Bad packet sequence",
            DecodeError::UnsupportedIsa => "ISA not supported in decoder",
            // OpenCSD's text, misspelling included: listings match it.
            DecodeError::HwConfigUnsupported => "Programmed trace configuration not supported by decodUer.",
            DecodeError::UnsupportedPacket => "Packet not supported in decoder",
            DecodeError::BadDecodePacket => "Reserved or unknown packet in decoder.",
            DecodeError::CommitOverrun => "Overrun in commit packet stack - tried to commit more than available",
            DecodeError::ReturnStackOverflow => {
                "Internal return stack overflow checks failed - popped more than we pushed."
            }
            DecodeError::InvalidOpcode => "Illegal Opode found while decoding program memory.",
            DecodeError::RangeLimitOverrun => {
                "An optional limit on consecutive instructions in range during decode has been exceeded."
            }
            DecodeError::BadImage => "Inconsistent program memory image detected.",
        }
    }
}

impl From<InstrError> for DecodeError {
    fn from(e: InstrError) -> Self {
        match e {
            InstrError::UnsupportedIsa => DecodeError::UnsupportedIsa,
            InstrError::InvalidOpcode => DecodeError::InvalidOpcode,
        }
    }
}

/// Instructions a walk to the next waypoint steps one at a time before it
/// asks the image's stop map ([`MemoryImage::pass_plain`]) for a run of
/// ordinary instructions to pass, and again after a lookup that gave none:
/// most ranges are short and never pay for a lookup.
pub(crate) const PLAIN_STEPS: u32 = 16;

/// The 16-entry return stack of ETMv4 (TRCCONFIGR.RS) and PTM (ETMCR bit
/// 29): calls push their return address, an indirect branch the trace does
/// not give pops it. Popping an empty stack is an error, seen as a negative
/// fill ([`ReturnStack::overflow`]), as in OpenCSD.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct ReturnStack {
    pub active: bool,
    /// ETMv4: a pop is due when the next address is not traced.
    pub pop_pending: bool,
    /// ETMv4: after a Trace Info, nothing is pushed until an address.
    pub tinfo_wait_addr: bool,
    pub head: usize,
    pub entries: i32,
    pub stack: [(u64, Isa); 16],
}

impl ReturnStack {
    /// An empty stack, used when `active`.
    pub fn new(active: bool) -> ReturnStack {
        ReturnStack { active, pop_pending: false, tinfo_wait_addr: false, head: 15, entries: 0, stack: [(0, Isa::A32); 16] }
    }

    pub fn push(&mut self, addr: u64, isa: Isa) {
        if self.active && !self.tinfo_wait_addr {
            self.head = (self.head + 1) % 16;
            self.stack[self.head] = (addr, isa);
            if self.entries < 16 {
                self.entries += 1;
            }
        }
    }

    pub fn pop(&mut self) -> Option<(u64, Isa)> {
        let mut r = None;
        if self.active {
            if self.entries > 0 {
                r = Some(self.stack[self.head]);
                self.head = (self.head + 15) % 16;
            }
            self.entries -= 1;
            self.pop_pending = false;
        }
        r
    }

    pub fn flush(&mut self) {
        self.head = 15;
        self.entries = 0;
        self.pop_pending = false;
    }

    /// More pops than pushes since the last flush.
    pub fn overflow(&self) -> bool {
        self.entries < 0
    }

    pub fn set_pop_pending(&mut self) {
        if self.active {
            self.pop_pending = true;
        }
    }

    /// The checks a loaded state must pass (see [`super::check_state`]).
    pub fn bounds(&self) -> [(bool, &'static str); 2] {
        [
            (self.head < self.stack.len(), "return stack index"),
            (self.entries <= self.stack.len() as i32, "return stack fill"),
        ]
    }
}
