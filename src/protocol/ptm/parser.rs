//! Streaming PTM (PFT) packet parser.
//!
//! A byte-at-a-time state machine with the observable behaviour of OpenCSD
//! 1.8.0's `TrcPktProcPtm`, the reference the golden tests compare against:
//! the same packet boundaries and `Idx` values, the same listing of bytes seen
//! before the first A-sync (chunks of at most 16 bytes, cut at the end of each
//! pushed block), and the same treatment of malformed input.
//!
//! OpenCSD lists unsynchronised bytes straight from its input block; when a
//! candidate A-sync started in an earlier block turns out not to be one, it
//! lists those bytes again as zeros and then reads as many bytes past the end
//! of the current block. [`PtmParser::push_with_overread`] takes the bytes
//! that follow the block in OpenCSD's memory so a listing can match it; the
//! other push methods use the block length for them (what OpenCSD reads after
//! a full 15-byte frame block).
//!
//! Packet layouts: IHI 0035 (PFT) chapter 4.

use super::config::PtmConfig;
use super::packet::{
    ISyncReason, PtmPacket, PtmPacketType, MSG_BAD_ASYNC, MSG_BRANCH_SEQUENCE, MSG_SHORT_CONTEXT_ID,
    MSG_SHORT_CYCLE_COUNT, MSG_SHORT_TIMESTAMP,
};
use crate::element::Isa;
use crate::protocol::Stretches;

/// Most unsynchronised bytes listed in one NOTSYNC chunk.
const UNSYNC_CHUNK: usize = 16;
/// Zeros beyond the A-sync minimum after which a run of zeros is cut.
const ASYNC_PAD_ZEROS: u32 = 11;

/// The most zeros the A-sync search holds over from one block to the next.
/// OpenCSD holds about a third of a long unsynchronised zero run and lists
/// the held zeros again with each later block, so its listing grows with the
/// square of the run; past this many (a run of some 12,000 zeros) the held
/// zeros are listed as unsynchronised data and the search starts over, which
/// keeps the listing linear and a parser's memory and saved state bounded.
pub const MAX_HELD_ZEROS: usize = 4096;
/// Zeros an A-sync needs before its 0x80.
const ASYNC_ZEROS: u32 = 5;

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    WaitSync,
    Header,
    Data,
    SendPacket,
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum Handler {
    Reserved,
    ASync,
    ISync,
    Trigger,
    WaypointUpdate,
    Ignore,
    ContextId,
    Vmid,
    Atom,
    Timestamp,
    ExceptionReturn,
    BranchAddress,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AsyncScan {
    Found,
    NotAsync,
    TooManyZeros,
    Incomplete,
}

/// Per-packet scratch state of multi-byte packets.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default)]
struct Scratch {
    bytes_needed: usize,
    need_cc: bool,
    got_cc: bool,
    cc_bytes: usize,
    ctxt_bytes: usize,
    got_ctxt_bytes: usize,
    got_ts_bytes: bool,
    ts_max_bytes: usize,
    got_addr_bytes: bool,
    addr_bytes: usize,
    got_excep_bytes: bool,
    excep_bytes: usize,
    addr_isa: Option<Isa>,
}

type ParseResult = Result<(), &'static str>;

/// The PTM packet parser for one trace ID.
///
/// Its stream state serializes ([`PtmParser::save_state`]) so that parsing
/// can resume exactly where it stopped; the header table and the settings
/// taken from the configuration are rebuilt on load.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PtmParser {
    #[serde(skip, default = "build_table")]
    table: [(PtmPacketType, Handler); 256],
    #[serde(skip)]
    cycle_accurate: bool,
    #[serde(skip)]
    ctxt_id_bytes: usize,
    #[serde(skip)]
    ts_64bit: bool,
    state: State,
    handler: Handler,
    buf: Vec<u8>,
    pkt: PtmPacket,
    s: Scratch,
    packet_index: u64,
    block_index: u64,
    /// A zero byte was seen while unsynchronised: maybe the start of an A-sync.
    async_candidate: bool,
    /// Consecutive zeros of the A-sync being matched.
    async_zeros: u32,
    /// The decoder has been given the NOTSYNC packet.
    sent_not_sync: bool,
    /// Alternative-ISA bit of the last exception byte (kept across packets, as OpenCSD does).
    excep_alt_isa: bool,
    bytes_in: u64,
    stopped: bool,
}

fn build_table() -> [(PtmPacketType, Handler); 256] {
    use Handler as H;
    use PtmPacketType as T;
    let mut t = [(T::Reserved, H::Reserved); 256];
    for (i, e) in t.iter_mut().enumerate() {
        if i & 1 == 1 {
            *e = (T::BranchAddress, H::BranchAddress);
        } else if i & 0x81 == 0x80 {
            *e = (T::Atom, H::Atom);
        }
    }
    t[0x00] = (T::ASync, H::ASync);
    t[0x08] = (T::ISync, H::ISync);
    t[0x72] = (T::WaypointUpdate, H::WaypointUpdate);
    t[0x0c] = (T::Trigger, H::Trigger);
    t[0x6e] = (T::ContextId, H::ContextId);
    t[0x3c] = (T::Vmid, H::Vmid);
    t[0x42] = (T::Timestamp, H::Timestamp);
    t[0x46] = (T::Timestamp, H::Timestamp);
    t[0x76] = (T::ExceptionReturn, H::ExceptionReturn);
    t[0x66] = (T::Ignore, H::Ignore);
    t
}

impl PtmParser {
    pub fn new(cfg: &PtmConfig) -> PtmParser {
        let mut p = PtmParser {
            table: build_table(),
            cycle_accurate: false,
            ctxt_id_bytes: 0,
            ts_64bit: false,
            state: State::WaitSync,
            handler: Handler::Reserved,
            buf: Vec::with_capacity(32),
            pkt: PtmPacket::start_state(),
            s: Scratch::default(),
            packet_index: 0,
            block_index: 0,
            async_candidate: false,
            async_zeros: 0,
            sent_not_sync: false,
            excep_alt_isa: false,
            bytes_in: 0,
            stopped: false,
        };
        p.configure(cfg);
        p.reset();
        p
    }

    fn configure(&mut self, cfg: &PtmConfig) {
        self.cycle_accurate = cfg.cycle_accurate();
        self.ctxt_id_bytes = cfg.context_id_bytes() as usize;
        self.ts_64bit = cfg.timestamp_64bit();
    }

    /// The stream state, for a later [`PtmParser::load_state`].
    pub fn save_state(&self) -> Vec<u8> {
        bincode::serialize(self).unwrap_or_default()
    }

    /// A parser for `cfg` continuing from a saved state.
    pub fn load_state(cfg: &PtmConfig, state: &[u8]) -> Result<PtmParser, crate::protocol::ProtocolError> {
        let mut p: PtmParser = crate::protocol::read_state("PTM parser", state)?;
        p.check()?;
        p.configure(cfg);
        Ok(p)
    }

    /// The bounds a loaded state must meet (see [`crate::protocol::check_state`]):
    /// the longest PTM packet (an I-sync with cycle count and context ID, or
    /// a 64-bit timestamp, IHI 0035 4.2) is well under 64 bytes; the A-sync
    /// search holds at most [`MAX_HELD_ZEROS`].
    fn check(&self) -> Result<(), crate::protocol::ProtocolError> {
        const MAX_PACKET: usize = 64;
        let s = &self.s;
        crate::protocol::check_state(
            "PTM parser",
            &[
                // One scan for an A-sync may add up to 16 zeros past the limit.
                (self.buf.len() <= MAX_HELD_ZEROS + MAX_PACKET, "packet buffer length"),
                (s.bytes_needed <= MAX_PACKET, "expected packet length"),
                (s.cc_bytes <= 5, "cycle count bytes"),
                (s.ctxt_bytes <= 4 && s.got_ctxt_bytes <= s.ctxt_bytes, "context ID bytes"),
                (s.ts_max_bytes <= 10, "timestamp bytes"),
                (s.addr_bytes <= 5, "address bytes"),
                (s.excep_bytes <= 2, "exception bytes"),
                (self.pkt.atom_count <= 32, "atom count"),
            ],
        )
    }

    /// Forget all stream state, as at the start of a new capture.
    pub fn reset(&mut self) {
        self.pkt = PtmPacket::start_state();
        self.handler = Handler::Reserved;
        self.state = State::WaitSync;
        self.async_zeros = 0;
        self.async_candidate = false;
        self.sent_not_sync = false;
        self.excep_alt_isa = false;
        self.buf.clear();
    }

    /// True once an A-sync has been seen.
    pub fn is_synced(&self) -> bool {
        self.state != State::WaitSync
    }

    /// Total bytes pushed since creation.
    pub fn bytes_in(&self) -> u64 {
        self.bytes_in
    }

    /// Parse `data`, whose first byte is at `index` in the captured buffer.
    /// Every packet (and every listing chunk of unsynchronised bytes) is passed
    /// to `sink` with its raw bytes.
    pub fn push<F: FnMut(&PtmPacket, &[u8])>(&mut self, index: u64, data: &[u8], sink: &mut F) {
        self.push_with_overread(index, data, &[], &mut |p: &PtmPacket, r: &[u8]| {
            sink(p, r);
            true
        });
    }

    /// As [`PtmParser::push`], but the sink can stop parsing by returning
    /// false (a decoder that hit a fatal error). Returns the number of bytes of
    /// `data` consumed; the packet the sink refused is complete.
    pub fn push_until<F: FnMut(&PtmPacket, &[u8]) -> bool>(&mut self, index: u64, data: &[u8], sink: &mut F) -> usize {
        self.push_with_overread(index, data, &[], sink)
    }

    /// As [`PtmParser::push_until`], with `overread` the bytes that follow
    /// `data` in OpenCSD's buffer (see the module documentation). Missing bytes
    /// read as the low byte of the block length.
    pub fn push_with_overread<F: FnMut(&PtmPacket, &[u8]) -> bool>(
        &mut self,
        index: u64,
        data: &[u8],
        overread: &[u8],
        sink: &mut F,
    ) -> usize {
        self.parse(Stretches::one(index), data, overread, sink)
    }

    /// As [`PtmParser::push_until`], for one trace ID's bytes joined from
    /// several blocks (`spans`: where each starts in `data`, and its index
    /// in the captured buffer, as
    /// [`FrameSink::run`](crate::frame::FrameSink::run) gives them), so
    /// that packets cut by the frames of other trace IDs are taken whole.
    /// Only once the parser is synchronised ([`PtmParser::is_synced`]):
    /// before that, what it lists depends on where each block ends.
    pub fn push_spans_until<F: FnMut(&PtmPacket, &[u8]) -> bool>(
        &mut self,
        spans: &[(usize, u64)],
        data: &[u8],
        sink: &mut F,
    ) -> usize {
        debug_assert!(self.is_synced());
        self.parse(Stretches::of(spans), data, &[], sink)
    }

    fn parse<F: FnMut(&PtmPacket, &[u8]) -> bool>(&mut self, mut at: Stretches<'_>, data: &[u8], overread: &[u8], sink: &mut F) -> usize {
        self.block_index = at.base;
        self.stopped = false;
        let mut pos = 0usize;
        while (pos < data.len() || self.state == State::SendPacket) && !self.stopped {
            match self.state {
                State::WaitSync => {
                    if !self.async_candidate {
                        self.packet_index = at.index(pos);
                        self.pkt.ptype = PtmPacketType::NotSync;
                    }
                    self.wait_async(data, &mut pos, overread, sink);
                }
                State::Header => {
                    // Packets taken whole one after the other without going
                    // back to the state dispatch, which Snowball's profile
                    // put at a quarter of this function's samples.
                    while let Some(&b) = data.get(pos) {
                        self.packet_index = at.index(pos);
                        let (t, h) = self.table[b as usize];
                        // Atom packets (half of a capture's packets, most of
                        // them one byte) taken whole from `data` when they lie
                        // in it: through the buffer and the handler each cost
                        // about 250 instructions.
                        if h == Handler::Atom {
                            if let Some(n) = self.take_atom(&data[pos..]) {
                                self.pkt.ptype = t;
                                self.handler = Handler::Atom;
                                self.pkt.index = self.packet_index;
                                let go_on = sink(&self.pkt, &data[pos..pos + n]);
                                self.pkt.clear();
                                pos += n;
                                if !go_on {
                                    self.stopped = true;
                                    break;
                                }
                                continue;
                            }
                        }
                        // Branch addresses and I-syncs (most of the rest, and
                        // most of the bytes) too: byte by byte, each byte went
                        // through the state dispatch and the handler's own state.
                        let whole = match h {
                            Handler::BranchAddress => self.take_branch(&data[pos..]),
                            Handler::ISync => self.take_isync(&data[pos..]),
                            _ => None,
                        };
                        if let Some(n) = whole {
                            self.pkt.ptype = t;
                            self.handler = h;
                            self.buf.extend_from_slice(&data[pos..pos + n]);
                            pos += n;
                            let fields = if h == Handler::ISync { self.isync_fields() } else { self.branch_fields() };
                            if let Err(msg) = fields {
                                self.bad_sequence(msg);
                            }
                            self.output(sink);
                            self.pkt.clear();
                            if self.stopped || self.state != State::Header {
                                break;
                            }
                            continue;
                        }
                        pos += 1;
                        self.buf.push(b);
                        self.pkt.ptype = t;
                        self.handler = h;
                        self.state = State::Data;
                        self.run_handler(data, &mut pos);
                        break;
                    }
                }
                State::Data => self.run_handler(data, &mut pos),
                State::SendPacket => {
                    self.output(sink);
                    self.pkt.clear();
                    self.state = State::Header;
                }
            }
        }
        // As a push of each block would leave it (it is saved with the
        // state, and saved states are compared to join the parts of a
        // parallel decode).
        self.block_index = at.block(pos.saturating_sub(1));
        if self.state != State::WaitSync {
            // Read only while waiting for the first A-sync, which only a
            // reset (which clears it) brings back: a state saved from here on
            // is the same whether or not bytes were listed before that
            // A-sync, as the parallel index build needs to see two decodes
            // meet (see the ETMv4 parser's `is_sync`).
            self.sent_not_sync = false;
        }
        self.bytes_in += pos as u64;
        pos
    }

    /// End of trace: a packet still being assembled is reported as
    /// `INCOMPLETE_EOT`.
    pub fn finish<F: FnMut(&PtmPacket, &[u8])>(&mut self, sink: &mut F) {
        if !self.buf.is_empty() {
            self.pkt.err_type = self.pkt.ptype;
            self.pkt.ptype = PtmPacketType::IncompleteEot;
            self.output(&mut |p: &PtmPacket, r: &[u8]| {
                sink(p, r);
                true
            });
        }
    }

    fn output<F: FnMut(&PtmPacket, &[u8]) -> bool>(&mut self, sink: &mut F) {
        self.pkt.index = self.packet_index;
        if !sink(&self.pkt, &self.buf) {
            self.stopped = true;
        }
        self.buf.clear();
    }

    fn read(&mut self, data: &[u8], pos: &mut usize) -> Option<u8> {
        let b = *data.get(*pos)?;
        *pos += 1;
        self.buf.push(b);
        Some(b)
    }

    // ---- synchronisation -----------------------------------------------

    /// Emit one listing chunk of unsynchronised bytes.
    fn emit_unsynced<F: FnMut(&PtmPacket, &[u8]) -> bool>(&mut self, bytes: &[u8], first: bool, sink: &mut F) {
        self.pkt.index = self.packet_index;
        self.pkt.first_not_sync = first;
        if !sink(&self.pkt, bytes) {
            self.stopped = true;
        }
        self.pkt.first_not_sync = false;
    }

    /// Scan for an A-sync (five or more zeros then 0x80), listing what comes
    /// before it as NOTSYNC chunks.
    fn wait_async<F: FnMut(&PtmPacket, &[u8]) -> bool>(
        &mut self,
        data: &[u8],
        pos: &mut usize,
        overread: &[u8],
        sink: &mut F,
    ) {
        let mut scanning = true;
        let mut send = false;
        let mut found = false;
        let mut unsynced = 0usize;
        // OpenCSD lists the bytes from the start of the block.
        let mut chunk_start = 0usize;
        let zeros_on_entry = self.buf.len();
        while scanning && !self.stopped {
            if self.async_candidate && self.buf.len() >= MAX_HELD_ZEROS {
                // As OpenCSD's "not an A-sync" answer, for a run too long to hold.
                unsynced += self.buf.len();
                self.async_candidate = false;
                self.buf.clear();
            } else if self.async_candidate {
                match self.find_async(data, pos) {
                    AsyncScan::Found => {
                        self.state = State::SendPacket;
                        self.async_candidate = false;
                        send = true;
                        found = true;
                        scanning = false;
                    }
                    AsyncScan::TooManyZeros => {
                        unsynced += ASYNC_PAD_ZEROS as usize;
                        self.async_candidate = false;
                        self.buf.drain(..ASYNC_PAD_ZEROS as usize);
                    }
                    AsyncScan::NotAsync => {
                        unsynced += self.buf.len();
                        self.async_candidate = false;
                        self.buf.clear();
                    }
                    AsyncScan::Incomplete => {
                        send = true;
                        scanning = false;
                    }
                }
            } else {
                let b = data[*pos];
                *pos += 1;
                if b == 0 {
                    self.async_candidate = true;
                    self.buf.push(0);
                    self.async_zeros = 1;
                } else {
                    unsynced += 1;
                }
            }
            if unsynced >= UNSYNC_CHUNK {
                send = true;
            }
            if *pos == data.len() {
                send = true;
                scanning = false;
            }
            if send && unsynced > 0 {
                if zeros_on_entry > 0 {
                    let zeros = vec![0u8; zeros_on_entry];
                    self.emit_unsynced(&zeros, false, sink);
                    self.packet_index += zeros_on_entry as u64;
                }
                let first = !self.sent_not_sync;
                let end = chunk_start + unsynced;
                if end <= data.len() {
                    self.emit_unsynced(&data[chunk_start..end], first, sink);
                } else {
                    let mut bytes = data[chunk_start.min(data.len())..].to_vec();
                    let mut k = 0;
                    while chunk_start + bytes.len() < end {
                        bytes.push(overread.get(k).copied().unwrap_or(data.len() as u8));
                        k += 1;
                    }
                    self.emit_unsynced(&bytes, first, sink);
                }
                self.sent_not_sync = true;
                chunk_start += unsynced;
                self.packet_index += unsynced as u64;
                unsynced = 0;
                send = false;
            }
            if found {
                self.pkt.ptype = PtmPacketType::ASync;
            }
        }
    }

    fn find_async(&mut self, data: &[u8], pos: &mut usize) -> AsyncScan {
        loop {
            let Some(b) = self.read(data, pos) else { return AsyncScan::Incomplete };
            if b == 0 {
                self.async_zeros += 1;
                if self.async_zeros >= ASYNC_PAD_ZEROS + ASYNC_ZEROS {
                    return AsyncScan::TooManyZeros;
                }
            } else {
                return if b == 0x80 && self.async_zeros >= ASYNC_ZEROS {
                    AsyncScan::Found
                } else {
                    AsyncScan::NotAsync
                };
            }
        }
    }

    // ---- packets -------------------------------------------------------

    fn run_handler(&mut self, data: &[u8], pos: &mut usize) {
        let r = match self.handler {
            Handler::Reserved | Handler::Trigger | Handler::Ignore | Handler::ExceptionReturn => {
                self.state = State::SendPacket;
                Ok(())
            }
            Handler::ASync => self.async_packet(data, pos),
            Handler::ISync => self.isync(data, pos),
            Handler::WaypointUpdate => {
                self.waypoint_update(data, pos);
                Ok(())
            }
            Handler::ContextId => self.context_id(data, pos),
            Handler::Vmid => {
                if let Some(b) = self.read(data, pos) {
                    self.pkt.vmid = b;
                    self.pkt.vmid_updated = true;
                    self.state = State::SendPacket;
                }
                Ok(())
            }
            Handler::Atom => self.atom(data, pos),
            Handler::Timestamp => self.timestamp(data, pos),
            Handler::BranchAddress => self.branch_address(data, pos),
        };
        if let Err(msg) = r {
            self.bad_sequence(msg);
            self.state = State::SendPacket;
        }
    }

    /// The packet becomes a bad sequence, for the reason `msg`.
    fn bad_sequence(&mut self, msg: &'static str) {
        self.pkt.err_type = self.pkt.ptype;
        self.pkt.ptype = PtmPacketType::BadSequence;
        self.pkt.error_message = Some(msg);
    }

    fn async_packet(&mut self, data: &[u8], pos: &mut usize) -> ParseResult {
        if self.buf.len() == 1 {
            self.async_zeros = 1;
        }
        match self.find_async(data, pos) {
            AsyncScan::Found => {
                self.state = State::SendPacket;
                Ok(())
            }
            AsyncScan::NotAsync | AsyncScan::TooManyZeros => Err(MSG_BAD_ASYNC),
            AsyncScan::Incomplete => Ok(()),
        }
    }

    fn isync(&mut self, data: &[u8], pos: &mut usize) -> ParseResult {
        if self.buf.len() == 1 {
            self.s.ctxt_bytes = self.ctxt_id_bytes;
            self.s.got_ctxt_bytes = 0;
            self.s.bytes_needed = 6 + self.s.ctxt_bytes;
        }
        let mut done = false;
        while !done {
            let Some(b) = self.read(data, pos) else { break };
            let i = self.buf.len() - 1;
            if i == 5 {
                self.isync_info(b, self.buf[1]);
                if self.s.need_cc {
                    self.s.bytes_needed += 1;
                }
            } else if i > 5 {
                // Cycle count first, then the context ID.
                if self.s.need_cc && !self.s.got_cc {
                    self.s.got_cc = if i == 6 { b & 0x40 == 0 } else { b & 0x80 == 0 || i == 10 };
                    self.s.cc_bytes += 1;
                    if !self.s.got_cc {
                        self.s.bytes_needed += 1;
                    }
                } else if self.s.ctxt_bytes > self.s.got_ctxt_bytes {
                    self.s.got_ctxt_bytes += 1;
                }
            }
            done = self.s.bytes_needed == self.buf.len();
        }
        if done {
            self.isync_fields()?;
            self.state = State::SendPacket;
        }
        Ok(())
    }

    /// The I-sync's information byte `b` (its sixth), with the first
    /// address byte `a0` (bit 0: Thumb).
    fn isync_info(&mut self, b: u8, a0: u8) {
        let reason = ISyncReason::from_bits(b >> 5);
        self.pkt.isync_reason = reason;
        self.pkt.ns = b & 0x08 != 0;
        self.pkt.alt_isa = b & 0x04 != 0;
        self.pkt.hyp = b & 0x02 != 0;
        self.pkt.context_updated = true;
        // Thumb (address bit 0), and ThumbEE if the alternative set is on.
        let isa = match (a0 & 1 != 0, b & 0x04 != 0) {
            (false, _) => Isa::A32,
            (true, false) => Isa::T32,
            (true, true) => Isa::ThumbEE,
        };
        self.pkt.update_isa(isa);
        self.s.need_cc = reason != ISyncReason::Periodic && self.cycle_accurate;
        self.s.got_cc = false;
        self.s.cc_bytes = 0;
    }

    /// The address, cycle count and context ID of the I-sync in the
    /// buffer, whose sections the scratch measures.
    fn isync_fields(&mut self) -> ParseResult {
        // Bytes missing only where a loaded state was edited (the count
        // needed no longer matches the packet): they read as zero.
        let b = |i: usize| self.buf.get(i).copied().unwrap_or(0) as u32;
        let addr = (b(1) & 0xfe) | b(2) << 8 | b(3) << 16 | b(4) << 24;
        self.pkt.update_address(addr as u64, 32);
        let mut opt = 6;
        if self.s.need_cc {
            let cc = self.extract_cycle_count(opt)?;
            self.pkt.cycle_count = cc;
            self.pkt.cc_valid = true;
            opt += self.s.cc_bytes;
        }
        if self.s.ctxt_bytes > 0 {
            self.pkt.context_id = self.extract_context_id(opt)?;
            self.pkt.context_id_updated = true;
        }
        Ok(())
    }

    /// The I-sync at the start of `rest`, measured as [`PtmParser::isync`]
    /// measures it byte by byte: its length, with the information byte's
    /// fields set and the scratch left as that would leave them, or `None`
    /// (and nothing changed) when it runs past `rest`.
    #[inline(always)]
    fn take_isync(&mut self, rest: &[u8]) -> Option<usize> {
        let info = *rest.get(5)?;
        let need_cc = ISyncReason::from_bits(info >> 5) != ISyncReason::Periodic && self.cycle_accurate;
        let cc_bytes = if need_cc { cycle_count_len(rest.get(6..)?)? } else { 0 };
        let n = 6 + cc_bytes + self.ctxt_id_bytes;
        if rest.len() < n {
            return None;
        }
        self.s.ctxt_bytes = self.ctxt_id_bytes;
        self.s.got_ctxt_bytes = self.ctxt_id_bytes;
        self.isync_info(info, rest[1]);
        self.s.got_cc = need_cc;
        self.s.cc_bytes = cc_bytes;
        self.s.bytes_needed = n;
        Some(n)
    }

    fn waypoint_update(&mut self, data: &[u8], pos: &mut usize) {
        if self.buf.len() == 1 {
            self.s.got_addr_bytes = false;
            self.s.addr_bytes = 0;
            self.s.got_excep_bytes = false;
            self.s.excep_bytes = 0;
            self.s.addr_isa = None;
        }
        let mut done = false;
        while !done {
            let Some(b) = self.read(data, pos) else { break };
            let i = self.buf.len() - 1;
            if !self.s.got_addr_bytes {
                if i <= 4 {
                    if b & 0x80 == 0 {
                        self.s.got_addr_bytes = true;
                        self.s.got_excep_bytes = true;
                        done = true;
                    }
                } else {
                    if b & 0x40 == 0 {
                        self.s.got_excep_bytes = true;
                    }
                    self.s.got_addr_bytes = true;
                    done = self.s.got_excep_bytes;
                    self.s.addr_isa = Some(isa_of_fifth_byte(b));
                }
                self.s.addr_bytes += 1;
            } else if !self.s.got_excep_bytes {
                self.excep_alt_isa = b & 0x40 != 0;
                self.s.got_excep_bytes = true;
                self.s.excep_bytes += 1;
                done = true;
            }
        }
        if done {
            self.finish_address(1);
            self.state = State::SendPacket;
        }
    }

    /// Settle the packet's instruction set and address from the collected
    /// address bytes starting at `offset`.
    fn finish_address(&mut self, offset: usize) {
        let mut isa = self.s.addr_isa.unwrap_or(self.pkt.isa);
        if self.s.got_excep_bytes {
            if isa == Isa::ThumbEE && !self.excep_alt_isa {
                isa = Isa::T32;
            } else if isa == Isa::T32 && self.excep_alt_isa {
                isa = Isa::ThumbEE;
            }
        }
        self.pkt.update_isa(isa);
        let (addr, bits) = self.extract_address(offset, isa);
        self.pkt.update_address(addr as u64, bits);
    }

    fn context_id(&mut self, data: &[u8], pos: &mut usize) -> ParseResult {
        if self.buf.len() == 1 {
            self.s.ctxt_bytes = self.ctxt_id_bytes;
            self.s.got_ctxt_bytes = 0;
        }
        while self.s.got_ctxt_bytes < self.s.ctxt_bytes {
            if self.read(data, pos).is_none() {
                return Ok(());
            }
            self.s.got_ctxt_bytes += 1;
        }
        let id = if self.s.ctxt_bytes > 0 { self.extract_context_id(1)? } else { 0 };
        self.pkt.context_id = id;
        self.pkt.context_id_updated = true;
        self.state = State::SendPacket;
        Ok(())
    }

    fn atom(&mut self, data: &[u8], pos: &mut usize) -> ParseResult {
        let hdr = self.buf[0];
        if !self.cycle_accurate {
            self.set_atoms_from_header(hdr);
            self.state = State::SendPacket;
            return Ok(());
        }
        // Cycle-accurate: one atom (bit 1) and a cycle count of up to 5 bytes.
        let mut complete = hdr & 0x40 == 0;
        while !complete {
            let Some(b) = self.read(data, pos) else { break };
            if b & 0x80 == 0 || self.buf.len() == 5 {
                complete = true;
            }
        }
        if complete {
            let cc = self.extract_cycle_count(0)?;
            self.set_cycle_accurate_atom(hdr, cc);
            self.state = State::SendPacket;
        }
        Ok(())
    }

    /// The atom packet at the start of `rest`, if all of it is there and
    /// it is well formed: its fields set as [`PtmParser::atom`] sets them,
    /// and its length.
    #[inline(always)]
    fn take_atom(&mut self, rest: &[u8]) -> Option<usize> {
        let hdr = rest[0];
        if !self.cycle_accurate {
            self.set_atoms_from_header(hdr);
            return Some(1);
        }
        // As `atom` reads it: a byte without bit 7, or the fifth, ends it.
        let mut n = 1;
        if hdr & 0x40 != 0 {
            loop {
                let b = *rest.get(n)?;
                n += 1;
                if b & 0x80 == 0 || n == 5 {
                    break;
                }
            }
        }
        let cc = cycle_count_field(&rest[..n]).ok()?;
        self.set_cycle_accurate_atom(hdr, cc);
        Some(n)
    }

    /// The fields of a cycle-accurate atom packet: one atom, E unless bit 1
    /// of the header is set, and its cycle count.
    fn set_cycle_accurate_atom(&mut self, hdr: u8, cc: u32) {
        self.pkt.cycle_count = cc;
        self.pkt.cc_valid = true;
        self.pkt.atom_count = 1;
        self.pkt.atom_bits = if hdr & 0x02 != 0 { 0 } else { 1 };
    }

    /// Atoms of a non-cycle-accurate atom header: 1 to 5 atoms in bits 1..,
    /// a 0 bit is E.
    fn set_atoms_from_header(&mut self, hdr: u8) {
        let count = match hdr & 0xf0 {
            0x80 => {
                if hdr & 0x08 != 0 {
                    2
                } else {
                    1
                }
            }
            0x90 => 3,
            _ => {
                if hdr & 0xe0 == 0xa0 {
                    4
                } else {
                    5
                }
            }
        };
        // The atom in bit 1 ends up in the highest position: OpenCSD processes
        // (and lists) the atoms starting from the one in bit `count`.
        let mut bits = 0u8;
        for i in 0..count {
            bits <<= 1;
            if hdr & (0x02 << i) == 0 {
                bits |= 1;
            }
        }
        self.pkt.atom_count = count;
        self.pkt.atom_bits = bits;
    }

    fn timestamp(&mut self, data: &[u8], pos: &mut usize) -> ParseResult {
        if self.buf.len() == 1 {
            self.s.got_ts_bytes = false;
            self.s.need_cc = self.cycle_accurate;
            self.s.cc_bytes = 0;
            self.s.ts_max_bytes = if self.ts_64bit { 10 } else { 8 };
        }
        let mut done = false;
        while !done {
            let Some(b) = self.read(data, pos) else { break };
            if !self.s.got_ts_bytes {
                if b & 0x80 == 0 || self.buf.len() == self.s.ts_max_bytes {
                    self.s.got_ts_bytes = true;
                    if !self.s.need_cc {
                        done = true;
                    }
                }
            } else {
                let cont = if self.s.cc_bytes == 0 { 0x40 } else { 0x80 };
                if b & cont == 0 {
                    done = true;
                }
                self.s.cc_bytes += 1;
                if self.s.cc_bytes == 5 {
                    done = true;
                }
            }
        }
        if done {
            let (value, bits, end) = self.extract_timestamp()?;
            if self.s.need_cc {
                let cc = self.extract_cycle_count(end)?;
                self.pkt.cycle_count = cc;
                self.pkt.cc_valid = true;
            }
            // OpenCSD 1.8.0 takes the value as binary whatever ETMCCER says
            // about Gray coding (the Snowball PFT 1.0 golden shows it).
            self.pkt.update_timestamp(value, bits);
            self.state = State::SendPacket;
        }
        Ok(())
    }

    fn branch_address(&mut self, data: &[u8], pos: &mut usize) -> ParseResult {
        let mut done = false;
        if self.buf.len() == 1 {
            self.s.got_addr_bytes = false;
            self.s.addr_bytes = 1;
            self.s.need_cc = self.cycle_accurate;
            self.s.cc_bytes = 0;
            self.s.got_excep_bytes = false;
            self.s.excep_bytes = 0;
            self.s.addr_isa = None;
            if self.buf[0] & 0x80 == 0 {
                // A one-byte address; no exception can follow.
                self.s.got_addr_bytes = true;
                done = !self.s.need_cc;
                self.s.got_excep_bytes = true;
            }
        }
        while !done {
            let Some(b) = self.read(data, pos) else { break };
            let i = self.buf.len() - 1;
            if !self.s.got_addr_bytes {
                if i < 4 {
                    if b & 0x80 == 0 {
                        if b & 0x40 == 0 {
                            self.s.got_excep_bytes = true;
                        }
                        self.s.got_addr_bytes = true;
                        done = self.s.got_excep_bytes && !self.s.need_cc;
                    }
                } else {
                    if b & 0x40 == 0 {
                        self.s.got_excep_bytes = true;
                    }
                    self.s.got_addr_bytes = true;
                    done = self.s.got_excep_bytes && !self.s.need_cc;
                    self.s.addr_isa = Some(isa_of_fifth_byte(b));
                }
                self.s.addr_bytes += 1;
            } else if !self.s.got_excep_bytes {
                if self.s.excep_bytes == 0 {
                    if b & 0x80 == 0 {
                        self.s.got_excep_bytes = true;
                    }
                    self.excep_alt_isa = b & 0x40 != 0;
                } else {
                    self.s.got_excep_bytes = true;
                }
                self.s.excep_bytes += 1;
                if self.s.got_excep_bytes && !self.s.need_cc {
                    done = true;
                }
            } else if self.s.need_cc {
                done = if self.s.cc_bytes == 0 { b & 0x40 == 0 } else { b & 0x80 == 0 || self.s.cc_bytes == 4 };
                self.s.cc_bytes += 1;
            } else {
                return Err(MSG_BRANCH_SEQUENCE);
            }
        }
        if done {
            self.branch_fields()?;
            self.state = State::SendPacket;
        }
        Ok(())
    }

    /// The packet fields of the branch address packet in the buffer, whose
    /// sections the scratch measures.
    fn branch_fields(&mut self) -> ParseResult {
        self.finish_address(0);
        if self.s.excep_bytes > 0 {
            let e1 = self.buf[self.s.addr_bytes];
            let mut number = ((e1 >> 1) & 0xf) as u16;
            self.pkt.ns = e1 & 1 != 0;
            self.pkt.context_updated = true;
            if self.s.excep_bytes > 1 {
                let e2 = self.buf[self.s.addr_bytes + 1];
                self.pkt.hyp = (e2 >> 5) & 1 != 0;
                number |= ((e2 & 0x1f) as u16) << 4;
            }
            self.pkt.exception_present = true;
            self.pkt.exception_number = number;
        }
        if self.s.need_cc {
            let cc = self.extract_cycle_count(self.s.addr_bytes + self.s.excep_bytes)?;
            self.pkt.cycle_count = cc;
            self.pkt.cc_valid = true;
        }
        Ok(())
    }

    /// The branch address packet at the start of `rest`, measured as
    /// [`PtmParser::branch_address`] measures it byte by byte: its length,
    /// with the scratch left as that would leave it, or `None` (and nothing
    /// changed) when it runs past `rest`.
    #[inline(always)]
    fn take_branch(&mut self, rest: &[u8]) -> Option<usize> {
        let need_cc = self.cycle_accurate;
        let (mut n, mut addr_bytes, mut excep_bytes, mut addr_isa) = (1, 1, 0, None);
        let mut alt_isa = self.excep_alt_isa;
        if rest.first()? & 0x80 != 0 {
            // Address bytes 2 to 4 end at one without bit 7; a fifth always
            // ends them. Bit 6 of the last one says exception bytes follow.
            let more_excep = loop {
                let b = *rest.get(n)?;
                n += 1;
                addr_bytes += 1;
                if n == 5 {
                    addr_isa = Some(isa_of_fifth_byte(b));
                    break b & 0x40 != 0;
                }
                if b & 0x80 == 0 {
                    break b & 0x40 != 0;
                }
            };
            if more_excep {
                let b = *rest.get(n)?;
                n += 1;
                excep_bytes = 1;
                alt_isa = b & 0x40 != 0;
                if b & 0x80 != 0 {
                    rest.get(n)?;
                    n += 1;
                    excep_bytes = 2;
                }
            }
        }
        let cc_bytes = if need_cc { cycle_count_len(rest.get(n..)?)? } else { 0 };
        n += cc_bytes;
        self.excep_alt_isa = alt_isa;
        let s = &mut self.s;
        s.got_addr_bytes = true;
        s.addr_bytes = addr_bytes;
        s.need_cc = need_cc;
        s.cc_bytes = cc_bytes;
        s.got_excep_bytes = true;
        s.excep_bytes = excep_bytes;
        s.addr_isa = addr_isa;
        Some(n)
    }

    // ---- field extraction ----------------------------------------------

    fn extract_context_id(&self, idx: usize) -> Result<u32, &'static str> {
        let mut id = 0u32;
        for i in 0..self.s.ctxt_bytes {
            let b = *self.buf.get(idx + i).ok_or(MSG_SHORT_CONTEXT_ID)?;
            id |= (b as u32) << (8 * i);
        }
        Ok(id)
    }

    /// Cycle count starting at `offset`: the first byte holds bits 3:0 in its
    /// bits 5:2 (bit 6 = more), later bytes 7 bits each (bit 7 = more), at most 5 bytes.
    fn extract_cycle_count(&self, offset: usize) -> Result<u32, &'static str> {
        cycle_count_field(self.buf.get(offset..).unwrap_or_default())
    }

    /// Timestamp bytes from index 1: 7 bits each with a continuation bit; the
    /// last possible byte carries 6 bits (48-bit) or 8 bits (64-bit). Returns
    /// the value, the bits it sets and the index after it.
    fn extract_timestamp(&self) -> Result<(u64, u8, usize), &'static str> {
        let mut value = 0u64;
        let mut bits = 0u8;
        let mut idx = 1;
        let mut shift = 0;
        loop {
            let mut b = *self.buf.get(idx).ok_or(MSG_SHORT_TIMESTAMP)?;
            let more;
            if self.ts_64bit {
                if idx < 9 {
                    more = b & 0x80 != 0;
                    b &= 0x7f;
                    bits += 7;
                } else {
                    more = false;
                    bits += 8;
                }
            } else if idx < 7 {
                more = b & 0x80 != 0;
                b &= 0x7f;
                bits += 7;
            } else {
                b &= 0x3f;
                more = false;
                bits += 6;
            }
            value |= (b as u64) << shift;
            idx += 1;
            shift += 7;
            if !more {
                return Ok((value, bits, idx));
            }
        }
    }

    /// Address bits of a branch or waypoint packet whose address bytes start
    /// at `offset`: 6 bits in the first byte (bits 6:1), 7 in middle bytes, 6
    /// in a last byte 2-4, and 3/4/5 in a fifth byte (A32/T32/Jazelle). A32
    /// addresses are word aligned, so shifted one more bit; Jazelle ones are
    /// byte aligned.
    fn extract_address(&self, offset: usize, isa: Isa) -> (u32, u8) {
        let n = self.s.addr_bytes;
        let mut value = 0u32;
        let mut total = 0u8;
        let mut next_shift = 0u32;
        for i in 0..n {
            let (mask, bits) = if i == 0 {
                (0x7eu8, 7u8)
            } else if i == 4 {
                match isa {
                    Isa::Jazelle => (0x1f, 5),
                    Isa::A32 => (0x07, 3),
                    _ => (0x0f, 4),
                }
            } else if i == n - 1 {
                (0x3f, 6)
            } else {
                (0x7f, 7)
            };
            let b = self.buf.get(offset + i).copied().unwrap_or(0);
            value |= ((b & mask) as u32).wrapping_shl(next_shift);
            total += bits;
            if i == 0 {
                if isa == Isa::Jazelle {
                    value >>= 1;
                    next_shift = 6;
                    total -= 1;
                } else {
                    next_shift = 7;
                }
            } else {
                next_shift += 7;
            }
        }
        if isa == Isa::A32 {
            value <<= 1;
            total += 1;
        }
        (value, total)
    }
}

/// The cycle count field at the start of `b`: 4 bits in the first byte
/// (bit 6 says more follow), then 7 bits a byte (bit 7 says more follow),
/// five bytes at most.
fn cycle_count_field(b: &[u8]) -> Result<u32, &'static str> {
    let mut cc = 0u32;
    let mut shift = 4;
    let mut i = 0;
    loop {
        let x = *b.get(i).ok_or(MSG_SHORT_CYCLE_COUNT)?;
        let more;
        if i == 0 {
            more = x & 0x40 != 0;
            cc = ((x >> 2) & 0xf) as u32;
        } else {
            more = x & 0x80 != 0 && i != 4;
            cc |= ((x & 0x7f) as u32) << shift;
            shift += 7;
        }
        i += 1;
        if !more {
            return Ok(cc);
        }
    }
}

/// The length of the cycle count field at the start of `b`, as
/// [`cycle_count_field`] reads it: the first byte ends it without bit 6,
/// later ones without bit 7, the fifth always. `None` when it runs past `b`.
fn cycle_count_len(b: &[u8]) -> Option<usize> {
    let mut n = 0;
    loop {
        let x = *b.get(n)?;
        let last = if n == 0 { x & 0x40 == 0 } else { x & 0x80 == 0 || n == 4 };
        n += 1;
        if last {
            return Some(n);
        }
    }
}

/// Instruction set given by the fifth byte of a branch address.
fn isa_of_fifth_byte(b: u8) -> Isa {
    if b & 0x20 != 0 {
        Isa::Jazelle
    } else if b & 0x30 == 0x10 {
        Isa::T32
    } else {
        Isa::A32
    }
}
