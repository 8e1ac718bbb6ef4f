//! ETMv3 element decoder: packets plus the program image in, executed
//! instruction ranges and the other trace elements out.
//!
//! Each atom of a P-header is followed through one instruction of the image
//! (ETMv3 traces every instruction, so an atom is one instruction), from the
//! address the last I-sync or branch address packet gave. Output reproduces
//! OpenCSD's `TrcPktDecodeEtmV3` element for element, including when elements
//! are held back: a lone instruction range waits for the next packet, which may
//! cancel it (a branch address packet whose exception cancels the last traced
//! instruction), and an exception return waits with its instruction range.
//!
//! OpenCSD builds elements in a pool of reused element objects and sets only
//! the fields each element type needs, so some fields of some elements are
//! whatever the slot held before (the instruction set of a PE context from a
//! context ID packet, the number of an exception entry marker). The pool is
//! modelled here so those values come out the same.

use std::sync::Arc;

use super::config::Etm3Config;
use super::packet::{Etm3Packet, PacketType};
use crate::element::{
    Element, ElementKind, InstrSubtype, InstrType, Isa, MemSpace, PeContext, Security, Time, TraceOnReason,
    UnsyncReason, KIND_CYCLE_COUNT, KIND_INSTR_RANGE,
};
use crate::image::instr::{self, DecodeOptions, InstrError, InstrInfo, ItState};
use crate::image::memory::MemoryImage;
use crate::protocol::decoder::{DecodeError, Decoder, DecoderCore};
use crate::protocol::etm4::decoder::DecoderOptions;
use crate::protocol::ProtocolError;
use crate::protocol::etm4::config::CoreProfile;
pub use crate::protocol::etm4::decoder::DecoderOutput;

/// OpenCSD's generic element types that ETMv3 produces.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Unknown,
    NoSync,
    TraceOn,
    EoTrace,
    PeContext,
    InstrRange,
    AddrNacc,
    AddrUnknown,
    Exception,
    ExceptionRet,
    Timestamp,
    CycleCount,
    Event,
}

// Per-element flag bits (OpenCSD `ocsd_generic_trace_elem` flag_bits).
const F_EXEC: u32 = 1 << 0;
const F_SIZE_SHIFT: u32 = 1;
const F_HAS_CC: u32 = 1 << 4;
const F_DATA_MARKER: u32 = 1 << 7;
const F_COND: u32 = 1 << 10;

// Payload values.
const EVENT_TRIGGER: u32 = 1;
const ON_NORMAL: u32 = 0;
const ON_OVERFLOW: u32 = 1;
const ON_DEBUG: u32 = 2;

/// The decoder's PE context (OpenCSD `ocsd_pe_context`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Ctx {
    non_secure: bool,
    /// `None` = unknown exception level.
    el: Option<u8>,
    context_id: Option<u32>,
    vmid: Option<u32>,
}

impl Ctx {
    fn element(&self) -> PeContext {
        PeContext {
            security: if self.non_secure { Security::NonSecure } else { Security::Secure },
            el: self.el.unwrap_or(0),
            el_valid: self.el.is_some(),
            aarch64: false,
            vmid: self.vmid,
            context_id: self.context_id,
        }
    }
}

/// One element object of the output pool.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct Slot {
    kind: Kind,
    index: u64,
    flags: u32,
    /// Type-specific value: exception number, instruction count, unsync
    /// reason, trace-on reason, event, memory space (one union in OpenCSD).
    payload: u32,
    isa: Isa,
    st: u64,
    en: u64,
    cc: u32,
    ts: u64,
    ctx: Ctx,
    itype: InstrType,
    isubtype: InstrSubtype,
}

impl Default for Slot {
    fn default() -> Slot {
        Slot {
            kind: Kind::Unknown,
            index: 0,
            flags: 0,
            payload: 0,
            isa: Isa::Unknown,
            st: u64::MAX,
            en: u64::MAX,
            cc: 0,
            ts: 0,
            ctx: Ctx::default(),
            itype: InstrType::Other,
            isubtype: InstrSubtype::None,
        }
    }
}

impl Slot {
    fn set_type(&mut self, k: Kind) {
        self.kind = k;
        self.flags = 0;
    }
    fn set_cc(&mut self, cc: u32) {
        self.cc = cc;
        self.flags |= F_HAS_CC;
    }
}

/// The element a slot holds; `None` for an empty one.
#[inline(always)]
fn slot_kind(s: &Slot) -> Option<ElementKind> {
    Some(match s.kind {
        Kind::NoSync => ElementKind::NoSync(UnsyncReason::from_code(s.payload)),
        Kind::EoTrace => ElementKind::EndOfTrace(UnsyncReason::from_code(s.payload)),
        Kind::TraceOn => ElementKind::TraceOn(match s.payload {
            ON_OVERFLOW => TraceOnReason::Overflow,
            ON_DEBUG => TraceOnReason::DebugRestart,
            _ => TraceOnReason::Normal,
        }),
        Kind::PeContext => ElementKind::PeContext(s.ctx.element()),
        Kind::InstrRange => ElementKind::InstrRange {
            start: s.st,
            end: s.en,
            count: s.payload,
            last_type: s.itype,
            last_subtype: s.isubtype,
            last_size: ((s.flags >> F_SIZE_SHIFT) & 0x7) as u8,
            executed: s.flags & F_EXEC != 0,
            conditional: s.flags & F_COND != 0,
        },
        Kind::AddrNacc => ElementKind::AddrNotAccessible { addr: s.st, space: MemSpace(s.payload as u8) },
        Kind::Exception => ElementKind::Exception {
            number: s.payload,
            ret_addr: None,
            ret_addr_is_branch_target: false,
            m_tail_chain: false,
        },
        Kind::ExceptionRet => ElementKind::ExceptionReturn,
        Kind::Timestamp => ElementKind::Timestamp { value: s.ts },
        Kind::CycleCount => ElementKind::CycleCount,
        Kind::AddrUnknown => ElementKind::AddrUnknown,
        Kind::Event if s.payload & 0xffff == EVENT_TRIGGER => ElementKind::Trigger,
        Kind::Event => ElementKind::Event { number: (s.payload >> 16) as u16 },
        // Nothing the lister would print either; never built by the
        // decoder, kept so a corrupt slot cannot panic.
        Kind::Unknown => return None,
    })
}

/// OpenCSD's element list: a ring of reused slots; the last `pend` elements
/// are held back from sending.
#[derive(serde::Serialize, serde::Deserialize)]
struct ElemList {
    slots: Vec<Slot>,
    first: usize,
    used: i64,
    pend: i64,
}

impl ElemList {
    fn new() -> ElemList {
        ElemList { slots: Vec::new(), first: 0, used: 0, pend: 0 }
    }

    fn reset(&mut self) {
        self.first = 0;
        self.used = 0;
        self.pend = 0;
    }

    /// The bounds a loaded list must meet (see [`crate::protocol::check_state`]):
    /// the ring grows by half when full, from 8, and a decode holds back at
    /// most the two last elements (an exception return and its range), so
    /// 2^16 slots is far beyond any real list.
    fn check(&self) -> Result<(), ProtocolError> {
        let n = self.slots.len();
        crate::protocol::check_state(
            "ETMv3 decoder",
            &[
                (n <= 1 << 16, "element list size"),
                (self.first < n.max(1), "element list start"),
                ((0..=n as i64).contains(&self.used), "element list fill"),
                ((0..=2).contains(&self.pend), "held-back element count"),
            ],
        )
    }

    // A compare, not `%`: the division was 6% of a summary of TC2. `first`
    // is below the length and `n` below the fill (checked on load), so one
    // subtraction wraps it.
    #[inline(always)]
    fn pos(&self, n: i64) -> usize {
        let i = self.first + n as usize;
        if i >= self.slots.len() {
            i - self.slots.len()
        } else {
            i
        }
    }

    /// Append an element for packet `index`; returns its slot.
    #[inline(always)]
    fn next(&mut self, index: u64) -> usize {
        if self.used as usize == self.slots.len() {
            self.grow();
        }
        self.used += 1;
        let i = self.pos(self.used - 1);
        self.slots[i].index = index;
        i
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.slots.len();
        let inc = if n == 0 { 8 } else { n / 2 };
        let mut v = Vec::with_capacity(n + inc);
        for k in 0..n {
            v.push(self.slots[(self.first + k) % n]);
        }
        v.resize(n + inc, Slot::default());
        self.slots = v;
        self.first = 0;
    }

    fn kind_at(&self, n: i64) -> Kind {
        if n >= 0 && n < self.used {
            self.slots[self.pos(n)].kind
        } else {
            Kind::Unknown
        }
    }

    /// Hold back the last `n` elements; only takes effect when the list holds
    /// no more than `n` (OpenCSD's rule).
    fn pend_last(&mut self, n: i64) {
        if n >= self.used {
            self.pend = n;
        }
    }

    fn commit_all(&mut self) {
        self.pend = 0;
    }

    /// Drop the held-back elements. OpenCSD keeps the held-back count, so
    /// elements added afterwards wait for the next commit.
    fn cancel_pending(&mut self) {
        if self.pend > 0 {
            self.used = (self.used - self.pend).max(0);
        }
    }

    fn to_send(&self) -> bool {
        self.used - self.pend > 0
    }
}

/// What a valid one-byte P-header sets in a packet cleared for it.
#[derive(Clone, Copy)]
struct PhdrAtoms {
    count: u8,
    format: u8,
    bits: u32,
    cycles: u32,
}

/// [`Etm3Packet::atoms_from_phdr`] for every header byte, without and with
/// cycle accuracy (`None`: invalid in that mode), built by calling it. Its
/// branches on the format, taken per P-header of a run, were 6% of the
/// samples of a summary of TC2; looked up instead, the summary ran 2-3%
/// faster (medians of 7 and 9, one thread).
fn phdr_tables() -> &'static [[Option<PhdrAtoms>; 256]; 2] {
    static TABLES: std::sync::OnceLock<[[Option<PhdrAtoms>; 256]; 2]> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        let mut t = [[None; 256]; 2];
        for (ca, row) in t.iter_mut().enumerate() {
            for (h, entry) in row.iter_mut().enumerate() {
                let mut p = Etm3Packet::reset_state();
                p.clear();
                if p.atoms_from_phdr(h as u8, ca == 1) {
                    *entry = Some(PhdrAtoms { count: p.atom_count, format: p.phdr_format, bits: p.atom_bits, cycles: p.cycle_count });
                }
            }
        }
        t
    })
}

/// The code follower: one instruction per atom (OpenCSD `OcsdCodeFollower`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct Follower {
    isa: Isa,
    next_isa: Isa,
    itype: InstrType,
    isubtype: InstrSubtype,
    size: u8,
    cond: bool,
    st: u64,
    en: u64,
    next: u64,
    next_valid: bool,
    nacc: bool,
    nacc_addr: u64,
    space: MemSpace,
}

/// Instructions the follower has decoded, by address: [`KNOWN_BITS`] bits
/// from the address ([`known_slot`]) pick the one entry that may hold it.
/// ETMv3 follows one instruction per atom, and reading and classifying each
/// anew was a fifth of a summary of TC2 (whose kernel code runs each
/// instruction two or three times in the capture, and again in each
/// repetition of it the benchmark makes). 2^16 entries of 16 bytes (1 MiB,
/// made on the first instruction): with 2^14, one lookup in eight on TC2
/// missed and read and decoded the instruction again. Only instructions
/// read from the image and decoded without error are kept, and never with
/// the saved state (a restored decoder may be given another image).
const KNOWN_BITS: u32 = 16;
// phdr_counted keeps the entries it walks as u16.
const _: () = assert!(KNOWN_BITS <= 16);

/// The most atoms a P-header carries (format 1 outside cycle-accurate
/// mode: up to 15 E atoms and an N).
const MAX_PHDR_ATOMS: usize = 16;

/// One decoded instruction, packed: ETMv3 addresses and branch targets are
/// 32 bits. An entry of size 0 is empty.
#[derive(Clone, Copy)]
struct Known {
    addr: u32,
    target: u32,
    isa: Isa,
    space: MemSpace,
    itype: InstrType,
    subtype: InstrSubtype,
    size: u8,
    next_isa: Isa,
    conditional: bool,
    link: bool,
}

impl Known {
    const EMPTY: Known = Known {
        addr: 0,
        target: 0,
        isa: Isa::Unknown,
        space: MemSpace(0),
        itype: InstrType::Other,
        subtype: InstrSubtype::None,
        size: 0,
        next_isa: Isa::Unknown,
        conditional: false,
        link: false,
    };

    fn info(&self) -> InstrInfo {
        InstrInfo {
            itype: self.itype,
            subtype: self.subtype,
            conditional: self.conditional,
            link: self.link,
            target: self.target as u64,
            size: self.size,
            next_isa: self.next_isa,
        }
    }
}

/// The cycles a P-header of format `fmt` (`hdr_cycles` its own count, for
/// format 3) gives the element of its current atom, `num` atoms left with
/// it (`all` false), or the one element for all of them (`all`); none
/// outside cycle-accurate mode (`ca`).
#[inline(always)]
fn phdr_cycles(ca: bool, fmt: u8, hdr_cycles: u32, num: u32, all: bool) -> u32 {
    if !ca {
        return 0;
    }
    match fmt {
        3 => hdr_cycles,
        2 => (num > 1) as u32,
        1 if all => num,
        1 => 1,
        _ => 0,
    }
}

/// The entry of [`Known`] for `addr`. Instructions that follow each other
/// take entries that follow each other (A32 words; T32 halfwords in the
/// table's other half when they are not word-aligned), from a place picked
/// by a Fibonacci hash of the 128 KiB block they are in. Each atom's lookup
/// waits on the one before it (the next address is in the entry): hashed
/// address by address, the lookups went all over the table and missed the
/// L1 cache, 38% of the samples of the P-header loop on TC2.
#[inline(always)]
fn known_slot(addr: u64) -> usize {
    let a = addr as u32;
    let block = (a >> 17).wrapping_mul(0x9e37_79b1) >> (32 - KNOWN_BITS);
    let within = (a >> 2).wrapping_add((a & 2) << (KNOWN_BITS - 2));
    (block.wrapping_add(within) & ((1 << KNOWN_BITS) - 1)) as usize
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    NoSync,
    WaitASync,
    WaitISync,
    Decode,
    Send,
}

/// The ETMv3 element decoder for one trace ID.
///
/// Its decode state serializes ([`Decoder::save_state`]) so that decoding
/// can resume exactly; configuration and program image are supplied again on
/// load.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Etm3Decoder {
    #[serde(skip, default = "Etm3Config::unset")]
    cfg: Etm3Config,
    #[serde(skip)]
    image: Arc<MemoryImage>,
    core: DecoderCore,
    #[serde(skip)]
    idec: DecodeOptions,
    it: ItState,
    state: State,
    unsync: UnsyncReason,
    iaddr: u64,
    need_addr: bool,
    sent_unknown: bool,
    wait_isync: bool,
    ctx: Ctx,
    list: ElemList,
    follow: Follower,
    /// Empty until the first instruction is decoded.
    #[serde(skip)]
    known: Box<[Known]>,
}

impl Decoder for Etm3Decoder {
    type Config = Etm3Config;
    type Packet = Etm3Packet;
    const TAG: &'static str = "DCD_ETMV3";
    const STATE: &'static str = "ETMv3 decoder";
    const RESYNC: &'static str = "A-sync and I-sync";

    fn create(cfg: &Etm3Config, image: Arc<MemoryImage>, _opts: DecoderOptions) -> Etm3Decoder {
        Etm3Decoder::new(cfg, image)
    }

    fn core(&self) -> &DecoderCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DecoderCore {
        &mut self.core
    }

    fn packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Etm3Packet, sink: &mut F) {
        self.take_packet(pkt, sink);
    }

    fn finish<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        self.end_of_trace(sink);
    }

    fn restart(&mut self, why: UnsyncReason) {
        self.unsync = why;
        self.reset_decoder();
    }

    fn restore(&mut self, cfg: &Etm3Config, image: Arc<MemoryImage>) {
        let fresh = Etm3Decoder::new(cfg, image);
        self.cfg = fresh.cfg;
        self.image = fresh.image;
        self.idec = fresh.idec;
        self.known = Box::default();
    }

    fn check(&self) -> Result<(), ProtocolError> {
        self.list.check()
    }
}

impl Etm3Decoder {
    pub fn new(cfg: &Etm3Config, image: Arc<MemoryImage>) -> Etm3Decoder {
        let idec = DecodeOptions {
            arch: cfg.arch,
            m_profile: cfg.profile == CoreProfile::Microcontroller,
            wfi_wfe_branch: false,
            dsb_dmb_waypoints: false,
            aa64_opcode_check: false,
            track_it_block: false,
        };
        let mut d = Etm3Decoder {
            cfg: cfg.clone(),
            image,
            core: DecoderCore::new(cfg.trace_id()),
            idec,
            it: ItState::new(),
            state: State::NoSync,
            unsync: UnsyncReason::InitDecoder,
            iaddr: 0,
            need_addr: true,
            sent_unknown: false,
            wait_isync: false,
            ctx: Ctx::default(),
            list: ElemList::new(),
            follow: Follower {
                isa: Isa::Unknown,
                next_isa: Isa::Unknown,
                itype: InstrType::Other,
                isubtype: InstrSubtype::None,
                size: 0,
                cond: false,
                st: 0,
                en: 0,
                next: 0,
                next_valid: false,
                nacc: false,
                nacc_addr: 0,
                space: MemSpace::S,
            },
            known: Box::default(),
        };
        d.reset_decoder();
        d
    }

    fn reset_decoder(&mut self) {
        self.state = State::NoSync;
        self.need_addr = true;
        self.sent_unknown = false;
        self.wait_isync = false;
        self.list.reset();
    }

    fn set_need_addr(&mut self, need: bool) {
        self.need_addr = need;
        self.sent_unknown = false;
    }

    // ---- output ----------------------------------------------------------

    fn elem(&mut self, kind: Kind) -> usize {
        let s = self.list.next(self.core.index_curr);
        self.list.slots[s].set_type(kind);
        s
    }

    /// Send every element that is not held back.
    fn send<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        if self.core.counted.is_some() {
            self.send_counted();
            return;
        }
        while self.list.to_send() {
            let i = self.list.first;
            self.list.first = if i + 1 >= self.list.slots.len() { 0 } else { i + 1 };
            self.list.used -= 1;
            // Read in place: a copy of the slot (a hundred bytes) for each
            // element was much of this loop's time.
            let s = &self.list.slots[i];
            let Some(kind) = slot_kind(s) else { continue };
            let cycle_count = (s.flags & F_HAS_CC != 0).then_some(s.cc);
            if self.core.count_only(&kind, cycle_count) {
                continue;
            }
            let mut e = Element { index: s.index, trace_id: self.core.trace_id, kind, isa: s.isa, cycle_count, time: Time::default() };
            self.core.deliver(&mut e, sink);
        }
    }

    /// [`Etm3Decoder::send`] in a run that only counts: what
    /// [`DecoderCore::count_only`] does with each element, read from its
    /// slot. Instruction ranges and cycle counts, nearly every element of a
    /// cycle-accurate trace, are counted without building the element.
    fn send_counted(&mut self) {
        self.count_front(self.list.used - self.list.pend);
    }

    /// Count the first `n` elements of the list, as sent, and take them off.
    #[inline(always)]
    fn count_front(&mut self, n: i64) {
        for _ in 0..n.clamp(0, self.list.used) {
            let i = self.list.first;
            self.list.first = if i + 1 >= self.list.slots.len() { 0 } else { i + 1 };
            self.list.used -= 1;
            let s = &self.list.slots[i];
            let cycle_count = (s.flags & F_HAS_CC != 0).then_some(s.cc);
            let (kind, instructions) = match s.kind {
                Kind::InstrRange => (KIND_INSTR_RANGE, s.payload),
                Kind::CycleCount => (KIND_CYCLE_COUNT, 0),
                _ => {
                    if let Some(kind) = slot_kind(s) {
                        self.core.count_only(&kind, cycle_count);
                    }
                    continue;
                }
            };
            if let Some(c) = self.core.counted.as_deref_mut() {
                c.kinds[kind] += 1;
                c.range_instructions += instructions as u64;
            }
            if let Some(cc) = cycle_count {
                self.core.time.total_cycles += cc as u64;
            }
        }
    }

    fn log<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, err: DecodeError, index: Option<u64>, text: &str) {
        self.core.log(sink, Self::TAG, err, index, text);
    }

    // ---- packet entry -----------------------------------------------------

    /// [`Decoder::packet`].
    fn take_packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Etm3Packet, sink: &mut F) {
        if self.core.fatal {
            return;
        }
        self.core.index_curr = pkt.index;
        // P-headers in the decoding state (nearly every packet of a capture):
        // what the state loop below does with them, without its two
        // dispatches on the state and decode_packet's on the packet type.
        if self.state == State::Decode && pkt.ptype == PacketType::PHeader {
            self.decode_phdr(pkt, sink);
            return;
        }
        let mut done = false;
        while !done {
            match self.state {
                State::NoSync => {
                    let s = self.elem(Kind::NoSync);
                    self.list.slots[s].payload = self.unsync.code();
                    self.send(sink);
                    self.state = State::WaitASync;
                }
                State::WaitASync => {
                    if pkt.ptype == PacketType::ASync {
                        self.state = State::WaitISync;
                    }
                    done = true;
                }
                State::WaitISync => {
                    self.wait_isync = true;
                    if matches!(pkt.ptype, PacketType::ISync | PacketType::ISyncCycle) {
                        self.process_isync(pkt, true);
                        self.state = State::Send;
                        self.wait_isync = false;
                    } else if self.pre_isync_valid(pkt.ptype) {
                        done = self.decode_packet(pkt, sink);
                    } else {
                        done = true;
                    }
                }
                State::Decode => done = self.decode_packet(pkt, sink),
                State::Send => {
                    self.send(sink);
                    self.state = if self.wait_isync { State::WaitISync } else { State::Decode };
                    done = true;
                }
            }
        }
    }

    /// A P-header in the decoding state, as the state loop of
    /// [`Etm3Decoder::take_packet`] decodes and sends it.
    #[inline(always)]
    fn decode_phdr<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Etm3Packet, sink: &mut F) {
        self.list.commit_all();
        self.process_phdr(pkt, sink);
        if self.list.to_send() {
            self.send(sink);
            self.state = if self.wait_isync { State::WaitISync } else { State::Decode };
        } else {
            self.state = State::Decode;
        }
    }

    /// Take one-byte P-headers from the start of `bytes` (the first at
    /// buffer index `index`) as [`Decoder::packet`] takes each, for as long
    /// as the decoder decodes and the bytes are valid P-headers read as the
    /// parser reads them (`cycle_accurate`); returns how many it took. `last`
    /// is the parser's packet before them, which carries the instruction set.
    /// See [`super::parser::Etm3Sink::phdr_run`].
    pub fn phdr_run<F: FnMut(DecoderOutput<'_>)>(
        &mut self,
        index: u64,
        bytes: &[u8],
        last: &Etm3Packet,
        cycle_accurate: bool,
        sink: &mut F,
    ) -> usize {
        let mut pkt = *last;
        pkt.clear();
        pkt.ptype = PacketType::PHeader;
        let table = &phdr_tables()[cycle_accurate as usize];
        let counted = self.core.counted.is_some();
        for (k, &b) in bytes.iter().enumerate() {
            if self.core.fatal || self.state != State::Decode || b & 0x81 != 0x80 {
                return k;
            }
            let Some(a) = table[b as usize] else { return k };
            pkt.index = index + k as u64;
            self.core.index_curr = pkt.index;
            if counted && self.phdr_counted(&a, pkt.isa) {
                continue;
            }
            (pkt.atom_count, pkt.phdr_format, pkt.atom_bits, pkt.cycle_count) = (a.count, a.format, a.bits, a.cycles);
            self.decode_phdr(&pkt, sink);
        }
        bytes.len()
    }

    /// [`Etm3Decoder::decode_phdr`] for a P-header with atoms `a`, the
    /// packet's instruction set `isa`, in a run that only counts, when every
    /// instruction its atoms follow is known ([`Known`]) and nothing but
    /// instruction ranges and cycle counts come of it: the elements are
    /// written to the list as there, and counted. Returns false, having
    /// changed nothing, for any other header (among them those that come
    /// while the decoder waits for an address: taken here too, they made
    /// no difference on TC2).
    ///
    /// The header is walked first without changing anything, so that the
    /// general path can take it whole when the walk meets something else
    /// (an instruction not known, an indirect branch before the last atom,
    /// a list that would have to grow). Taken one by one through the
    /// general path, an ETMv3 atom cost some 250 instructions on TC2.
    #[inline(always)]
    fn phdr_counted(&mut self, a: &PhdrAtoms, isa: Isa) -> bool {
        let ca = self.cfg.cycle_accurate();
        let num = a.count as usize;
        let (used, len) = (self.list.used, self.list.slots.len());
        // The list as between headers (nothing waiting but what is held
        // back), with room for this header's elements without growing.
        if self.need_addr || self.wait_isync || used != self.list.pend || used as usize + num.max(1) > len || num > MAX_PHDR_ATOMS {
            return false;
        }
        let space = if self.ctx.non_secure { MemSpace::N } else { MemSpace::S };
        // A header without atoms outside cycle-accurate mode leaves a stale
        // range: the general path.
        if num == 0 && !ca {
            return false;
        }
        // The entries of the instructions followed (each entry's address
        // and instruction set are the atom's: checked on the way).
        let mut steps = [0u16; MAX_PHDR_ATOMS];
        let (mut addr, mut isa_now, mut indirect) = (self.iaddr, isa, false);
        for (j, step) in steps.iter_mut().enumerate().take(num) {
            let e = known_slot(addr);
            let Some(k) = self.known.get(e) else { return false };
            // After an executed indirect branch the next atom needs an
            // address: the general path.
            if indirect || k.addr as u64 != addr || k.isa != isa_now || k.space != space || k.size == 0 {
                return false;
            }
            *step = e as u16;
            let exec = (a.bits >> j) & 1 == 1;
            addr = match k.itype {
                InstrType::Branch if exec => k.target as u64,
                InstrType::IndirectBranch if exec => {
                    indirect = true;
                    addr
                }
                _ => addr + k.size as u64,
            };
            isa_now = k.next_isa;
        }
        let cycles = |left: usize| phdr_cycles(ca, a.format, a.cycles, left as u32, false);
        self.list.commit_all();
        self.follow.space = space;
        let index = self.core.index_curr;
        let cc_flag = if ca { F_HAS_CC } else { 0 };
        let mut total_cycles = 0u64;
        if num == 0 {
            let i = self.list.next(index);
            let s = &mut self.list.slots[i];
            s.kind = Kind::CycleCount;
            s.flags = F_HAS_CC;
            s.cc = cycles(0);
            total_cycles = s.cc as u64;
        }
        for (j, &e) in steps.iter().enumerate().take(num) {
            let k = self.known[e as usize];
            let exec = (a.bits >> j) & 1 == 1;
            let i = self.list.next(index);
            let s = &mut self.list.slots[i];
            s.kind = Kind::InstrRange;
            s.flags = cc_flag | exec as u32 | ((k.size as u32 & 0x7) << F_SIZE_SHIFT) | if k.conditional { F_COND } else { 0 };
            if ca {
                s.cc = cycles(num - j);
                total_cycles += s.cc as u64;
            }
            s.st = k.addr as u64;
            s.en = k.addr as u64 + k.size as u64;
            s.payload = 1;
            s.itype = k.itype;
            s.isubtype = k.subtype;
            s.isa = k.isa;
        }
        if let Some(&e) = steps[..num].last() {
            let k = self.known[e as usize];
            let exec = (a.bits >> (num - 1)) & 1 == 1;
            let f = &mut self.follow;
            f.isa = k.isa;
            f.next_isa = k.next_isa;
            f.itype = k.itype;
            f.isubtype = k.subtype;
            f.size = k.size;
            f.cond = k.conditional;
            f.st = k.addr as u64;
            f.en = f.st + k.size as u64;
            f.next = if exec && k.itype == InstrType::Branch { k.target as u64 } else { f.en };
            f.next_valid = !indirect;
            f.nacc = false;
            // After an indirect branch, `addr` is the branch's own: where
            // the general path leaves `iaddr` when no next address is known.
            self.iaddr = addr;
            if indirect {
                self.set_need_addr(true);
            }
        }
        let n = self.list.used;
        if n == 1 && num > 0 {
            // A lone range waits for the next packet (pend_last(1)).
            self.list.pend = 1;
        } else {
            // Everything goes: what was held back, counted from its slots,
            // then this header's ranges and cycle counts.
            self.count_front(used);
            if let Some(c) = self.core.counted.as_deref_mut() {
                c.kinds[KIND_INSTR_RANGE] += num as u64;
                c.range_instructions += num as u64;
                c.kinds[KIND_CYCLE_COUNT] += (num == 0) as u64;
            }
            self.core.time.total_cycles += total_cycles;
            self.list.first = self.list.pos(num.max(1) as i64);
            self.list.used = 0;
        }
        self.state = State::Decode;
        true
    }

    /// [`Decoder::finish`]: what is held back goes out, then the end-of-trace
    /// element.
    fn end_of_trace<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        if self.core.fatal {
            return;
        }
        let s = self.elem(Kind::EoTrace);
        self.list.slots[s].payload = UnsyncReason::EndOfTrace.code();
        self.list.commit_all();
        self.send(sink);
        self.state = State::Decode;
    }

    fn pre_isync_valid(&self, t: PacketType) -> bool {
        t == PacketType::Timestamp
            || (self.cfg.cycle_accurate() && matches!(t, PacketType::CycleCount | PacketType::PHeader))
    }

    /// Returns true when the packet is done with (nothing left to send).
    fn decode_packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Etm3Packet, sink: &mut F) -> bool {
        use PacketType as P;
        // Held-back elements stand unless a branch address cancels them.
        if pkt.ptype != P::BranchAddress {
            self.list.commit_all();
        }
        let fail: Option<(DecodeError, &str, bool)> = match pkt.ptype {
            P::NotSync => Some((DecodeError::BadPacketSeq, "Trace Packet Synchronisation Lost", false)),
            P::IncompleteEot | P::ASync | P::Ignore => None,
            P::CycleCount => {
                let s = self.elem(Kind::CycleCount);
                self.list.slots[s].set_cc(pkt.cycle_count);
                None
            }
            P::Trigger => {
                let s = self.elem(Kind::Event);
                self.list.slots[s].payload = EVENT_TRIGGER;
                None
            }
            P::BranchAddress => {
                self.process_branch(pkt);
                None
            }
            P::ISync | P::ISyncCycle => {
                self.process_isync(pkt, false);
                None
            }
            P::PHeader => {
                self.process_phdr(pkt, sink);
                None
            }
            P::ContextId => {
                let s = self.elem(Kind::PeContext);
                self.ctx.context_id = Some(pkt.context.context_id);
                self.list.slots[s].ctx = self.ctx;
                None
            }
            P::Vmid => {
                let s = self.elem(Kind::PeContext);
                self.ctx.vmid = Some(pkt.context.vmid as u32);
                self.list.slots[s].ctx = self.ctx;
                None
            }
            P::ExceptionEntry => {
                // A v7-M data marker; the exception number is not set.
                let s = self.elem(Kind::Exception);
                self.list.slots[s].flags |= F_DATA_MARKER;
                None
            }
            P::ExceptionExit => {
                self.elem(Kind::ExceptionRet);
                self.pend_exception_return();
                None
            }
            P::Timestamp => {
                let s = self.elem(Kind::Timestamp);
                self.list.slots[s].ts = pkt.timestamp;
                None
            }
            P::StoreFail
            | P::OooData
            | P::OooAddrPlaceholder
            | P::NormalData
            | P::DataSuppressed
            | P::ValueNotTraced
            | P::BadTraceMode => {
                Some((DecodeError::HwConfigUnsupported, "Invalid packet type : Data Tracing decode not supported.", true))
            }
            P::BadSequence => Some((DecodeError::BadPacketSeq, "Bad Packet sequence.", true)),
            _ => Some((DecodeError::BadPacketSeq, "Reserved or unknown packet ID.", true)),
        };
        if let Some((code, text, fatal)) = fail {
            self.log(sink, code, Some(self.core.index_curr), text);
            self.unsync = UnsyncReason::BadPacket;
            self.reset_decoder();
            self.core.fatal = fatal;
            return true;
        }
        let to_send = self.list.to_send();
        self.state = if to_send { State::Send } else { State::Decode };
        !to_send
    }

    fn process_isync(&mut self, pkt: &Etm3Packet, first: bool) {
        let mut s = self.list.next(self.core.index_curr);
        if first || pkt.isync.reason != 0 {
            self.list.slots[s].set_type(Kind::TraceOn);
            self.list.slots[s].payload = match pkt.isync.reason {
                2 => ON_OVERFLOW,
                3 => ON_DEBUG,
                _ => ON_NORMAL,
            };
            s = self.list.next(self.core.index_curr);
        }
        if pkt.context_updated() || first {
            if first {
                self.ctx = Ctx::default();
            }
            if pkt.context.updated_cid {
                self.ctx.context_id = Some(pkt.context.context_id);
            }
            if pkt.context.updated_vmid {
                self.ctx.vmid = Some(pkt.context.vmid as u32);
            }
            if pkt.context.updated {
                self.ctx.el = pkt.context.hyp.then_some(2);
                self.ctx.non_secure = pkt.context.ns;
            }
            let slot = &mut self.list.slots[s];
            slot.set_type(Kind::PeContext);
            slot.ctx = self.ctx;
            slot.isa = pkt.isa;
            if pkt.isync.has_cycle_count {
                slot.set_cc(pkt.cycle_count);
            }
        }
        if !pkt.isync.no_address {
            self.iaddr = pkt.addr.value;
            self.set_need_addr(false);
        }
        self.state = if self.list.to_send() { State::Send } else { State::Decode };
    }

    fn process_branch(&mut self, pkt: &Etm3Packet) {
        if pkt.exception_cancels() {
            self.list.cancel_pending();
        } else {
            self.list.commit_all();
        }
        self.iaddr = pkt.addr.value;
        self.set_need_addr(false);
        if !pkt.exception.present {
            return;
        }
        let mut update = false;
        if pkt.context_updated() {
            if pkt.context.ns != self.ctx.non_secure {
                self.ctx.non_secure = pkt.context.ns;
                update = true;
            }
            let el = pkt.context.hyp.then_some(2);
            if el != self.ctx.el {
                self.ctx.el = el;
                update = true;
            }
        }
        if update {
            let s = self.elem(Kind::PeContext);
            self.list.slots[s].ctx = self.ctx;
        }
        if pkt.exception.number != 0 {
            let s = self.elem(Kind::Exception);
            self.list.slots[s].payload = pkt.exception.number as u32;
        }
        self.state = if self.list.to_send() { State::Send } else { State::Decode };
    }

    /// A v7-A/R exception return holds back with the range before it (a
    /// cancelling exception may follow); v7-M holds back the return alone.
    fn pend_exception_return(&mut self) {
        let mut n = 1;
        if self.cfg.profile != CoreProfile::Microcontroller
            && self.list.used > 1
            && self.list.kind_at(self.list.used - 2) == Kind::InstrRange
        {
            n = 2;
        }
        self.list.pend_last(n);
    }

    fn process_phdr<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Etm3Packet, sink: &mut F) {
        let ca = self.cfg.cycle_accurate();
        let mut num = pkt.atom_count as u32;
        let mut bits = pkt.atom_bits;
        let fmt = pkt.phdr_format;
        let cycles = |num: u32, all: bool| phdr_cycles(ca, fmt, pkt.cycle_count, num, all);
        let mut isa = pkt.isa;
        self.follow.space = if self.ctx.non_secure { MemSpace::N } else { MemSpace::S };
        loop {
            if self.need_addr {
                if !self.sent_unknown || ca {
                    let kind = if self.sent_unknown || num == 0 { Kind::CycleCount } else { Kind::AddrUnknown };
                    let s = self.elem(kind);
                    if ca {
                        self.list.slots[s].set_cc(cycles(num, true));
                    }
                    self.sent_unknown = true;
                }
                num = 0;
            } else {
                let s = self.elem(Kind::InstrRange);
                if ca {
                    if num == 0 {
                        self.list.slots[s].set_type(Kind::CycleCount);
                    }
                    self.list.slots[s].set_cc(cycles(num, false));
                }
                if num > 0 {
                    let exec = bits & 1 == 1;
                    self.follow.isa = isa;
                    let step = self.follow_atom(self.iaddr, exec);
                    if let Err(InstrError::UnsupportedIsa) = step {
                        // OpenCSD leaves a stale range here; tracesight reports
                        // the instruction set as unsupported and waits for the
                        // next address.
                        self.list.used -= 1;
                        let text = format!(
                            "Unsupported instruction set {} at 0x{:x}: waiting for the next address.",
                            isa.name(),
                            self.iaddr
                        );
                        self.log(sink, DecodeError::UnsupportedIsa, Some(self.core.index_curr), &text);
                        self.need_addr = true;
                        self.sent_unknown = true;
                        break;
                    }
                    let (st, en) = (self.follow.st, self.follow.en);
                    let has_range = st < en;
                    if let (true, Ok(Some(info))) = (has_range, step) {
                        let slot = &mut self.list.slots[s];
                        slot.st = self.iaddr;
                        slot.en = en;
                        slot.payload = 1;
                        slot.flags &= !(F_EXEC | (0x7 << F_SIZE_SHIFT) | F_COND);
                        slot.flags |= (exec as u32) | ((info.size as u32 & 0x7) << F_SIZE_SHIFT);
                        if info.conditional {
                            slot.flags |= F_COND;
                        }
                        slot.itype = info.itype;
                        slot.isubtype = info.subtype;
                        slot.isa = isa;
                        if self.follow.next_valid {
                            self.iaddr = self.follow.next;
                        } else {
                            self.set_need_addr(true);
                        }
                    }
                    if self.follow.isa != self.follow.next_isa {
                        isa = self.follow.next_isa;
                    }
                    if self.follow.nacc {
                        let n = if has_range { self.elem(Kind::AddrNacc) } else { s };
                        let slot = &mut self.list.slots[n];
                        // Without a range the element keeps its flags.
                        slot.kind = Kind::AddrNacc;
                        slot.st = self.follow.nacc_addr;
                        slot.payload = self.follow.space.0 as u32;
                        self.set_need_addr(true);
                        self.follow.nacc = false;
                    }
                }
                bits >>= 1;
                num = num.saturating_sub(1);
            }
            if num == 0 {
                break;
            }
        }
        let n = self.list.used;
        if n >= 1 && self.list.kind_at(n - 1) == Kind::InstrRange {
            self.list.pend_last(1);
        }
        self.state = if self.list.to_send() { State::Send } else { State::Decode };
    }

    /// Decode the one instruction at `addr`: its range, and where execution
    /// goes next for an E or N atom. Returns the instruction (`None` when
    /// the image does not hold it), which the caller reads rather than the
    /// follower's fields just stored: read back, the narrow stores of the
    /// instruction's type and subtype stalled the wider load that copied
    /// them (a fifth of `decode_packet`'s samples on TC2).
    #[inline(always)]
    fn follow_atom(&mut self, addr: u64, exec: bool) -> Result<Option<InstrInfo>, InstrError> {
        let f = &mut self.follow;
        f.next_valid = false;
        f.nacc = false;
        f.next = f.st;
        f.st = addr;
        f.en = addr;
        let slot = known_slot(addr);
        let info = match self.known.get(slot) {
            // An empty entry has size 0: it never matches, whatever the
            // address and instruction set asked for.
            Some(k) if k.addr as u64 == addr && k.isa == f.isa && k.space == f.space && k.size != 0 => k.info(),
            _ => {
                // Four bytes are read whatever the instruction size, as
                // OpenCSD does.
                let Some(word) = self.image.read_u32(addr, f.space) else {
                    f.nacc = true;
                    f.nacc_addr = addr;
                    return Ok(None);
                };
                let info = instr::decode(f.isa, word, (word >> 16) as u16, addr, &self.idec, &mut self.it)?;
                // The decode depends on nothing else while IT blocks are not
                // tracked (ETMv3 never tracks them).
                if !self.idec.track_it_block && addr <= u32::MAX as u64 && info.target <= u32::MAX as u64 {
                    if self.known.is_empty() {
                        self.known = vec![Known::EMPTY; 1 << KNOWN_BITS].into_boxed_slice();
                    }
                    if let Some(k) = self.known.get_mut(slot) {
                        *k = Known {
                            addr: addr as u32,
                            target: info.target as u32,
                            isa: f.isa,
                            space: f.space,
                            itype: info.itype,
                            subtype: info.subtype,
                            size: info.size,
                            next_isa: info.next_isa,
                            conditional: info.conditional,
                            link: info.link,
                        };
                    }
                }
                info
            }
        };
        f.itype = info.itype;
        f.isubtype = info.subtype;
        f.size = info.size;
        f.cond = info.conditional;
        f.next_isa = info.next_isa;
        f.en = addr + info.size as u64;
        f.next = f.en;
        f.next_valid = true;
        match info.itype {
            InstrType::Branch if exec => f.next = info.target,
            InstrType::IndirectBranch if exec => f.next_valid = false,
            _ => {}
        }
        Ok(Some(info))
    }
}
