//! Streaming ETMv4/ETE packet parser.
//!
//! The parser is a byte-at-a-time state machine with the same observable
//! behaviour as OpenCSD's `TrcPktProcEtmV4I`, which is the reference our golden
//! tests compare against: the same packet boundaries, the same `Idx` for every
//! packet, the same treatment of bytes before the first A-sync (reported in
//! `I_NOT_SYNC` chunks) and of malformed input (error packets, then carry on).
//! A fast path parses whole packets straight from the input slice when they lie
//! entirely inside it; the byte-wise machine handles packets split across pushes.
//!
//! Packet layouts: IHI 0064 (ETMv4) chapter 6 and Arm ARM D4.4 (ETE).

use super::config::{CoreProfile, Etm4Config};
use super::packet::{Packet, PacketType};
use super::packet::Address;

/// What the byte-wise machine does with the next byte of the current packet.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum Handler {
    NotSync,
    Reserved,
    InvalidCfg,
    NoPayload,
    Extension,
    Async,
    TraceInfo,
    Timestamp,
    Exception,
    CycleCount,
    SpecRes,
    CondInstr,
    CondResult,
    Context,
    AddrCtxt,
    ShortAddr,
    LongAddr,
    Q,
    Atom,
    Ite,
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Header,
    Data,
    SendPacket,
    SendUnsynced,
}

// Trace Info section flags (first PLCTL byte bits, plus "control bytes done").
const TINFO_INFO: u8 = 0x01;
const TINFO_KEY: u8 = 0x02;
const TINFO_SPEC: u8 = 0x04;
const TINFO_CYCT: u8 = 0x08;
const TINFO_WNDW: u8 = 0x10;
const TINFO_CTRL: u8 = 0x20;
const TINFO_ALL_SECT: u8 = 0x1f;
const TINFO_ALL: u8 = 0x3f;

/// The most bytes one packet may gather. OpenCSD reads a Trace Info's
/// control bytes for as long as their top bit is set, so one packet can grow
/// with the trace, though the longest packets the architecture defines are
/// under 64 bytes (IHI 0064 6.4). Past this many bytes the packet is sent as
/// a bad sequence, so a parser's memory and saved state stay bounded.
pub const MAX_PACKET_BYTES: usize = 4096;

/// Per-packet scratch state of the byte-wise machine.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Default)]
struct Scratch {
    tinfo_flags: u8,
    tinfo_ctrl_bytes: u16,
    ts_done: bool,
    cc_done: bool,
    ts_bytes: u8,
    excep_size: u8,
    count_done: bool,
    commit_done: bool,
    has_count: bool,
    f1p1_done: bool,
    f1p2_done: bool,
    f1_has_p2: bool,
    vmid_bytes: u8,
    cid_bytes: u8,
    addr_bytes: u8,
    addr_is: u8,
    addr_64: bool,
    ctxt_info_done: bool,
    addr_done: bool,
    q_type: u8,
    has_addr: bool,
    addr_short: bool,
    addr_match: bool,
    qe: u8,
}

/// Settings the parser needs, extracted once from [`Etm4Config`].
#[derive(Clone, Copy, Debug, Default)]
struct ParseSettings {
    major: u8,
    vmid_bytes: u8,
    cid_bytes: u8,
    cc_mask: u32,
    commit_opt1: bool,
    max_spec: u32,
    m_profile: bool,
}

/// Where [`Etm4Parser::push_until`] hands each packet, with its raw bytes;
/// false stops the parse. Any `FnMut(&Packet, &[u8]) -> bool` is one. A
/// caller on the hot path (the session's decode) passes a struct whose
/// method is always inlined: rustc cannot be told that of a closure, and
/// left as a call it cost each packet a call frame.
pub trait PacketSink {
    fn packet(&mut self, packet: &Packet, raw: &[u8]) -> bool;

    /// A run of packets may follow that the sink can take in steps
    /// ([`PacketSink::run_atom`], [`PacketSink::run_addr`],
    /// [`PacketSink::run_cc`]) instead of one
    /// [`Packet`] each: true if it takes them. Asked before the first
    /// packet of each run, always an atom packet (a sink may do here what
    /// that packet would do first one by one); a sink that only counts and
    /// replays committed atoms spends most of its time per packet on checks
    /// that hold for a whole run, and makes them here.
    #[inline(always)]
    fn run_begin(&mut self) -> bool {
        false
    }

    /// The next packet of the run is an atom packet with pattern `bits`
    /// (bit k set: atom k is E) and `count` atoms, at buffer index `index`:
    /// true if the sink took it whole, as [`PacketSink::packet`] would have.
    /// False ends the run, and the packet goes to [`PacketSink::packet`].
    #[inline(always)]
    fn run_atom(&mut self, _bits: u32, _count: u8, _index: u64) -> bool {
        false
    }

    /// The next packet of the run is an address packet (a short, long or
    /// exact-match one, not a source address) that gives address `addr` in
    /// instruction set `is`: as [`PacketSink::run_atom`].
    #[inline(always)]
    fn run_addr(&mut self, _addr: u64, _is: u8) -> bool {
        false
    }

    /// The next packet of the run is a cycle count packet of type `ptype`
    /// that gives count `cc` and carries no commit (commit mode 1), at
    /// `index`: as [`PacketSink::run_atom`].
    #[inline(always)]
    fn run_cc(&mut self, _cc: u32, _ptype: PacketType, _index: u64) -> bool {
        false
    }

    /// The run is over: it took `packets` packets of `bytes` bytes in all,
    /// the last at buffer index `last`. Not called when it took none.
    #[inline(always)]
    fn run_end(&mut self, _packets: usize, _bytes: usize, _last: u64) {}

    /// The run's next packet, at buffer index `first`, is an atom packet,
    /// and so is the one after it: true if the sink may take a row of them
    /// ([`PacketSink::run_atoms`]). Asked before the row's bytes are
    /// gathered, which is wasted work where the sink's state rules rows out
    /// (an atom packet that starts where the image maps nothing, or while
    /// an address is needed).
    #[inline(always)]
    fn run_row_begin(&mut self, _first: u64) -> bool {
        false
    }

    /// After [`PacketSink::run_row_begin`] said yes: `bytes` holds the next
    /// `avail` bytes of the run (2 to [`ROW_PACKETS`]; the first in the low
    /// byte, those above 0), the first at buffer index `first` and the
    /// others at the indices after it. Rows are offered only in unframed
    /// data (see `offer_run`). The
    /// sink may take a row of atom packets from their start, one packet a
    /// byte, as [`PacketSink::run_atom`] would have one by one: how many it
    /// took. When none, [`PacketSink::run_row`] says how many of the bytes
    /// are atom packets; those are offered one by one next, and no row is
    /// offered until they have been.
    #[inline(always)]
    fn run_atoms(&mut self, _bytes: u64, _avail: u8, _first: u64) -> usize {
        0
    }

    /// After a row [`PacketSink::run_atoms`] took none of: its first
    /// `packets` bytes are atom packets, and the one after is not (or is
    /// beyond the bytes given).
    #[inline(always)]
    fn run_row(&mut self, _packets: u8) {}

    /// Whether the sink may take runs: the parser looks for them only then.
    const RUNS: bool = false;

    /// Whether the sink takes rows of atom packets at once
    /// ([`PacketSink::run_atoms`]) in its runs.
    const ROWS: bool = false;

    /// Whether the sink is small enough to be inlined at more than one
    /// place: the parser's fast loop then hands atom and short address
    /// packets over from their own arms, without the shared tail the other
    /// packets take.
    const SMALL: bool = false;

    /// Whether the sink only counts packets and their bytes (a packets-only
    /// summary): runs of atom, address and cycle count packets are then
    /// handed over as numbers ([`PacketSink::counted`]), not a [`Packet`]
    /// each. Nine packets in ten of 001-ack_test are such, three in four
    /// atom packets, mostly in rows.
    const COUNTS: bool = false;

    /// `packets` packets of `bytes` bytes in all, to a sink that only
    /// counts ([`PacketSink::COUNTS`]): as that many calls of
    /// [`PacketSink::packet`] that each returned true.
    #[inline(always)]
    fn counted(&mut self, _packets: usize, _bytes: usize) {}

    /// Whether the sink ignores, from here, every packet that `count_run`
    /// takes (atoms, addresses, cycle counts, contexts, exceptions, one-byte
    /// packets): a decoder that waits for an A-sync after an error. Those
    /// are then counted as a packets-only summary counts them, and handed
    /// over as numbers ([`PacketSink::skipped`]). Asked where a run would
    /// start (an atom packet followed by an atom, address or cycle count
    /// packet) and the sink declined it ([`PacketSink::run_begin`]).
    #[inline(always)]
    fn skips(&mut self) -> bool {
        false
    }

    /// `packets` packets of `bytes` bytes in all that the sink ignored
    /// ([`PacketSink::skips`]), the last of them at buffer index `last`: as
    /// that many calls of [`PacketSink::packet`] that each returned true.
    #[inline(always)]
    fn skipped(&mut self, _packets: usize, _bytes: usize, _last: u64) {}
}

// Closures are the light sinks (packet listings, counts); the session's
// decoding sinks are structs.
impl<F: FnMut(&Packet, &[u8]) -> bool> PacketSink for F {
    #[inline(always)]
    fn packet(&mut self, packet: &Packet, raw: &[u8]) -> bool {
        self(packet, raw)
    }

    const SMALL: bool = true;
}

/// Atom packets a row offered to a sink ([`PacketSink::run_atoms`]) holds
/// at most: their header bytes fill a `u64`.
pub const ROW_PACKETS: usize = 8;

/// No atom packet pending in the counting loop (see `count_run`).
const NO_ATOM: usize = usize::MAX;

/// The first `avail` bytes of `rest` (at most 8, and no more than it
/// holds) as a row's bytes for [`PacketSink::run_atoms`].
#[inline(always)]
fn row_word(rest: &[u8], avail: usize) -> u64 {
    let word = match rest.first_chunk::<8>() {
        Some(w) => u64::from_le_bytes(*w),
        None => {
            let mut w = [0u8; 8];
            let n = rest.len().min(8);
            w[..n].copy_from_slice(&rest[..n]);
            u64::from_le_bytes(w)
        }
    };
    word & row_mask(avail)
}

/// The bits of the first `bytes` bytes of a row's word (bytes above 8 count
/// as 8).
#[inline(always)]
pub(crate) fn row_mask(bytes: usize) -> u64 {
    match bytes {
        0 => 0,
        1..=7 => (1u64 << (8 * bytes)) - 1,
        _ => u64::MAX,
    }
}

/// How many bytes from the start of `rest` are 0xc0 or above: with
/// [`Etm4Parser::c0_atoms`], the length of the row of atom packets there.
/// Eight bytes at a time: bits 7 and 6 both set in each.
#[inline(always)]
fn c0_row_len(rest: &[u8]) -> usize {
    const TOP: u64 = 0x8080_8080_8080_8080;
    let mut n = 0;
    while let Some(w) = rest.get(n..).and_then(|r| r.first_chunk::<8>()) {
        let w = u64::from_le_bytes(*w);
        // Bit 7 of a byte where bit 6 or bit 7 is clear: the row ends at
        // the lowest such byte (the first in memory).
        let ends = !(w & (w << 1)) & TOP;
        if ends != 0 {
            return n + (ends.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while rest.get(n).is_some_and(|&b| b >= 0xc0) {
        n += 1;
    }
    n
}

/// The ETMv4/ETE packet parser for one trace ID.
///
/// Its stream state serializes (see [`Etm4Parser::save_state`]) so that an
/// index can restart parsing exactly where it left off; the tables derived from
/// the configuration are rebuilt instead.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Etm4Parser {
    #[serde(skip, default = "unset_table")]
    table: [(PacketType, Handler); 256],
    #[serde(skip, default = "unset_fast")]
    fast: [Fast; 256],
    /// The atom headers are exactly the bytes 0xc0 to 0xff (those of every
    /// ETMv4 and ETE table today): rows of them are measured eight bytes
    /// at a time ([`c0_row_len`]). Derived from `fast`.
    #[serde(skip)]
    c0_atoms: bool,
    #[serde(skip)]
    set: ParseSettings,
    state: State,
    handler: Handler,
    buf: Vec<u8>,
    pkt: Packet,
    /// Address history, the most recent first. Shifted on every push
    /// rather than kept as a ring: a ring's head moved with a compare and
    /// its store took an index check, more instructions than one 32-byte
    /// move and a store, once for every address packet.
    stack: [Address; 3],
    scratch: Scratch,
    is_sync: bool,
    first_trace_info: bool,
    sent_not_sync: bool,
    packet_index: u64,
    block_index: u64,
    /// Where the bytes of the current push lie in the buffer: (offset in
    /// the push, buffer index) of each stretch, in order, the first at
    /// offset 0 (see [`Etm4Parser::push_spans_until`]). Not saved: a state
    /// is taken between pushes.
    #[serde(skip)]
    spans: Vec<(usize, u64)>,
    update_on_unsync_index: u64,
    dump_unsynced: usize,
    bytes_in: u64,
    /// The sink asked to stop during the current push.
    stopped: bool,
    /// Buffer offset of `buf[0]`, for [`Packet::offset`] (not saved: a
    /// saved state is taken between packets).
    #[serde(skip)]
    buf_first: u64,
}

fn unset_table() -> [(PacketType, Handler); 256] {
    [(PacketType::Reserved, Handler::Reserved); 256]
}

fn unset_fast() -> [Fast; 256] {
    [Fast::Slow; 256]
}

impl Etm4Parser {
    /// The stream state, for a later [`Etm4Parser::load_state`].
    pub fn save_state(&self) -> Vec<u8> {
        bincode::serialize(self).unwrap_or_default()
    }

    /// A parser for `cfg` continuing from a saved state.
    pub fn load_state(cfg: &Etm4Config, state: &[u8]) -> Result<Etm4Parser, crate::protocol::ProtocolError> {
        let mut p: Etm4Parser = crate::protocol::read_state("parser", state)?;
        p.check()?;
        let fresh = Etm4Parser::new(cfg);
        p.table = fresh.table;
        p.fast = fresh.fast;
        p.c0_atoms = fresh.c0_atoms;
        p.set = fresh.set;
        Ok(p)
    }

    /// The bounds a loaded state must meet (see [`crate::protocol::check_state`]):
    /// what the parser itself can hold ([`MAX_PACKET_BYTES`]; unsynchronised
    /// bytes are reported in chunks of at most 8).
    fn check(&self) -> Result<(), crate::protocol::ProtocolError> {
        let s = &self.scratch;
        crate::protocol::check_state(
            "ETMv4 parser",
            &[
                (self.buf.len() <= MAX_PACKET_BYTES, "packet buffer length"),
                (s.ts_bytes <= 9, "timestamp bytes"),
                (s.excep_size <= 3, "exception packet size"),
                (s.vmid_bytes <= 4 && s.cid_bytes <= 8, "context ID sizes"),
                (s.addr_bytes <= 9, "address bytes"),
                (self.pkt.atom_count <= 32, "atom count"),
            ],
        )
    }

    pub fn new(cfg: &Etm4Config) -> Etm4Parser {
        let set = ParseSettings {
            major: cfg.major_version(),
            vmid_bytes: cfg.vmid_bits() / 8,
            cid_bytes: cfg.cid_bits() / 8,
            cc_mask: ((1u64 << cfg.cc_bits()) - 1) as u32,
            commit_opt1: cfg.commit_opt1(),
            max_spec: cfg.max_spec_depth(),
            m_profile: cfg.profile == CoreProfile::Microcontroller,
        };
        let table = build_table(cfg);
        let fast = build_fast_table(&table);
        let mut p = Etm4Parser {
            c0_atoms: fast.iter().enumerate().all(|(b, f)| matches!(f, Fast::Atom(..)) == (b >= 0xc0)),
            fast,
            table,
            set,
            state: State::Header,
            handler: Handler::NotSync,
            buf: Vec::with_capacity(64),
            pkt: Packet::start_state(),
            stack: [reset_address(); 3],
            scratch: Scratch::default(),
            is_sync: false,
            first_trace_info: false,
            sent_not_sync: false,
            packet_index: 0,
            block_index: 0,
            spans: Vec::with_capacity(8),
            update_on_unsync_index: 0,
            dump_unsynced: 0,
            bytes_in: 0,
            stopped: false,
            buf_first: 0,
        };
        p.reset();
        p
    }

    /// Forget all stream state, as at the start of a new capture (OpenCSD's
    /// reset between multi-session buffers).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.pkt = Packet::start_state();
        self.handler = Handler::NotSync;
        self.packet_index = 0;
        self.is_sync = false;
        self.first_trace_info = false;
        self.sent_not_sync = false;
        self.state = State::Header;
        self.update_on_unsync_index = 0;
    }

    /// True once an A-sync has been seen.
    pub fn is_synced(&self) -> bool {
        self.is_sync
    }

    /// Total bytes pushed since creation.
    pub fn bytes_in(&self) -> u64 {
        self.bytes_in
    }

    /// Parse `data`, whose first byte is at `index` in the captured buffer.
    /// Every complete packet is passed to `sink` with its raw bytes.
    pub fn push<F: FnMut(&Packet, &[u8])>(&mut self, index: u64, data: &[u8], sink: &mut F) {
        self.push_until(index, data, &mut |p: &Packet, r: &[u8]| {
            sink(p, r);
            true
        });
    }

    /// As [`Etm4Parser::push`], but the sink can stop parsing by returning
    /// false (a decoder that hit a fatal error). Returns the number of bytes of
    /// `data` consumed; the packet the sink refused is complete.
    pub fn push_until<F: PacketSink>(&mut self, index: u64, data: &[u8], sink: &mut F) -> usize {
        self.spans.clear();
        self.spans.push((0, index));
        self.parse::<false, F>(index, data, sink)
    }

    /// As [`Etm4Parser::push_until`] for data gathered from several blocks
    /// of the buffer (one trace ID's bytes from consecutive formatter
    /// frames): `spans` gives (offset in `data`, buffer index) of each
    /// block's first byte, in order. Packets get the indices they would get
    /// had each block been pushed on its own, and a packet that runs from
    /// one block into the next is parsed straight from `data`.
    pub fn push_spans_until<F: PacketSink>(&mut self, spans: &[(usize, u64)], data: &[u8], sink: &mut F) -> usize {
        self.spans.clear();
        self.spans.extend_from_slice(spans);
        // The first stretch starts the push, whatever the caller says.
        let first = match self.spans.first_mut() {
            Some(s) => {
                s.0 = 0;
                s.1
            }
            None => {
                self.spans.push((0, 0));
                0
            }
        };
        self.parse::<true, F>(first, data, sink)
    }

    /// The stretch of the current push holding `data[pos]`, found from
    /// stretch `k` on (the fast path moves forward a stretch at a time): its
    /// number, the buffer index of `data[0]` were the push all that stretch
    /// (wrapping), and where the next stretch starts.
    #[inline]
    fn span_from(&self, mut k: usize, pos: usize) -> (usize, u64, usize) {
        while self.spans.get(k + 1).is_some_and(|s| s.0 <= pos) {
            k += 1;
        }
        let (start, index) = self.spans.get(k).copied().unwrap_or((0, self.block_index));
        let next = self.spans.get(k + 1).map_or(usize::MAX, |s| s.0);
        (k, index.wrapping_sub(start as u64), next)
    }

    /// Buffer index of `data[pos]` in the current push.
    #[inline]
    fn at(&self, pos: usize) -> u64 {
        let k = self.spans.partition_point(|s| s.0 <= pos).saturating_sub(1);
        self.span_from(k, pos).1.wrapping_add(pos as u64)
    }

    /// Buffer index just past `data[pos - 1]`: at the end of a block that is
    /// just past its last byte, as for a push of that block alone.
    #[inline]
    fn after(&self, pos: usize) -> u64 {
        self.at(pos - 1) + 1
    }

    /// The machine over one push; `SPANS` when the push joins blocks (see
    /// [`Etm4Parser::push_spans_until`]).
    fn parse<const SPANS: bool, F: PacketSink>(&mut self, index: u64, data: &[u8], sink: &mut F) -> usize {
        self.block_index = index;
        self.stopped = false;
        let mut pos = 0usize;
        while pos < data.len() || self.state == State::SendPacket {
            match self.state {
                State::Header => {
                    if self.is_sync {
                        // Fast path: whole common packets straight from `data`.
                        pos = self.fast_run::<SPANS, F>(data, pos, sink);
                        if pos >= data.len() || self.stopped {
                            break;
                        }
                    }
                    self.clear_packet_fields();
                    // What earlier packets left in the scratch (the fast
                    // path leaves some) would be saved with a push that ends
                    // inside this one; with it, a state depended on where
                    // pushes split the packets before.
                    self.scratch = Scratch::default();
                    self.packet_index = self.at(pos);
                    if self.is_sync {
                        let (t, h) = self.table[data[pos] as usize];
                        self.handler = h;
                        self.pkt.ptype = t;
                    } else {
                        self.handler = Handler::NotSync;
                        self.pkt.ptype = PacketType::NotSync;
                    }
                    self.state = State::Data;
                }
                State::Data => {
                    while pos < data.len() && self.state == State::Data {
                        let b = data[pos];
                        if self.buf.is_empty() {
                            self.buf_first = self.at(pos);
                        }
                        self.buf.push(b);
                        pos += 1;
                        self.byte(b, pos);
                        if self.state == State::Data && self.buf.len() >= MAX_PACKET_BYTES {
                            self.bad_sequence();
                        }
                    }
                }
                State::SendPacket => {
                    self.output(sink);
                    self.init_packet();
                    self.state = State::Header;
                }
                State::SendUnsynced => {
                    self.output_unsynced(sink);
                    if self.update_on_unsync_index != 0 {
                        self.packet_index = self.update_on_unsync_index;
                        self.update_on_unsync_index = 0;
                    }
                    self.state = State::Data;
                }
            }
            if self.stopped {
                break;
            }
        }
        self.bytes_in += pos as u64;
        if self.state == State::Header && self.buf.is_empty() {
            self.settle();
        }
        pos
    }

    /// Between packets, forget what only the last packet needed (the next
    /// header sets it again). The fast path leaves some of it as the
    /// byte-wise machine would not, and which of the two took a packet
    /// depends on where pushes split the data: a state saved here is the
    /// same either way, so a decode started part way through a buffer is
    /// seen to have met the one from the start (the parallel index build
    /// compares their states).
    fn settle(&mut self) {
        self.scratch = Scratch::default();
        self.handler = Handler::NotSync;
        self.packet_index = 0;
        self.clear_packet_fields();
    }

    /// End of trace: a packet still being assembled is reported as
    /// `I_INCOMPLETE_EOT`.
    pub fn finish<F: FnMut(&Packet, &[u8])>(&mut self, sink: &mut F) {
        if !self.buf.is_empty() {
            self.update_err_type(PacketType::IncompleteEot, 0);
            self.output(&mut |p: &Packet, r: &[u8]| {
                sink(p, r);
                true
            });
            self.init_packet();
        }
        self.state = State::Header;
    }

    fn output<F: PacketSink>(&mut self, sink: &mut F) {
        self.pkt.index = self.packet_index;
        self.pkt.offset = self.buf_start();
        if !sink.packet(&self.pkt, &self.buf) {
            self.stopped = true;
        }
    }

    /// Where the buffered bytes begin (never before the packet's index, which
    /// after a load is all that is known).
    fn buf_start(&self) -> u64 {
        self.buf_first.max(self.packet_index)
    }

    fn output_unsynced<F: PacketSink>(&mut self, sink: &mut F) {
        let n = self.dump_unsynced.min(self.buf.len());
        self.pkt.index = self.packet_index;
        self.pkt.offset = self.buf_start();
        self.pkt.first_not_sync = !self.sent_not_sync;
        if !sink.packet(&self.pkt, &self.buf[..n]) {
            self.stopped = true;
        }
        self.pkt.first_not_sync = false;
        self.sent_not_sync = true;
        self.buf.drain(..n);
        self.buf_first += n as u64;
    }

    fn init_packet(&mut self) {
        self.buf.clear();
        self.pkt.cc_valid = false;
        self.pkt.commit_valid = false;
        self.pkt.atom_count = 0;
        self.pkt.context.updated = false;
        self.pkt.context.updated_cid = false;
        self.pkt.context.updated_vmid = false;
        self.pkt.err_type = PacketType::NoErrType;
        self.pkt.trace_info.initial = false;
        self.update_on_unsync_index = 0;
    }

    fn update_err_type(&mut self, err: PacketType, header: u8) {
        self.pkt.err_type = self.pkt.ptype;
        self.pkt.ptype = err;
        self.pkt.err_header = header;
    }

    fn bad_sequence(&mut self) {
        self.update_err_type(PacketType::BadSequence, 0);
        self.state = State::SendPacket;
    }

    /// One byte of the current packet; `pos` is the offset just past it.
    fn byte(&mut self, b: u8, pos: usize) {
        match self.handler {
            Handler::NotSync => self.not_sync(b, pos),
            Handler::Reserved => {
                self.update_err_type(PacketType::Reserved, b);
                self.state = State::SendPacket;
            }
            Handler::InvalidCfg => {
                self.update_err_type(PacketType::ReservedCfg, b);
                self.state = State::SendPacket;
            }
            Handler::NoPayload => self.no_payload(b),
            Handler::Extension => self.extension(b),
            Handler::Async => self.async_byte(b),
            Handler::TraceInfo => self.trace_info(b),
            Handler::Timestamp => self.timestamp(b),
            Handler::Exception => self.exception(b),
            Handler::CycleCount => self.cycle_count(b),
            Handler::SpecRes => self.spec_res(b),
            Handler::CondInstr => self.cond_instr(b),
            Handler::CondResult => self.cond_result(b),
            Handler::Context => self.context(b),
            Handler::AddrCtxt => self.addr_ctxt(b),
            Handler::ShortAddr => self.short_addr(b),
            Handler::LongAddr => self.long_addr(),
            Handler::Q => self.q(b),
            Handler::Atom => {
                self.atom(b);
                self.state = State::SendPacket;
            }
            Handler::Ite => {
                if self.buf.len() == 10 {
                    self.pkt.ite_el = self.buf[1];
                    self.pkt.ite_payload = u64::from_le_bytes(self.buf[2..10].try_into().unwrap());
                    self.state = State::SendPacket;
                }
            }
        }
    }

    fn not_sync(&mut self, b: u8, pos: usize) {
        if b == 0x00 {
            // A possible A-sync starts here: report what came before it.
            if self.buf.len() > 1 {
                self.dump_unsynced = self.buf.len() - 1;
                self.state = State::SendUnsynced;
                self.update_on_unsync_index = self.at(pos - 1);
            } else {
                self.packet_index = self.at(pos - 1);
            }
            self.handler = self.table[0].1;
        } else if self.buf.len() >= 8 {
            self.dump_unsynced = self.buf.len();
            self.state = State::SendUnsynced;
            self.update_on_unsync_index = self.after(pos);
        }
    }

    fn no_payload(&mut self, b: u8) {
        match self.pkt.ptype {
            PacketType::AddrMatch | PacketType::SrcAddrMatch => self.set_exact_match(b & 0x3),
            PacketType::Event => self.pkt.event = b & 0xf,
            PacketType::NumDataSyncMarker | PacketType::UnnumDataSyncMarker => self.pkt.dsm = b & 0x7,
            _ => {}
        }
        self.state = State::SendPacket;
    }

    fn extension(&mut self, b: u8) {
        if self.buf.len() != 2 {
            return;
        }
        if !self.is_sync && b != 0x00 {
            self.handler = Handler::NotSync;
            self.pkt.ptype = PacketType::NotSync;
            return;
        }
        match b {
            0x03 => {
                self.pkt.ptype = PacketType::Discard;
                self.state = State::SendPacket;
            }
            0x05 => {
                self.pkt.ptype = PacketType::Overflow;
                self.state = State::SendPacket;
            }
            0x00 => {
                self.pkt.ptype = PacketType::Async;
                self.handler = Handler::Async;
            }
            _ => {
                self.pkt.err_type = self.pkt.ptype;
                self.pkt.ptype = PacketType::BadSequence;
                self.state = State::SendPacket;
            }
        }
    }

    fn async_byte(&mut self, b: u8) {
        let len = self.buf.len();
        if b != 0x00 {
            if !self.is_sync && len != 12 {
                self.handler = Handler::NotSync;
                self.pkt.ptype = PacketType::NotSync;
                return;
            }
            self.state = State::SendPacket;
            if len != 12 || b != 0x80 {
                self.pkt.ptype = PacketType::BadSequence;
                self.pkt.err_type = PacketType::Async;
            } else {
                self.is_sync = true;
                // Read only while unsynchronised, which the parser is not
                // again before a reset (which clears them). Left set, a
                // decode started part way through whose parser listed bytes
                // before its first A-sync never met the decode from the
                // start in the parallel index build: juno-uname-002
                // repeated had its second half decoded twice, its summary no
                // faster on two cores than on one.
                self.sent_not_sync = false;
                self.dump_unsynced = 0;
            }
        } else if len == 12 {
            if !self.is_sync {
                // Extra leading zero before the sync: report it as unsynchronised.
                self.dump_unsynced = 1;
                self.state = State::SendUnsynced;
            } else {
                self.pkt.ptype = PacketType::BadSequence;
                self.pkt.err_type = PacketType::Async;
                self.state = State::SendPacket;
            }
        }
    }

    fn trace_info(&mut self, b: u8) {
        let s = &mut self.scratch;
        tinfo_step(&mut s.tinfo_flags, &mut s.tinfo_ctrl_bytes, self.buf.len(), b);
        if self.scratch.tinfo_flags == TINFO_ALL {
            let start = self.scratch.tinfo_ctrl_bytes as usize + 1;
            let ti = decode_trace_info(&self.buf, start);
            self.apply_trace_info(ti);
        }
    }

    /// A whole Trace Info packet's sections (`None`: one ran past the end,
    /// a bad sequence) become the packet's and the parser's.
    fn apply_trace_info(&mut self, ti: Option<super::packet::TraceInfo>) {
        self.clear_trace_info();
        match ti {
            Some(ti) => {
                let ti_initial = !self.first_trace_info;
                self.pkt.trace_info = super::packet::TraceInfo { initial: ti_initial, ..ti };
                self.state = State::SendPacket;
                self.first_trace_info = true;
            }
            None => self.bad_sequence(),
        }
    }

    fn clear_trace_info(&mut self) {
        self.pkt.ts_valid = false;
        self.pkt.trace_info = Default::default();
        self.stack = [reset_address(); 3];
        self.pkt.addr = self.stack[0];
    }

    fn timestamp(&mut self, b: u8) {
        let s = &mut self.scratch;
        if self.buf.len() == 1 {
            s.cc_done = b & 1 == 0;
            s.ts_done = false;
            s.ts_bytes = 0;
        } else if !s.ts_done {
            s.ts_bytes += 1;
            s.ts_done = s.ts_bytes == 9 || b & 0x80 == 0;
        } else if !s.cc_done {
            s.cc_done = b & 0x80 == 0;
        }
        if self.scratch.ts_done && self.scratch.cc_done {
            let (ts, n) = ts_field(&self.buf[1..]);
            self.apply_timestamp(ts, n);
            if self.buf[0] & 1 == 1 {
                match cont_field(&self.buf[1 + n..], 3) {
                    Some((cc, _)) => self.set_cc(cc & self.set.cc_mask),
                    None => return self.bad_sequence(),
                }
            }
            self.state = State::SendPacket;
        }
    }

    fn apply_timestamp(&mut self, value: u64, nbytes: usize) {
        let mut bits = if nbytes < 9 { nbytes as u32 * 7 } else { 64 };
        if !self.pkt.ts_valid && self.first_trace_info {
            // After a Trace Info the bits the packet leaves out are zero.
            bits = 64;
        }
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        self.pkt.timestamp = (self.pkt.timestamp & !mask) | (value & mask);
        self.pkt.ts_bits_changed = bits as u8;
        self.pkt.ts_valid = true;
    }

    fn set_cc(&mut self, cc: u32) {
        self.pkt.cycle_count = cc;
        self.pkt.cc_valid = true;
    }

    fn set_commit(&mut self, n: u32) {
        self.pkt.commit = n;
        self.pkt.commit_valid = true;
    }

    fn cc_threshold(&self) -> u32 {
        if self.pkt.trace_info.cyct_present {
            self.pkt.trace_info.cc_threshold
        } else {
            0
        }
    }

    fn exception(&mut self, b: u8) {
        let len = self.buf.len();
        if len == 1 {
            self.scratch.excep_size = 3;
        } else if len == 2 {
            self.scratch.excep_size = self.exception_size(b);
        }
        if len == self.scratch.excep_size as usize {
            let b2 = if len > 2 { self.buf[2] } else { 0 };
            self.finish_exception(self.buf[1], b2);
            self.state = State::SendPacket;
        }
    }

    /// The length of an exception packet whose second byte is `b1`: three
    /// when bit 7 says a third follows, or for ETE's PE reset and
    /// transaction failure, which always carry it; else two.
    #[inline(always)]
    fn exception_size(&self, b1: u8) -> u8 {
        if b1 & 0x80 != 0 || self.ete_reset_or_fail(b1) {
            3
        } else {
            2
        }
    }

    /// Whether an exception packet's second byte `b1` has the type bits of
    /// ETE's PE reset or transaction failure (0 and 0x18): such a packet
    /// has three bytes, and is renamed when its whole number is one of
    /// those ([`Etm4Parser::finish_exception`]).
    #[inline(always)]
    fn ete_reset_or_fail(&self, b1: u8) -> bool {
        let t = (b1 >> 1) & 0x1f;
        self.set.major >= 5 && (t == 0 || t == 0x18)
    }

    /// The exception fields from the packet's second byte and its third
    /// (read only when the second says there is one).
    fn finish_exception(&mut self, b1: u8, b2: u8) {
        let mut number = ((b1 >> 1) & 0x1f) as u16;
        let addr_interp = ((b1 & 0x40) >> 5) | (b1 & 0x1);
        let mut fault_pending = false;
        if b1 & 0x80 != 0 {
            number |= ((b2 & 0x1f) as u16) << 5;
            fault_pending = (b2 >> 5) & 1 == 1;
        }
        self.pkt.exception = super::packet::ExceptionInfo {
            number,
            addr_interp,
            m_fault_pending: fault_pending,
            m_type: self.set.m_profile,
        };
        if self.set.major >= 5 && (number == 0 || number == 0x18) {
            self.set_address_64(0, 0);
            self.pkt.ptype = if number == 0x18 { PacketType::TransFail } else { PacketType::PeReset };
        }
    }

    fn cycle_count(&mut self, b: u8) {
        let len = self.buf.len();
        let format = self.pkt.ptype;
        if len == 1 {
            self.cycle_scratch();
            match format {
                PacketType::CycleCountF3 => {
                    if !self.set.commit_opt1 {
                        self.set_commit(((b >> 2) & 0x3) as u32 + 1);
                    }
                    let cc = self.cc_threshold().wrapping_add((b & 0x3) as u32);
                    self.set_cc(cc);
                    self.state = State::SendPacket;
                }
                PacketType::CycleCountF1 => {
                    if b & 1 == 1 {
                        self.scratch.has_count = false;
                        self.scratch.count_done = true;
                    }
                    if self.set.commit_opt1 {
                        self.scratch.commit_done = true;
                    }
                }
                _ => {}
            }
        } else if format == PacketType::CycleCountF2 && len == 2 {
            self.cycle_f2(self.buf[0], b);
            self.state = State::SendPacket;
        } else if !self.scratch.commit_done {
            self.scratch.commit_done = b & 0x80 == 0;
        } else if !self.scratch.count_done {
            self.scratch.count_done = b & 0x80 == 0;
        }
        if format == PacketType::CycleCountF1 && self.scratch.commit_done && self.scratch.count_done {
            let mut idx = 1;
            if !self.set.commit_opt1 {
                match cont_field(self.held_from(idx), 5) {
                    Some((v, n)) => {
                        idx += n;
                        self.set_commit(v);
                    }
                    None => return self.bad_sequence(),
                }
            }
            if self.scratch.has_count {
                match cont_field(&self.buf[idx..], 3) {
                    Some((v, _)) => {
                        let cc = v.wrapping_add(self.cc_threshold());
                        self.set_cc(cc);
                    }
                    None => return self.bad_sequence(),
                }
            } else {
                // Unknown count after an overflow is reported as 0.
                self.set_cc(0);
            }
            self.state = State::SendPacket;
        }
    }

    /// What a cycle count packet's first byte sets up, for both paths.
    fn cycle_scratch(&mut self) {
        self.scratch.count_done = false;
        self.scratch.commit_done = false;
        self.scratch.has_count = true;
    }

    /// A format 3 cycle count packet with header `b` (one byte).
    #[inline(always)]
    fn cycle_f3(&mut self, b: u8) {
        self.cycle_scratch();
        if !self.set.commit_opt1 {
            self.set_commit(((b >> 2) & 0x3) as u32 + 1);
        }
        let cc = self.cc_threshold().wrapping_add((b & 0x3) as u32);
        self.set_cc(cc);
    }

    /// A format 2 cycle count from its two bytes.
    fn cycle_f2(&mut self, header: u8, b: u8) {
        // Header bit 0 (F) selects the commit offset: 1, or MAXSPEC - 15.
        let offset = if header & 1 == 1 { (self.set.max_spec as i64 - 15) as u32 } else { 1 };
        let commit = ((b >> 4) & 0xf) as u32;
        let cc = self.cc_threshold().wrapping_add((b & 0xf) as u32);
        self.set_cc(cc);
        // Commit mode 1 cycle counts carry no commit field.
        if !self.set.commit_opt1 {
            self.set_commit(commit.wrapping_add(offset));
        }
    }

    fn spec_res(&mut self, b: u8) {
        if self.buf.len() == 1 {
            if self.spec_res_header(self.pkt.ptype, b) {
                self.state = State::SendPacket;
            }
        } else if b & 0x80 == 0 {
            match cont_field(&self.buf[1..], 5) {
                Some((v, _)) => {
                    self.spec_res_count(self.pkt.ptype, v);
                    self.state = State::SendPacket;
                }
                None => self.bad_sequence(),
            }
        }
    }

    /// The fields a speculation packet of type `ptype` takes from its header
    /// `b`, with no atoms before them (as every packet starts): true for
    /// the one-byte packets (mispredict, cancel formats 2 and 3), which
    /// are then whole; false for those with a count field.
    #[inline(always)]
    fn spec_res_header(&mut self, ptype: PacketType, b: u8) -> bool {
        self.pkt.atom_count = 0;
        match ptype {
            PacketType::Mispredict | PacketType::CancelF2 => {
                match b & 0x3 {
                    1 => self.set_atoms(0x1, 1),
                    2 => self.set_atoms(0x3, 2),
                    3 => self.set_atoms(0x0, 1),
                    _ => {}
                }
                self.pkt.cancel = (ptype == PacketType::CancelF2) as u32;
                true
            }
            PacketType::CancelF3 => {
                if b & 1 == 1 {
                    self.set_atoms(0x1, 1);
                }
                self.pkt.cancel = ((b >> 1) & 0x3) as u32 + 2;
                true
            }
            _ => false,
        }
    }

    /// The count field's value `v` of a commit or cancel (format 1) packet.
    #[inline(always)]
    fn spec_res_count(&mut self, ptype: PacketType, v: u32) {
        if ptype == PacketType::Commit {
            self.set_commit(v);
        } else {
            self.pkt.cancel = v;
        }
    }

    fn cond_instr(&mut self, b: u8) {
        let len = self.buf.len();
        let mut f1_done = false;
        if len == 1 {
            if self.pkt.ptype == PacketType::CondInstrF2 {
                self.state = State::SendPacket;
            }
        } else if len == 2 && self.pkt.ptype == PacketType::CondInstrF3 {
            self.state = State::SendPacket;
        } else {
            f1_done = b & 0x80 == 0;
        }
        if f1_done {
            match cont_field(&self.buf[1..], 5) {
                Some(_) => self.state = State::SendPacket,
                None => self.bad_sequence(),
            }
        }
    }

    fn cond_result(&mut self, b: u8) {
        let len = self.buf.len();
        let s = &mut self.scratch;
        if len == 1 {
            s.f1p1_done = false;
            s.f1p2_done = false;
            s.f1_has_p2 = false;
            match self.pkt.ptype {
                PacketType::CondResultF1 => {
                    s.f1_has_p2 = true;
                    if b & 0xfc == 0x6c {
                        s.f1p2_done = true;
                        s.f1_has_p2 = false;
                    }
                }
                PacketType::CondResultF2 | PacketType::CondResultF4 => self.state = State::SendPacket,
                _ => {}
            }
        } else if self.pkt.ptype == PacketType::CondResultF3 && len == 2 {
            self.state = State::SendPacket;
        } else {
            if !s.f1p1_done {
                s.f1p1_done = b & 0x80 == 0;
            } else if !s.f1p2_done {
                s.f1p2_done = b & 0x80 == 0;
            }
            if s.f1p1_done && s.f1p2_done {
                let has_p2 = s.f1_has_p2;
                let ok = match cond_result_field(&self.buf[1..]) {
                    Some(n) => !has_p2 || cond_result_field(&self.buf[1 + n..]).is_some(),
                    None => false,
                };
                if ok {
                    self.state = State::SendPacket;
                } else {
                    self.bad_sequence();
                }
            }
        }
    }

    fn context(&mut self, b: u8) {
        let len = self.buf.len();
        let mut send = false;
        if len == 1 {
            if b & 1 == 0 {
                self.set_context_info(false, 0);
                self.state = State::SendPacket;
            }
        } else if len == 2 {
            if b & 0xc0 == 0 {
                send = true;
            } else {
                self.scratch.vmid_bytes = if b & 0x40 != 0 { self.set.vmid_bytes } else { 0 };
                self.scratch.cid_bytes = if b & 0x80 != 0 { self.set.cid_bytes } else { 0 };
            }
        } else {
            if self.scratch.vmid_bytes > 0 {
                self.scratch.vmid_bytes -= 1;
            } else if self.scratch.cid_bytes > 0 {
                self.scratch.cid_bytes -= 1;
            }
            send = self.scratch.vmid_bytes == 0 && self.scratch.cid_bytes == 0;
        }
        if send {
            self.extract_context(1);
            self.state = State::SendPacket;
        }
    }

    fn set_context_info(&mut self, update: bool, info: u8) {
        self.pkt.context_valid = true;
        if update {
            let c = &mut self.pkt.context;
            c.updated = true;
            c.el = info & 0x3;
            c.ns = (info >> 5) & 1 == 1;
            c.sf = (info >> 4) & 1 == 1;
            c.nse = (info >> 3) & 1 == 1;
        }
    }

    /// Context fields starting at the info byte `buf[at]`.
    fn extract_context(&mut self, at: usize) {
        let buf = std::mem::take(&mut self.buf);
        self.context_fields(buf.get(at..).unwrap_or_default());
        self.buf = buf;
    }

    /// Context fields from `b`: the info byte, then the IDs it names. The
    /// byte-wise handler counted the ID bytes from the info byte as it came;
    /// in a loaded state that was edited the info byte held may name more
    /// than the buffer holds, and those read as zero.
    fn context_fields(&mut self, b: &[u8]) {
        let info = b.first().copied().unwrap_or(0);
        self.set_context_info(true, info);
        let nv = if info & 0x40 != 0 { self.set.vmid_bytes as usize } else { 0 };
        let nc = if info & 0x80 != 0 { self.set.cid_bytes as usize } else { 0 };
        let mut p = 1;
        if nv > 0 {
            let v = b.get(p..p + nv).map_or(0, le_bytes);
            p += nv;
            self.pkt.context.vmid = v;
            self.pkt.context.updated = true;
            self.pkt.context.updated_vmid = true;
        }
        if nc > 0 {
            let v = b.get(p..p + nc).map_or(0, le_bytes);
            self.pkt.context.context_id = v;
            self.pkt.context.updated = true;
            self.pkt.context.updated_cid = true;
        }
    }

    fn addr_ctxt(&mut self, b: u8) {
        let s = &mut self.scratch;
        if self.buf.len() == 1 {
            s.addr_is = 0;
            s.addr_bytes = 4;
            s.addr_64 = false;
            s.vmid_bytes = 0;
            s.cid_bytes = 0;
            s.ctxt_info_done = false;
            match self.pkt.ptype {
                PacketType::AddrCtxtL32Is1 => s.addr_is = 1,
                PacketType::AddrCtxtL64Is0 | PacketType::AddrCtxtL64Is1 => {
                    s.addr_is = (self.pkt.ptype == PacketType::AddrCtxtL64Is1) as u8;
                    s.addr_bytes = 8;
                    s.addr_64 = true;
                }
                _ => {}
            }
            return;
        }
        if s.addr_bytes == 0 {
            if !s.ctxt_info_done {
                s.ctxt_info_done = true;
                s.vmid_bytes = if b & 0x40 != 0 { self.set.vmid_bytes } else { 0 };
                s.cid_bytes = if b & 0x80 != 0 { self.set.cid_bytes } else { 0 };
            } else if s.vmid_bytes > 0 {
                s.vmid_bytes -= 1;
            } else if s.cid_bytes > 0 {
                s.cid_bytes -= 1;
            }
        } else {
            s.addr_bytes -= 1;
        }
        if s.addr_bytes == 0 && s.ctxt_info_done && s.vmid_bytes == 0 && s.cid_bytes == 0 {
            let is = s.addr_is;
            let next = if s.addr_64 {
                let v = long_addr_64(self.held_from(1), is);
                self.set_address_64(v, is);
                9
            } else {
                let v = long_addr_32(self.held_from(1), is);
                self.set_address_32(v, is);
                5
            };
            self.extract_context(next);
            self.state = State::SendPacket;
        }
    }

    fn short_addr(&mut self, b: u8) {
        let len = self.buf.len();
        if len == 1 {
            self.scratch.addr_done = false;
            self.scratch.addr_is =
                matches!(self.pkt.ptype, PacketType::AddrShortIs1 | PacketType::SrcAddrShortIs1) as u8;
        } else if !self.scratch.addr_done {
            self.scratch.addr_done = len == 3 || b & 0x80 == 0;
        }
        if self.scratch.addr_done {
            let is = self.scratch.addr_is;
            let (v, bits, _) = short_addr(self.held_from(1), is);
            self.update_short_address(v, is, bits);
            self.state = State::SendPacket;
        }
    }

    fn long_addr(&mut self) {
        let len = self.buf.len();
        if len == 1 {
            use PacketType::*;
            let t = self.pkt.ptype;
            self.scratch.addr_is = matches!(t, AddrL32Is1 | SrcAddrL32Is1 | AddrL64Is1 | SrcAddrL64Is1) as u8;
            self.scratch.addr_64 = matches!(t, AddrL64Is0 | AddrL64Is1 | SrcAddrL64Is0 | SrcAddrL64Is1);
            self.scratch.addr_bytes = if self.scratch.addr_64 { 8 } else { 4 };
        }
        if len == 1 + self.scratch.addr_bytes as usize {
            let is = self.scratch.addr_is;
            if self.scratch.addr_64 {
                let v = long_addr_64(self.held_from(1), is);
                self.set_address_64(v, is);
            } else {
                let v = long_addr_32(self.held_from(1), is);
                self.set_address_32(v, is);
            }
            self.state = State::SendPacket;
        }
    }

    fn q(&mut self, b: u8) {
        let s = &mut self.scratch;
        if self.buf.len() == 1 {
            s.q_type = b & 0xf;
            s.addr_bytes = 0;
            s.count_done = false;
            s.has_addr = false;
            s.addr_short = true;
            s.addr_match = false;
            s.addr_is = 1;
            s.qe = 0;
            match s.q_type {
                0x0..=0x2 => {
                    s.addr_match = true;
                    s.has_addr = true;
                    s.qe = s.q_type & 0x3;
                }
                0xc => {}
                0x5 | 0x6 => {
                    s.addr_is = (s.q_type == 0x6) as u8;
                    s.has_addr = true;
                    s.addr_bytes = 2;
                }
                0xa | 0xb => {
                    s.addr_is = (s.q_type == 0xb) as u8;
                    s.has_addr = true;
                    s.addr_short = false;
                    s.addr_bytes = 4;
                }
                0xf => s.count_done = true,
                _ => {
                    self.pkt.err_type = self.pkt.ptype;
                    self.pkt.ptype = PacketType::BadSequence;
                    self.state = State::SendPacket;
                    return;
                }
            }
        } else if s.addr_bytes > 0 {
            if s.addr_short && s.addr_bytes == 2 && b & 0x80 == 0 {
                s.addr_bytes -= 1;
            }
            s.addr_bytes -= 1;
        } else if !s.count_done {
            s.count_done = b & 0x80 == 0;
        }
        let s = self.scratch;
        if s.addr_bytes == 0 && s.count_done {
            let mut idx = 1;
            if s.has_addr {
                if s.addr_match {
                    self.set_exact_match(s.qe);
                } else if s.addr_short {
                    let (v, bits, n) = short_addr(self.held_from(1), s.addr_is);
                    idx += n;
                    self.update_short_address(v, s.addr_is, bits);
                } else {
                    let v = long_addr_32(self.held_from(1), s.addr_is);
                    idx += 4;
                    self.set_address_32(v, s.addr_is);
                }
            }
            if s.q_type != 0xf {
                match cont_field(self.held_from(idx), 5) {
                    Some((count, _)) => {
                        self.pkt.q = super::packet::QInfo {
                            count,
                            count_present: true,
                            addr_present: s.has_addr,
                            addr_match: s.addr_match,
                            q_type: s.q_type,
                        }
                    }
                    None => return self.bad_sequence(),
                }
            } else {
                self.pkt.q = super::packet::QInfo { q_type: 0xf, ..Default::default() };
            }
            self.state = State::SendPacket;
        }
    }

    fn atom(&mut self, b: u8) {
        let (bits, count) = atom_pattern(self.pkt.ptype, b);
        if count > 0 {
            self.set_atoms(bits, count);
        }
    }

    fn set_atoms(&mut self, bits: u32, count: u8) {
        self.pkt.atom_bits = bits;
        self.pkt.atom_count = count;
    }

    /// The exception packet at the start of `rest`, taken whole as
    /// [`Etm4Parser::exception`] takes it byte by byte: its length and type,
    /// or `None` when it is not whole in `rest` (its length:
    /// [`Etm4Parser::exception_size`]). ETE's PE reset and transaction
    /// failure, when the whole number says so, are packets of their own
    /// type; `renamed: false` leaves every packet that may be one to the
    /// one-by-one loop, for a caller that finds the last packet's type from
    /// its header (`count_run`).
    #[inline(always)]
    fn take_exception(&mut self, rest: &[u8], renamed: bool) -> Option<(usize, PacketType)> {
        let b1 = *rest.get(1)?;
        if !renamed && self.ete_reset_or_fail(b1) {
            return None;
        }
        let n = self.exception_size(b1);
        let b2 = if n == 3 { *rest.get(2)? } else { 0 };
        self.scratch.excep_size = n;
        // The type is the whole number's, the third byte's bits included:
        // what renames the packet, if anything, is `finish_exception`.
        self.pkt.ptype = PacketType::Exception;
        self.finish_exception(b1, b2);
        Some((n as usize, self.pkt.ptype))
    }

    /// The commit, cancel or mispredict packet (header `b`, of type
    /// `ptype`) at the start of `rest`, taken whole as
    /// [`Etm4Parser::spec_res`] takes it byte by byte: its length, or `None`
    /// when its count field does not end in `rest` within five bytes (a
    /// runaway field is the byte-wise machine's to judge).
    #[inline(always)]
    fn take_spec_res(&mut self, ptype: PacketType, b: u8, rest: &[u8]) -> Option<usize> {
        if self.spec_res_header(ptype, b) {
            return Some(1);
        }
        let field = rest.get(1..).unwrap_or_default();
        let len = field.iter().take(5).position(|&c| c & 0x80 == 0)? + 1;
        let (v, _) = cont_field(field, len)?;
        self.spec_res_count(ptype, v);
        Some(1 + len)
    }

    /// The Q packet (header `b`) at the start of `rest`, taken whole as
    /// [`Etm4Parser::q`] takes it byte by byte: its length, or `None` when
    /// its count runs past `rest` or past what the byte-wise machine holds
    /// ([`MAX_PACKET_BYTES`]), left to that machine. Only the headers the
    /// table gives to `q` come here, so every type is a valid one.
    #[inline(always)]
    fn take_q(&mut self, b: u8, rest: &[u8]) -> Option<usize> {
        let rest = rest.get(..MAX_PACKET_BYTES).unwrap_or(rest);
        let q_type = b & 0xf;
        // The address part: (instruction set, whether short, its length).
        let addr = match q_type {
            // One address byte, or two when the first has bit 7 set, as in
            // a short address packet (whose length counts the header).
            0x5 | 0x6 => Some(((q_type == 0x6) as u8, true, short_addr_len(rest)? - 1)),
            0xa | 0xb => Some(((q_type == 0xb) as u8, false, 4)),
            _ => None,
        };
        let count_at = 1 + addr.map_or(0, |a| a.2);
        let len = if q_type == 0xf {
            1
        } else {
            // The count ends at the first byte without bit 7.
            count_at + rest.get(count_at..)?.iter().position(|&c| c & 0x80 == 0)? + 1
        };
        match addr {
            _ if q_type <= 0x2 => self.set_exact_match(q_type),
            Some((is, true, n)) => {
                let (v, bits, _) = short_addr(&rest[1..1 + n], is);
                self.update_short_address(v, is, bits);
            }
            Some((is, false, _)) => self.set_address_32(long_addr_32(&rest[1..5], is), is),
            None => {}
        }
        self.pkt.q = match cont_field(&rest[count_at..len], 5) {
            Some((count, _)) if q_type != 0xf => super::packet::QInfo {
                count,
                count_present: true,
                addr_present: addr.is_some() || q_type <= 0x2,
                addr_match: q_type <= 0x2,
                q_type,
            },
            _ => super::packet::QInfo { q_type: 0xf, ..Default::default() },
        };
        Some(len)
    }

    /// The context packet (header `b`) at the start of `rest`, without the
    /// info byte or with one that names no IDs, taken whole: its length.
    /// The caller clears the packet fields after it.
    #[inline(always)]
    fn take_context(&mut self, b: u8, rest: &[u8]) -> Option<usize> {
        if b & 1 == 0 {
            self.set_context_info(false, 0);
            return Some(1);
        }
        let info = *rest.get(1)?;
        let nv = if info & 0x40 != 0 { self.set.vmid_bytes as usize } else { 0 };
        let nc = if info & 0x80 != 0 { self.set.cid_bytes as usize } else { 0 };
        if info & 0xc0 != 0 && nv + nc == 0 {
            // IDs named where the configuration has none: the byte-wise
            // machine takes one byte more, as OpenCSD does.
            return None;
        }
        let raw = rest.get(..2 + nv + nc)?;
        self.context_fields(&raw[1..]);
        Some(raw.len())
    }

    /// The timestamp packet (header `b`, with a cycle count if its bit 0
    /// is set) at the start of `rest`, taken whole: its length. `None`
    /// when it runs past `rest` or its count is malformed, both left to
    /// the byte-wise machine. The caller clears the packet fields after.
    #[inline(always)]
    fn take_timestamp(&mut self, b: u8, rest: &[u8]) -> Option<usize> {
        // As the byte-wise machine counts: at most 9 timestamp bytes, the
        // last one whole; then count bytes up to one without bit 7.
        let tail = rest.get(1..)?;
        let ts_len = tail.iter().take(9).position(|&x| x & 0x80 == 0).map_or(9, |i| i + 1);
        let mut n = 1 + ts_len;
        let mut cc = None;
        if b & 1 == 1 {
            let count = rest.get(n..)?;
            // Longer counts than three bytes are read as three (as the
            // byte-wise machine reads them); rarer than rare, left to it.
            let cc_len = count.iter().take(3).position(|&x| x & 0x80 == 0)? + 1;
            cc = Some(cont_field(&count[..cc_len], 3)?.0);
            n += cc_len;
        }
        let (ts, nbytes) = ts_field(rest.get(1..1 + ts_len)?);
        self.apply_timestamp(ts, nbytes);
        if let Some(cc) = cc {
            self.set_cc(cc & self.set.cc_mask);
        }
        Some(n)
    }

    /// The Trace Info packet at the start of `rest`, taken whole: its
    /// length. `None` when it runs past `rest` (or past 64 bytes, a length
    /// only a malformed one reaches) or a section is malformed.
    #[inline(always)]
    fn take_trace_info(&mut self, rest: &[u8]) -> Option<usize> {
        let (mut flags, mut ctrl) = (0u8, 0u16);
        let mut n = 0;
        for (i, &b) in rest.iter().enumerate().take(64) {
            tinfo_step(&mut flags, &mut ctrl, i + 1, b);
            if flags == TINFO_ALL {
                n = i + 1;
                break;
            }
        }
        if n == 0 {
            return None;
        }
        let ti = decode_trace_info(&rest[..n], ctrl as usize + 1)?;
        self.apply_trace_info(Some(ti));
        Some(n)
    }

    /// The address-and-context packet at the start of `rest` (a 64-bit
    /// address if `wide`, in instruction set `is`) taken whole: its length.
    /// The caller clears the packet fields after it.
    #[inline(always)]
    fn take_addr_ctxt(&mut self, rest: &[u8], is: u8, wide: bool) -> Option<usize> {
        let a = if wide { 8 } else { 4 };
        let info = *rest.get(1 + a)?;
        let nv = if info & 0x40 != 0 { self.set.vmid_bytes as usize } else { 0 };
        let nc = if info & 0x80 != 0 { self.set.cid_bytes as usize } else { 0 };
        let n = 2 + a + nv + nc;
        let raw = rest.get(..n)?;
        // The address first: a 32-bit one keeps the upper half when the
        // context before this packet says AArch64.
        if wide {
            self.set_address_64(long_addr_64(&raw[1..9], is), is);
        } else {
            self.set_address_32(long_addr_32(&raw[1..5], is), is);
        }
        self.context_fields(&raw[1 + a..]);
        Some(n)
    }

    /// In the counting loop, a packet that clears the packet fields: the
    /// atom packet pending at `*atom_at` (if any) sets its fields first,
    /// as it did one by one, and none is pending after.
    #[inline(always)]
    fn clear_after_atoms(&mut self, data: &[u8], atom_at: &mut usize) {
        self.set_atoms_at(data, std::mem::replace(atom_at, NO_ATOM));
        self.clear_packet_fields();
    }

    /// The atom fields of the atom packet whose header is `data[at]`, if
    /// it is one (nothing for an index past the data).
    #[inline(always)]
    fn set_atoms_at(&mut self, data: &[u8], at: usize) {
        if let Some(Fast::Atom(count, _, bits)) = data.get(at).map(|&b| self.fast[b as usize]) {
            self.set_atoms(bits, count);
        }
    }

    /// The packet bytes from `from` on. The byte-wise handlers read their
    /// payload through it: a loaded state (an index file from elsewhere)
    /// may hold sizes that do not fit its buffer, and must not panic.
    fn held_from(&self, from: usize) -> &[u8] {
        self.buf.get(from..).unwrap_or_default()
    }

    /// The packet's address becomes `a` and goes on the address stack.
    /// Each caller builds the whole address first and it is stored once:
    /// changing fields of `pkt.addr` in place and then copying it to the
    /// stack made the copy wait on the narrow stores before it.
    #[inline(always)]
    fn put_addr(&mut self, a: Address) {
        self.pkt.addr = a;
        // As one 32-byte move: built as a new array, each entry was copied
        // field by field.
        self.stack.copy_within(0..2, 1);
        self.stack[0] = a;
    }

    fn set_address_64(&mut self, v: u64, is: u8) {
        self.put_addr(Address { value: v, valid_bits: 64, pkt_bits: 64, is_64bit: true, isa: is });
    }

    fn set_address_32(&mut self, v: u32, is: u8) {
        self.put_addr(self.address_32(v, is));
    }

    /// The address a 32-bit address packet gives (not yet stored).
    #[inline(always)]
    fn address_32(&self, v: u32, is: u8) -> Address {
        // Built whole rather than changed in a copy of the last address:
        // the copy carried its padding bytes along, loaded and stored again
        // with every address packet.
        let old = &self.pkt.addr;
        let (value, is_64bit) = if self.pkt.context_valid && self.pkt.context.sf {
            ((old.value & !0xffff_ffff) | v as u64, true)
        } else {
            (v as u64, false)
        };
        Address { value, valid_bits: old.valid_bits.max(32), pkt_bits: 32, is_64bit, isa: is }
    }

    fn update_short_address(&mut self, v: u32, is: u8, bits: u8) {
        self.put_addr(self.short_address(v, is, bits));
    }

    /// The address a short address packet gives (not yet stored).
    #[inline(always)]
    fn short_address(&self, v: u32, is: u8, bits: u8) -> Address {
        // Built whole: see address_32.
        let old = &self.pkt.addr;
        let mask = (1u64 << bits) - 1;
        Address {
            value: (old.value & !mask) | (v as u64 & mask),
            valid_bits: old.valid_bits.max(bits),
            pkt_bits: bits,
            is_64bit: old.is_64bit,
            isa: is,
        }
    }

    fn set_exact_match(&mut self, idx: u8) {
        self.pkt.exact_match_idx = idx;
        self.put_addr(self.matched_address(idx));
    }

    /// The address an exact match packet for entry `idx` gives.
    #[inline(always)]
    fn matched_address(&self, idx: u8) -> Address {
        self.stack.get(idx as usize).copied().unwrap_or(self.pkt.addr)
    }

    /// Per-packet fields a packet only sets when it carries them; cleared
    /// before every packet the byte-wise machine assembles.
    fn clear_packet_fields(&mut self) {
        self.pkt.atom_count = 0;
        self.pkt.cc_valid = false;
        self.pkt.commit_valid = false;
        self.pkt.context.updated = false;
        self.pkt.context.updated_cid = false;
        self.pkt.context.updated_vmid = false;
        self.pkt.err_type = PacketType::NoErrType;
        self.pkt.trace_info.initial = false;
    }

    /// Hand a packet the fast path parsed to the sink.
    #[inline(always)]
    fn emit<F: PacketSink>(&mut self, sink: &mut F, ptype: PacketType, at: u64, raw: &[u8]) -> bool {
        self.pkt.ptype = ptype;
        self.pkt.index = at;
        self.pkt.offset = at;
        sink.packet(&self.pkt, raw)
    }

    /// Parse whole packets of the common kinds (atoms, addresses, cycle
    /// counts, exceptions, context and address-and-context packets,
    /// one-byte packets)
    /// straight from `data[pos..]`, as long as each lies entirely in `data`.
    /// Returns where it stopped: the end of `data`, or a packet the byte-wise
    /// machine must take. Each packet gets the fields the byte-wise machine
    /// would give it; those valid for one packet only are cleared after it
    /// (atoms excepted: only atom packets and the decoder's atom-carrying
    /// packets read them, and those always set them).
    #[inline]
    fn fast_run<const SPANS: bool, F: PacketSink>(&mut self, data: &[u8], mut pos: usize, sink: &mut F) -> usize {
        let k = self.spans.partition_point(|s| s.0 <= pos).saturating_sub(1);
        let (mut k, mut base, mut next) = self.span_from(k, pos);
        while let Some(&b) = data.get(pos) {
            if SPANS && pos >= next {
                (k, base, next) = self.span_from(k, pos);
            }
            if F::COUNTS && self.fast[b as usize].may_run() {
                let end = self.count_run::<SPANS, F>(sink, data, pos, base);
                if end > pos {
                    pos = end;
                    continue;
                }
            }
            let rest = &data[pos..];
            let at = base.wrapping_add(pos as u64);
            // Every arm ends in the one call of the sink below: with a call in
            // each arm the sink was not inlined.
            let (n, ptype, clear) = match self.fast[b as usize] {
                Fast::Atom(count, ptype, bits) => {
                    // Followed by another atom, an address or a cycle
                    // count, to a sink that takes runs: offered as a run.
                    // An atom alone costs a run's setup more than it saves.
                    if F::RUNS && rest.get(1).is_some_and(|&b1| self.fast[b1 as usize].may_run()) {
                        let taken = self.offer_run::<SPANS, F>(sink, data, pos, (k, base, next));
                        if taken > 0 {
                            pos += taken;
                            continue;
                        }
                    }
                    self.set_atoms(bits, count);
                    if F::SMALL {
                        // Most packets of most captures: no tail to test.
                        pos += 1;
                        if !self.emit(sink, ptype, at, &rest[..1]) {
                            self.stopped = true;
                            break;
                        }
                        continue;
                    }
                    (1, ptype, false)
                }
                Fast::ShortAddr(is, ptype) => {
                    let Some(n) = short_addr_len(rest) else { break };
                    let (v, bits, _) = short_addr(&rest[1..n], is);
                    self.update_short_address(v, is, bits);
                    if F::SMALL {
                        pos += n;
                        if !self.emit(sink, ptype, at, &rest[..n]) {
                            self.stopped = true;
                            break;
                        }
                        continue;
                    }
                    (n, ptype, false)
                }
                Fast::Long32(is, ptype) => {
                    let Some(raw) = rest.get(..5) else { break };
                    let v = long_addr_32(&raw[1..], is);
                    self.set_address_32(v, is);
                    (5, ptype, false)
                }
                Fast::Long64(is, ptype) => {
                    let Some(raw) = rest.get(..9) else { break };
                    let v = long_addr_64(&raw[1..], is);
                    self.set_address_64(v, is);
                    (9, ptype, false)
                }
                Fast::NoPayload(ptype) => {
                    self.pkt.ptype = ptype;
                    self.no_payload(b);
                    (1, ptype, false)
                }
                Fast::CycleF3 => {
                    self.cycle_f3(b);
                    (1, PacketType::CycleCountF3, true)
                }
                Fast::CycleF2 => {
                    let Some(raw) = rest.get(..2) else { break };
                    self.cycle_scratch();
                    self.cycle_f2(b, raw[1]);
                    (2, PacketType::CycleCountF2, true)
                }
                // Long forms too: ETE's transaction failures come once per
                // failed transaction, and cut the run each time.
                Fast::Exception => {
                    let Some((n, ptype)) = self.take_exception(rest, true) else { break };
                    (n, ptype, false)
                }
                Fast::Context => {
                    let Some(n) = self.take_context(b, rest) else { break };
                    (n, PacketType::Context, true)
                }
                Fast::AddrCtxt(is, ptype, wide) => {
                    let Some(n) = self.take_addr_ctxt(rest, is, wide) else { break };
                    (n, ptype, true)
                }
                // A-sync, Trace Info and timestamps come at every sync
                // point: a capture cut into many short sessions (or with
                // timestamps on) went a third of its bytes byte-wise.
                Fast::Extension => {
                    if rest.get(..ASYNC.len()) != Some(&ASYNC[..]) {
                        break;
                    }
                    // As the byte-wise machine leaves them at an A-sync.
                    self.sent_not_sync = false;
                    self.dump_unsynced = 0;
                    (ASYNC.len(), PacketType::Async, false)
                }
                Fast::Timestamp(ptype) => {
                    let Some(n) = self.take_timestamp(b, rest) else { break };
                    (n, ptype, true)
                }
                Fast::TraceInfo(ptype) => {
                    let Some(n) = self.take_trace_info(rest) else { break };
                    (n, ptype, true)
                }
                // Where Q elements are on, a Q packet comes after every
                // stretch of instructions without a waypoint.
                Fast::Q => {
                    let Some(n) = self.take_q(b, rest) else { break };
                    (n, PacketType::Q, false)
                }
                // Where speculation is traced, a commit or cancel packet
                // comes every few atoms.
                Fast::SpecRes(ptype) => {
                    let Some(n) = self.take_spec_res(ptype, b, rest) else { break };
                    (n, ptype, true)
                }
                Fast::Slow => break,
            };
            let go_on = self.emit(sink, ptype, at, &rest[..n]);
            if clear {
                self.clear_packet_fields();
            }
            pos += n;
            if !go_on {
                self.stopped = true;
                break;
            }
        }
        self.state = State::Header;
        pos
    }
}

impl Etm4Parser {
    /// The packets from `data[start]` counted by a sink that only counts
    /// ([`PacketSink::COUNTS`]), as long as they are packets `fast_run`
    /// takes whole (atoms, addresses, cycle counts, one-byte packets,
    /// exceptions but ETE's PE resets and transaction failures, contexts,
    /// commits, cancels and mispredicts) whole in `data`: returns where it
    /// stopped.
    /// Rows of atom headers are measured eight bytes at a time where they
    /// are the bytes 0xc0 and above ([`Etm4Parser::c0_atoms`]).
    /// Every packet sets the fields it sets one by one, except the type
    /// and index, which only the last one's need, and the atom fields,
    /// which only the last atom packet's need (set before a packet that
    /// clears them): a state saved after it is the same.
    // Out of line: it is the loop of most of a count, and inlined into the
    // one-by-one loop it would make that loop's frame larger.
    #[inline(never)]
    fn count_run<const SPANS: bool, F: PacketSink>(&mut self, sink: &mut F, data: &[u8], start: usize, base: u64) -> usize {
        let (mut pos, mut packets, mut last) = (start, 0usize, start);
        // Where the last atom packet taken starts (NO_ATOM: none since the
        // fields were last set): its fields are set once, when a packet
        // that clears them comes (`clear_after_atoms`), or at the end. Set
        // per row, they were a load and two stores for every row of atoms.
        let mut atom_at = NO_ATOM;
        let c0 = self.c0_atoms;
        while let Some(&b) = data.get(pos) {
            let rest = &data[pos..];
            // Atom packets tested on the byte, before the match: as an arm
            // of the match's jump table, the one indirect branch that took
            // every packet was mispredicted far more often (callgrind's
            // branch model: 88% of them on 001-ack_test).
            if c0 && b >= 0xc0 {
                let n = if rest.get(1).is_some_and(|&b1| b1 >= 0xc0) {
                    // At least the two headers seen, whatever the scan says.
                    c0_row_len(rest).clamp(2, rest.len())
                } else {
                    1
                };
                atom_at = pos + n - 1;
                packets += n;
                last = pos + n - 1;
                pos += n;
                continue;
            }
            let n = match self.fast[b as usize] {
                Fast::Atom(..) => {
                    atom_at = pos;
                    1
                }
                Fast::ShortAddr(is, _) => {
                    let Some(n) = short_addr_len(rest) else { break };
                    let (v, bits, _) = short_addr(&rest[1..n], is);
                    self.update_short_address(v, is, bits);
                    n
                }
                Fast::Long32(is, _) => {
                    let Some(raw) = rest.get(..5) else { break };
                    self.set_address_32(long_addr_32(&raw[1..], is), is);
                    5
                }
                Fast::Long64(is, _) => {
                    let Some(raw) = rest.get(..9) else { break };
                    self.set_address_64(long_addr_64(&raw[1..], is), is);
                    9
                }
                Fast::NoPayload(PacketType::AddrMatch | PacketType::SrcAddrMatch) => {
                    self.set_exact_match(b & 0x3);
                    1
                }
                // The other packets fast_run takes whole, as it takes them:
                // each cut a run, and a packet between runs cost 001-ack_test
                // a return, the one-by-one loop's dispatch and a new run.
                Fast::NoPayload(ptype) => {
                    self.pkt.ptype = ptype;
                    self.no_payload(b);
                    1
                }
                Fast::Exception => {
                    let Some((n, _)) = self.take_exception(rest, false) else { break };
                    n
                }
                Fast::Context => {
                    let Some(n) = self.take_context(b, rest) else { break };
                    self.clear_after_atoms(data, &mut atom_at);
                    n
                }
                Fast::AddrCtxt(is, _, wide) => {
                    let Some(n) = self.take_addr_ctxt(rest, is, wide) else { break };
                    self.clear_after_atoms(data, &mut atom_at);
                    n
                }
                // Where speculation is traced, one comes every few atoms:
                // each ended the run (ete_spec_1's packets were counted with
                // 95 instructions each, 001-ack_test's with 26). Its atoms,
                // if any, replace those of an atom packet before it, so
                // those are set first.
                Fast::SpecRes(ptype) => {
                    self.set_atoms_at(data, std::mem::replace(&mut atom_at, NO_ATOM));
                    let Some(n) = self.take_spec_res(ptype, b, rest) else { break };
                    self.clear_packet_fields();
                    n
                }
                Fast::CycleF3 => {
                    self.cycle_f3(b);
                    self.clear_after_atoms(data, &mut atom_at);
                    1
                }
                Fast::CycleF2 => {
                    let Some(raw) = rest.get(..2) else { break };
                    self.cycle_scratch();
                    self.cycle_f2(b, raw[1]);
                    self.clear_after_atoms(data, &mut atom_at);
                    2
                }
                _ => break,
            };
            last = pos;
            pos += n;
            packets += 1;
        }
        self.set_atoms_at(data, atom_at);
        if pos > start {
            let at = if SPANS { self.at(last) } else { base.wrapping_add(last as u64) };
            if F::COUNTS {
                sink.counted(packets, pos - start);
            } else {
                sink.skipped(packets, pos - start, at);
            }
            self.pkt.ptype = self.run_ptype(data[last]);
            self.pkt.index = at;
            self.pkt.offset = at;
        }
        pos
    }

    /// The type of a packet a run took, from its header `b`.
    fn run_ptype(&self, b: u8) -> PacketType {
        match self.fast[b as usize] {
            Fast::Atom(_, ptype, _)
            | Fast::ShortAddr(_, ptype)
            | Fast::Long32(_, ptype)
            | Fast::Long64(_, ptype)
            | Fast::NoPayload(ptype)
            | Fast::AddrCtxt(_, ptype, _) => ptype,
            Fast::CycleF3 => PacketType::CycleCountF3,
            Fast::CycleF2 => PacketType::CycleCountF2,
            Fast::Exception => PacketType::Exception,
            Fast::Context => PacketType::Context,
            Fast::SpecRes(ptype) => ptype,
            _ => self.pkt.ptype,
        }
    }

    /// Offer the packets from `data[start]` to the sink as a run, in the
    /// stretch `span` gives (as `span_from` gives it) and those after it:
    /// atom packets, address packets whose address is stored only once the
    /// sink takes it, and cycle counts. Returns how many bytes the sink
    /// took, leaving the packet fields as the last packet taken would have.
    // Out of line: inlined, the run's loop made the one-by-one loop's frame
    // larger for every packet.
    #[inline(never)]
    fn offer_run<const SPANS: bool, F: PacketSink>(
        &mut self,
        sink: &mut F,
        data: &[u8],
        start: usize,
        span: (usize, u64, usize),
    ) -> usize {
        use PacketType as P;
        if !sink.run_begin() {
            // Asked only here, where the sink declined a run, so that the
            // packet loop does not ask it of every packet (a tenth slower
            // on maxspec78_commopt0, whose runs are mostly declined).
            if sink.skips() {
                return self.count_run::<SPANS, F>(sink, data, start, span.1) - start;
            }
            return 0;
        }
        let (mut k, mut base, mut next) = span;
        let (mut pos, mut packets, mut last, mut last_atom) = (start, 0, start, None);
        // Atom packets before this go one by one: a row the sink did not take.
        let mut singles_to = start;
        let c0 = self.c0_atoms;
        while pos < data.len() {
            // Across stretches: frames of other trace IDs cut a framed
            // trace ID's bytes into stretches of 15 or fewer.
            if SPANS && pos >= next {
                (k, base, next) = self.span_from(k, pos);
            }
            let at = base.wrapping_add(pos as u64);
            let rest = &data[pos..];
            // In a framed trace ID's stretches (no rows there, see below)
            // atom packets are tested on the byte before the match, as
            // `count_run` does: the jump table's one indirect branch then
            // sees only the packets between atoms. juno_r1_1 at 128 MiB,
            // one thread: 142.7 -> 155.1 MiB/s (medians of 7).
            if SPANS && c0 && rest[0] >= 0xc0 {
                if let Fast::Atom(count, _, bits) = self.fast[rest[0] as usize] {
                    if !sink.run_atom(bits, count, at) {
                        break;
                    }
                    last_atom = Some(pos);
                    last = pos;
                    pos += 1;
                    packets += 1;
                    continue;
                }
            }
            let n = match self.fast[rest[0] as usize] {
                Fast::Atom(count, _, bits) => {
                    // Not in a framed trace ID's stretches (15 bytes or
                    // fewer): there, juno_r1_1's summary took 14% more
                    // instructions with rows, the run's loop spilling more
                    // for every packet, and rows were few.
                    if F::ROWS && !SPANS && pos >= singles_to {
                        // The bytes from here, as a row of atom packets: the
                        // sink's memo says how many of them it knows, and
                        // the row's length is looked for only when it knows
                        // none.
                        let avail = (data.len() - pos).min(ROW_PACKETS);
                        if avail > 1 && matches!(self.fast[rest[1] as usize], Fast::Atom(..)) && sink.run_row_begin(at) {
                            let taken = sink.run_atoms(row_word(rest, avail), avail as u8, at).min(avail);
                            if taken > 0 {
                                last_atom = Some(pos + taken - 1);
                                last = pos + taken - 1;
                                pos += taken;
                                packets += taken;
                                continue;
                            }
                            let mut n = 2;
                            while n < avail && matches!(self.fast[rest[n] as usize], Fast::Atom(..)) {
                                n += 1;
                            }
                            sink.run_row(n as u8);
                            singles_to = pos + n;
                        }
                    }
                    if !sink.run_atom(bits, count, at) {
                        break;
                    }
                    last_atom = Some(pos);
                    1
                }
                Fast::ShortAddr(is, P::AddrShortIs0 | P::AddrShortIs1) => {
                    let Some(n) = short_addr_len(rest) else { break };
                    let (v, bits, _) = short_addr(&rest[1..n], is);
                    let a = self.short_address(v, is, bits);
                    if !sink.run_addr(a.value, a.isa) {
                        break;
                    }
                    self.put_addr(a);
                    n
                }
                Fast::Long32(is, P::AddrL32Is0 | P::AddrL32Is1) => {
                    let Some(raw) = rest.get(..5) else { break };
                    let a = self.address_32(long_addr_32(&raw[1..], is), is);
                    if !sink.run_addr(a.value, a.isa) {
                        break;
                    }
                    self.put_addr(a);
                    5
                }
                Fast::Long64(is, P::AddrL64Is0 | P::AddrL64Is1) => {
                    let Some(raw) = rest.get(..9) else { break };
                    let value = long_addr_64(&raw[1..], is);
                    if !sink.run_addr(value, is) {
                        break;
                    }
                    self.set_address_64(value, is);
                    9
                }
                // Without a commit field (commit mode 1) the decoder can take
                // these as it takes atoms; the fields are set and cleared as
                // one by one.
                Fast::CycleF3 if self.set.commit_opt1 => {
                    let cc = self.cc_threshold().wrapping_add((rest[0] & 0x3) as u32);
                    if !sink.run_cc(cc, P::CycleCountF3, at) {
                        break;
                    }
                    self.cycle_scratch();
                    self.set_cc(cc);
                    self.clear_packet_fields();
                    1
                }
                Fast::CycleF2 if self.set.commit_opt1 => {
                    let Some(raw) = rest.get(..2) else { break };
                    let cc = self.cc_threshold().wrapping_add((raw[1] & 0xf) as u32);
                    if !sink.run_cc(cc, P::CycleCountF2, at) {
                        break;
                    }
                    self.cycle_scratch();
                    self.cycle_f2(raw[0], raw[1]);
                    self.clear_packet_fields();
                    2
                }
                Fast::NoPayload(P::AddrMatch) => {
                    let idx = rest[0] & 0x3;
                    let a = self.matched_address(idx);
                    if !sink.run_addr(a.value, a.isa) {
                        break;
                    }
                    self.pkt.exact_match_idx = idx;
                    self.put_addr(a);
                    1
                }
                _ => break,
            };
            last = pos;
            pos += n;
            packets += 1;
        }
        if packets > 0 {
            let index = if SPANS { self.at(last) } else { base.wrapping_add(last as u64) };
            sink.run_end(packets, pos - start, index);
            self.pkt.ptype = self.run_ptype(data[last]);
            // The atom fields, kept by the packets after an atom packet.
            if let Some(p) = last_atom {
                self.set_atoms_at(data, p);
            }
            self.pkt.index = index;
            self.pkt.offset = index;
        }
        pos - start
    }
}

/// How the fast path handles a header byte (with the packet type it gives,
/// where the header byte alone does not say). Tagged in the first byte, and
/// the fields laid out to fill 8 bytes, so an entry is read without
/// decoding a niche.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Fast {
    Slow,
    /// Atom packet with its count, type and pattern precomputed.
    Atom(u8, PacketType, u32),
    /// Address packets with their instruction set.
    ShortAddr(u8, PacketType),
    Long32(u8, PacketType),
    Long64(u8, PacketType),
    CycleF3,
    CycleF2,
    NoPayload(PacketType),
    Exception,
    Context,
    /// Address and context, with the instruction set and whether the
    /// address is 64 bits.
    AddrCtxt(u8, PacketType, bool),
    /// Header 0x00: an A-sync taken whole; the other extensions byte-wise.
    Extension,
    Timestamp(PacketType),
    TraceInfo(PacketType),
    Q,
    /// Commit, cancel and mispredict packets.
    SpecRes(PacketType),
}

impl Fast {
    /// Whether a run may go on with this packet (atoms, addresses, cycle
    /// counts; a run takes exact-match addresses too, but does not start
    /// for them). The tags are in that order so this is one comparison.
    #[inline(always)]
    fn may_run(self) -> bool {
        matches!(
            self,
            Fast::Atom(..) | Fast::ShortAddr(..) | Fast::Long32(..) | Fast::Long64(..) | Fast::CycleF3 | Fast::CycleF2
        )
    }
}

/// The fast-path table for a header table: atoms are decoded once here.
fn build_fast_table(table: &[(PacketType, Handler); 256]) -> [Fast; 256] {
    use PacketType as P;
    let mut f = [Fast::Slow; 256];
    for (b, &(t, h)) in table.iter().enumerate() {
        f[b] = match h {
            Handler::Atom => match atom_pattern(t, b as u8) {
                // A header that gave no atoms (none of today's tables has
                // one) would go byte-wise: a run never meets an atom packet
                // without atoms (Etm4Decoder::run_atom counts on it).
                (_, 0) => Fast::Slow,
                (bits, count) => Fast::Atom(count, t, bits),
            },
            Handler::ShortAddr => Fast::ShortAddr(matches!(t, P::AddrShortIs1 | P::SrcAddrShortIs1) as u8, t),
            Handler::LongAddr => {
                let is = matches!(t, P::AddrL32Is1 | P::SrcAddrL32Is1 | P::AddrL64Is1 | P::SrcAddrL64Is1) as u8;
                if matches!(t, P::AddrL64Is0 | P::AddrL64Is1 | P::SrcAddrL64Is0 | P::SrcAddrL64Is1) {
                    Fast::Long64(is, t)
                } else {
                    Fast::Long32(is, t)
                }
            }
            Handler::NoPayload => Fast::NoPayload(t),
            Handler::CycleCount if t == P::CycleCountF3 => Fast::CycleF3,
            Handler::CycleCount if t == P::CycleCountF2 => Fast::CycleF2,
            Handler::Exception => Fast::Exception,
            Handler::Context => Fast::Context,
            Handler::Extension => Fast::Extension,
            Handler::Timestamp => Fast::Timestamp(t),
            Handler::TraceInfo => Fast::TraceInfo(t),
            Handler::Q => Fast::Q,
            Handler::SpecRes => Fast::SpecRes(t),
            Handler::AddrCtxt => Fast::AddrCtxt(
                matches!(t, P::AddrCtxtL32Is1 | P::AddrCtxtL64Is1) as u8,
                t,
                matches!(t, P::AddrCtxtL64Is0 | P::AddrCtxtL64Is1),
            ),
            _ => Fast::Slow,
        };
    }
    f
}

/// Atom pattern (bit 0 = oldest, 1 = E) and count of an atom header
/// (IHI 0064 6.4.20-6.4.25).
fn atom_pattern(t: PacketType, b: u8) -> (u32, u8) {
    match t {
        PacketType::AtomF1 => ((b & 1) as u32, 1),
        PacketType::AtomF2 => ((b & 3) as u32, 2),
        PacketType::AtomF3 => ((b & 7) as u32, 3),
        PacketType::AtomF4 => ([0xe, 0x0, 0xa, 0x5][(b & 3) as usize], 4),
        PacketType::AtomF5 => match ((b & 0x20) >> 3) | (b & 0x3) {
            5 => (0x1e, 5),
            1 => (0x00, 5),
            2 => (0x0a, 5),
            3 => (0x15, 5),
            _ => (0, 0),
        },
        PacketType::AtomF6 => {
            let e_count = (b & 0x1f) as u32 + 3;
            let mut pattern = (1u32 << e_count) - 1;
            if b & 0x20 == 0 {
                pattern |= 1 << e_count;
            }
            (pattern, e_count as u8 + 1)
        }
        _ => (0, 0),
    }
}

fn reset_address() -> Address {
    Address { value: 0, valid_bits: 64, pkt_bits: 0, is_64bit: true, isa: 0 }
}

/// The A-sync packet: eleven zero bytes, then 0x80 (IHI 0064 6.4.2).
const ASYNC: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];

/// One byte `b` of a Trace Info packet, the packet's `len`th (the header
/// is the first): which sections are complete (`flags`, all of them with
/// the control bytes: `TINFO_ALL`) and how many control bytes there are.
fn tinfo_step(flags: &mut u8, ctrl: &mut u16, len: usize, b: u8) {
    if len == 1 {
        *flags = 0;
        *ctrl = 1;
    } else if len == 2 {
        *flags = !b & TINFO_ALL_SECT;
        if b & 0x80 == 0 {
            *flags |= TINFO_CTRL;
        }
    } else {
        let done = b & 0x80 == 0;
        if *flags & TINFO_CTRL == 0 {
            if done {
                *flags |= TINFO_CTRL;
            }
            *ctrl = ctrl.saturating_add(1);
        } else {
            for sect in [TINFO_INFO, TINFO_KEY, TINFO_SPEC, TINFO_CYCT, TINFO_WNDW] {
                if *flags & sect == 0 {
                    if done {
                        *flags |= sect;
                    }
                    break;
                }
            }
        }
    }
}

/// Trace Info sections after the control bytes. `None` when a section runs past
/// the end of the packet.
fn decode_trace_info(buf: &[u8], start: usize) -> Option<super::packet::TraceInfo> {
    let present = buf[1] & TINFO_ALL_SECT;
    let mut ti = super::packet::TraceInfo::default();
    let mut idx = start;
    let field = |idx: &mut usize| -> Option<u32> {
        let (v, n) = cont_field(&buf[*idx..], 5)?;
        *idx += n;
        Some(v)
    };
    if present & TINFO_INFO != 0 && idx < buf.len() {
        ti.info = field(&mut idx)?;
    }
    if present & TINFO_KEY != 0 && idx < buf.len() {
        ti.p0_key = field(&mut idx)?;
    }
    if present & TINFO_SPEC != 0 && idx < buf.len() {
        ti.spec_depth = field(&mut idx)?;
        ti.spec_present = true;
    }
    if present & TINFO_CYCT != 0 && idx < buf.len() {
        ti.cc_threshold = field(&mut idx)?;
        ti.cyct_present = true;
    }
    if present & TINFO_WNDW != 0 && idx < buf.len() {
        // The commit window section is not used by current ETE versions.
        field(&mut idx)?;
    }
    Some(ti)
}

/// A 7-bits-per-byte little-endian field of at most `limit` bytes. Returns the
/// value and the bytes used, or `None` if the field runs off the end of `buf`.
#[inline]
fn cont_field(buf: &[u8], limit: usize) -> Option<(u32, usize)> {
    let mut v = 0u32;
    for i in 0..limit {
        let b = *buf.get(i)?;
        v |= ((b & 0x7f) as u32).wrapping_shl(7 * i as u32);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    Some((v, limit))
}

/// The timestamp field: up to 8 bytes of 7 bits, then a 9th byte of 8 bits.
fn ts_field(buf: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(9) {
        if i == 8 {
            v |= (b as u64) << 56;
            return (v, 9);
        }
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    (v, buf.len().min(9))
}

/// Conditional result field of a format 1 packet: returns the bytes used.
fn cond_result_field(buf: &[u8]) -> Option<usize> {
    for i in 0..6 {
        let b = *buf.get(i)?;
        if b & 0x80 == 0 {
            return Some(i + 1);
        }
    }
    Some(6)
}

/// Short address payload: (value, valid bits, bytes used). Bytes missing
/// from `buf` (only where a loaded state was edited) read as zero.
#[inline]
fn short_addr(buf: &[u8], is: u8) -> (u32, u8, usize) {
    let shift = if is == 0 { 2 } else { 1 };
    let b0 = buf.first().copied().unwrap_or(0);
    let mut v = ((b0 & 0x7f) as u32) << shift;
    let mut bits = 7u8;
    let mut n = 1;
    if b0 & 0x80 != 0 {
        v |= (buf.get(1).copied().unwrap_or(0) as u32) << (7 + shift);
        bits += 8;
        n = 2;
    }
    (v, bits + shift as u8, n)
}

/// The length of the short address packet at the start of `rest`, if it
/// is all there: a payload byte with its top bit set has a second after it.
#[inline(always)]
fn short_addr_len(rest: &[u8]) -> Option<usize> {
    match rest.get(1) {
        Some(&b1) if b1 & 0x80 == 0 => Some(2),
        Some(_) if rest.len() > 2 => Some(3),
        _ => None,
    }
}

/// The address of a 32-bit address packet's payload `b` (IS0: bits 2-8
/// and 9-15 in the first two bytes' low seven bits; IS1: bits 1-7, then
/// whole bytes). Taken as one little-endian word: byte by byte it was 17
/// instructions a packet on 001-ack_test.
#[inline]
fn long_addr_32(b: &[u8], is: u8) -> u32 {
    let w = le_word(b);
    if is == 0 {
        ((w & 0x7f) << 2) | ((w & 0x7f00) << 1) | (w & 0xffff_0000)
    } else {
        ((w & 0x7f) << 1) | (w & 0xffff_ff00)
    }
}

#[inline]
fn long_addr_64(b: &[u8], is: u8) -> u64 {
    let high = b.get(4..).map_or(0, le_word) as u64;
    long_addr_32(b, is) as u64 | high << 32
}

/// The first four bytes of `b` as a little-endian word (those there are).
#[inline(always)]
fn le_word(b: &[u8]) -> u32 {
    match b.first_chunk::<4>() {
        Some(c) => u32::from_le_bytes(*c),
        None => le_bytes(b),
    }
}

fn le_bytes(b: &[u8]) -> u32 {
    b.iter().enumerate().fold(0u32, |v, (i, &x)| v | (x as u32) << (8 * i))
}

/// The header decode table for one configuration (IHI 0064 table 6-1; ETE
/// additions by architecture version).
fn build_table(cfg: &Etm4Config) -> [(PacketType, Handler); 256] {
    use Handler as H;
    use PacketType as P;
    let mut t = [(P::Reserved, H::Reserved); 256];
    let full = cfg.full_version();
    let major = cfg.major_version();
    let minor = cfg.minor_version();
    let cond_ok = cfg.has_cond_trace() && cfg.cond_mode() != 0;
    let data_ok = cfg.data_trace();
    let gate = |ok: bool, h: Handler| if ok { h } else { H::InvalidCfg };

    t[0x00] = (P::Extension, H::Extension);
    t[0x01] = (P::TraceInfo, H::TraceInfo);
    t[0x02] = (P::Timestamp, H::Timestamp);
    t[0x03] = (P::Timestamp, H::Timestamp);
    t[0x04] = (P::TraceOn, H::NoPayload);
    let func_ret = cfg.profile == CoreProfile::Microcontroller && cfg.arch_v8() && full >= 0x42;
    t[0x05] = (P::FuncRet, if func_ret { H::NoPayload } else { H::Reserved });
    t[0x06] = (P::Exception, H::Exception);
    t[0x07] = (P::ExceptionReturn, if major >= 5 { H::InvalidCfg } else { H::NoPayload });
    if major >= 5 {
        t[0x0a] = (P::TransStart, H::NoPayload);
        t[0x0b] = (P::TransCommit, H::NoPayload);
        if minor >= 3 {
            t[0x09] = (P::Ite, H::Ite);
        }
    }
    for i in 0..4 {
        t[0x0c + i] = (if i >= 2 { P::CycleCountF1 } else { P::CycleCountF2 }, H::CycleCount);
    }
    for i in 0..16 {
        t[0x10 + i] = (P::CycleCountF3, H::CycleCount);
    }
    for i in 0..8 {
        t[0x20 + i] = (P::NumDataSyncMarker, gate(data_ok, H::NoPayload));
    }
    for i in 0..5 {
        t[0x28 + i] = (P::UnnumDataSyncMarker, gate(data_ok, H::NoPayload));
    }
    t[0x2d] = (P::Commit, H::SpecRes);
    t[0x2e] = (P::CancelF1, H::SpecRes);
    t[0x2f] = (P::CancelF1Mispredict, H::SpecRes);
    for i in 0..4 {
        t[0x30 + i] = (P::Mispredict, H::SpecRes);
        t[0x34 + i] = (P::CancelF2, H::SpecRes);
    }
    for i in 0..8 {
        t[0x38 + i] = (P::CancelF3, H::SpecRes);
    }
    for i in 0..3 {
        t[0x40 + i] = (P::CondInstrF2, gate(cond_ok, H::CondInstr));
        t[0x44 + i] = (P::CondResultF4, gate(cond_ok, H::CondResult));
        t[0x48 + i] = (P::CondResultF2, gate(cond_ok, H::CondResult));
        t[0x4c + i] = (P::CondResultF2, gate(cond_ok, H::CondResult));
    }
    t[0x43] = (P::CondFlush, gate(cond_ok, H::NoPayload));
    for i in 0..16 {
        t[0x50 + i] = (P::CondResultF3, gate(cond_ok, H::CondResult));
    }
    for i in 0..4 {
        t[0x68 + i] = (P::CondResultF1, gate(cond_ok, H::CondResult));
    }
    t[0x6c] = (P::CondInstrF1, gate(cond_ok, H::CondInstr));
    t[0x6d] = (P::CondInstrF3, gate(cond_ok, H::CondInstr));
    t[0x6e] = (P::CondResultF1, gate(cond_ok, H::CondResult));
    t[0x6f] = (P::CondResultF1, gate(cond_ok, H::CondResult));
    if full >= 0x43 {
        t[0x70] = (P::Ignore, H::NoPayload);
    }
    for i in 0..15 {
        t[0x71 + i] = (P::Event, H::NoPayload);
    }
    t[0x80] = (P::Context, H::Context);
    t[0x81] = (P::Context, H::Context);
    t[0x82] = (P::AddrCtxtL32Is0, H::AddrCtxt);
    t[0x83] = (P::AddrCtxtL32Is1, H::AddrCtxt);
    t[0x85] = (P::AddrCtxtL64Is0, H::AddrCtxt);
    t[0x86] = (P::AddrCtxtL64Is1, H::AddrCtxt);
    if full >= 0x46 {
        t[0x88] = (P::TimestampMarker, H::NoPayload);
    }
    for i in 0..3 {
        t[0x90 + i] = (P::AddrMatch, H::NoPayload);
    }
    t[0x95] = (P::AddrShortIs0, H::ShortAddr);
    t[0x96] = (P::AddrShortIs1, H::ShortAddr);
    t[0x9a] = (P::AddrL32Is0, H::LongAddr);
    t[0x9b] = (P::AddrL32Is1, H::LongAddr);
    t[0x9d] = (P::AddrL64Is0, H::LongAddr);
    t[0x9e] = (P::AddrL64Is1, H::LongAddr);
    for i in 0..16usize {
        let reserved_q = matches!(i, 0x3 | 0x4 | 0x7 | 0x8 | 0x9 | 0xd | 0xe);
        let h = if !reserved_q && cfg.has_q_elements() { H::Q } else { H::Reserved };
        t[0xa0 + i] = (P::Q, h);
    }
    if full >= 0x50 {
        for i in 0..3 {
            t[0xb0 + i] = (P::SrcAddrMatch, H::NoPayload);
        }
        t[0xb4] = (P::SrcAddrShortIs0, H::ShortAddr);
        t[0xb5] = (P::SrcAddrShortIs1, H::ShortAddr);
        t[0xb6] = (P::SrcAddrL32Is0, H::LongAddr);
        t[0xb7] = (P::SrcAddrL32Is1, H::LongAddr);
        t[0xb8] = (P::SrcAddrL64Is0, H::LongAddr);
        t[0xb9] = (P::SrcAddrL64Is1, H::LongAddr);
    }
    t[0xc0..=0xd4].fill((P::AtomF6, H::Atom));
    t[0xd5..=0xd7].fill((P::AtomF5, H::Atom));
    t[0xd8..=0xdb].fill((P::AtomF2, H::Atom));
    t[0xdc..=0xdf].fill((P::AtomF4, H::Atom));
    t[0xe0..=0xf4].fill((P::AtomF6, H::Atom));
    t[0xf5] = (P::AtomF5, H::Atom);
    t[0xf6] = (P::AtomF1, H::Atom);
    t[0xf7] = (P::AtomF1, H::Atom);
    t[0xf8..=0xff].fill((P::AtomF3, H::Atom));
    t
}
