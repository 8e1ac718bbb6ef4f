//! ETMv4/ETE element decoder: packets plus the program image in, executed
//! instruction ranges and the other trace elements out.
//!
//! P0 elements (atoms, exceptions, Q, source addresses, ...) are speculative until
//! a Commit resolves them (Arm ARM D4.3.3, D4.3.8): they wait on the P0 stack with
//! the non-P0 elements (addresses, contexts, timestamps) traced among them, and
//! are walked through the program image when committed. Cancel removes the
//! youngest uncommitted ones, Mispredict flips the last atom, Discard drops all.
//! The committed stream reproduces OpenCSD's `TrcPktDecodeEtmV4I` exactly,
//! element for element, including its error handling and resynchronisation.

use std::sync::Arc;

use super::config::{CoreProfile, Etm4Config};
use super::ring::Ring;
use super::packet::{Packet, PacketType, PeContext as PktContext};
use super::parser::row_mask;
use crate::element::{
    Element, ElementKind, Time, InstrSubtype, InstrType, Isa, MemSpace, MemTrans, PeContext, Security, TraceOnReason,
    UnsyncReason,
};
use crate::image::instr::{self, DecodeOptions, InstrInfo, ItState};
use crate::image::memory::MemoryImage;
use crate::protocol::decoder::{Decoder, DecoderCore, ReturnStack, PLAIN_STEPS};
use crate::protocol::output::ElementBatch;
use crate::protocol::ProtocolError;

pub use crate::protocol::decoder::DecodeError;

pub use crate::protocol::output::{DecoderOptions, DecoderOutput, SpecKind, SpecRecord, SpecState, DEFAULT_INSTR_RANGE_LIMIT};

/// Most elements the P0 stack holds before the decoder gives up and resyncs.
const MAX_QUEUED: usize = 1 << 16;

/// Most elements queued before an atom packet that
/// [`Etm4Decoder::commit_atoms_now`] takes (more go the long way).
const PLAIN_QUEUE: usize = 8;

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    NoSync,
    WaitSync,
    WaitTraceInfo,
    Decode,
    Resolve,
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum P0Kind {
    Atom,
    Addr,
    SrcAddr,
    Ctxt,
    TraceOn,
    Excep,
    ExcepRet,
    Event,
    Ts,
    Cc,
    TsCc,
    Marker,
    Q,
    FuncRet,
    TransTraceInit,
    TransStart,
    TransCommit,
    TransFail,
    Ite,
    UnseenUncommitted,
    TraceInfo,
}

impl P0Kind {
    /// Kinds whose commit leaves the commit count alone when they are not
    /// P0 elements ([`Etm4Decoder::commit_plain`]).
    fn is_plain(self) -> bool {
        matches!(
            self,
            P0Kind::TraceOn
                | P0Kind::Addr
                | P0Kind::Ctxt
                | P0Kind::Event
                | P0Kind::Ts
                | P0Kind::Cc
                | P0Kind::TsCc
                | P0Kind::Marker
                | P0Kind::ExcepRet
                | P0Kind::Ite
                | P0Kind::TraceInfo
        )
    }
}

/// An element waiting on the P0 stack.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct P0 {
    kind: P0Kind,
    /// A genuine P0 element: committed and cancelled by count.
    is_p0: bool,
    root: PacketType,
    index: u64,
    addr: u64,
    addr_is: u8,
    ctxt: PktContext,
    atom_bits: u32,
    atom_count: u8,
    excep_num: u16,
    prev_same: bool,
    /// Cycle count (Cc, TsCc), event number (Event), instruction count (Q).
    value: u32,
    q_has_addr: bool,
    /// Sequence number of the oldest unresolved P0 unit of this element.
    seq: u64,
    /// Atoms flipped by a Mispredict (bit i: atom i, oldest first).
    mispredicted: u32,
}

// Only to fill the unused slots of the stack's ring.
impl Default for P0 {
    fn default() -> P0 {
        P0::new(P0Kind::Atom, false, PacketType::Ignore, 0)
    }
}

impl P0 {
    fn new(kind: P0Kind, is_p0: bool, root: PacketType, index: u64) -> P0 {
        P0 {
            kind,
            is_p0,
            root,
            index,
            addr: 0,
            addr_is: 0,
            ctxt: PktContext::default(),
            atom_bits: 0,
            atom_count: 0,
            excep_num: 0,
            prev_same: false,
            value: 0,
            q_has_addr: false,
            seq: 0,
            mispredicted: 0,
        }
    }

    /// P0 units (speculative elements) this entry still holds.
    fn units(&self) -> u32 {
        match (self.is_p0, self.kind) {
            (false, _) => 0,
            (true, P0Kind::Atom) => self.atom_count as u32,
            (true, _) => 1,
        }
    }

    fn spec_kind(&self, unit: u32) -> SpecKind {
        match self.kind {
            // As traced: a mispredict flipped the atom after it was traced.
            P0Kind::Atom => SpecKind::Atom { executed: ((self.atom_bits ^ self.mispredicted) >> unit) & 1 == 1 },
            P0Kind::Excep => SpecKind::Exception,
            P0Kind::ExcepRet => SpecKind::ExceptionReturn,
            P0Kind::FuncRet => SpecKind::FunctionReturn,
            P0Kind::Q => SpecKind::Q,
            P0Kind::SrcAddr => SpecKind::SourceAddress,
            P0Kind::TransStart => SpecKind::TransactionStart,
            _ => SpecKind::Unseen,
        }
    }

    /// Take the oldest atom: true for E.
    fn commit_oldest(&mut self) -> bool {
        let e = self.atom_bits & 1 == 1;
        self.atom_count -= 1;
        self.atom_bits >>= 1;
        self.mispredicted >>= 1;
        self.seq += 1;
        e
    }

    fn cancel_newest(&mut self, n: u32) -> u32 {
        let k = n.min(self.atom_count as u32);
        self.atom_count -= k as u8;
        k
    }

    fn mispredict_newest(&mut self) {
        if self.atom_count > 0 {
            self.atom_bits ^= 1 << (self.atom_count - 1);
            self.mispredicted ^= 1 << (self.atom_count - 1);
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ElemRes {
    commit: i64,
    cancel: i64,
    mispredict: bool,
    discard: bool,
}

impl ElemRes {
    // Asked after nearly every packet, and nearly always false: one test
    // of the fields together, not four branches.
    #[inline(always)]
    fn any(&self) -> bool {
        ((self.commit | self.cancel) != 0) | self.mispredict | self.discard
    }
}

/// Where the instruction walk is.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct Walk {
    addr: u64,
    isa: Isa,
    /// The last instruction decoded.
    last: InstrInfo,
    it: ItState,
}

/// Result of walking to the next waypoint.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum WpRes {
    Found,
    Nacc,
}

#[derive(Clone, Copy, Debug)]
struct Range {
    start: u64,
    end: u64,
    count: u32,
}

/// Entries of the walk cache (a power of two), in sets of two: a walk may
/// sit in either entry of the set its start address picks. Direct-mapped,
/// as before, the walks of a repeated 64 KiB trace (juno_r1_1) still missed
/// one time in nine on collisions.
const WALK_CACHE: usize = 8192;

/// Entries of the cache of walks to a given address (exceptions walk to
/// their return address), a power of two, direct-mapped. A few in unit
/// tests, so that walks meet in their slots there.
const TO_WALK_CACHE: usize = if cfg!(test) { 4 } else { 4096 };

/// Entries of the atom memo (a power of two), in sets of two as the walk
/// cache's. Direct-mapped, a repeated 64 KiB trace (juno_r1_1) missed one
/// atom packet in ten on collisions, each miss a walk atom by atom and a
/// new entry.
const ATOM_MEMO: usize = 8192;

/// Calls a remembered atom packet can replay (see [`AtomMemo`]). With two,
/// 001-ack_test's packets of three calls (its recursion) were walked every
/// time: 12,610 of the 13,150 packets of 2 MiB that missed.
const MEMO_CALLS: usize = 4;

/// What committing one atom packet did in a run that only counts, from a
/// walk state with nothing pending (no context or address needed, no return
/// stack pop due): where the walk ended and what it counted. It depends only
/// on the image, the walk's start (address, ISA, memory space) and the atoms,
/// as a cached walk does, so a packet met again at the same place is replayed
/// from here instead of walking atom by atom.
///
/// Only what can be replayed exactly is remembered: no walk that starts or
/// ends inside a T32 IT block (the key does not hold the IT state), no error
/// or message, no more than [`MEMO_CALLS`]
/// calls pushed on the return stack, each in the key's instruction set and
/// within 2 GiB of the walk's start (the entry keeps their distances from
/// it only), no more ranges or instructions than
/// its fields hold, an inaccessible address only where its walk covered
/// nothing (otherwise the range's last instruction would be whatever the
/// walk before left), and an indirect branch taken (with its ETE exception
/// return) only as the packet's last walk: with the return stack on, an
/// atom after it pops the stack, whose contents are not in the key.
///
/// An entry fills one cache line, aligned: a replay reads the line of the
/// newer entry of its set from the table (half a megabyte, beyond the
/// first-level cache), and the older's only when the newer is another
/// packet's; the 88-byte entries before straddled two lines, and those
/// misses were a third of a replay's time on juno_r1_1.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct AtomMemo {
    /// Key: walk address, atoms (count 0: empty entry), ISA, memory space.
    addr: u64,
    end_addr: u64,
    /// The last instruction walked, when any range was.
    last: Option<InstrInfo>,
    /// Return addresses pushed, in order, each in the key's ISA (the only
    /// ones remembered), as distances from `addr` ([`call_at`]).
    pushed: [i32; MEMO_CALLS],
    bits: u32,
    instructions: u32,
    count: u8,
    isa: Isa,
    space: u8,
    /// How the walk ended when an address is needed next: on an
    /// inaccessible address (counted) or an indirect branch taken.
    end: MemoEnd,
    end_isa: Isa,
    calls: u8,
    /// The next walk must start at `end_addr` (a branch not taken last).
    check: bool,
    ranges: u8,
}

const _: () = assert!(std::mem::size_of::<AtomMemo>() == 64);

/// What holds for a run of packets the decoder takes in steps
/// ([`Etm4Decoder::run_begin`]).
#[derive(Clone, Copy, Debug)]
pub struct PacketRun {
    /// Atom packets may be replayed from the atom memo.
    replays: bool,
    /// Some were: their counts are sent at the end.
    replayed: bool,
    /// The run counts elements (a summary): cycle counts may be taken.
    counts: bool,
    /// A cycle count was taken and waits for an atom packet: its count,
    /// packet type and index. (Not an `Option`: asked for every atom
    /// packet, it cost a store each.)
    cc_waits: bool,
    cc: (u32, PacketType, u64),
    /// Elements were built (cycle counts): sent at the end.
    emitted: bool,
    /// The memory space (of the context, which a run cannot change).
    space: u8,
    /// The decoder's [`Unmapped`] gap when it is of this space.
    unmapped: Gap,
}

impl Default for PacketRun {
    fn default() -> PacketRun {
        PacketRun {
            replays: false,
            replayed: false,
            counts: false,
            cc_waits: false,
            cc: (0, PacketType::CycleCountF3, 0),
            emitted: false,
            space: 0,
            unmapped: Gap::default(),
        }
    }
}

/// The two entries a key may sit in, the newer first, on two lines that
/// the processor fetches as a pair (128 bytes, aligned).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(128))]
struct MemoSet([AtomMemo; 2]);

const MEMO_SETS: usize = ATOM_MEMO / 2;

/// Entries of the sequence memo (a power of two), direct-mapped.
const SEQ_MEMO: usize = 4096;

/// Calls a remembered sequence can replay: with sixteen an entry fills two
/// cache lines, the second read only for a sequence that calls.
const SEQ_CALLS: usize = 16;

/// What a sequence of consecutive atom packets did in a run that only
/// counts, each of them replayed from the atom memo: the sum of their
/// entries ([`AtomMemo`]), so that the next time the same header bytes come
/// at the same walk start they are replayed at once. One lookup and one
/// replay instead of one per packet: on 001-ack_test half of the bytes are
/// atom packets, most in rows of two or more, and the per-packet lookup and
/// replay were the larger part of an index build.
///
/// A sequence is remembered only when every packet but the last left the
/// walk ready for the next ([`MemoEnd::Walk`]): an address needed or a
/// return stack pop due would make the next packet depend on more than the
/// key. The last packet's entry gives the sequence's end.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct SeqMemo {
    /// Key: walk address, header bytes (the first packet's in the low byte,
    /// those above the last 0), packets (0: empty entry), ISA, memory
    /// space.
    addr: u64,
    headers: u64,
    end_addr: u64,
    instructions: u32,
    /// Atoms of all the packets.
    atoms: u16,
    ranges: u16,
    packets: u8,
    isa: Isa,
    space: u8,
    end: MemoEnd,
    end_isa: Isa,
    calls: u8,
    check: bool,
    /// The last packet met an inaccessible address where its walk started.
    unmapped: bool,
    /// The last instruction walked, when any range was.
    last: Option<InstrInfo>,
    /// Return addresses pushed, in order, in the key's ISA, as distances
    /// from `addr` ([`call_at`]).
    pushed: [i32; SEQ_CALLS],
}

const _: () = assert!(std::mem::size_of::<SeqMemo>() == 128);

impl SeqMemo {
    const EMPTY: SeqMemo = SeqMemo {
        addr: 0,
        headers: 0,
        end_addr: 0,
        instructions: 0,
        atoms: 0,
        ranges: 0,
        packets: 0,
        isa: Isa::A64,
        space: 0,
        end: MemoEnd::Walk,
        end_isa: Isa::A64,
        calls: 0,
        check: false,
        unmapped: false,
        last: None,
        pushed: [0; SEQ_CALLS],
    };

    /// The entry a row of atom packets at `addr` may find: by its first
    /// two header bytes (a row has two packets or more).
    #[inline(always)]
    fn slot(addr: u64, headers: u64) -> usize {
        // Bit 1 folded in, as T32 walks start on any halfword.
        let h = (addr >> 2) ^ (addr >> 13) ^ ((addr & 2) << 9) ^ ((headers & 0xffff).wrapping_mul(0x9e37_79b9) >> 12);
        h as usize & (SEQ_MEMO - 1)
    }
}

/// The return address a memo entry keeps as `offset` from its walk start
/// `addr` (the entry is made only where the distance fits).
#[inline(always)]
fn call_at(addr: u64, offset: i32) -> u64 {
    addr.wrapping_add(offset as i64 as u64)
}

/// `call` as a distance from `addr` for [`call_at`], if it is within 2 GiB.
fn call_offset(addr: u64, call: u64) -> Option<i32> {
    i32::try_from(call.wrapping_sub(addr) as i64).ok()
}

/// While a run offers one by one the atom packets of a row the sequence
/// memo did not have: the entry being summed up (its `packets` those noted
/// so far, its `headers` the whole row's).
#[derive(Clone, Copy, Debug)]
struct SeqRecord {
    /// Packets still to come (0: nothing recorded).
    left: u8,
    slot: usize,
    memo: SeqMemo,
}

impl Default for SeqRecord {
    fn default() -> SeqRecord {
        SeqRecord { left: 0, slot: 0, memo: SeqMemo::EMPTY }
    }
}

impl AtomMemo {
    /// Whether this entry is remembered under `key`'s key. (A method, not
    /// a closure: as a closure it was sometimes left out of line, a call
    /// per entry looked at.)
    #[inline(always)]
    fn same_key(&self, key: &AtomMemo) -> bool {
        self.count == key.count && self.addr == key.addr && self.bits == key.bits && self.isa == key.isa && self.space == key.space
    }

    const EMPTY: AtomMemo = AtomMemo {
        addr: 0,
        bits: 0,
        count: 0,
        isa: Isa::A64,
        space: 0,
        end: MemoEnd::Walk,
        end_isa: Isa::A64,
        calls: 0,
        check: false,
        ranges: 0,
        instructions: 0,
        end_addr: 0,
        last: None,
        pushed: [0; MEMO_CALLS],
    };

    /// The set a key may sit in.
    fn set(addr: u64, bits: u32, count: u8) -> usize {
        let h = (addr >> 2) ^ (addr >> 13) ^ ((addr & 2) << 9) ^ (bits as u64).wrapping_mul(0x9e37_79b9) ^ ((count as u64) << 7);
        h as usize & (MEMO_SETS - 1)
    }
}

/// Ask for the cache line of `m` ahead of its use (a hint only; nothing
/// on targets without a stable prefetch).
#[inline(always)]
fn prefetch<T>(m: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch reads nothing into the program and cannot
        // fault; `m` is a live reference besides.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((m as *const T).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = m;
}

/// How a remembered atom packet left the walk (see [`AtomMemo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum MemoEnd {
    /// At the next instruction to walk.
    #[default]
    Walk,
    /// On an inaccessible address.
    Nacc,
    /// After an indirect branch taken; `true`: an ETE exception return.
    Indirect(bool),
}

/// While `commit_atoms_now` records an [`AtomMemo`]: what the walk did that
/// the memo must replay or that forbids one.
#[derive(Clone, Copy, Debug, Default)]
struct MemoWatch {
    /// Recording (the packet started with nothing pending).
    on: bool,
    /// Something happened that a memo cannot replay.
    spoiled: bool,
    /// An indirect branch was taken (a further atom would pop the return
    /// stack, and spoil the memo).
    indirect: Option<bool>,
    calls: u8,
    pushed: [(u64, Isa); MEMO_CALLS],
}

impl MemoWatch {
    #[cold]
    fn call(&mut self, addr: u64, isa: Isa) {
        match self.pushed.get_mut(self.calls as usize) {
            Some(p) if self.on => {
                *p = (addr, isa);
                self.calls += 1;
            }
            _ => self.spoiled = true,
        }
    }
}

/// The memory space of each security state (as [`Security`]'s order) at
/// EL0-EL3, and at any larger EL a loaded state could hold (column 4).
const SPACES: [[MemSpace; 5]; 4] = {
    use MemSpace as M;
    [
        [M::EL1S, M::EL1S, M::EL2S, M::EL3, M::EL1S],
        [M::EL1N, M::EL1N, M::EL2, M::EL1N, M::EL1N],
        [M::ROOT; 5],
        [M::EL1R, M::EL1R, M::EL2R, M::R, M::R],
    ]
};

/// A remembered walk from `start` to the next waypoint.
#[derive(Clone, Copy, Debug)]
struct WalkCacheEntry {
    valid: bool,
    start: u64,
    isa: Isa,
    space: u8,
    end: u64,
    count: u32,
    res: WpRes,
    /// The last instruction decoded (none when the first read failed).
    last: Option<InstrInfo>,
}

/// A walk from `start` that met `to` (the walk's `Found`), with the last
/// instruction it decoded.
#[derive(Clone, Copy)]
struct ToWalkEntry {
    start: u64,
    to: u64,
    isa: Isa,
    space: u8,
    count: u32,
    last: InstrInfo,
}

/// The decoder for one trace source.
///
/// Its decode state serializes ([`Decoder::save_state`]) so that an index
/// can restart decoding exactly; configuration, image and caches are supplied
/// again on load.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Etm4Decoder {
    #[serde(skip, default = "Etm4Config::unset")]
    cfg: Etm4Config,
    opts: DecoderOptions,
    #[serde(skip)]
    image: Arc<MemoryImage>,
    #[serde(skip)]
    idec: DecodeOptions,
    core: DecoderCore,
    state: State,
    stack: Ring<P0>,
    res: ElemRes,
    /// Elements built for the current step, sent together.
    out: Vec<Element>,
    last_is: u8,
    need_ctxt: bool,
    need_addr: bool,
    elem_pending_addr: bool,
    is_64bit: bool,
    context: PeContext,
    prev_overflow: bool,
    max_spec: i64,
    spec_depth: i64,
    walk: Walk,
    rs: ReturnStack,
    unsync_reason: UnsyncReason,
    unsync_index: Option<u64>,
    ete_first_ts_marker: bool,
    next_range_check: Option<u64>,
    /// Elements of the ISA last set by a context (persistent element data).
    elem_isa: Isa,
    /// Next P0 sequence number (speculation view).
    next_seq: u64,
    /// First P0 sequence number committed inside the open transaction.
    tx_first_seq: Option<u64>,
    /// Last P0 sequence number committed.
    last_committed_seq: Option<u64>,
    /// Empty until the first walk is kept ([`empty_walk_cache`]): a
    /// decoder is made for every source of a plan, again for every resumed
    /// state and for every part of a build, and most never walk, or walk
    /// little, before they go.
    #[serde(skip)]
    walk_cache: Box<[WalkCacheEntry]>,
    /// Empty until the first walk to an address is kept, as `walk_cache`.
    #[serde(skip)]
    to_walk_cache: Box<[Option<ToWalkEntry>]>,
    /// Set while `commit_atoms_now` walks its atoms in a run that only
    /// counts: the ranges, inaccessible addresses and exception returns
    /// made there are counted in `held` instead of being built into `out`.
    /// Nothing there changes an element once made (only a cycle count does,
    /// and none is made there).
    #[serde(skip)]
    count_now: bool,
    /// Elements counted but not yet sent: like those in `out`, they are
    /// sent by `send` and dropped by a reset (an error in the middle of an
    /// atom packet drops the ranges of the atoms before it).
    #[serde(skip)]
    held: Held,
    /// Made at the first packet worth remembering: a decoder made to list a
    /// few elements (a seek) never needs it.
    #[serde(skip)]
    atom_memo: Option<Box<[MemoSet; MEMO_SETS]>>,
    #[serde(skip)]
    memo_watch: MemoWatch,
    /// Atom packets replayed from the memo (for tests and profiles).
    #[serde(skip)]
    memo_hits: u64,
    /// Made, as the atom memo, at the first sequence worth remembering.
    #[serde(skip)]
    seq_memo: Option<Box<[SeqMemo; SEQ_MEMO]>>,
    #[serde(skip)]
    seq_record: SeqRecord,
    /// Sequences replayed from the sequence memo (for tests and profiles).
    #[serde(skip)]
    seq_hits: u64,
    /// Addresses the image does not map, learnt from the last atom packet
    /// that was replayed to an inaccessible address at its start.
    #[serde(skip)]
    unmapped: Unmapped,
}

/// A gap of the image, in memory space `space`: see [`Gap`].
#[derive(Clone, Copy, Debug, Default)]
struct Unmapped {
    gap: Gap,
    space: u8,
}

/// Addresses `lo` to `lo + span - 1` that no region of the image maps (empty
/// when `span` is 0). An atom packet whose walk starts there only meets an
/// inaccessible address: what the atom memo would replay for it is known
/// without looking there, and on juno_r1_1 most replays were those, each a
/// read beyond the first-level cache. (Two words with no padding: a run
/// copies it when it begins, and a copy of [`Unmapped`] with its padding
/// bytes was two overlapping stores read back as one, a store-forwarding
/// stall at every run's start: 8% of the run's `perf` samples on juno_r1_1.)
#[derive(Clone, Copy, Debug, Default)]
struct Gap {
    lo: u64,
    span: u64,
}

impl Gap {
    #[inline(always)]
    fn holds(&self, addr: u64) -> bool {
        addr.wrapping_sub(self.lo) < self.span
    }
}

/// See [`Etm4Decoder::held`].
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    /// The atom packet's (a batch's index).
    index: u64,
    ranges: u64,
    instructions: u64,
    nacc: u64,
    eret: u64,
}

impl Held {
    /// Whether a batch is held (elements of any kind counted).
    #[inline(always)]
    fn any(&self) -> bool {
        self.ranges | self.nacc | self.eret != 0
    }
}

/// The walk cache a decoder allocates when it keeps its first walk. Its
/// 320 KiB (and the 160 KiB of the cache of walks to an address) were
/// written when each decoder was made: on juno_r1_1, whose plan has six
/// sources, nine in ten of the fresh pages a summary of 2 MiB touched, and
/// a seek in the viewer made them twice per source (the runner's decoders,
/// then the loaded ones).
fn empty_walk_cache() -> Box<[WalkCacheEntry]> {
    vec![
        WalkCacheEntry { valid: false, start: 0, isa: Isa::A64, space: 0, end: 0, count: 0, res: WpRes::Nacc, last: None };
        WALK_CACHE
    ]
    .into_boxed_slice()
}

// The sizes the comment above gives (with 8192 and 4096 entries).
const _: () = assert!(std::mem::size_of::<WalkCacheEntry>() == 40 && std::mem::size_of::<Option<ToWalkEntry>>() == 40);

fn empty_to_walk_cache() -> Box<[Option<ToWalkEntry>]> {
    vec![None; TO_WALK_CACHE].into_boxed_slice()
}

fn calc_isa(is_64bit: bool, is: u8) -> Isa {
    if is_64bit {
        Isa::A64
    } else if is == 1 {
        Isa::T32
    } else {
        Isa::A32
    }
}

impl Decoder for Etm4Decoder {
    type Config = Etm4Config;
    type Packet = Packet;
    const TAG: &'static str = "DCD_ETMV4";
    const STATE: &'static str = "decoder";
    const RESYNC: &'static str = "A-sync and Trace Info";

    fn create(cfg: &Etm4Config, image: Arc<MemoryImage>, opts: DecoderOptions) -> Etm4Decoder {
        Etm4Decoder::new(cfg, image, opts)
    }

    fn core(&self) -> &DecoderCore {
        &self.core
    }

    fn core_mut(&mut self) -> &mut DecoderCore {
        &mut self.core
    }

    fn packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Packet, sink: &mut F) {
        self.take_packet(pkt, sink);
    }

    fn finish<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        self.end_of_trace(sink);
    }

    fn restart(&mut self, why: UnsyncReason) {
        self.reset_state();
        self.state = State::NoSync;
        self.unsync_reason = why;
    }

    fn restore(&mut self, cfg: &Etm4Config, image: Arc<MemoryImage>) {
        let fresh = Etm4Decoder::new(cfg, image, self.opts);
        self.cfg = fresh.cfg;
        self.image = fresh.image;
        self.idec = fresh.idec;
        self.unmapped = Unmapped::default();
    }

    /// The bounds a loaded state must meet (see [`crate::protocol::check_state`]):
    /// resolution counts are never negative and cannot exceed what the
    /// element stack and the speculation depth allow (the architecture's
    /// maximum depth is below 2^32, IHI 0064 TRCIDR8.MAXSPEC), and the return
    /// stack's index and fill stay within its 16 entries.
    fn check(&self) -> Result<(), ProtocolError> {
        let depth_max = u32::MAX as i64;
        let [rs_index, rs_fill] = self.rs.bounds();
        crate::protocol::check_state(
            "ETMv4 decoder",
            &[
                ((0..=depth_max).contains(&self.max_spec), "maximum speculation depth"),
                // The depth counts P0 elements that may since have left the
                // element stack, so only the architecture bounds it from
                // above. It goes below zero when a cancel or commit resolves
                // elements it never counted: an exception counts only once its
                // address packet arrives, so exceptions without addresses
                // queue uncounted elements. OpenCSD's `m_curr_spec_depth` is a
                // signed int that does the same and the listing follows it,
                // so it is kept, not clamped. Each element resolved was
                // queued by a trace byte, so no trace gets near -2^62, and
                // arithmetic with MAXSPEC cannot overflow above it.
                ((-(1i64 << 62)..=depth_max).contains(&self.spec_depth), "speculation depth"),
                ((0..=depth_max).contains(&self.res.commit), "commit count"),
                ((0..=depth_max).contains(&self.res.cancel), "cancel count"),
                rs_index,
                rs_fill,
                (self.stack.iter().all(|p| p.atom_count <= 32), "atom count of a stacked element"),
                // The decoder never queues more (see MAX_QUEUED; a Trace Info
                // adds its speculation depth, at most 2^16, and two more).
                (self.stack.len() <= MAX_QUEUED + 3, "queued elements"),
            ],
        )
    }

    /// The speculative elements still on the stack are lost (each reported
    /// so in the speculation view).
    fn drop_held<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) -> Option<usize> {
        let dropped = self.stack.len();
        let at = Some(self.core.index_curr);
        self.spec_drain(sink, SpecState::LostToError, at);
        Some(dropped)
    }
}

impl Etm4Decoder {
    pub fn new(cfg: &Etm4Config, image: Arc<MemoryImage>, opts: DecoderOptions) -> Etm4Decoder {
        let idec = DecodeOptions {
            arch: cfg.arch,
            m_profile: cfg.profile == CoreProfile::Microcontroller,
            wfi_wfe_branch: cfg.wfi_wfe_branch(),
            dsb_dmb_waypoints: false,
            aa64_opcode_check: opts.aa64_opcode_check,
            track_it_block: true,
        };
        let mut d = Etm4Decoder {
            cfg: cfg.clone(),
            opts,
            image,
            idec,
            core: DecoderCore::new(cfg.trace_id()),
            state: State::NoSync,
            stack: Ring::with_capacity(64),
            res: ElemRes::default(),
            out: Vec::with_capacity(8),
            last_is: 0,
            need_ctxt: true,
            need_addr: true,
            elem_pending_addr: false,
            is_64bit: false,
            context: PeContext::default(),
            prev_overflow: false,
            max_spec: cfg.max_spec_depth() as i64,
            spec_depth: 0,
            walk: Walk { addr: 0, isa: Isa::A32, last: InstrInfo::default(), it: ItState::new() },
            rs: ReturnStack::new(false),
            unsync_reason: UnsyncReason::InitDecoder,
            unsync_index: None,
            ete_first_ts_marker: false,
            next_range_check: None,
            elem_isa: Isa::A32,
            next_seq: 0,
            tx_first_seq: None,
            last_committed_seq: None,
            walk_cache: Box::default(),
            to_walk_cache: Box::default(),
            count_now: false,
            held: Held::default(),
            atom_memo: None,
            memo_watch: MemoWatch::default(),
            memo_hits: 0,
            seq_memo: None,
            seq_record: SeqRecord::default(),
            seq_hits: 0,
            unmapped: Unmapped::default(),
        };
        d.reset_state();
        d.unsync_reason = UnsyncReason::InitDecoder;
        d
    }

    fn reset_state(&mut self) {
        self.spec_depth = 0;
        self.need_ctxt = true;
        self.need_addr = true;
        self.elem_pending_addr = false;
        self.prev_overflow = false;
        self.res = ElemRes::default();
        self.stack.clear();
        self.unsync_reason = UnsyncReason::ResetDecoder;
        self.unsync_index = None;
        self.ete_first_ts_marker = false;
        self.next_range_check = None;
        self.out.clear();
        self.held = Held::default();
        self.rs = ReturnStack::new(self.cfg.return_stack());
    }

    // ---- output ----------------------------------------------------------

    fn add(&mut self, index: u64, kind: ElementKind) {
        if self.count_now {
            match kind {
                ElementKind::AddrNotAccessible { .. } => return self.held.nacc += 1,
                ElementKind::ExceptionReturn => return self.held.eret += 1,
                _ => {}
            }
        }
        self.out.push(Element {
            index,
            trace_id: self.core.trace_id,
            kind,
            isa: self.elem_isa,
            cycle_count: None,
            time: Time::default(),
        });
    }

    /// Hand the pending elements over, stamping each with its time context.
    fn send<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        if let Some(c) = self.core.counted.as_deref_mut() {
            let h = std::mem::take(&mut self.held);
            c.kinds[crate::element::KIND_INSTR_RANGE] += h.ranges;
            c.range_instructions += h.instructions;
            c.kinds[crate::element::KIND_ADDR_NACC] += h.nacc;
            c.kinds[crate::element::KIND_EXCEPTION_RETURN] += h.eret;
        }
        // In place: an element is written once, where `add` built it.
        for e in self.out.iter_mut() {
            self.core.deliver(e, sink);
        }
        self.out.clear();
        // Held elements come after those in `out`: `out` can hold what the
        // atom loop of `commit_atoms_now` found queued before it (a trace
        // on, a cycle count), and that loop makes held kinds only.
        if self.held.any() {
            self.send_batch(sink);
        }
    }

    // Out of line: a summary never gets here, and inlined it made `send`
    // too big to inline into the atom loop.
    #[inline(never)]
    fn send_batch<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        let h = std::mem::take(&mut self.held);
        let b = ElementBatch {
            trace_id: self.core.trace_id,
            index: h.index,
            time: self.core.time,
            ranges: h.ranges,
            instructions: h.instructions,
            addr_not_accessible: h.nacc,
            exception_returns: h.eret,
        };
        sink(DecoderOutput::Batch(&b));
    }

    fn log<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, err: DecodeError, index: Option<u64>, text: &str) {
        self.core.log(sink, Self::TAG, err, index, text);
    }

    // ---- packet entry -----------------------------------------------------

    /// [`Decoder::packet`].
    fn take_packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Packet, sink: &mut F) {
        // Only the first chunk of unsynchronised bytes reaches the decoder.
        if pkt.ptype == PacketType::NotSync && !pkt.first_not_sync {
            return;
        }
        self.core.index_curr = pkt.index;
        // Nearly every packet arrives in the Decode state and leaves it so:
        // that case is kept small, the rest is taken out of line.
        if self.state == State::Decode {
            // Atoms and addresses, nine packets in ten of most captures, are
            // mostly taken at once (atoms committed or idle, addresses
            // applied): that is tried here, without the frame of the full
            // match. When it fails the full match asks again for atoms, and
            // queues addresses.
            use PacketType as P;
            match pkt.ptype {
                P::AtomF1 | P::AtomF2 | P::AtomF3 | P::AtomF4 | P::AtomF5 | P::AtomF6 => {
                    if self.commit_idle_atoms(pkt) || self.replay_atoms(pkt, sink) {
                        return;
                    }
                    if self.stack.len() <= PLAIN_QUEUE && self.commit_atoms_now(pkt, sink) {
                        if self.state != State::Resolve || self.core.fatal {
                            return;
                        }
                        return self.take_packet_slow(pkt, sink);
                    }
                }
                P::AddrMatch | P::AddrL32Is0 | P::AddrL32Is1 | P::AddrL64Is0 | P::AddrL64Is1 | P::AddrShortIs0 | P::AddrShortIs1 => {
                    self.last_is = pkt.addr.isa;
                    if self.addr_now(pkt) {
                        return;
                    }
                }
                _ => {}
            }
            self.decode_packet(pkt, sink);
            if self.state != State::Resolve || self.core.fatal {
                return;
            }
        }
        self.take_packet_slow(pkt, sink);
    }

    /// Hand over the batch that replayed atom packets keep open in a run
    /// that merges batches ([`DecoderCore::merge_batches`]): before anything
    /// else is handed over or changes the time (at the start of the paths
    /// `take_packet` takes when a packet is not taken at once), and at the
    /// end of each block (the session asks). The packets that add to it
    /// (replayed) and those between them that hand nothing over (idle
    /// atoms, addresses taken at once) do not change the time, so the batch
    /// is the one the run would have merged from a batch per packet.
    #[inline(always)]
    pub fn flush_batch<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        if self.held.any() {
            self.send_batch(sink);
        }
    }

    #[inline(never)]
    fn take_packet_slow<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Packet, sink: &mut F) {
        self.flush_batch(sink);
        loop {
            match self.state {
                State::NoSync => {
                    self.out.clear();
                    self.add(self.core.index_curr, ElementKind::NoSync(self.unsync_reason));
                    self.send(sink);
                    self.state = State::WaitSync;
                }
                State::WaitSync => {
                    if pkt.ptype == PacketType::Async {
                        self.state = State::WaitTraceInfo;
                    }
                    return;
                }
                State::WaitTraceInfo => {
                    self.need_ctxt = true;
                    self.need_addr = true;
                    if pkt.ptype == PacketType::TraceInfo {
                        self.do_trace_info(pkt);
                        self.state = State::Decode;
                        self.rs.flush();
                    } else if self.cfg.major_version() >= 5 && pkt.ptype == PacketType::Event {
                        self.decode_packet(pkt, sink);
                    }
                    return;
                }
                State::Decode => {
                    self.decode_packet(pkt, sink);
                    // (A failed commit_atoms_now is as fatal as a failed resolve.)
                    if self.state != State::Resolve || self.core.fatal {
                        return;
                    }
                }
                State::Resolve => {
                    // A discard or overflow leaves the decoder unsynchronised: the
                    // next turn reports it against this packet.
                    if self.resolve(sink) {
                        return;
                    }
                }
            }
        }
    }

    /// [`Decoder::finish`]: flush what can be, then the end-of-trace element.
    fn end_of_trace<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        self.flush_batch(sink);
        self.out.clear();
        self.spec_drain(sink, SpecState::Unresolved, None);
        while let Some(e) = self.stack.front().copied() {
            match e.kind {
                P0Kind::TraceOn | P0Kind::Atom | P0Kind::Excep | P0Kind::ExcepRet | P0Kind::Q | P0Kind::UnseenUncommitted => {
                    self.stack.clear();
                    break;
                }
                P0Kind::TransStart if self.cfg.tstart_is_p0() => {
                    self.stack.clear();
                    break;
                }
                P0Kind::TransFail | P0Kind::TransCommit if self.max_spec == 0 || self.spec_depth == 0 => {
                    self.process_trans(&e);
                    if e.kind == P0Kind::TransFail {
                        self.transaction_failed(sink, e.index);
                    }
                }
                P0Kind::Event | P0Kind::Ts | P0Kind::Cc | P0Kind::TsCc => self.process_ts_cc_event(&e),
                P0Kind::Marker => self.process_marker(&e),
                P0Kind::Ite => self.process_ite(&e),
                _ => {}
            }
            self.stack.pop_front();
        }
        let reason = if self.prev_overflow { UnsyncReason::Overflow } else { UnsyncReason::EndOfTrace };
        self.add(self.core.index_curr, ElementKind::EndOfTrace(reason));
        self.send(sink);
    }

    fn do_trace_info(&mut self, pkt: &Packet) {
        let ti = &pkt.trace_info;
        self.spec_depth = ti.spec_depth as i64;
        for _ in 0..ti.spec_depth.min(1 << 16) {
            let mut e = P0::new(P0Kind::UnseenUncommitted, true, pkt.ptype, pkt.index);
            e.seq = self.next_seq;
            self.next_seq += 1;
            self.stack.push_back(e);
        }
        // Through `push`, numbered as every entry (the next P0 number, not
        // taken): a saved state holds the number as a counter, which the
        // parallel index build shifts from a decode started part way
        // through to the one from the start; a 0 here became that shift.
        self.push(P0Kind::TraceInfo, false, pkt);
        if ti.in_transaction() {
            self.push(P0Kind::TransTraceInit, false, pkt);
        }
    }

    // Inlined: nearly every packet pushes, and as a call its frame cost
    // about as much as the push.
    #[inline(always)]
    fn push(&mut self, kind: P0Kind, is_p0: bool, pkt: &Packet) -> &mut P0 {
        let mut e = P0::new(kind, is_p0, pkt.ptype, pkt.index);
        e.seq = self.next_seq;
        if is_p0 && kind != P0Kind::Atom {
            self.next_seq += 1;
        }
        self.stack.push_back(e)
    }

    /// Atoms take one sequence number each.
    #[inline(always)]
    fn push_atoms(&mut self, pkt: &Packet) {
        let e = self.push(P0Kind::Atom, true, pkt);
        e.atom_bits = pkt.atom_bits;
        e.atom_count = pkt.atom_count;
        self.next_seq += pkt.atom_count as u64;
        self.spec_depth += pkt.atom_count as i64;
    }

    /// Commit a packet of atoms at once when that can change nothing but the
    /// P0 sequence numbers; false (nothing done) otherwise. With no
    /// speculation window (MAXSPEC 0) each atom commits as soon as it is
    /// traced, and while the decoder waits for an address or a context (after
    /// an inaccessible address, say) a committed atom walks no code. On an
    /// empty element stack with no return-stack pop pending, queueing the
    /// atoms and resolving them again would only advance the numbers; on
    /// captures that mostly run where the image has no code (juno_r1_1) this
    /// is a third of the atom packets. The speculation view records each
    /// atom's fate, so it takes the long way, unless it reports only the
    /// atoms that did not commit ([`DecoderOptions::spec_losses_only`]).
    #[inline]
    fn commit_idle_atoms(&mut self, pkt: &Packet) -> bool {
        let idle = self.max_spec == 0
            && self.spec_depth == 0
            && (self.need_addr || self.need_ctxt)
            && self.stack.is_empty()
            && !self.rs.pop_pending
            && !self.res.any()
            && self.quiet_commit()
            && pkt.atom_count > 0;
        if idle {
            self.commit_idle(pkt.atom_count);
        }
        idle
    }

    /// What committing `count` atoms while idle does.
    #[inline(always)]
    fn commit_idle(&mut self, count: u8) {
        self.next_seq += count as u64;
        self.last_committed_seq = Some(self.next_seq - 1);
    }

    /// Whether the stack holds only elements an atom packet commits at
    /// once, before its atoms ([`Etm4Decoder::send_plain_queue`]): no P0
    /// element, nothing that resolves (timestamps, contexts, addresses...,
    /// [`P0Kind::is_plain`]), and shortcuts are allowed.
    #[inline(always)]
    fn plain_queue(&self) -> bool {
        self.queue_only(P0Kind::is_plain)
    }

    /// Whether shortcuts are allowed and the stack holds at most
    /// [`PLAIN_QUEUE`] elements, none P0, all of kinds `kind` accepts.
    #[inline(always)]
    fn queue_only(&self, kind: impl Fn(P0Kind) -> bool) -> bool {
        self.stack.len() <= PLAIN_QUEUE && !self.opts.long_way && self.stack.iter().all(|q| !q.is_p0 && kind(q.kind))
    }

    /// A run begins with elements queued: true if they were sent. A run
    /// starts with an atom packet, and one by one that packet would send
    /// what is queued first (commit_atoms_now): on 001-ack_test the
    /// addresses and contexts after each exception (before runs started
    /// after a queue, 28,580 runs in 2 MiB were declined for what was
    /// queued). (Out of line: inlined into the parser's run loop, it made
    /// every packet of texit-poe2's runs dearer.)
    ///
    /// Only addresses and contexts: they are applied, or sent at once (a
    /// context change), as one by one. Trace on, cycle counts and the like
    /// wait in `out` one by one until the packet's end, after any message
    /// its walk logs; sent here they would come before it. (Addresses and
    /// contexts are plain kinds: this is [`Etm4Decoder::plain_queue`] with
    /// fewer kinds, in one pass.)
    #[inline(never)]
    fn run_after_queue<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) -> bool {
        if !self.queue_only(|k| matches!(k, P0Kind::Addr | P0Kind::Ctxt)) {
            return false;
        }
        self.send_plain_queue(sink);
        debug_assert!(self.out.is_empty());
        true
    }

    /// Commit and send what is queued, as at the front of the stack, with
    /// nothing speculative before it: what an atom packet does first.
    fn send_plain_queue<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        self.flush_batch(sink);
        self.out.clear();
        while let Some(q) = self.stack.pop_front() {
            if self.commit_plain(&q) {
                self.send(sink);
            }
        }
    }

    /// Commit a packet of atoms as it arrives when that is all it can do: no
    /// speculation window (MAXSPEC 0, as on every fixture), nothing
    /// uncommitted, no resolution pending, and queued before the atoms only
    /// elements that do not count (addresses, contexts, cycle counts,
    /// timestamps...: [`P0Kind::is_plain`], at most [`PLAIN_QUEUE`]). The
    /// steps are those of queueing the atoms and resolving them
    /// ([`Etm4Decoder::commit_elements`] over the queued elements and then
    /// the atoms, with [`Etm4Decoder::resolve`]'s sends and error handling),
    /// in the same order, without putting the atoms on the stack and without
    /// the resolve loop: 11-14% fewer instructions in the summaries of the
    /// benchmark captures. False (nothing done) when the long way is needed.
    // Out of line: inlined, its walk made the packet entry's frame larger for
    // every packet (+7% instructions on texit-poe2 in its first version).
    #[inline(never)]
    fn commit_atoms_now<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Packet, sink: &mut F) -> bool {
        let now = self.settled() && self.plain_queue() && pkt.atom_count > 0;
        if !now {
            return false;
        }
        self.send_plain_queue(sink);
        let (seq, count) = (self.next_seq, pkt.atom_count);
        self.next_seq += count as u64;
        let mut ok = true;
        self.count_now = self.core.counted.is_some() || self.core.batched;
        self.held.index = pkt.index;
        let mut record = None;
        let mut replayed = false;
        if self.count_now {
            self.pop_first(sink);
            if self.memo_ready() {
                let set = self.memo_set(pkt);
                match self.memo_find(pkt, set) {
                    (_, Some(slot)) => {
                        self.replay(slot);
                        self.last_committed_seq = Some(seq + count as u64 - 1);
                        replayed = true;
                    }
                    (key, None) => {
                        record = Some((set, key, self.held));
                        self.memo_watch = MemoWatch { on: true, ..MemoWatch::default() };
                    }
                }
            }
        }
        let mut e = P0::new(P0Kind::Atom, true, pkt.ptype, pkt.index);
        e.seq = seq;
        e.atom_bits = pkt.atom_bits;
        // A replayed packet has nothing left to walk.
        e.atom_count = if replayed { 0 } else { count };
        while e.atom_count > 0 {
            let at = Some(self.core.index_curr);
            self.spec_record(sink, &e, 0, SpecState::Committed, at);
            self.last_committed_seq = Some(e.seq);
            let taken = e.commit_oldest();
            ok = self.return_stack_pop(sink) && (self.need_ctxt || self.need_addr || self.process_atom(sink, taken, &e));
            if !ok {
                break;
            }
        }
        self.count_now = false;
        if let Some((set, key, before)) = record {
            self.memo_watch.on = false;
            if ok {
                self.remember(set, key, before);
            }
        }
        self.send(sink);
        if ok {
            return true;
        }
        // As resolve ends after a failed commit.
        if self.state == State::NoSync {
            // The error reset the decoder (nothing is left queued).
            self.res.commit = 0;
            if let Some(i) = self.unsync_index.take() {
                self.add(i, ElementKind::NoSync(self.unsync_reason));
                self.send(sink);
            }
            self.state = State::WaitSync;
        } else {
            // The atom that failed and those after it stay uncommitted.
            let left = e.atom_count as i64 + 1;
            self.res.commit = left;
            self.spec_depth = left;
            if e.atom_count > 0 {
                self.stack.push_back(e);
            }
            self.state = State::Resolve;
            self.core.fatal = true;
        }
        true
    }

    /// An atom packet that finds nothing queued, replayed from the atom memo
    /// when it is there: what `commit_atoms_now` does on a hit, without the
    /// frame of its atom loop. False (nothing done but the first atom's pop,
    /// which `commit_atoms_now` then finds done) when it is not.
    #[inline(never)]
    fn replay_atoms<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Packet, sink: &mut F) -> bool {
        let count = pkt.atom_count;
        // The set is read only after the tests below: its lines, beyond the
        // first-level cache, are asked for now (waiting on them was a third
        // of a replay's time on juno_r1_1).
        let start = self.walk.addr;
        let set = self.memo_set(pkt);
        if let Some(memo) = &self.atom_memo {
            let [a, b] = &memo[set & (MEMO_SETS - 1)].0;
            prefetch(a);
            prefetch(b);
        }
        // As `commit_atoms_now` asks, with an empty stack: it runs next
        // whenever this declines, so the pop below is never done twice.
        let now = (self.core.counted.is_some() || self.core.batched)
            && count > 0
            && self.stack.is_empty()
            && self.settled()
            && self.atom_memo.is_some();
        if !now {
            return false;
        }
        self.pop_first(sink);
        if !self.memo_ready() {
            return false;
        }
        // The pop, if any, moved the walk's start and with it the set.
        let set = if self.walk.addr == start { set } else { self.memo_set(pkt) };
        let (_, Some(slot)) = self.memo_find(pkt, set) else {
            return false;
        };
        self.out.clear();
        self.replay_packet(slot, count, pkt.index);
        if !self.core.merge_batches || self.core.counted.is_some() {
            self.send(sink);
        }
        true
    }

    /// Whether the decoder ignores every packet but an A-sync, and holds
    /// no batch of elements that the next packet would send first: after an
    /// error, until the trace synchronises again. A capture decoded with the
    /// wrong configuration (infrastructure: ETMv4 trace read as ETE) spends
    /// most of its packets there, each taken through the whole way of a
    /// packet only to be dropped.
    #[inline(always)]
    pub fn waits_for_async(&self) -> bool {
        self.state == State::WaitSync && !self.held.any()
    }

    /// Packets up to buffer index `last` went by while the decoder waited
    /// for an A-sync ([`Etm4Decoder::waits_for_async`]): as if each had
    /// been taken (which changes only the current packet's index).
    #[inline(always)]
    pub fn skipped_to(&mut self, last: u64) {
        debug_assert!(self.waits_for_async());
        self.core.index_curr = last;
    }

    /// Begin a run of atom, address and cycle count packets
    /// ([`PacketSink::run_begin`](super::parser::PacketSink::run_begin)),
    /// in a decode whose packets go nowhere: the run takes the packets that
    /// [`Etm4Decoder::take_packet`] would take at once, as it would take
    /// them, and stops before the first that needs the long way. Those are
    /// the atom packets it commits while idle
    /// ([`Etm4Decoder::commit_idle_atoms`]) or replays from the atom memo
    /// ([`Etm4Decoder::replay_atoms`]), the addresses it applies at once
    /// ([`Etm4Decoder::addr_now`]), and, where elements are only counted,
    /// the cycle counts ([`Etm4Decoder::run_cc`]). What those paths ask of
    /// the options, and of the state none of them changes (the element stack,
    /// the speculation depth, the resolution counts, the decode state, an
    /// exception waiting for its address), is asked here, once per run:
    /// per packet it was most of a replay's work. None when the run cannot
    /// take any packet. The run's first packet is an atom packet: elements
    /// queued before it that it would commit first one by one are sent to
    /// `sink` here ([`Etm4Decoder::run_after_queue`]), even when the run
    /// then takes no packet.
    #[inline(always)]
    pub fn run_begin<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) -> Option<PacketRun> {
        // A sequence being recorded ends with the run that offered it.
        self.seq_record.left = 0;
        if self.state != State::Decode || !self.settled() || !self.quiet_commit() || self.elem_pending_addr {
            return None;
        }
        if !self.stack.is_empty() && !self.run_after_queue(sink) {
            return None;
        }
        // Replayed packets send their counts once, at the end of the run:
        // as a replay per packet would where the run counts (nothing reads
        // the counts in between) or keeps its batch open.
        let replays = (self.core.counted.is_some() || (self.core.batched && self.core.merge_batches))
            && self.opts.instr_range_limit == 0
            && self.atom_memo.is_some();
        let space = self.mem_space().0;
        let unmapped = if self.unmapped.space == space { self.unmapped.gap } else { Gap::default() };
        Some(PacketRun { replays, counts: self.core.counted.is_some(), space, unmapped, ..PacketRun::default() })
    }

    /// The run's next packet is an atom packet: true if it was taken. A
    /// declined packet may have had the return stack pop a replay starts
    /// with done, as `replay_atoms` leaves it when the memo has no entry.
    /// `count` is never 0: the parser's fast table leaves atom headers
    /// that give no atoms to the byte-wise machine.
    #[inline(always)]
    pub fn run_atom<F: FnMut(DecoderOutput<'_>)>(&mut self, run: &mut PacketRun, bits: u32, count: u8, index: u64, sink: &mut F) -> bool {
        debug_assert!(count > 0);
        // Each test once on the common way (no pop due): asked again in
        // memo_walk_ready, the way to a replay took 25 instructions after
        // the atom test on juno_r1_1, 15 now.
        if self.rs.pop_pending {
            if !self.run_pop(run, index, sink) {
                return false;
            }
        } else {
            if self.need_addr || self.need_ctxt {
                // As commit_idle_atoms (or, after a cycle count, as
                // commit_atoms_now, which finds nothing to walk).
                self.run_cc_out(run);
                self.core.index_curr = index;
                self.commit_idle(count);
                self.seq_record.left = 0;
                return true;
            }
            if !run.replays {
                return false;
            }
            self.core.index_curr = index;
            if !self.memo_walk_placed() {
                return false;
            }
        }
        if run.unmapped.holds(self.walk.addr) {
            self.run_cc_out(run);
            self.replay_unmapped(count, index);
            // The packets before it in the row, if any, are a sequence that
            // ends where nothing is mapped: kept, so that the row is not
            // missed (and this packet and those after it offered one by
            // one) again each time.
            if self.seq_record.left > 0 {
                self.seq_record.left = 0;
                self.seq_store();
            }
            run.replayed = true;
            return true;
        }
        let set = AtomMemo::set(self.walk.addr, bits, count);
        let (_, Some(slot)) = self.memo_find_key(bits, count, set, run.space) else {
            return false;
        };
        self.run_cc_out(run);
        if self.seq_record.left > 0 {
            self.seq_note(slot, count);
        }
        if self.replay_packet(slot, count, index) {
            self.learn_unmapped(run);
        }
        run.replayed = true;
        true
    }

    /// The run's next atom packet, at `index`, starts with the return stack
    /// pop due: done (`pop_first`, whose option test the run made), and
    /// true if the packet may then be replayed. Without a replaying run
    /// nothing is done.
    #[inline(always)]
    fn run_pop<F: FnMut(DecoderOutput<'_>)>(&mut self, run: &PacketRun, index: u64, sink: &mut F) -> bool {
        if !run.replays {
            return false;
        }
        self.core.index_curr = index;
        if self.rs.entries > 0 {
            self.return_stack_pop(sink);
        }
        self.memo_walk_ready()
    }

    /// The run's next packets, the first at `first`, are atom packets, at
    /// least two: true if a row of them may be replayed from the sequence
    /// memo ([`Etm4Decoder::run_atoms`]), as `run_atom` asks on its way to a
    /// replay. Like `run_atom`, a row that is declined, here or there, may
    /// have had the first packet's return stack pop done.
    #[inline(always)]
    pub fn run_row_begin<F: FnMut(DecoderOutput<'_>)>(&mut self, run: &PacketRun, first: u64, sink: &mut F) -> bool {
        if self.rs.pop_pending {
            if !self.run_pop(run, first, sink) {
                return false;
            }
        } else if self.need_addr || self.need_ctxt || !run.replays || !self.memo_walk_placed() {
            return false;
        }
        !run.unmapped.holds(self.walk.addr)
    }

    /// After [`Etm4Decoder::run_row_begin`] said yes: `bytes` holds the
    /// next `avail` bytes of the run (2 to
    /// [`ROW_PACKETS`](super::parser::ROW_PACKETS); the first in the low
    /// byte), the first at `first` and the others at the indices after it.
    /// How many packets, from the first, were taken, replayed at once from
    /// the sequence memo: an entry whose header bytes begin `bytes` (they
    /// were atom packets when it was recorded, so these are too). When
    /// none, the run says how many of the bytes are atom packets
    /// ([`Etm4Decoder::run_row`]) and offers them one by one
    /// ([`Etm4Decoder::run_atom`]); when each is replayed from the atom
    /// memo, the sequence is remembered.
    #[inline(always)]
    pub fn run_atoms(&mut self, run: &mut PacketRun, bytes: u64, avail: u8, first: u64) -> u8 {
        let (addr, isa, space) = (self.walk.addr, self.walk.isa, run.space);
        let slot = SeqMemo::slot(addr, bytes);
        // An entry holds the first packets of rows: it serves every row
        // that starts with them.
        let taken = match self.seq_memo.as_deref().map(|t| &t[slot]) {
            Some(m)
                if m.packets <= avail
                    && bytes & row_mask(m.packets as usize) == m.headers
                    && m.addr == addr
                    && m.isa == isa
                    && m.space == space =>
            {
                m.packets
            }
            _ => 0,
        };
        if taken == 0 {
            // Its length is not known yet: `run_row` says.
            self.seq_record = SeqRecord {
                left: avail,
                slot,
                memo: SeqMemo { addr, headers: bytes, isa, space, end_addr: addr, end_isa: isa, ..SeqMemo::EMPTY },
            };
            return 0;
        }
        self.run_cc_out(run);
        let last = first.wrapping_add(taken as u64 - 1);
        self.core.index_curr = last;
        if self.replay_seq(slot, last) {
            self.learn_unmapped(run);
        }
        run.replayed = true;
        taken
    }

    /// The row [`Etm4Decoder::run_atoms`] did not take has `packets` atom
    /// packets: the sequence recorded, if any, ends with them.
    #[inline(always)]
    pub fn run_row(&mut self, packets: u8) {
        let r = &mut self.seq_record;
        r.left = r.left.min(packets);
    }

    /// Do what the sequence in entry `slot` did, its last packet at `last`:
    /// true if that packet only met an inaccessible address where its walk
    /// started (see [`Etm4Decoder::replay`]).
    #[inline(always)]
    fn replay_seq(&mut self, slot: usize, last: u64) -> bool {
        let Some(table) = self.seq_memo.as_deref() else { return false };
        let m = &table[slot];
        self.held.index = self.held.index.max(last);
        let seq = self.next_seq;
        self.next_seq += m.atoms as u64;
        self.last_committed_seq = Some(seq + m.atoms as u64 - 1);
        // What `replay` does for one entry (the two tables' entries differ
        // in size, and `replay`'s is the hotter path: left as it is).
        self.held.ranges += m.ranges as u64;
        self.held.instructions += m.instructions as u64;
        for &off in &m.pushed[..m.calls as usize] {
            self.rs.push(call_at(m.addr, off), m.isa);
        }
        match m.end {
            MemoEnd::Walk => {}
            MemoEnd::Nacc => {
                self.held.nacc += 1;
                self.need_addr = true;
            }
            MemoEnd::Indirect(eret) => {
                self.need_addr = true;
                self.rs.set_pop_pending();
                self.held.eret += eret as u64;
            }
        }
        self.walk.addr = m.end_addr;
        self.walk.isa = m.end_isa;
        if let Some(l) = m.last {
            self.walk.last = l;
        }
        self.next_range_check = m.check.then_some(m.end_addr);
        self.memo_hits += m.packets as u64;
        self.seq_hits += 1;
        m.unmapped
    }

    /// Add the atom packet of `count` atoms about to be replayed from atom
    /// memo entry `slot` to the sequence being recorded. The sequence is
    /// remembered when it ends: at the last packet of the row, at one that
    /// leaves the walk waiting (an address
    /// needed, a pop due: the next packet would depend on more than the
    /// key), or before one that would overflow its counts. A packet that
    /// does not follow on from the one before (its key's start is not where
    /// that one left the walk) ends the recording with nothing kept.
    #[cold]
    #[inline(never)]
    fn seq_note(&mut self, slot: usize, count: u8) {
        let Some(table) = self.atom_memo.as_deref() else { return };
        let m = table[(slot / 2) & (MEMO_SETS - 1)].0[slot & 1];
        let r = &mut self.seq_record;
        r.left -= 1;
        let s = &mut r.memo;
        if m.addr != s.end_addr || m.isa != s.end_isa || m.isa != s.isa || m.space != s.space {
            r.left = 0;
            return;
        }
        let calls = s.calls as usize + m.calls as usize;
        let (Some(instructions), Some(ranges), Some(atoms)) =
            (s.instructions.checked_add(m.instructions), s.ranges.checked_add(m.ranges as u16), s.atoms.checked_add(count as u16))
        else {
            r.left = 0;
            self.seq_store();
            return;
        };
        if calls > SEQ_CALLS {
            r.left = 0;
            self.seq_store();
            return;
        }
        // The sequence's distances are from its own start.
        for (to, &off) in s.pushed[s.calls as usize..calls].iter_mut().zip(&m.pushed[..m.calls as usize]) {
            match call_offset(s.addr, call_at(m.addr, off)) {
                Some(o) => *to = o,
                None => {
                    r.left = 0;
                    self.seq_store();
                    return;
                }
            }
        }
        s.calls = calls as u8;
        s.instructions = instructions;
        s.ranges = ranges;
        s.atoms = atoms;
        s.packets += 1;
        s.end = m.end;
        s.end_addr = m.end_addr;
        s.end_isa = m.end_isa;
        s.check = m.check;
        s.unmapped = m.end == MemoEnd::Nacc && m.ranges == 0;
        if m.last.is_some() {
            s.last = m.last;
        }
        if m.end != MemoEnd::Walk {
            r.left = 0;
        }
        if r.left == 0 {
            self.seq_store();
        }
    }

    /// Keep the sequence recorded so far, if it has any packet. One packet
    /// is worth keeping when the walk waits after it: the next time the
    /// row is taken up to there, and a row starting after it is offered
    /// (one by one, the rest of the row would go without ever being offered
    /// again).
    fn seq_store(&mut self) {
        let r = &self.seq_record;
        if r.memo.packets == 0 {
            return;
        }
        let memo = SeqMemo { headers: r.memo.headers & row_mask(r.memo.packets as usize), ..r.memo };
        let slot = r.slot;
        if self.seq_memo.is_none() {
            self.seq_memo = vec![SeqMemo::EMPTY; SEQ_MEMO].into_boxed_slice().try_into().ok();
        }
        if let Some(table) = self.seq_memo.as_deref_mut() {
            table[slot & (SEQ_MEMO - 1)] = memo;
        }
    }

    /// Sequences replayed from the sequence memo so far.
    pub fn seq_hits(&self) -> u64 {
        self.seq_hits
    }

    /// An atom packet of `count` atoms at `index` whose walk starts where
    /// the image maps nothing: replayed as the atom memo would replay it
    /// (see [`AtomMemo`]), with no range, one inaccessible address, and an
    /// address needed next. The first atom meets the address; the others
    /// find an address needed and do nothing.
    #[inline(always)]
    fn replay_unmapped(&mut self, count: u8, index: u64) {
        self.held.index = self.held.index.max(index);
        let seq = self.next_seq;
        self.next_seq += count as u64;
        self.held.nacc += 1;
        self.need_addr = true;
        self.next_range_check = None;
        self.memo_hits += 1;
        self.last_committed_seq = Some(seq + count as u64 - 1);
    }

    /// The packet just replayed met an inaccessible address where its walk
    /// started: the addresses around it that the image does not map are
    /// learnt, for the run and for runs after it in the same memory space.
    #[cold]
    #[inline(never)]
    fn learn_unmapped(&mut self, run: &mut PacketRun) {
        self.unmapped = match self.image.unmapped_around(self.walk.addr, MemSpace(run.space)) {
            Some((lo, last)) => Unmapped { gap: Gap { lo, span: (last - lo).saturating_add(1) }, space: run.space },
            None => Unmapped::default(),
        };
        run.unmapped = self.unmapped.gap;
    }

    /// The run's next packet is an address packet giving `addr` in
    /// instruction set `is`: taken, as `addr_now` takes it (what it asks
    /// was asked when the run began), unless a cycle count waits: it would
    /// be queued behind it.
    #[inline(always)]
    pub fn run_addr(&mut self, run: &PacketRun, addr: u64, is: u8) -> bool {
        if run.cc_waits {
            return false;
        }
        self.last_is = is;
        self.take_addr(addr, is);
        true
    }

    /// The run's next packet is a cycle count packet without a commit
    /// field: taken in a run that counts elements, where it waits for the
    /// atom packet after it. One by one it would be queued, and that atom
    /// packet's commit (`commit_atoms_now`) would hand its element over
    /// first; the run does the same when it takes the atom packet, and
    /// queues the count as the one-by-one path does if it does not.
    #[inline(always)]
    pub fn run_cc(&mut self, run: &mut PacketRun, cc: u32, ptype: PacketType, index: u64) -> bool {
        if !run.counts || run.cc_waits {
            return false;
        }
        run.cc_waits = true;
        run.cc = (cc, ptype, index);
        true
    }

    /// The element of the cycle count waiting for an atom packet that the
    /// run is taking, if any.
    #[inline(always)]
    fn run_cc_out(&mut self, run: &mut PacketRun) {
        if run.cc_waits {
            self.run_cc_element(run);
        }
    }

    #[inline(never)]
    fn run_cc_element(&mut self, run: &mut PacketRun) {
        run.cc_waits = false;
        if !run.emitted {
            self.out.clear();
            run.emitted = true;
        }
        // `process_ts_cc_event`'s cycle count arm, without its match over
        // kinds and timestamp checks (4 million instructions in a summary
        // of 2 MiB of texit-poe2).
        let (cc, _, index) = run.cc;
        self.add(index, ElementKind::CycleCount);
        if let Some(e) = self.out.last_mut() {
            e.cycle_count = Some(cc);
        }
    }

    /// The element the packet entry would have queued for the run's cycle
    /// count (nothing between changes the sequence number it takes).
    fn run_cc_queued(&self, run: &PacketRun) -> P0 {
        let (cc, ptype, index) = run.cc;
        let mut e = P0::new(P0Kind::Cc, false, ptype, index);
        e.seq = self.next_seq;
        e.value = cc;
        e
    }

    /// The run is over, its last packet at `last`.
    #[inline(always)]
    pub fn run_end<F: FnMut(DecoderOutput<'_>)>(&mut self, run: PacketRun, last: u64, sink: &mut F) {
        self.core.index_curr = last;
        if run.cc_waits {
            let e = self.run_cc_queued(&run);
            self.stack.push_back(e);
        }
        if run.emitted || (run.replayed && (!self.core.merge_batches || self.core.counted.is_some())) {
            if !run.emitted {
                self.out.clear();
            }
            self.send(sink);
        }
    }

    /// Replay the atom packet of `count` atoms at `index` from entry `slot`
    /// (found by `memo_find`), into the counts held: true if its walk met
    /// an inaccessible address where it started (see [`Etm4Decoder::replay`]).
    #[inline(always)]
    fn replay_packet(&mut self, slot: usize, count: u8, index: u64) -> bool {
        // A batch kept open has the index of its last packet.
        self.held.index = self.held.index.max(index);
        let seq = self.next_seq;
        self.next_seq += count as u64;
        let unmapped = self.replay(slot);
        self.last_committed_seq = Some(seq + count as u64 - 1);
        unmapped
    }

    /// The atom memo's set for an atom packet at the walk's start. The
    /// pattern is taken as the parser gives it: it never sets bits beyond
    /// the count, and if it did, a packet would only be remembered under a
    /// key of its own.
    #[inline(always)]
    fn memo_set(&self, pkt: &Packet) -> usize {
        AtomMemo::set(self.walk.addr, pkt.atom_bits, pkt.atom_count)
    }

    /// The key an atom packet at the walk's start would be remembered under
    /// in `set` (its [`Etm4Decoder::memo_set`]), and the entry that
    /// remembers this packet, if one does: twice the set, plus one for the
    /// older entry. (Not the entry itself: copying it out cost a replay a
    /// tenth of its instructions.)
    #[inline(always)]
    fn memo_find(&self, pkt: &Packet, set: usize) -> (AtomMemo, Option<usize>) {
        self.memo_find_key(pkt.atom_bits, pkt.atom_count, set, self.mem_space().0)
    }

    /// [`Etm4Decoder::memo_find`] for an atom packet's pattern and count.
    #[inline(always)]
    fn memo_find_key(&self, bits: u32, count: u8, set: usize, space: u8) -> (AtomMemo, Option<usize>) {
        let (addr, isa) = (self.walk.addr, self.walk.isa);
        let key = AtomMemo { addr, bits, count, isa, space, ..AtomMemo::EMPTY };
        let hit = match self.atom_memo.as_deref().map(|m| &m[set & (MEMO_SETS - 1)].0) {
            Some([a, _]) if a.same_key(&key) => Some(2 * set),
            Some([_, b]) if b.same_key(&key) => Some(2 * set + 1),
            _ => None,
        };
        (key, hit)
    }

    /// Whether an atom packet can be replayed from, or recorded into, the
    /// atom memo: nothing pending that the walk would read besides its
    /// start (see [`AtomMemo`]), and no speculation record to make per atom.
    #[inline]
    fn memo_ready(&self) -> bool {
        self.memo_walk_ready() && self.opts.instr_range_limit == 0 && self.quiet_commit()
    }

    /// The part of [`Etm4Decoder::memo_ready`] that a replay can change.
    #[inline(always)]
    fn memo_walk_ready(&self) -> bool {
        !self.need_ctxt && !self.need_addr && !self.rs.pop_pending && self.memo_walk_placed()
    }

    /// The part of [`Etm4Decoder::memo_walk_ready`] about where the walk
    /// stands (not inside a T32 IT block, not off a pending range check).
    #[inline(always)]
    fn memo_walk_placed(&self) -> bool {
        self.walk.it.remaining() == 0 && self.next_range_check.is_none_or(|c| c == self.walk.addr)
    }

    /// The first atom's return stack pop, done before the atom memo is asked
    /// so that the walk starts where it leads. With an entry on the stack it
    /// cannot fail, and what the atom loop does before it is seen only in the
    /// speculation view. Called only in runs that only count (the memo's).
    #[inline(always)]
    fn pop_first<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) {
        if self.rs.pop_pending && self.rs.entries > 0 && self.quiet_commit() {
            self.return_stack_pop(sink);
        }
    }

    /// Nothing speculative and nothing to resolve (no speculation window, as
    /// on every fixture): what arrives can take effect at once.
    #[inline(always)]
    fn settled(&self) -> bool {
        self.max_spec == 0 && self.spec_depth == 0 && !self.res.any()
    }

    /// An atom committed leaves no speculation record, and shortcuts are
    /// allowed.
    #[inline(always)]
    fn quiet_commit(&self) -> bool {
        (!self.opts.speculation || self.opts.spec_losses_only) && !self.opts.long_way
    }

    /// Do what the atom packet remembered in entry `slot` (found by
    /// `memo_find`) did: true if that was only to meet an inaccessible
    /// address where its walk started (no range before it).
    #[inline(always)]
    fn replay(&mut self, slot: usize) -> bool {
        let Some(memo) = self.atom_memo.as_deref() else { return false };
        let m = &memo[(slot / 2) & (MEMO_SETS - 1)].0[slot & 1];
        self.held.ranges += m.ranges as u64;
        self.held.instructions += m.instructions as u64;
        for &off in &m.pushed[..m.calls as usize] {
            self.rs.push(call_at(m.addr, off), m.isa);
        }
        let mut unmapped = false;
        match m.end {
            MemoEnd::Walk => {}
            MemoEnd::Nacc => {
                self.held.nacc += 1;
                self.need_addr = true;
                unmapped = m.ranges == 0;
            }
            MemoEnd::Indirect(eret) => {
                self.need_addr = true;
                self.rs.set_pop_pending();
                self.held.eret += eret as u64;
            }
        }
        self.walk.addr = m.end_addr;
        self.walk.isa = m.end_isa;
        if let Some(last) = m.last {
            self.walk.last = last;
        }
        self.next_range_check = m.check.then_some(m.end_addr);
        self.memo_hits += 1;
        unmapped
    }

    /// Remember what the atom packet just committed did, from `before` (the
    /// counts when it started), in `set` (its [`Etm4Decoder::memo_set`]),
    /// unless something it did cannot be replayed.
    #[cold]
    fn remember(&mut self, set: usize, key: AtomMemo, before: Held) {
        if self.atom_memo.is_none() {
            self.atom_memo = vec![MemoSet([AtomMemo::EMPTY; 2]); MEMO_SETS].into_boxed_slice().try_into().ok();
        }
        let w = self.memo_watch;
        let nacc = self.held.nacc - before.nacc;
        let eret = self.held.eret - before.eret;
        let end = match (nacc, w.indirect) {
            (0, None) => MemoEnd::Walk,
            (1, None) => MemoEnd::Nacc,
            (0, Some(e)) => MemoEnd::Indirect(e),
            _ => return,
        };
        let check = match self.next_range_check {
            None => false,
            Some(a) if a == self.walk.addr => true,
            Some(_) => return,
        };
        // What the end implies must be all that happened: an address is
        // needed only after an inaccessible one or an indirect branch, a pop
        // is due only after the latter, and an exception return comes only
        // from it.
        if w.spoiled
            || self.walk.it.remaining() != 0
            || self.need_ctxt
            || self.need_addr != (end != MemoEnd::Walk)
            || self.rs.pop_pending != (self.rs.active && matches!(end, MemoEnd::Indirect(_)))
            || eret != u64::from(end == MemoEnd::Indirect(true))
        {
            return;
        }
        let ranges = self.held.ranges - before.ranges;
        let (Ok(ranges), Ok(instructions)) = (u8::try_from(ranges), u32::try_from(self.held.instructions - before.instructions)) else {
            return;
        };
        let pushed = w.pushed[..w.calls as usize].iter();
        if pushed.clone().any(|&(_, isa)| isa != key.isa) {
            return;
        }
        let mut addrs = [0; MEMO_CALLS];
        for (a, &(addr, _)) in addrs.iter_mut().zip(pushed) {
            let Some(off) = call_offset(key.addr, addr) else { return };
            *a = off;
        }
        let Some(memo) = self.atom_memo.as_deref_mut() else { return };
        let [newer, older] = &mut memo[set & (MEMO_SETS - 1)].0;
        // The newer entry goes first; the older of the two leaves.
        *older = *newer;
        *newer = AtomMemo {
            end,
            end_isa: self.walk.isa,
            calls: w.calls,
            check,
            ranges,
            instructions,
            end_addr: self.walk.addr,
            last: (ranges > 0).then_some(self.walk.last),
            pushed: addrs,
            ..key
        };
    }

    /// Atom packets replayed from the atom memo so far.
    pub fn memo_hits(&self) -> u64 {
        self.memo_hits
    }

    fn spec_record<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, e: &P0, unit: u32, state: SpecState, at: Option<u64>) {
        if self.opts.speculation && !(self.opts.spec_losses_only && state == SpecState::Committed) {
            let r = SpecRecord {
                seq: e.seq + unit as u64,
                trace_id: self.core.trace_id,
                kind: e.spec_kind(unit),
                created: e.index,
                resolved: at,
                state,
            };
            sink(DecoderOutput::Spec(&r));
        }
    }

    /// Every P0 unit still on the stack ends with `state`.
    fn spec_drain<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, state: SpecState, at: Option<u64>) {
        if !self.opts.speculation {
            return;
        }
        let stack = std::mem::take(&mut self.stack);
        for e in stack.iter() {
            for u in 0..e.units() {
                self.spec_record(sink, e, u, state, at);
            }
        }
        self.stack = stack;
    }

    fn decode_packet<F: FnMut(DecoderOutput<'_>)>(&mut self, pkt: &Packet, sink: &mut F) {
        self.flush_batch(sink);
        use PacketType as P;
        let mut is_addr = false;
        match pkt.ptype {
            P::Async | P::Ignore => {}
            P::TraceInfo => {
                self.push(P0Kind::TraceInfo, false, pkt);
            }
            P::TraceOn => {
                self.push(P0Kind::TraceOn, false, pkt);
            }
            P::AtomF1 | P::AtomF2 | P::AtomF3 | P::AtomF4 | P::AtomF5 | P::AtomF6 => {
                if self.commit_idle_atoms(pkt) {
                } else if self.stack.len() <= PLAIN_QUEUE && self.commit_atoms_now(pkt, sink) {
                    // Resolved: nothing for the rest of this function to do.
                    return;
                } else {
                    self.push_atoms(pkt)
                }
            }
            P::Context => {
                let last_is = self.last_is;
                let e = self.push(P0Kind::Ctxt, false, pkt);
                e.ctxt = pkt.context;
                e.addr_is = last_is;
            }
            P::AddrMatch
            | P::AddrCtxtL32Is0
            | P::AddrCtxtL32Is1
            | P::AddrCtxtL64Is0
            | P::AddrCtxtL64Is1
            | P::AddrL32Is0
            | P::AddrL32Is1
            | P::AddrL64Is0
            | P::AddrL64Is1
            | P::AddrShortIs0
            | P::AddrShortIs1 => {
                self.last_is = pkt.addr.isa;
                if matches!(pkt.ptype, P::AddrCtxtL32Is0 | P::AddrCtxtL32Is1 | P::AddrCtxtL64Is0 | P::AddrCtxtL64Is1) {
                    let e = self.push(P0Kind::Ctxt, false, pkt);
                    e.ctxt = pkt.context;
                    e.addr_is = pkt.addr.isa;
                }
                let e = self.push(P0Kind::Addr, false, pkt);
                e.addr = pkt.addr.value;
                e.addr_is = pkt.addr.isa;
                is_addr = true;
            }
            P::SrcAddrMatch
            | P::SrcAddrShortIs0
            | P::SrcAddrShortIs1
            | P::SrcAddrL32Is0
            | P::SrcAddrL32Is1
            | P::SrcAddrL64Is0
            | P::SrcAddrL64Is1 => {
                self.last_is = pkt.addr.isa;
                let e = self.push(P0Kind::SrcAddr, true, pkt);
                e.addr = pkt.addr.value;
                e.addr_is = pkt.addr.isa;
                self.spec_depth += 1;
            }
            P::Exception => {
                let e = self.push(P0Kind::Excep, true, pkt);
                e.prev_same = pkt.exception.addr_interp == 2;
                e.excep_num = pkt.exception.number;
                self.elem_pending_addr = true;
            }
            P::PeReset => {
                let e = self.push(P0Kind::Excep, true, pkt);
                e.excep_num = pkt.exception.number;
            }
            P::ExceptionReturn => {
                let v7m = !self.cfg.arch_v8() && self.cfg.profile == CoreProfile::Microcontroller;
                self.push(P0Kind::ExcepRet, v7m, pkt);
                if v7m {
                    self.spec_depth += 1;
                }
            }
            P::Q => {
                let e = self.push(P0Kind::Q, true, pkt);
                e.value = pkt.q.count;
                if pkt.q.addr_present {
                    e.q_has_addr = true;
                    e.addr = pkt.addr.value;
                    e.addr_is = pkt.addr.isa;
                    self.spec_depth += 1;
                } else {
                    self.elem_pending_addr = true;
                }
            }
            P::FuncRet => {
                if self.cfg.arch_v8() && self.cfg.profile == CoreProfile::Microcontroller {
                    self.push(P0Kind::FuncRet, true, pkt);
                    self.spec_depth += 1;
                }
            }
            P::TimestampMarker => {
                self.push(P0Kind::Marker, false, pkt);
            }
            P::TransStart => {
                let p0 = self.cfg.tstart_is_p0();
                self.push(P0Kind::TransStart, p0, pkt);
                if p0 {
                    self.spec_depth += 1;
                }
            }
            P::TransCommit => {
                self.push(P0Kind::TransCommit, false, pkt);
            }
            P::TransFail => {
                self.push(P0Kind::TransFail, false, pkt);
            }
            P::Ite => {
                let e = self.push(P0Kind::Ite, false, pkt);
                // Payload in the address field, EL in the ISA field.
                e.addr = pkt.ite_payload;
                e.addr_is = pkt.ite_el;
            }
            P::Event => {
                let e = self.push(P0Kind::Event, false, pkt);
                e.value = pkt.event as u32;
            }
            P::CycleCountF1 | P::CycleCountF2 | P::CycleCountF3 => {
                let e = self.push(P0Kind::Cc, false, pkt);
                e.value = pkt.cycle_count;
                if pkt.commit_valid {
                    self.res.commit = pkt.commit as i64;
                }
            }
            P::Timestamp => {
                let with_cc = self.cfg.cycle_counting();
                let kind = if with_cc { P0Kind::TsCc } else { P0Kind::Ts };
                let e = self.push(kind, false, pkt);
                // The timestamp rides in the address field.
                e.addr = pkt.timestamp;
                if with_cc {
                    e.value = if pkt.cc_valid { pkt.cycle_count } else { 0 };
                }
            }
            P::Mispredict | P::CancelF1Mispredict | P::CancelF2 | P::CancelF3 => {
                self.res.mispredict = true;
                if pkt.atom_count > 0 {
                    self.push_atoms(pkt);
                }
                self.res.cancel = pkt.cancel as i64;
            }
            P::CancelF1 => self.res.cancel = pkt.cancel as i64,
            P::Commit => self.res.commit = pkt.commit as i64,
            P::Overflow => {
                self.prev_overflow = true;
                self.spec_depth = 0;
                self.res.discard = true;
            }
            P::Discard => {
                self.spec_depth = 0;
                self.res.discard = true;
            }
            P::BadSequence => self.bad_packet(sink, pkt.index, "Bad byte sequence in packet."),
            P::BadTraceMode => self.bad_packet(sink, pkt.index, "Invalid packet type for trace mode."),
            P::Reserved => self.bad_packet(sink, pkt.index, "Reserved packet header"),
            P::CondInstrF1
            | P::CondInstrF2
            | P::CondInstrF3
            | P::CondFlush
            | P::CondResultF1
            | P::CondResultF2
            | P::CondResultF3
            | P::CondResultF4
            | P::NumDataSyncMarker
            | P::UnnumDataSyncMarker => {
                // Conditional and data trace are not decoded (nor by OpenCSD, which
                // stops there); resynchronise at the next sync point instead.
                self.log(sink, DecodeError::UnsupportedPacket, Some(pkt.index), "Unsupported packet type.");
                self.spec_drain(sink, SpecState::LostToError, Some(pkt.index));
                self.reset_state();
                self.state = State::NoSync;
                self.unsync_reason = UnsyncReason::BadPacket;
            }
            _ => self.bad_packet(sink, pkt.index, "Unknown packet type."),
        }
        if is_addr && self.elem_pending_addr {
            self.spec_depth += 1;
            self.elem_pending_addr = false;
        }
        if self.spec_depth > self.max_spec {
            self.res.commit = self.spec_depth - self.max_spec;
        }
        // Real trace resolves its elements long before this; only malformed
        // input can queue more, and memory must not grow with the input.
        if self.stack.len() > MAX_QUEUED {
            self.seq_error(sink, DecodeError::CommitOverrun, Some(pkt.index), "Too many unresolved trace elements.");
            self.state = State::NoSync;
        }
        if self.state == State::Decode && self.res.any() {
            self.state = State::Resolve;
        }
    }

    fn bad_packet<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, index: u64, why: &str) {
        self.log(sink, DecodeError::BadDecodePacket, Some(index), why);
        self.spec_drain(sink, SpecState::LostToError, Some(index));
        self.reset_state();
        self.state = State::NoSync;
        self.unsync_reason = UnsyncReason::BadPacket;
        self.unsync_index = Some(index);
    }

    /// A sequence error while resolving: log, resynchronise.
    fn seq_error<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, err: DecodeError, index: Option<u64>, why: &str) {
        self.log(sink, err, index, why);
        let at = Some(self.core.index_curr);
        self.spec_drain(sink, SpecState::LostToError, at);
        self.reset_state();
        self.state = State::NoSync;
        self.unsync_reason = UnsyncReason::BadPacket;
        self.unsync_index = index;
    }

    /// Resolve commits, cancels, mispredicts and discards. Returns true when the
    /// current packet is done with.
    fn resolve<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) -> bool {
        debug_assert!(self.res.commit >= 0 && self.res.cancel >= 0, "{:?}", self.res);
        loop {
            if !self.out.is_empty() {
                self.send(sink);
            } else if self.res.any() {
                let before = (self.res, self.stack.len());
                let mut ok = true;
                if self.res.commit != 0 {
                    ok = self.commit_elements(sink);
                }
                if self.res.commit == 0 && ok {
                    if self.res.cancel != 0 {
                        ok = self.cancel_elements(sink);
                    }
                    if ok && self.res.mispredict {
                        ok = self.mispredict(sink);
                    }
                    if ok && self.res.discard {
                        let at = Some(self.core.index_curr);
                        self.spec_drain(sink, SpecState::Discarded, at);
                        self.discard_elements();
                    }
                }
                // Every pass resolves something or sends something; one that
                // does neither (a count no element can meet) would repeat
                // forever, so it ends the resolution as an error does.
                if ok && self.out.is_empty() && (self.res, self.stack.len()) == before {
                    self.res = ElemRes::default();
                    ok = false;
                }
                if !ok {
                    self.send(sink);
                    if self.state == State::NoSync {
                        if let Some(i) = self.unsync_index.take() {
                            self.add(i, ElementKind::NoSync(self.unsync_reason));
                            self.send(sink);
                        }
                        self.state = State::WaitSync;
                    } else {
                        self.core.fatal = true;
                    }
                    return true;
                }
            }
            if self.out.is_empty() && !self.res.any() {
                if self.state == State::Resolve {
                    self.state = State::Decode;
                    return true;
                }
                return self.state != State::NoSync;
            }
        }
    }

    // ---- resolution -------------------------------------------------------

    fn commit_elements<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) -> bool {
        let requested = self.res.commit;
        let mut err_index = None;
        let mut ok = true;
        self.out.clear();
        let mut context_flush = false;
        while self.res.commit > 0 && ok && !context_flush {
            let Some(mut e) = self.stack.front().copied() else {
                self.seq_error(sink, DecodeError::CommitOverrun, err_index, "Not enough elements to commit");
                self.res.commit = 0;
                ok = false;
                break;
            };
            err_index = Some(e.index);
            let mut pop = true;
            if e.is_p0 && e.kind != P0Kind::Atom {
                let at = Some(self.core.index_curr);
                self.spec_record(sink, &e, 0, SpecState::Committed, at);
                self.last_committed_seq = Some(e.seq);
            }
            match e.kind {
                P0Kind::Atom => {
                    while e.atom_count > 0 && self.res.commit > 0 && ok {
                        let state = if e.mispredicted & 1 == 1 { SpecState::CorrectedByMispredict } else { SpecState::Committed };
                        let at = Some(self.core.index_curr);
                        self.spec_record(sink, &e, 0, state, at);
                        self.last_committed_seq = Some(e.seq);
                        let taken = e.commit_oldest();
                        ok = self.return_stack_pop(sink);
                        if !ok {
                            break;
                        }
                        if !self.need_ctxt && !self.need_addr {
                            ok = self.process_atom(sink, taken, &e);
                            if !ok {
                                break;
                            }
                        }
                        self.res.commit -= 1;
                    }
                    if e.atom_count > 0 {
                        pop = false;
                        if let Some(f) = self.stack.front_mut() {
                            *f = e;
                        }
                    }
                }
                P0Kind::Excep => {
                    ok = self.return_stack_pop(sink);
                    if ok {
                        self.next_range_check = None;
                        ok = self.process_exception(sink, &e);
                        self.res.commit -= 1;
                    }
                }
                P0Kind::ExcepRet => {
                    self.commit_plain(&e);
                    if e.is_p0 {
                        self.res.commit -= 1;
                    }
                }
                P0Kind::FuncRet => {
                    if e.is_p0 {
                        self.res.commit -= 1;
                    }
                }
                P0Kind::SrcAddr => {
                    self.next_range_check = None;
                    ok = self.process_source_address(sink, &e);
                    self.res.commit -= 1;
                }
                P0Kind::Q => {
                    self.next_range_check = None;
                    ok = self.process_q(sink, &e);
                    self.res.commit -= 1;
                }
                P0Kind::TransStart | P0Kind::TransCommit | P0Kind::TransFail | P0Kind::TransTraceInit => {
                    if e.kind == P0Kind::TransStart && self.cfg.tstart_is_p0() {
                        self.res.commit -= 1;
                    }
                    self.next_range_check = None;
                    self.process_trans(&e);
                    if e.kind == P0Kind::TransFail {
                        self.transaction_failed(sink, e.index);
                    }
                }
                P0Kind::UnseenUncommitted => self.res.commit -= 1,
                // The rest: P0Kind::is_plain.
                _ => context_flush = self.commit_plain(&e),
            }
            if !ok {
                break;
            }
            if pop {
                // Exceptions and Q elements may have consumed the elements after them.
                self.stack.pop_front();
            }
        }
        if self.state == State::NoSync {
            // A resynchronisation inside the loop already cleared the speculation
            // state; the element that failed must not leave a count behind, or the
            // next sync would start by resolving a negative commit forever.
            self.res.commit = 0;
            return ok;
        }
        self.spec_depth -= requested - self.res.commit;
        ok
    }

    /// An address (without context: the packet entry asks only for those, in
    /// the Decode state) that arrives with nothing queued, nothing
    /// speculative and nothing to resolve takes effect at once, as it would
    /// on the next commit, when it would be first on the stack: nothing that
    /// comes between reads what it sets (the elements after it commit after
    /// it), and what drops it unused instead (a discard, an overflow, an
    /// error) also asks for a new address and a new trace info, which set
    /// all of it again. Half of the packets of some captures are addresses
    /// (texit-poe2, juno_r1_1).
    #[inline(always)]
    fn addr_now(&mut self, pkt: &Packet) -> bool {
        let now = self.stack.is_empty()
            && self.max_spec == 0
            && self.spec_depth == 0
            && !self.elem_pending_addr
            && !self.res.any()
            && !self.opts.long_way;
        if now {
            self.take_addr(pkt.addr.value, pkt.addr.isa);
        }
        now
    }

    /// An address element committed.
    #[inline(always)]
    fn take_addr(&mut self, addr: u64, is: u8) {
        self.rs.pop_pending = false;
        self.rs.tinfo_wait_addr = false;
        self.walk.addr = addr;
        self.walk.isa = calc_isa(self.is_64bit, is);
        self.need_addr = false;
    }

    /// Commit an element that leaves the commit count alone (one that is not
    /// a P0 element, or the part of an exception return that is the same
    /// either way). True after a context change: the elements built so far
    /// are then sent before the next is committed.
    #[inline(always)]
    fn commit_plain(&mut self, e: &P0) -> bool {
        match e.kind {
            P0Kind::TraceOn => {
                self.next_range_check = None;
                let reason = if self.prev_overflow { TraceOnReason::Overflow } else { TraceOnReason::Normal };
                self.add(e.index, ElementKind::TraceOn(reason));
                self.prev_overflow = false;
                self.rs.flush();
            }
            P0Kind::Addr => self.take_addr(e.addr, e.addr_is),
            P0Kind::Ctxt if e.ctxt.updated => {
                self.update_context(e, e.index);
                return true;
            }
            P0Kind::Event | P0Kind::Ts | P0Kind::Cc | P0Kind::TsCc => self.process_ts_cc_event(e),
            P0Kind::Marker => self.process_marker(e),
            P0Kind::ExcepRet => {
                self.next_range_check = None;
                self.add(e.index, ElementKind::ExceptionReturn);
            }
            P0Kind::Ite => self.process_ite(e),
            P0Kind::TraceInfo => {
                self.rs.tinfo_wait_addr = true;
                self.rs.flush();
            }
            // Elements that count: commit_elements resolves them.
            _ => {}
        }
        false
    }

    #[inline(always)]
    fn return_stack_pop<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) -> bool {
        if self.rs.pop_pending {
            // What is popped is not part of an atom memo's key.
            self.memo_watch.spoiled = true;
            let popped = self.rs.pop();
            if self.rs.overflow() {
                self.seq_error(sink, DecodeError::ReturnStackOverflow, None, "Trace Return Stack Overflow.");
                return false;
            }
            if let Some((addr, isa)) = popped {
                self.walk.addr = addr;
                self.walk.isa = isa;
                self.need_addr = false;
            }
        }
        true
    }

    // Asked at every walk: a table read, not two matches.
    #[inline(always)]
    fn mem_space(&self) -> MemSpace {
        let c = &self.context;
        SPACES[c.security as usize][c.el.min(4) as usize]
    }

    fn update_context(&mut self, e: &P0, index: u64) {
        let c = e.ctxt;
        self.is_64bit = c.sf;
        let security = match (c.nse, c.ns) {
            (true, true) => Security::Realm,
            (true, false) => Security::Root,
            (false, true) => Security::NonSecure,
            (false, false) => Security::Secure,
        };
        // VMID and context ID persist in the element from earlier contexts.
        let ctx = PeContext {
            security,
            el: c.el,
            el_valid: true,
            aarch64: c.sf,
            vmid: if c.updated_vmid { Some(c.vmid) } else { self.context.vmid },
            context_id: if c.updated_cid { Some(c.context_id) } else { self.context.context_id },
        };
        self.elem_isa = calc_isa(self.is_64bit, e.addr_is);
        self.walk.isa = self.elem_isa;
        self.context = ctx;
        self.add(index, ElementKind::PeContext(ctx));
        self.need_ctxt = false;
    }

    fn process_ts_cc_event(&mut self, e: &P0) {
        let permit_ts = !self.cfg.has_ts_marker() || self.ete_first_ts_marker;
        match e.kind {
            P0Kind::Event => self.add(e.index, ElementKind::Event { number: e.value as u16 }),
            P0Kind::Ts if permit_ts => {
                self.add(e.index, ElementKind::Timestamp { value: e.addr })
            }
            P0Kind::Cc => {
                self.add(e.index, ElementKind::CycleCount);
                self.out.last_mut().unwrap().cycle_count = Some(e.value);
            }
            P0Kind::TsCc if permit_ts => {
                self.add(e.index, ElementKind::Timestamp { value: e.addr });
                self.out.last_mut().unwrap().cycle_count = Some(e.value);
            }
            _ => {}
        }
    }

    /// Report that the P0 elements committed since the transaction started did
    /// not take effect.
    fn transaction_failed<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, index: u64) {
        if let (Some(first), Some(last)) = (self.tx_first_seq.take(), self.last_committed_seq) {
            if self.opts.speculation && last >= first {
                sink(DecoderOutput::TransactionFailed { trace_id: self.core.trace_id, first_seq: first, last_seq: last, index });
            }
        }
    }

    fn process_marker(&mut self, e: &P0) {
        if self.cfg.has_ts_marker() {
            self.ete_first_ts_marker = true;
        }
        self.add(e.index, ElementKind::TimestampMarker { value: 0 });
    }

    fn process_trans(&mut self, e: &P0) {
        match e.kind {
            P0Kind::TransStart | P0Kind::TransTraceInit => {
                self.tx_first_seq = Some(self.last_committed_seq.map_or(0, |s| s + 1));
            }
            P0Kind::TransCommit => self.tx_first_seq = None,
            _ => {}
        }
        let t = match e.kind {
            P0Kind::TransTraceInit => MemTrans::TraceInit,
            P0Kind::TransStart => MemTrans::Start,
            P0Kind::TransCommit => MemTrans::Commit,
            _ => MemTrans::Fail,
        };
        self.add(e.index, ElementKind::MemTrans(t));
    }

    fn process_ite(&mut self, e: &P0) {
        self.add(e.index, ElementKind::Instrumentation { el: e.addr_is, value: e.addr });
    }

    /// Decode the instruction at the walk address. `Ok(None)` when the memory is
    /// not accessible.
    fn decode_at(&mut self, addr: u64) -> Result<Option<InstrInfo>, DecodeError> {
        let space = self.mem_space();
        let isa = self.walk.isa;
        let info = match isa {
            Isa::A64 | Isa::A32 => match self.image.read_u32(addr, space) {
                Some(op) => instr::decode(isa, op, 0, addr, &self.idec, &mut self.walk.it),
                None => return Ok(None),
            },
            Isa::T32 => {
                let Some(first) = self.image.read_u16(addr, space) else { return Ok(None) };
                if instr::t32_is_32bit(first) {
                    match self.image.read_u16(addr + 2, space) {
                        Some(second) => instr::decode(isa, first as u32, second, addr, &self.idec, &mut self.walk.it),
                        None => return Ok(None),
                    }
                } else {
                    instr::decode(isa, first as u32, 0, addr, &self.idec, &mut self.walk.it)
                }
            }
            _ => return Err(DecodeError::UnsupportedIsa),
        };
        Ok(Some(info?))
    }

    /// Walk from the current address to the next waypoint (or to `to` when
    /// given), as OpenCSD's `traceInstrToWP`. Inlined into the atom loops,
    /// where nearly every call is a cache hit cheaper than a call frame.
    #[inline(always)]
    fn trace_to_waypoint(&mut self, to: Option<u64>) -> Result<(Range, WpRes), DecodeError> {
        // The walk from an address to the next waypoint (or to a given
        // address) depends only on the image, so it is cached; a T32 walk
        // also depends on the IT state, so only those that start and end
        // outside an IT block are kept (nearly all: a branch may only end
        // a block). A range limit needs the step-by-step walk.
        let cacheable = self.walk.it.remaining() == 0 && self.opts.instr_range_limit == 0;
        // (Cached walks were made under the default limit, so they meet it.)
        if !cacheable {
            self.memo_watch.spoiled = true;
            return self.walk_to_waypoint(to);
        }
        if let Some(to) = to {
            self.memo_watch.spoiled = true;
            return self.walk_to_cached(to);
        }
        let start = self.walk.addr;
        let space = self.mem_space();
        // Bit 1 folded in: T32 walks start on any halfword.
        let set = 2 * (((start >> 2) ^ (start >> 14) ^ ((start & 2) << 10)) as usize & (WALK_CACHE / 2 - 1));
        let isa = self.walk.isa;
        let found = self.walk_cache.get(set..set + 2).and_then(|s| s.iter().find(|h| h.valid && h.start == start && h.isa == isa && h.space == space.0));
        if let Some(hit) = found {
            let (end, count, res) = (hit.end, hit.count, hit.res);
            if let Some(last) = hit.last {
                self.walk.last = last;
            }
            self.walk.addr = end;
            return Ok((Range { start, end, count }, res));
        }
        let (r, res) = self.walk_to_waypoint(None)?;
        if self.walk.it.remaining() != 0 {
            return Ok((r, res));
        }
        if self.walk_cache.is_empty() {
            self.walk_cache = empty_walk_cache();
        }
        // The newer walk goes first; the older of the two leaves.
        self.walk_cache[set + 1] = self.walk_cache[set];
        self.walk_cache[set] = WalkCacheEntry {
            valid: true,
            start,
            isa,
            space: space.0,
            end: r.end,
            count: r.count,
            res,
            last: (r.count > 0).then_some(self.walk.last),
        };
        Ok((r, res))
    }

    /// Walk from the current address to `to`, through the cache of such
    /// walks: a walk that met `to` is the same walk whenever it starts at
    /// the same place in the same image (outside an IT block, no range
    /// limit: the caller's conditions). Walks that did not meet it, and
    /// those that ended inside an IT block, are not kept.
    #[inline(never)]
    fn walk_to_cached(&mut self, to: u64) -> Result<(Range, WpRes), DecodeError> {
        let start = self.walk.addr;
        let space = self.mem_space().0;
        let isa = self.walk.isa;
        let slot = ((start >> 2) ^ (to >> 1) ^ (start >> 15)) as usize & (TO_WALK_CACHE - 1);
        if let Some(hit) = self.to_walk_cache.get(slot).copied().flatten().filter(|h| h.start == start && h.to == to && h.isa == isa && h.space == space) {
            self.walk.last = hit.last;
            self.walk.addr = to;
            return Ok((Range { start, end: to, count: hit.count }, WpRes::Found));
        }
        let (r, res) = self.walk_to_waypoint(Some(to))?;
        if res == WpRes::Found && r.count > 0 && self.walk.it.remaining() == 0 {
            if self.to_walk_cache.is_empty() {
                self.to_walk_cache = empty_to_walk_cache();
            }
            self.to_walk_cache[slot] = Some(ToWalkEntry { start, to, isa, space, count: r.count, last: self.walk.last });
        }
        Ok((r, res))
    }

    fn walk_to_waypoint(&mut self, to: Option<u64>) -> Result<(Range, WpRes), DecodeError> {
        let mut r = Range { start: self.walk.addr, end: self.walk.addr, count: 0 };
        // Below u32::MAX so that the count cannot wrap before the check.
        let limit = match self.opts.instr_range_limit {
            0 => DEFAULT_INSTR_RANGE_LIMIT,
            n => n.min(u32::MAX - 1),
        };
        let mut next_pass = PLAIN_STEPS;
        loop {
            let addr = self.walk.addr;
            if r.count >= next_pass {
                let space = self.mem_space();
                let max = (limit - r.count) as u64;
                if let Some((n, next)) = self.image.pass_plain(self.walk.isa, &self.idec, self.walk.it, addr, space, max, to) {
                    r.count += n as u32;
                    self.walk.addr = next;
                    next_pass = r.count + PLAIN_STEPS;
                    continue;
                }
                next_pass = r.count + PLAIN_STEPS;
            }
            let Some(info) = self.decode_at(addr)? else {
                r.end = self.walk.addr;
                return Ok((r, WpRes::Nacc));
            };
            self.walk.last = info;
            self.walk.addr = addr.wrapping_add(info.size as u64);
            r.count += 1;
            if r.count > limit {
                return Err(DecodeError::RangeLimitOverrun);
            }
            let found = match to {
                Some(t) => self.walk.addr == t,
                None => info.itype != InstrType::Other,
            };
            if found {
                r.end = self.walk.addr;
                return Ok((r, WpRes::Found));
            }
        }
    }

    fn range_element(&mut self, index: u64, r: Range, executed: bool, info: &InstrInfo, isa: Isa) {
        if self.count_now {
            self.held.ranges += 1;
            self.held.instructions += r.count as u64;
            return;
        }
        self.out.push(Element {
            index,
            trace_id: self.core.trace_id,
            kind: ElementKind::InstrRange {
                start: r.start,
                end: r.end,
                count: r.count,
                last_type: info.itype,
                last_subtype: info.subtype,
                last_size: info.size,
                executed,
                conditional: info.conditional,
            },
            isa,
            cycle_count: None,
            time: Time::default(),
        });
    }

    /// Emit the range the walk just covered; a taken branch switches ISA.
    fn set_range(&mut self, index: u64, r: Range, executed: bool) {
        let info = self.walk.last;
        let isa = self.walk.isa;
        self.range_element(index, r, executed, &info, isa);
        if executed {
            self.walk.isa = info.next_isa;
        }
    }

    fn walk_error<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, err: DecodeError, index: u64, what: &str) -> bool {
        match err {
            DecodeError::UnsupportedIsa => {
                self.need_addr = true;
                self.need_ctxt = true;
                self.log(sink, err, Some(index), &format!("Warning: unsupported instruction set processing {what} packet."));
                true
            }
            DecodeError::RangeLimitOverrun => {
                self.log(sink, err, None, "Decode Instruction Range Limit Overrun");
                self.seq_error(sink, err, Some(index), &format!("Error processing {what} packet."));
                false
            }
            DecodeError::InvalidOpcode => {
                self.log(sink, err, None, "Invalid AA64 opcode");
                self.seq_error(sink, err, Some(index), &format!("Error processing {what} packet."));
                false
            }
            _ => {
                self.seq_error(sink, err, Some(index), &format!("Error processing {what} packet."));
                false
            }
        }
    }

    fn nacc(&mut self, index: u64, addr: u64) {
        let space = self.mem_space();
        self.add(index, ElementKind::AddrNotAccessible { addr, space });
    }

    // Inlined into both of its callers (the atom loops of commit_elements
    // and commit_atoms_now): called out of line it costs more than it saves.
    #[inline(always)]
    fn process_atom<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, taken: bool, e: &P0) -> bool {
        let (r, res) = match self.trace_to_waypoint(None) {
            Ok(v) => v,
            Err(err) => {
                self.memo_watch.spoiled = true;
                return self.walk_error(sink, err, e.index, "atom");
            }
        };
        let mut ete_eret = false;
        if res == WpRes::Found {
            let next = self.walk.addr;
            let info = self.walk.last;
            match info.itype {
                InstrType::Branch if taken => {
                    self.walk.addr = info.target;
                    if info.link {
                        self.push_return(next);
                    }
                }
                InstrType::IndirectBranch if taken => {
                    self.need_addr = true;
                    if info.link {
                        self.push_return(next);
                    }
                    self.rs.set_pop_pending();
                    if self.cfg.major_version() >= 5 && info.subtype == InstrSubtype::ExceptionReturn {
                        ete_eret = true;
                    }
                    self.memo_watch.indirect = Some(ete_eret);
                }
                _ => {}
            }
            self.set_range(e.index, r, taken);
            if let Some(expect) = self.next_range_check {
                if expect != r.start {
                    self.bad_image(sink, e.index, "Discontinuous ranges - Inconsistent program image for decode\n");
                    return false;
                }
            }
            self.next_range_check = if taken { None } else { Some(next) };
            if ete_eret {
                self.add(e.index, ElementKind::ExceptionReturn);
            }
        } else {
            self.need_addr = true;
            self.next_range_check = None;
            if r.start != r.end {
                self.memo_watch.spoiled = true;
                self.set_range(e.index, r, true);
            }
            let a = self.walk.addr;
            self.nacc(e.index, a);
        }
        true
    }

    /// A call's return address onto the return stack, as an atom memo being
    /// recorded must replay it.
    #[inline(always)]
    fn push_return(&mut self, next: u64) {
        self.rs.push(next, self.walk.isa);
        self.memo_watch.call(next, self.walk.isa);
    }

    fn bad_image<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, index: u64, why: &str) {
        self.log(sink, DecodeError::BadImage, Some(index), why);
        let at = Some(self.core.index_curr);
        self.spec_drain(sink, SpecState::LostToError, at);
        self.reset_state();
        self.state = State::NoSync;
        self.unsync_reason = UnsyncReason::BadImage;
    }

    fn process_exception<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, e: &P0) -> bool {
        let index = e.index;
        let reset = e.root == PacketType::PeReset;
        let branch_target = e.prev_same;
        let mut ctxt: Option<P0> = None;
        let mut ret_addr = 0u64;
        let mut consumed = 0usize;
        if !reset {
            let mut i = 1;
            if let Some(c) = self.stack.get(i).filter(|c| c.kind == P0Kind::Ctxt) {
                ctxt = Some(*c);
                i += 1;
            }
            let Some(a) = self.stack.get(i).filter(|a| a.kind == P0Kind::Addr).copied() else {
                let cur = self.core.index_curr;
                self.seq_error(sink, DecodeError::BadPacketSeq, Some(cur), "Address missing in exception packet.");
                return false;
            };
            consumed = i;
            ret_addr = a.addr;
            if branch_target {
                let b64 = ctxt.map(|c| c.ctxt.sf).unwrap_or(self.walk.isa == Isa::A64);
                self.walk.addr = ret_addr;
                self.walk.isa = if a.addr_is == 0 {
                    if b64 {
                        Isa::A64
                    } else {
                        Isa::A32
                    }
                } else {
                    Isa::T32
                };
                self.need_addr = false;
            }
        }
        if let Some(c) = ctxt {
            self.update_context(&c, index);
        }
        let mut m_tail_chain = false;
        if !reset {
            if self.cfg.profile == CoreProfile::Microcontroller {
                m_tail_chain = ret_addr == 0xffff_fffe;
            }
            if self.walk.addr < ret_addr && !m_tail_chain {
                match self.trace_to_waypoint(Some(ret_addr)) {
                    Err(err) => {
                        if err == DecodeError::UnsupportedIsa {
                            self.need_addr = true;
                            self.need_ctxt = true;
                            self.log(sink, err, Some(index), "Warning: unsupported instruction set processing exception packet.");
                        } else {
                            self.log(sink, err, Some(index), "Error processing exception packet.");
                        }
                        return false;
                    }
                    Ok((r, res)) => {
                        if res == WpRes::Found || r.start != r.end {
                            if res != WpRes::Found {
                                self.need_addr = true;
                            }
                            self.set_range(index, r, true);
                        } else {
                            self.need_addr = true;
                        }
                        if res == WpRes::Nacc {
                            let a = self.walk.addr;
                            self.nacc(index, a);
                        }
                    }
                }
            }
        }
        self.add(
            index,
            ElementKind::Exception {
                number: e.excep_num as u32,
                ret_addr: if reset || m_tail_chain { None } else { Some(ret_addr) },
                ret_addr_is_branch_target: branch_target,
                m_tail_chain,
            },
        );
        // The context and address elements belong to the exception: drop them.
        for _ in 0..consumed {
            self.stack.remove(1);
        }
        true
    }

    fn process_source_address<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, e: &P0) -> bool {
        let src = e.addr;
        let cur = self.walk.addr;
        let split_on_n = self.opts.src_addr_n;
        let space = self.mem_space();
        let saved = self.walk.addr;
        self.walk.addr = src;
        let info = match self.decode_at(src) {
            Ok(Some(i)) => i,
            Ok(None) => {
                self.walk.addr = saved;
                self.add(e.index, ElementKind::AddrNotAccessible { addr: src, space });
                return true;
            }
            Err(err) => {
                self.log(sink, err, Some(e.index), "Instruction decode error processing source address packet.");
                return false;
            }
        };
        self.walk.last = info;
        self.walk.addr = src.wrapping_add(info.size as u64);
        let mut out = Range { start: cur, end: self.walk.addr, count: 1 };
        if self.need_addr || cur > src {
            self.need_addr = false;
            out.start = src;
        }
        if out.end - out.start > info.size as u64 {
            if self.walk.isa != Isa::T32 && !split_on_n {
                out.count = ((out.end - out.start) / 4) as u32;
            } else {
                // Count (and with -src_addr_n, split at) the instructions in between.
                let mut a = out.start;
                out.count = 0;
                let mut it = self.walk.it;
                while a < out.end {
                    let isa = self.walk.isa;
                    let got = match isa {
                        Isa::T32 => self.image.read_u16(a, space).and_then(|f| {
                            if instr::t32_is_32bit(f) {
                                self.image.read_u16(a + 2, space).map(|s| (f as u32, s))
                            } else {
                                Some((f as u32, 0))
                            }
                        }),
                        _ => self.image.read_u32(a, space).map(|w| (w, 0)),
                    };
                    let Some((w, s)) = got else {
                        self.add(e.index, ElementKind::AddrNotAccessible { addr: src, space });
                        out = Range { start: src, end: self.walk.addr, count: 1 };
                        break;
                    };
                    let i = match instr::decode(isa, w, s, a, &self.idec, &mut it) {
                        Ok(i) => i,
                        Err(err) => {
                            self.log(sink, err.into(), Some(e.index), "Instruction decode error processing source address packet.");
                            return false;
                        }
                    };
                    a += i.size as u64;
                    out.count += 1;
                    if split_on_n && a < out.end && i.itype != InstrType::Other {
                        let mid = Range { start: out.start, end: a, count: out.count };
                        self.range_element(e.index, mid, false, &i, isa);
                        out.start = a;
                        out.count = 0;
                    }
                }
            }
        }
        let next = self.walk.addr;
        match info.itype {
            InstrType::Branch => {
                if info.link {
                    self.rs.push(next, self.walk.isa);
                }
                self.walk.addr = info.target;
            }
            InstrType::IndirectBranch => {
                self.need_addr = true;
                if info.link {
                    self.rs.push(next, self.walk.isa);
                }
                self.rs.set_pop_pending();
            }
            _ => {}
        }
        let isa = self.walk.isa;
        self.walk.isa = info.next_isa;
        self.range_element(e.index, out, true, &info, isa);
        true
    }

    fn process_q<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F, e: &P0) -> bool {
        let (q_addr, q_is) = if e.q_has_addr {
            (e.addr, e.addr_is)
        } else {
            let mut i = 1;
            let ctxt = self.stack.get(i).filter(|c| c.kind == P0Kind::Ctxt).copied();
            if ctxt.is_some() {
                i += 1;
            }
            let Some(a) = self.stack.get(i).filter(|a| a.kind == P0Kind::Addr).copied() else {
                self.log(sink, DecodeError::BadPacketSeq, Some(e.index), "Address missing in Q packet.");
                return false;
            };
            // The address belongs to the Q element; a context stays queued after it.
            self.stack.remove(i);
            (a.addr, a.addr_is)
        };
        let mut r = Range { start: self.walk.addr, end: self.walk.addr, count: 0 };
        let mut is_branch = false;
        // A count that ends at the first branch is the walk to the next
        // waypoint when that waypoint is a branch: taken from the walk cache
        // (A64 and A32, no range limit), one decode per instruction otherwise.
        let mut steps = e.value;
        if self.walk.isa != Isa::T32 && self.opts.instr_range_limit == 0 && e.value > 0 {
            let (addr, last) = (self.walk.addr, self.walk.last);
            match self.trace_to_waypoint(None) {
                Ok((w, WpRes::Found))
                    if w.count <= e.value && matches!(self.walk.last.itype, InstrType::Branch | InstrType::IndirectBranch) =>
                {
                    r.count = w.count;
                    is_branch = true;
                    steps = 0;
                }
                _ => {
                    self.walk.addr = addr;
                    self.walk.last = last;
                }
            }
        }
        for _ in 0..steps {
            let a = self.walk.addr;
            match self.decode_at(a) {
                Ok(Some(info)) => {
                    self.walk.last = info;
                    self.walk.addr = a.wrapping_add(info.size as u64);
                    r.count += 1;
                    is_branch = matches!(info.itype, InstrType::Branch | InstrType::IndirectBranch);
                    if is_branch {
                        break;
                    }
                }
                _ => break,
            }
        }
        let mut incomplete = true;
        if e.value > 0 && r.count == e.value && (self.walk.addr == q_addr || is_branch) {
            incomplete = false;
            r.end = self.walk.addr;
            self.set_range(e.index, r, true);
        }
        if incomplete {
            let isa = calc_isa(self.is_64bit, q_is);
            self.out.push(Element {
                index: e.index,
                trace_id: self.core.trace_id,
                kind: ElementKind::RangeNoPath { start: r.start, next: q_addr, count: e.value },
                isa,
                cycle_count: None,
                time: Time::default(),
            });
        }
        self.walk.addr = q_addr;
        self.walk.isa = calc_isa(self.is_64bit, q_is);
        self.need_addr = false;
        true
    }

    fn cancel_elements<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) -> bool {
        let requested = self.res.cancel;
        let mut kept: Vec<P0> = Vec::new();
        let mut ok = true;
        while self.res.cancel > 0 {
            let Some(mut e) = self.stack.pop_back() else {
                let cur = self.core.index_curr;
                self.seq_error(sink, DecodeError::CommitOverrun, Some(cur), "Not enough elements to cancel");
                self.res.cancel = 0;
                ok = false;
                break;
            };
            if e.is_p0 {
                if e.kind == P0Kind::Atom {
                    let k = (self.res.cancel as u32).min(e.atom_count as u32);
                    let at = Some(self.core.index_curr);
                    for u in e.atom_count as u32 - k..e.atom_count as u32 {
                        self.spec_record(sink, &e, u, SpecState::Canceled, at);
                    }
                    self.res.cancel -= e.cancel_newest(self.res.cancel as u32) as i64;
                    if e.atom_count > 0 {
                        self.stack.push_back(e);
                    }
                } else {
                    let at = Some(self.core.index_curr);
                    self.spec_record(sink, &e, 0, SpecState::Canceled, at);
                    self.res.cancel -= 1;
                }
            } else if matches!(e.kind, P0Kind::Event | P0Kind::Ts | P0Kind::Cc | P0Kind::TsCc | P0Kind::Marker | P0Kind::Ite) {
                // Time and events are not speculative: keep them.
                kept.push(e);
            }
        }
        while let Some(e) = kept.pop() {
            self.stack.push_back(e);
        }
        if ok {
            self.spec_depth -= requested - self.res.cancel;
        }
        ok
    }

    fn mispredict<F: FnMut(DecoderOutput<'_>)>(&mut self, sink: &mut F) -> bool {
        let mut found = false;
        let mut i = self.stack.len();
        while i > 0 {
            i -= 1;
            match self.stack[i].kind {
                P0Kind::Atom => {
                    self.stack[i].mispredict_newest();
                    found = true;
                    break;
                }
                P0Kind::Addr => {
                    self.stack.remove(i);
                }
                P0Kind::UnseenUncommitted => {
                    found = true;
                    break;
                }
                _ => {}
            }
        }
        self.res.mispredict = false;
        if !found {
            let cur = self.core.index_curr;
            self.seq_error(sink, DecodeError::CommitOverrun, Some(cur), "Not found mispredict atom");
        }
        found
    }

    fn discard_elements(&mut self) {
        while let Some(e) = self.stack.pop_front() {
            match e.kind {
                P0Kind::Marker => self.process_marker(&e),
                P0Kind::Ite => self.process_ite(&e),
                _ => self.process_ts_cc_event(&e),
            }
        }
        self.res = ElemRes::default();
        self.spec_depth = 0;
        self.state = State::NoSync;
        self.unsync_reason = if self.prev_overflow { UnsyncReason::Overflow } else { UnsyncReason::Discard };
        self.need_ctxt = true;
        self.need_addr = true;
        self.elem_pending_addr = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder() -> Etm4Decoder {
        let regs = [("TRCCONFIGR", 0x1u64), ("TRCTRACEIDR", 0x2), ("TRCIDR0", 0x28000ea1), ("TRCIDR1", 0x4100f402), ("TRCIDR2", 0x488), ("TRCIDR8", 0)];
        let cfg = Etm4Config::from_registers(|n| regs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), false, None).unwrap();
        Etm4Decoder::new(&cfg, Arc::new(MemoryImage::default()), DecoderOptions::default())
    }

    /// The space table gives what the rules of the memory spaces give (OpenCSD's
    /// `getCurrMemSpace`), for every EL a loaded state can hold.
    #[test]
    fn the_space_table_follows_the_security_state_and_el() {
        for security in [Security::Secure, Security::NonSecure, Security::Root, Security::Realm] {
            for el in 0..=255u8 {
                let want = match (security, el) {
                    (Security::Root, _) => MemSpace::ROOT,
                    (Security::Realm, 0 | 1) => MemSpace::EL1R,
                    (Security::Realm, 2) => MemSpace::EL2R,
                    (Security::Realm, _) => MemSpace::R,
                    (Security::Secure, 3) => MemSpace::EL3,
                    (Security::Secure, 2) => MemSpace::EL2S,
                    (Security::Secure, _) => MemSpace::EL1S,
                    (Security::NonSecure, 2) => MemSpace::EL2,
                    (Security::NonSecure, _) => MemSpace::EL1N,
                };
                let mut d = decoder();
                d.context.security = security;
                d.context.el = el;
                assert_eq!(d.mem_space(), want, "{security:?} EL{el}");
            }
        }
    }

    /// Issue 15, finding 2: a resolution count that no element can meet (here
    /// a negative commit, which a checked load refuses but the loop must
    /// survive all the same) once made `resolve` spin forever.
    #[test]
    fn resolve_ends_whatever_counts_it_starts_from() {
        for res in [
            ElemRes { commit: -1, cancel: 0, mispredict: false, discard: false },
            ElemRes { commit: -5, cancel: 3, mispredict: false, discard: false },
            ElemRes { commit: 0, cancel: -2, mispredict: false, discard: false },
        ] {
            let mut d = decoder();
            d.state = State::Resolve;
            d.res = res;
            let mut n = 0;
            d.resolve(&mut |_| n += 1);
            assert!(!d.res.any(), "{res:?} left unresolved");
        }
    }

    /// Issue 15, finding 9: a range over an image that never branches was
    /// walked to its end whatever its length (37 s for a 124-byte trace) and
    /// its count wrapped at 2^32. With no limit given, the walk now stops at
    /// the default limit with the range-limit error.
    #[test]
    fn a_range_that_never_branches_stops_at_the_default_limit() {
        let mut image = MemoryImage::new();
        let nops = DEFAULT_INSTR_RANGE_LIMIT as usize + 16;
        image.add_bytes(0x1000, 0xd503_201fu32.to_le_bytes().repeat(nops), crate::element::MemSpace::ANY);
        let mut d = decoder();
        d.image = Arc::new(image);
        d.is_64bit = true;
        d.walk.addr = 0x1000;
        d.walk.isa = Isa::A64;
        match d.trace_to_waypoint(None) {
            Err(DecodeError::RangeLimitOverrun) => {}
            other => panic!("expected the range limit, got {other:?}"),
        }
        // An explicit limit still applies, and a walk within it succeeds.
        d.opts.instr_range_limit = 8;
        d.walk.addr = 0x1000;
        assert!(matches!(d.trace_to_waypoint(None), Err(DecodeError::RangeLimitOverrun)));
        d.walk.addr = 0x1000 + (nops as u64 - 4) * 4;
        let (r, res) = d.trace_to_waypoint(None).unwrap();
        assert_eq!((r.count, res), (4, WpRes::Nacc));
    }

    /// A decoder, made or loaded, holds no walk cache until it keeps a
    /// walk; then a second walk from the same place is the cached one (the
    /// code is gone from the image by then), and walks to an address are
    /// kept the same way.
    #[test]
    fn the_walk_caches_are_made_by_the_first_walk_kept() {
        let nop = 0xd503_201fu32;
        let b_plus_8 = 0x1400_0002u32;
        let mut image = MemoryImage::new();
        let code = [nop, nop, b_plus_8, nop, nop];
        image.add_bytes(0x1000, code.iter().flat_map(|w| w.to_le_bytes()).collect(), crate::element::MemSpace::ANY);
        let image = Arc::new(image);
        let fresh = decoder();
        let loaded = Etm4Decoder::load_state(&fresh.cfg.clone(), image.clone(), &fresh.save_state()).unwrap();
        for mut d in [fresh, loaded] {
            assert!(d.walk_cache.is_empty() && d.to_walk_cache.is_empty());
            d.image = image.clone();
            d.is_64bit = true;
            let walk = |d: &mut Etm4Decoder, to: Option<u64>| {
                d.walk.addr = 0x1000;
                d.walk.isa = Isa::A64;
                let (r, res) = d.trace_to_waypoint(to).unwrap();
                ((r.start, r.end, r.count), res, d.walk.addr, d.walk.last.target)
            };
            let first = walk(&mut d, None);
            assert_eq!(first, ((0x1000, 0x100c, 3), WpRes::Found, 0x100c, 0x1010));
            assert_eq!(d.walk_cache.len(), WALK_CACHE);
            assert!(d.to_walk_cache.is_empty());
            let to = walk(&mut d, Some(0x1008));
            assert_eq!(to, ((0x1000, 0x1008, 2), WpRes::Found, 0x1008, 0));
            assert_eq!(d.to_walk_cache.len(), TO_WALK_CACHE);
            // Walked again in an empty image, only the caches can give them.
            d.image = Arc::new(MemoryImage::default());
            assert_eq!(walk(&mut d, None), first);
            assert_eq!(walk(&mut d, Some(0x1008)), to);
        }
    }

    /// A run that only counts counts what a run that hands elements over
    /// sends, also when an error stops an atom packet half-way: the ranges
    /// of the atoms before the error are dropped with the reset, not
    /// counted. Here the second of two atoms overruns a range limit of 4.
    #[test]
    fn counting_atoms_drops_what_an_error_drops() {
        let nop = 0xd503_201fu32;
        let b_plus_8 = 0x1400_0002u32;
        let mut code = vec![nop, b_plus_8, nop];
        code.extend([nop; 20]);
        let mut image = MemoryImage::new();
        image.add_bytes(0x1000, code.iter().flat_map(|w| w.to_le_bytes()).collect(), crate::element::MemSpace::ANY);
        let image = Arc::new(image);
        let run = |counting: bool, atoms: u8| {
            let mut d = decoder();
            d.image = image.clone();
            d.opts.instr_range_limit = 4;
            d.state = State::Decode;
            d.is_64bit = true;
            d.need_addr = false;
            d.need_ctxt = false;
            d.walk.addr = 0x1000;
            d.walk.isa = Isa::A64;
            if counting {
                d.core.counted = Some(Box::default());
            }
            let mut pkt = Packet::start_state();
            pkt.ptype = PacketType::AtomF2;
            pkt.atom_count = atoms;
            pkt.atom_bits = 0b11;
            let mut sent = crate::protocol::decoder::ElementCounts::default();
            assert!(d.commit_atoms_now(&pkt, &mut |o| {
                if let DecoderOutput::Element(e) = o {
                    sent.add(&e.kind);
                }
            }));
            match d.core.counted.take() {
                Some(c) => *c,
                None => sent,
            }
        };
        // One atom walks the first range (two instructions to the branch).
        let one = run(false, 1);
        assert_eq!((one.kinds[crate::element::KIND_INSTR_RANGE], one.range_instructions), (1, 2));
        assert_eq!(run(true, 1), one);
        // Two: the second overruns the limit and the first's range goes too.
        let two = run(false, 2);
        assert_eq!(two.kinds[crate::element::KIND_INSTR_RANGE], 0);
        assert_eq!(run(true, 2), two);
    }

    /// A saved state with an out-of-range field is refused on load, naming it.
    #[test]
    fn load_refuses_out_of_range_fields() {
        let d = decoder();
        let cfg = d.cfg.clone();
        let good = d.save_state();
        assert!(Etm4Decoder::load_state(&cfg, Arc::new(MemoryImage::default()), &good).is_ok());
        let mut bad = decoder();
        bad.res.commit = -1;
        let err = Etm4Decoder::load_state(&cfg, Arc::new(MemoryImage::default()), &bad.save_state()).err().unwrap();
        assert!(err.to_string().contains("commit count"), "{err}");
        let mut bad = decoder();
        bad.rs.head = 16;
        let err = Etm4Decoder::load_state(&cfg, Arc::new(MemoryImage::default()), &bad.save_state()).err().unwrap();
        assert!(err.to_string().contains("return stack index"), "{err}");
    }

    /// One walk from `start` with the maps of `image`: what it returns, where
    /// it leaves the walk, the instruction it ends on and the IT state.
    fn walk_from(image: &MemoryImage, isa: Isa, start: u64, to: Option<u64>, limit: u32) -> String {
        walk_from_it(image, isa, ItState::new(), start, to, limit)
    }

    /// [`walk_from`] from IT state `it`.
    fn walk_from_it(image: &MemoryImage, isa: Isa, it: ItState, start: u64, to: Option<u64>, limit: u32) -> String {
        let mut d = decoder();
        d.image = Arc::new(image.clone());
        d.opts.instr_range_limit = limit;
        d.walk.addr = start;
        d.walk.isa = isa;
        d.walk.it = it;
        let res = d.walk_to_waypoint(to).map(|(r, res)| (r.start, r.end, r.count, res));
        format!("{res:?} at {:#x} last {:?} it {:?}", d.walk.addr, d.walk.last, d.walk.it)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Issue 16: random instruction words in random images (two regions,
        /// any alignment, A64, A32 and T32) walk to the same place, with the
        /// same count, outcome and last instruction, with and without the
        /// stop maps, to the next waypoint, to an address, and under a
        /// range limit.
        #[test]
        fn walks_are_the_same_with_and_without_the_stop_maps(case in crate::image::walkcase::walk_case(), limit in proptest::prop_oneof![proptest::strategy::Just(0u32), 1u32..3000]) {
            let (mapped, stepping) = case.images();
            for i in 0..case.starts.len() {
                let start = case.start(i);
                for to in [None, case.to()] {
                    let want = walk_from(&stepping, case.isa, start, to, limit);
                    proptest::prop_assert_eq!(walk_from(&mapped, case.isa, start, to, limit), want, "{:?} from {:#x} to {:?}", case.isa, start, to);
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Walks to an address (an exception's return address) through the
        /// cache of such walks, taken twice over so that the second round
        /// meets what the first kept, to the case's address and to every
        /// start, from every start: the same place, count, outcome and last
        /// instruction as the walk step by step on a fresh decoder.
        #[test]
        fn cached_walks_to_an_address_are_the_walks(case in crate::image::walkcase::walk_case()) {
            let (mapped, _) = case.images();
            let mut d = decoder();
            d.image = Arc::new(mapped.clone());
            let targets: Vec<u64> = case.to().into_iter().chain((0..case.starts.len()).map(|j| case.start(j))).collect();
            for _round in 0..2 {
                for i in 0..case.starts.len() {
                    let start = case.start(i);
                    for &to in &targets {
                        let want = walk_from(&mapped, case.isa, start, Some(to), 0);
                        let fresh = decoder();
                        d.walk = Walk { addr: start, isa: case.isa, ..fresh.walk };
                        let res = d.trace_to_waypoint(Some(to)).map(|(r, res)| (r.start, r.end, r.count, res));
                        let got = format!("{res:?} at {:#x} last {:?} it {:?}", d.walk.addr, d.walk.last, d.walk.it);
                        proptest::prop_assert_eq!(got, want, "{:?} from {:#x} to {:#x}", case.isa, start, to);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Walks to the next waypoint through the walk cache, from every
        /// start both outside an IT block and inside one, taken twice over
        /// so that the second round meets what the first kept: the same
        /// place, count, outcome, last instruction and IT state as the walk
        /// step by step on a fresh decoder. (T32 walks were all stepped:
        /// armv8_1m_branches decoded at 3 MiB/s.)
        #[test]
        fn cached_walks_to_the_next_waypoint_are_the_walks(case in crate::image::walkcase::walk_case(), inside in 1u8..5) {
            let (mapped, _) = case.images();
            let mut d = decoder();
            d.image = Arc::new(mapped.clone());
            for _round in 0..2 {
                for i in 0..case.starts.len() {
                    let start = case.start(i);
                    for it in [ItState::new(), ItState::inside(inside)] {
                        let want = walk_from_it(&mapped, case.isa, it, start, None, 0);
                        let fresh = decoder();
                        d.walk = Walk { addr: start, isa: case.isa, it, ..fresh.walk };
                        let res = d.trace_to_waypoint(None).map(|(r, res)| (r.start, r.end, r.count, res));
                        let got = format!("{res:?} at {:#x} last {:?} it {:?}", d.walk.addr, d.walk.last, d.walk.it);
                        proptest::prop_assert_eq!(got, want, "{:?} from {:#x} in {:?}", case.isa, start, it);
                    }
                }
            }
        }
    }

    /// A T32 walk that ends inside an IT block (on a branch that is not the
    /// block's last) is not kept: walked again from the same place, where
    /// the cache would have it, it ends inside the block again.
    #[test]
    fn t32_walks_that_end_inside_an_it_block_are_not_kept() {
        // ITT EQ; B.N (the block's first); NOP; NOP.
        let code: [u16; 4] = [0xbf04, 0xe002, 0xbf00, 0xbf00];
        let mut image = MemoryImage::new();
        image.add_bytes(0x1000, code.iter().flat_map(|h| h.to_le_bytes()).collect(), crate::element::MemSpace::ANY);
        let mut d = decoder();
        d.image = Arc::new(image);
        let walk = |d: &mut Etm4Decoder, to: Option<u64>| {
            d.walk.addr = 0x1000;
            d.walk.isa = Isa::T32;
            d.walk.it = ItState::new();
            let (r, res) = d.trace_to_waypoint(to).unwrap();
            ((r.start, r.end, r.count), res, d.walk.it.remaining(), d.walk.last.conditional)
        };
        // To the next waypoint, and to an address (as exceptions walk).
        for to in [None, Some(0x1004)] {
            let first = walk(&mut d, to);
            assert_eq!(first, ((0x1000, 0x1004, 2), WpRes::Found, 1, true));
            assert_eq!(walk(&mut d, to), first, "to {to:?}");
        }
    }

    /// The fixtures' program images walked from every halfword (T32) or
    /// word (A32, A64), with and without the stop maps, repeated so that
    /// some ranges are long: the T32 code of the PTM and v8.1-M captures, the
    /// Snowball kernel as A32, Juno's as A64.
    #[test]
    fn fixture_code_walks_the_same_with_the_stop_maps() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
        let cases = [
            ("tc2-ptm-rstk-t32/mem_Cortex-A15_0_1_RO_CODE.bin", Isa::T32, 2),
            ("armv8_1m_branches/range2.bin", Isa::T32, 2),
            ("Snowball/kernel_dump.bin", Isa::A32, 4),
            ("juno_r1_1/kernel_dump.bin", Isa::A64, 4),
        ];
        let mut seen = 0;
        for (file, isa, step) in cases {
            let Ok(code) = std::fs::read(root.join(file)) else { continue };
            seen += 1;
            // The code with its stops kept only one in 64 words apart: long
            // runs over real instruction mixes.
            let opts = d_opts();
            let key = crate::image::branchmap::MapKey::new(isa, &opts, 0).unwrap();
            let mut sparse = code.clone();
            for (n, w) in sparse.chunks_exact_mut(4).enumerate() {
                let op = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                let stops = match isa {
                    Isa::T32 => key.t32_stops(op as u16, (op >> 16) as u16) || key.t32_stops((op >> 16) as u16, 0),
                    _ => key.word_stops(op),
                };
                if stops && n % 64 != 0 {
                    w.copy_from_slice(&crate::image::branchmap::testcode::plain_words(isa)[0].to_le_bytes());
                }
            }
            let mut runs = 0;
            for bytes in [code, sparse] {
                let mut mapped = MemoryImage::new();
                mapped.add_bytes(0x8000, bytes.clone(), MemSpace::ANY);
                let mut stepping = mapped.clone();
                stepping.set_stop_maps(false);
                let end = 0x8000 + bytes.len() as u64;
                for start in (0x8000..end).step_by(step).filter(|a| bytes.len() < 70_000 || a % 64 < 8) {
                    assert_eq!(walk_from(&mapped, isa, start, None, 0), walk_from(&stepping, isa, start, None, 0), "{file} from {start:#x}");
                }
                runs += mapped.map_counts().runs;
            }
            assert!(runs > 0, "{file}: the maps found no run");
        }
        assert!(seen > 0, "no fixture under {}", root.display());
    }

    fn d_opts() -> DecodeOptions {
        decoder().idec
    }
}
