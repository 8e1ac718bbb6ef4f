//! Streaming ETMv3 packet parser.
//!
//! A byte-at-a-time state machine that behaves as OpenCSD's `EtmV3PktProcImpl`,
//! the reference the golden tests compare against: the same packet boundaries
//! and `Idx` values, the same chunking of bytes before the first A-sync into
//! `NOTSYNC` packets (at most 16 bytes, cut at every push boundary and before
//! every zero byte), the same treatment of malformed input (the packet is
//! reported with the error and parsing goes on), including the places where
//! OpenCSD's view of a field differs from the architecture (noted inline).
//!
//! Packet layouts: ETM architecture specification v3.x (IHI 0014) chapter 7,
//! summarised in `../shared/spec/etmv3-packet-types.txt`.

use super::config::Etm3Config;
use super::packet::{
    Etm3Packet, PacketType, ParseError, ERR_BAD_PACKET_SEQ, ERR_HW_CFG_UNSUPP, ERR_INVALID_PCKT_HDR,
    ERR_PKT_INTERP_FAIL,
};
use crate::element::Isa;
use crate::protocol::Stretches;

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    WaitSync,
    Header,
    Payload,
    Send,
}

/// Settings the parser needs, taken once from the configuration.
#[derive(Clone, Copy, Debug, Default)]
struct Settings {
    cycle_accurate: bool,
    alt_branch: bool,
    cid_bytes: usize,
    data_value: bool,
    data_address: bool,
    data_any: bool,
    instruction: bool,
    minor: u8,
    virtualization: bool,
    ts64: bool,
    v7m: bool,
    trace_id: u8,
}

type PResult<T> = Result<T, ParseError>;

fn malformed(message: &'static str) -> ParseError {
    ParseError { code: ERR_BAD_PACKET_SEQ, message }
}

fn bad_header(message: &'static str) -> ParseError {
    ParseError { code: ERR_INVALID_PCKT_HDR, message }
}

/// The most bytes one packet may gather. OpenCSD reads continuation bytes of
/// timestamps, data addresses and load/store-in-progress addresses for as
/// long as their top bit is set, so one packet can grow with the trace; the
/// longest packets the architecture defines (IHI 0014 7.3) are under 20
/// bytes. Past this many bytes the packet is sent as a bad sequence, so a
/// parser's memory and saved state stay bounded whatever the trace.
pub const MAX_PACKET_BYTES: usize = 4096;

/// Where [`Etm3Parser::push_until`] hands its packets, with their raw bytes.
pub trait Etm3Sink {
    /// A complete packet; false stops the parser after it.
    fn packet(&mut self, packet: &Etm3Packet, raw: &[u8]) -> bool;

    /// `bytes`, at buffer index `index`, start with a byte that looks like a
    /// one-byte P-header, and may go on with more: how many of them the
    /// sink took whole, each as [`Etm3Sink::packet`] would have taken it as
    /// a P-header packet. `last` is the parser's packet before them (what
    /// packets carry, the instruction set among it); `cycle_accurate` how
    /// the parser reads P-headers. The sink stops before a byte that is not
    /// a valid P-header and wherever it would do more than take the packet;
    /// what it did not take comes again one packet at a time. Most of an
    /// ETMv3 stream is one-byte P-headers: taken so, a summary of TC2 runs
    /// a sixth fewer instructions (each packet built, counted and passed
    /// through the decoder's state dispatch no more).
    #[inline(always)]
    fn phdr_run(&mut self, _index: u64, _bytes: &[u8], _last: &Etm3Packet, _cycle_accurate: bool) -> usize {
        0
    }
}

impl<F: FnMut(&Etm3Packet, &[u8]) -> bool> Etm3Sink for F {
    #[inline(always)]
    fn packet(&mut self, packet: &Etm3Packet, raw: &[u8]) -> bool {
        self(packet, raw)
    }
}

/// The ETMv3 packet parser for one trace ID.
///
/// Its stream state serializes ([`Etm3Parser::save_state`]) so that parsing
/// can resume exactly where it stopped; the settings derived from the
/// configuration are supplied again on load.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Etm3Parser {
    #[serde(skip)]
    set: Settings,
    state: State,
    /// Bytes of the packet being assembled.
    buf: Vec<u8>,
    /// Read position in `buf` while a packet is interpreted.
    rd: usize,
    pkt: Etm3Packet,
    /// Leading bytes split off `buf` to be sent as a packet of their own.
    part: Vec<u8>,
    send_part: bool,
    after_part_state: State,
    after_part_type: PacketType,
    synced: bool,
    /// A zero byte (possible A-sync start) opened the bytes in `buf`.
    sync_start: bool,
    expected: usize,
    branch_needs_exception: bool,
    isync_got_cc: bool,
    isync_lsip: bool,
    isync_info_idx: usize,
    expect_data_addr: bool,
    found_data_addr: bool,
    packet_index: u64,
    /// The payload handler gave its byte back to be read again.
    unread: bool,
    unformatted: bool,
    fatal: Option<ParseError>,
    bytes_in: u64,
}

impl Etm3Parser {
    pub fn new(cfg: &Etm3Config) -> Etm3Parser {
        let set = Settings {
            cycle_accurate: cfg.cycle_accurate(),
            alt_branch: cfg.alt_branch(),
            cid_bytes: cfg.context_id_bytes() as usize,
            data_value: cfg.data_value_trace(),
            data_address: cfg.data_address_trace(),
            data_any: cfg.data_trace(),
            instruction: cfg.instruction_trace(),
            minor: cfg.minor_version(),
            virtualization: cfg.has_virtualization(),
            ts64: cfg.timestamp_64bit(),
            v7m: cfg.v7m(),
            trace_id: cfg.trace_id(),
        };
        let mut p = Etm3Parser {
            set,
            state: State::WaitSync,
            buf: Vec::with_capacity(32),
            rd: 0,
            pkt: Etm3Packet::reset_state(),
            part: Vec::with_capacity(16),
            send_part: false,
            after_part_state: State::WaitSync,
            after_part_type: PacketType::NotSync,
            synced: false,
            sync_start: false,
            expected: 0,
            branch_needs_exception: false,
            isync_got_cc: false,
            isync_lsip: false,
            isync_info_idx: 0,
            expect_data_addr: false,
            found_data_addr: false,
            packet_index: 0,
            unread: false,
            unformatted: false,
            fatal: None,
            bytes_in: 0,
        };
        p.reset();
        p
    }

    /// The stream state, for a later [`Etm3Parser::load_state`].
    pub fn save_state(&self) -> Vec<u8> {
        bincode::serialize(self).unwrap_or_default()
    }

    /// A parser for `cfg` continuing from a saved state.
    pub fn load_state(cfg: &Etm3Config, state: &[u8]) -> Result<Etm3Parser, crate::protocol::ProtocolError> {
        let mut p: Etm3Parser = crate::protocol::read_state("ETMv3 parser", state)?;
        p.check()?;
        p.set = Etm3Parser::new(cfg).set;
        Ok(p)
    }

    /// The bounds a loaded state must meet (see [`crate::protocol::check_state`]):
    /// what the parser itself can hold ([`MAX_PACKET_BYTES`]).
    fn check(&self) -> Result<(), crate::protocol::ProtocolError> {
        const MAX_PACKET: usize = MAX_PACKET_BYTES;
        crate::protocol::check_state(
            "ETMv3 parser",
            &[
                (self.buf.len() <= MAX_PACKET, "packet buffer length"),
                (self.part.len() <= MAX_PACKET, "partial packet length"),
                (self.rd <= MAX_PACKET, "read position"),
                // A data packet's value bytes are counted after its address.
                (self.expected <= MAX_PACKET + 8, "expected packet length"),
                (self.isync_info_idx <= MAX_PACKET, "I-sync information byte position"),
                (self.pkt.atom_count <= 32, "atom count"),
            ],
        )
    }

    /// The trace comes from an unformatted (single source, formatter bypassed)
    /// buffer. OpenCSD cannot parse such ETMv3 trace past a 0x01 header (which
    /// may end the trace there) and stops with a fatal error; so does this parser.
    pub fn set_unformatted_source(&mut self, on: bool) {
        self.unformatted = on;
    }

    /// Forget all stream state, as at the start of a new capture.
    pub fn reset(&mut self) {
        self.synced = false;
        self.state = State::WaitSync;
        self.sync_start = false;
        self.pkt = Etm3Packet::reset_state();
        self.init_packet();
        self.send_part = false;
        self.fatal = None;
    }

    /// True once an A-sync has been seen.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// Total bytes consumed since creation.
    pub fn bytes_in(&self) -> u64 {
        self.bytes_in
    }

    /// The parser met data it cannot go past (OpenCSD's fatal data path
    /// response); it ignores further input until [`Etm3Parser::reset`].
    pub fn is_fatal(&self) -> bool {
        self.fatal.is_some()
    }

    /// The error that stopped the parser, in OpenCSD's message format (no
    /// trailing newline).
    pub fn fatal_message(&self) -> Option<String> {
        self.fatal.as_ref().map(|e| self.error_string(e, Some(self.packet_index)))
    }

    /// `PKTP_ETMV3_<id> : 0x<code> (<name>) [<description>]; TrcIdx=..; CS ID=..; <message>`.
    pub fn error_string(&self, e: &ParseError, index: Option<u64>) -> String {
        parse_error_string(self.set.trace_id, e, index)
    }

    /// Parse `data`, whose first byte is at `index` in the captured buffer.
    /// Every complete packet is passed to `sink` with its raw bytes.
    pub fn push<F: FnMut(&Etm3Packet, &[u8])>(&mut self, index: u64, data: &[u8], sink: &mut F) {
        self.push_until(index, data, &mut |p: &Etm3Packet, r: &[u8]| {
            sink(p, r);
            true
        });
    }

    /// As [`Etm3Parser::push`], but the sink can stop parsing by returning
    /// false. Returns the number of bytes of `data` consumed; the packet the
    /// sink refused is complete.
    pub fn push_until<S: Etm3Sink>(&mut self, index: u64, data: &[u8], sink: &mut S) -> usize {
        self.parse(Stretches::one(index), data, sink)
    }

    /// As [`Etm3Parser::push_until`], for one trace ID's bytes joined from
    /// several blocks (`spans`: where each starts in `data`, and its index
    /// in the captured buffer, as
    /// [`FrameSink::run`](crate::frame::FrameSink::run) gives them). Only
    /// once the parser is synchronised ([`Etm3Parser::is_synced`]): before
    /// that, what it lists depends on where each block ends.
    pub fn push_spans_until<S: Etm3Sink>(&mut self, spans: &[(usize, u64)], data: &[u8], sink: &mut S) -> usize {
        debug_assert!(self.is_synced());
        self.parse(Stretches::of(spans), data, sink)
    }

    fn parse<S: Etm3Sink>(&mut self, mut at: Stretches<'_>, data: &[u8], sink: &mut S) -> usize {
        if self.fatal.is_some() {
            return 0;
        }
        let mut pos = 0usize;
        while pos < data.len() || self.state == State::Send {
            match self.state {
                State::WaitSync => {
                    if !self.sync_start {
                        self.packet_index = at.index(pos);
                    }
                    pos += self.wait_for_sync(&data[pos..]);
                }
                State::Header => {
                    // Fast path: single-byte P-headers are most of the stream.
                    let b = data[pos];
                    if b & 0x81 == 0x80 {
                        let ca = self.set.cycle_accurate;
                        // Within the stretch: the sink gives the headers
                        // consecutive indices.
                        let first = at.index(pos);
                        let stretch = &data[pos..at.end(pos).min(data.len())];
                        let took = sink.phdr_run(first, stretch, &self.pkt, ca).min(stretch.len());
                        if took > 0 {
                            // The parser as after the run's last P-header,
                            // taken one by one: each one's packet replaces
                            // the one before.
                            let last = pos + took - 1;
                            pos += took;
                            self.packet_index = at.index(last);
                            self.init_packet();
                            self.pkt.ptype = PacketType::PHeader;
                            self.pkt.atoms_from_phdr(data[last], ca);
                            self.pkt.index = self.packet_index;
                            continue;
                        }
                        self.packet_index = first;
                        self.init_packet();
                        self.pkt.ptype = PacketType::PHeader;
                        pos += 1;
                        if self.pkt.atoms_from_phdr(b, self.set.cycle_accurate) {
                            self.pkt.index = self.packet_index;
                            if !sink.packet(&self.pkt, &data[pos - 1..pos]) {
                                break;
                            }
                        } else {
                            self.buf.push(b);
                            self.pkt.error = Some(bad_header("Invalid P-Header."));
                            self.state = State::Send;
                        }
                        continue;
                    }
                    self.packet_index = at.index(pos);
                    pos += 1;
                    if let Err(e) = self.header(b) {
                        self.on_error(e);
                    }
                }
                State::Payload => {
                    let b = data[pos];
                    pos += 1;
                    let r = self.payload(b);
                    if self.unread {
                        self.unread = false;
                        pos -= 1;
                    }
                    if let Err(e) = r {
                        self.on_error(e);
                    }
                }
                State::Send => {
                    if !self.output(sink) {
                        break;
                    }
                }
            }
            if self.fatal.is_some() {
                break;
            }
        }
        self.bytes_in += pos as u64;
        pos
    }

    /// End of trace: a packet still being assembled is sent as it stands
    /// (OpenCSD keeps its type).
    pub fn finish<F: FnMut(&Etm3Packet, &[u8])>(&mut self, sink: &mut F) {
        if self.fatal.is_none() && !self.buf.is_empty() {
            self.output(&mut |p: &Etm3Packet, r: &[u8]| {
                sink(p, r);
                true
            });
            self.init_packet();
        }
    }

    fn on_error(&mut self, e: ParseError) {
        if e.code == ERR_BAD_PACKET_SEQ || e.code == ERR_INVALID_PCKT_HDR {
            // Send the malformed packet on; the decoder decides.
            self.pkt.error = Some(e);
            self.state = State::Send;
        } else {
            self.fatal = Some(e);
        }
    }

    fn output<S: Etm3Sink>(&mut self, sink: &mut S) -> bool {
        self.pkt.index = self.packet_index;
        let go;
        if !self.send_part {
            go = sink.packet(&self.pkt, &self.buf);
            self.state = if self.synced { State::Header } else { State::WaitSync };
            self.buf.clear();
        } else {
            go = sink.packet(&self.pkt, &self.part);
            self.state = self.after_part_state;
            self.packet_index += self.part.len() as u64;
            self.send_part = false;
            self.pkt.ptype = self.after_part_type;
        }
        self.pkt.error = None;
        go
    }

    /// Split the first `n` bytes off the packet, to be sent before the rest.
    fn split_part(&mut self, n: usize, next_state: State, next_type: PacketType) {
        let n = n.min(self.buf.len());
        self.part.clear();
        self.part.extend_from_slice(&self.buf[..n]);
        self.buf.drain(..n);
        self.send_part = true;
        self.after_part_state = next_state;
        self.after_part_type = next_type;
    }

    /// Clear the per-packet state (OpenCSD's InitPacketState).
    fn init_packet(&mut self) {
        self.expected = 0;
        self.branch_needs_exception = false;
        self.isync_got_cc = false;
        self.isync_lsip = false;
        self.isync_info_idx = 0;
        self.expect_data_addr = false;
        self.found_data_addr = false;
        self.buf.clear();
        self.rd = 0;
        self.pkt.clear();
    }

    /// Look for the A-sync (five zeros and 0x80) that synchronises the stream;
    /// returns the bytes of `data` consumed.
    fn wait_for_sync(&mut self, data: &[u8]) -> usize {
        let mut n = 0usize;
        let mut send = false;
        while !send && n < data.len() {
            let b = data[n];
            n += 1;
            if self.sync_start {
                self.buf.push(b);
                if b == 0x80 && self.buf.len() >= 6 {
                    send = true;
                    if self.buf.len() > 6 {
                        // Extra leading zeros: send them first, then read the
                        // 0x80 again after the five zeros that remain.
                        self.buf.pop();
                        n -= 1;
                        let extra = self.buf.len() - 5;
                        self.split_part(extra, State::WaitSync, PacketType::NotSync);
                    } else {
                        self.synced = true;
                        self.pkt.ptype = PacketType::ASync;
                    }
                } else if b != 0x00 {
                    self.sync_start = false;
                } else if self.buf.len() >= 13 {
                    // Thirteen zeros: eight of them cannot be part of an A-sync.
                    self.split_part(8, State::WaitSync, PacketType::NotSync);
                    send = true;
                }
            } else if b == 0x00 {
                if self.buf.is_empty() {
                    self.buf.push(b);
                    self.sync_start = true;
                } else {
                    // Send what came before; this zero opens the next chunk.
                    n -= 1;
                    send = true;
                    self.pkt.ptype = PacketType::NotSync;
                }
            } else {
                self.buf.push(b);
                if n == data.len() || self.buf.len() == 16 {
                    send = true;
                    self.pkt.ptype = PacketType::NotSync;
                }
            }
        }
        if send {
            self.state = State::Send;
        }
        n
    }

    fn header(&mut self, b: u8) -> PResult<()> {
        self.init_packet();
        self.buf.push(b);
        self.state = State::Payload;
        let s = self.set;
        let p = &mut self.pkt;
        if b & 0x01 == 0x01 {
            // Branch address: bCxxxxxx1.
            p.ptype = PacketType::BranchAddress;
            self.branch_needs_exception = false;
            if b & 0x80 == 0 {
                if b == 0x01 && self.unformatted {
                    return Err(ParseError {
                        code: ERR_HW_CFG_UNSUPP,
                        message: "Bypassed ETM stream not supported in this version of the decoder.",
                    });
                }
                self.on_branch_address()?;
                self.state = State::Send;
            }
        } else if b & 0x81 == 0x80 {
            p.ptype = PacketType::PHeader;
            if p.atoms_from_phdr(b, s.cycle_accurate) {
                self.state = State::Send;
            } else {
                return Err(bad_header("Invalid P-Header."));
            }
        } else if b & 0xf3 == 0x00 {
            match b {
                0x00 => p.ptype = PacketType::ASync,
                0x04 => p.ptype = PacketType::CycleCount,
                0x08 => {
                    p.ptype = PacketType::ISync;
                    self.isync_got_cc = false;
                    self.isync_lsip = false;
                }
                _ => {
                    p.ptype = PacketType::Trigger;
                    self.state = State::Send;
                }
            }
        } else if b & 0x03 == 0x00 {
            if b & 0x93 == 0x00 {
                // Out-of-order data b0TT0SS00.
                if !s.data_value {
                    p.set_err_type(PacketType::BadTraceMode);
                    return Err(bad_header("Invalid data trace header (out of order data) - not tracing data values."));
                }
                p.ptype = PacketType::OooData;
                let size = ((b >> 2) & 0x3) as usize;
                if size == 0 {
                    p.data.ooo_tag = (b >> 5) & 0x3;
                    p.set_data_value(0);
                    self.state = State::Send;
                } else {
                    self.expected = 1 + if size == 3 { 4 } else { size };
                }
            } else if b == 0x70 {
                p.ptype = PacketType::ISyncCycle;
                self.isync_got_cc = false;
                self.isync_lsip = false;
            } else if b == 0x50 {
                if !s.data_value {
                    p.set_err_type(PacketType::BadTraceMode);
                    return Err(bad_header("Invalid data trace header (store failed) - not tracing data values."));
                }
                p.ptype = PacketType::StoreFail;
                self.state = State::Send;
            } else if b & 0xd3 == 0x50 {
                // Out-of-order placeholder b01A1TT00.
                p.ptype = PacketType::OooAddrPlaceholder;
                if !s.data_any {
                    p.set_err_type(PacketType::BadTraceMode);
                    return Err(bad_header(
                        "Invalid data trace header (out of order placeholder) - not tracing data.",
                    ));
                }
                self.expect_data_addr = b & 0x20 != 0 && s.data_address;
                self.found_data_addr = false;
                p.data.ooo_tag = (b >> 2) & 0x3;
                if !self.expect_data_addr {
                    self.state = State::Send;
                }
            } else if b == 0x3c {
                p.ptype = PacketType::Vmid;
            } else {
                p.set_err_type(PacketType::Reserved);
                return Err(bad_header("Packet header reserved encoding"));
            }
        } else if b & 0xd3 == 0x02 {
            // Normal data b00A0SS10.
            let size = ((b >> 2) & 0x3) as usize;
            if !s.data_any {
                p.set_err_type(PacketType::BadTraceMode);
                return Err(bad_header("Invalid data trace header (normal data) - not tracing data."));
            }
            p.ptype = PacketType::NormalData;
            self.expect_data_addr = b & 0x20 != 0 && s.data_address;
            self.found_data_addr = false;
            self.expected = 1 + if size == 3 { 4 } else { size };
            if !self.expect_data_addr && self.expected == 1 {
                p.set_data_value(0);
                self.state = State::Send;
            }
        } else if b == 0x62 {
            if !s.data_any {
                p.set_err_type(PacketType::BadTraceMode);
                return Err(bad_header("Invalid data trace header (data suppressed) - not tracing data."));
            }
            p.ptype = PacketType::DataSuppressed;
            self.state = State::Send;
        } else if b & 0xef == 0x6a {
            // Value not traced b011A1010.
            if !s.data_any {
                p.set_err_type(PacketType::BadTraceMode);
                return Err(bad_header("Invalid data trace header (value not traced) - not tracing data."));
            }
            p.ptype = PacketType::ValueNotTraced;
            self.expect_data_addr = b & 0x20 != 0 && s.data_address;
            self.found_data_addr = false;
            if !self.expect_data_addr {
                self.state = State::Send;
            }
        } else if b == 0x66 {
            p.ptype = PacketType::Ignore;
            self.state = State::Send;
        } else if b == 0x6e {
            p.ptype = PacketType::ContextId;
            self.expected = 1 + s.cid_bytes;
        } else if b == 0x76 {
            p.ptype = PacketType::ExceptionExit;
            self.state = State::Send;
        } else if b == 0x7e {
            p.ptype = PacketType::ExceptionEntry;
            self.state = State::Send;
        } else if b & 0xfb == 0x42 {
            p.ptype = PacketType::Timestamp;
        } else {
            p.set_err_type(PacketType::Reserved);
            return Err(bad_header("Packet header reserved encoding."));
        }
        Ok(())
    }

    fn payload(&mut self, b: u8) -> PResult<()> {
        self.buf.push(b);
        let len = self.buf.len();
        if len >= MAX_PACKET_BYTES {
            self.pkt.set_err_type(PacketType::BadSequence);
            return Err(malformed("Malformed Packet - oversized packet."));
        }
        let top = b & 0x80 != 0;
        match self.pkt.ptype {
            PacketType::BranchAddress => {
                let mut done = false;
                if self.set.alt_branch {
                    if !top {
                        if !self.branch_needs_exception {
                            if b & 0xc0 == 0x40 {
                                self.branch_needs_exception = true;
                            } else {
                                done = true;
                            }
                        } else {
                            done = true;
                        }
                    }
                } else if len == 5 {
                    // Only a five-byte address can carry exception bytes.
                    if b & 0xc0 == 0x40 {
                        self.branch_needs_exception = true;
                    } else {
                        done = true;
                    }
                } else if !top {
                    done = true;
                }
                if done {
                    self.on_branch_address()?;
                    self.state = State::Send;
                }
            }
            PacketType::ASync => {
                if b == 0x00 {
                    if len > 5 {
                        // One zero too many: send it alone and keep looking.
                        self.pkt.set_err_type(PacketType::BadSequence);
                        self.split_part(1, State::Payload, PacketType::ASync);
                        return Err(malformed("A-Sync ?: Extra 0x00 in sequence"));
                    }
                } else if b == 0x80 && len == 6 {
                    self.state = State::Send;
                    self.synced = true;
                } else {
                    self.pkt.set_err_type(PacketType::BadSequence);
                    self.unread = true;
                    self.buf.pop();
                    return Err(malformed("A-Sync ? : Unexpected byte in sequence"));
                }
            }
            PacketType::CycleCount => {
                if !top || len >= 6 {
                    self.rd = 1;
                    let cc = self.extract_cycle_count()?;
                    self.pkt.cycle_count = cc;
                    self.state = State::Send;
                }
            }
            PacketType::ISyncCycle if !self.isync_got_cc => {
                // The cycle count comes first; the byte that ends it is not
                // looked at again.
                if !top || len >= 6 {
                    self.isync_got_cc = true;
                }
            }
            PacketType::ISync | PacketType::ISyncCycle => {
                if self.expected == 0 {
                    let cc_bytes = len - 2;
                    self.expected =
                        if self.set.instruction { cc_bytes + 6 + self.set.cid_bytes } else { 2 + self.set.cid_bytes };
                    self.isync_info_idx = 1 + cc_bytes + self.set.cid_bytes;
                }
                if len - 1 == self.isync_info_idx {
                    self.isync_lsip = self.buf[self.isync_info_idx] & 0x80 != 0;
                }
                if len >= self.expected {
                    // A load/store-in-progress address follows the expected
                    // bytes; its length is only known from its last byte.
                    if !self.isync_lsip || !top {
                        self.on_isync()?;
                    }
                }
            }
            PacketType::NormalData => {
                if self.expect_data_addr && !self.found_data_addr {
                    if !top {
                        self.found_data_addr = true;
                        self.expected += len - 1;
                    }
                } else if self.expected == len {
                    self.rd = 1;
                    if self.expect_data_addr {
                        let (addr, bits, be) = self.extract_data_address()?;
                        self.pkt.update_data_address(addr, bits);
                        if let Some(be) = be {
                            self.pkt.data.big_endian = be;
                            self.pkt.data.update_be = true;
                        }
                    }
                    let size = (self.buf[0] >> 2) & 0x3;
                    let v = self.extract_data_value(size)?;
                    self.pkt.set_data_value(v);
                    self.state = State::Send;
                }
            }
            PacketType::OooData => {
                if self.expected == len {
                    self.rd = 1;
                    let v = self.extract_data_value((self.buf[0] >> 2) & 0x3)?;
                    self.pkt.set_data_value(v);
                    self.pkt.data.ooo_tag = (self.buf[0] >> 5) & 0x3;
                    self.state = State::Send;
                }
                if self.expected < len {
                    return Err(malformed("Malformed out of order data packet."));
                }
            }
            PacketType::ValueNotTraced | PacketType::OooAddrPlaceholder => {
                if self.expect_data_addr && !top {
                    self.rd = 1;
                    let (addr, bits, be) = self.extract_data_address()?;
                    self.pkt.update_data_address(addr, bits);
                    if let Some(be) = be {
                        self.pkt.data.big_endian = be;
                        self.pkt.data.update_be = true;
                    }
                    self.state = State::Send;
                }
            }
            PacketType::ContextId => {
                if self.expected == len {
                    self.rd = 1;
                    let id = self.extract_context_id()?;
                    self.pkt.update_context_id(id);
                    self.state = State::Send;
                }
                if self.expected < len {
                    return Err(malformed("Malformed context id packet."));
                }
            }
            PacketType::Timestamp => {
                if !top {
                    self.rd = 1;
                    let (ts, bits) = self.extract_timestamp()?;
                    self.pkt.update_timestamp(ts, bits);
                    self.state = State::Send;
                }
            }
            PacketType::Vmid => {
                self.pkt.update_vmid(b);
                self.state = State::Send;
            }
            _ => {
                return Err(ParseError {
                    code: ERR_PKT_INTERP_FAIL,
                    message: "Interpreter failed - cannot process payload for unexpected or unsupported packet.",
                })
            }
        }
        Ok(())
    }

    fn next_byte(&mut self) -> PResult<u8> {
        match self.buf.get(self.rd) {
            Some(&b) => {
                self.rd += 1;
                Ok(b)
            }
            None => Err(malformed("Malformed Packet - oversized packet.")),
        }
    }

    fn on_branch_address(&mut self) -> PResult<()> {
        self.rd = 0;
        let (value, bits) = self.extract_branch_address()?;
        self.pkt.addr.update(value as u64, bits);
        Ok(())
    }

    /// A compressed branch address from the read position (also used for the
    /// I-sync load/store-in-progress address). Returns the address bits and
    /// how many low-order bits they are.
    fn extract_branch_address(&mut self) -> PResult<(u32, u8)> {
        const SHIFT: [u32; 4] = [2, 1, 1, 0];
        const BYTE5_MASK: [u8; 4] = [0x7, 0xf, 0xf, 0x1f];
        const BYTE5_BITS: [u32; 4] = [3, 4, 4, 5];
        let mut more = true;
        let mut count = 0;
        let mut bits = 0u32;
        let mut value = 0u32;
        let mut byte = 0u8;
        while more && count < 4 {
            byte = self.next_byte()?;
            more = byte & 0x80 != 0;
            let shift = bits;
            if count == 0 {
                byte = (byte & !0x81) >> 1;
                bits += 6;
            } else if self.set.alt_branch && !more {
                // Alternative encoding: bit 6 of the last address byte says
                // exception bytes follow.
                if byte & 0x40 != 0 {
                    self.extract_exception()?;
                }
                byte &= 0x3f;
                bits += 6;
            } else {
                byte &= 0x7f;
                bits += 7;
            }
            value |= (byte as u32).wrapping_shl(shift);
            count += 1;
        }
        let mut byte5 = false;
        if more {
            byte = self.next_byte()?;
            if byte & 0x80 != 0 {
                // Original (deprecated) fifth byte: an A32 exception.
                let number = ((byte >> 3) & 0x7) as u16;
                self.pkt.update_isa(Isa::A32);
                self.pkt.set_exception(number, byte & 0x40 != 0, self.set.v7m, 0, 0);
            } else {
                if byte & 0x40 != 0 {
                    self.extract_exception()?;
                }
                if byte & 0xb8 == 0x08 {
                    self.pkt.update_isa(Isa::A32);
                } else if byte & 0xb0 == 0x10 {
                    let isa = if self.pkt.context.alt_isa { Isa::ThumbEE } else { Isa::T32 };
                    self.pkt.update_isa(isa);
                } else if byte & 0xa0 == 0x20 {
                    self.pkt.update_isa(Isa::Jazelle);
                } else {
                    return Err(malformed("Malformed Packet - Unknown ISA."));
                }
            }
            byte5 = true;
        }
        let i = match self.pkt.isa {
            Isa::T32 => 1,
            Isa::ThumbEE => 2,
            Isa::Jazelle => 3,
            _ => 0,
        };
        if byte5 {
            value |= ((byte & BYTE5_MASK[i]) as u32).wrapping_shl(bits);
            bits += BYTE5_BITS[i];
        }
        value = value.wrapping_shl(SHIFT[i]);
        bits += SHIFT[i];
        Ok((value, bits as u8))
    }

    /// Exception information bytes after a branch address.
    fn extract_exception(&mut self) -> PResult<()> {
        let mut b = self.next_byte()?;
        self.pkt.update_ns(b & 1 != 0);
        let mut number = ((b >> 1) & 0xf) as u16;
        let cancel = b & 0x20 != 0;
        self.pkt.update_alt_isa(b & 0x40 != 0);
        let mut resume = 0u8;
        if b & 0x80 != 0 {
            b = self.next_byte()?;
            let mut third = false;
            if b & 0x40 != 0 {
                // Straight to the resume byte.
                third = true;
            } else {
                if self.set.v7m {
                    number |= ((b & 0x1f) as u16) << 4;
                }
                self.pkt.update_hyp(b & 0x20 != 0);
                if b & 0x80 != 0 {
                    b = self.next_byte()?;
                    third = true;
                }
            }
            if third {
                resume = b & 0xf;
            }
        }
        let mut irq_n = 0u16;
        if self.set.v7m {
            number &= 0x1ff;
            // Numbers 1-8 and 24 up are external interrupts.
            let is_irq = (1..=8).contains(&number) || number >= 0x18;
            if is_irq {
                irq_n = if number > 0x18 {
                    number - 0x10
                } else if number == 0x8 {
                    0
                } else {
                    number
                };
            }
        } else {
            number &= 0xf;
        }
        self.pkt.set_exception(number, cancel, self.set.v7m, irq_n, resume);
        Ok(())
    }

    fn extract_context_id(&mut self) -> PResult<u32> {
        let n = self.set.cid_bytes;
        if self.rd + n > self.buf.len() {
            return Err(malformed("Too few bytes to extract context ID."));
        }
        let mut id = 0u32;
        for i in 0..n {
            id |= (self.buf[self.rd + i] as u32) << (8 * i);
        }
        self.rd += n;
        Ok(id)
    }

    fn extract_timestamp(&mut self) -> PResult<(u64, u8)> {
        let max = if self.set.ts64 { 9 } else { 7 };
        let last_mask: u8 = if self.set.ts64 { 0xff } else { 0x3f };
        let last_bits = if self.set.ts64 { 8 } else { 6 };
        let mut mask = 0x7fu8;
        let mut step = 7u8;
        let mut ts = 0u64;
        let mut bits = 0u8;
        let mut n = 0usize;
        let mut more = true;
        while n < max && more {
            let Some(&b) = self.buf.get(self.rd + n) else {
                return Err(malformed("Insufficient bytes to extract timestamp."));
            };
            ts |= ((b & mask) as u64) << (7 * n);
            n += 1;
            bits += step;
            more = b & 0x80 != 0;
            if n == max - 1 {
                mask = last_mask;
                step = last_bits;
            }
        }
        self.rd += n;
        Ok((ts, bits))
    }

    /// A data address. OpenCSD tests the continuation bit after masking it
    /// off, so only the first byte is ever read; this parser does the same.
    fn extract_data_address(&mut self) -> PResult<(u32, u8, Option<bool>)> {
        let mut addr = 0u32;
        let mut bits = 0u8;
        let mut be = None;
        let mut i = 0u32;
        let mut more = true;
        while more {
            let raw = self.next_byte()?;
            let b = raw & if i == 4 { 0x0f } else { 0x7f };
            addr |= (b as u32) << (i * 7);
            more = b & 0x80 != 0;
            if i == 4 {
                bits += 4;
                be = Some((b >> 4) & 1 != 0);
                more = false;
            } else {
                bits += 7;
            }
            i += 1;
        }
        Ok((addr, bits, be))
    }

    fn extract_data_value(&mut self, size_code: u8) -> PResult<u32> {
        let n = [0usize, 1, 2, 4][(size_code & 0x3) as usize];
        let mut v = 0u32;
        for i in 0..n {
            v |= (self.next_byte()? as u32) << (8 * i);
        }
        Ok(v)
    }

    fn extract_cycle_count(&mut self) -> PResult<u32> {
        let mut cc = 0u32;
        let mut i = 0u32;
        let mut mask = 0x7fu8;
        loop {
            let b = self.next_byte()?;
            cc |= ((b & mask) as u32) << (7 * i);
            i += 1;
            if i == 4 {
                mask = 0x0f;
            }
            if b & 0x80 == 0 || i == 5 {
                break;
            }
        }
        Ok(cc)
    }

    fn on_isync(&mut self) -> PResult<()> {
        self.rd = 1;
        if self.isync_got_cc {
            let cc = self.extract_cycle_count()?;
            self.pkt.cycle_count = cc;
            self.pkt.isync.has_cycle_count = true;
        }
        if self.set.cid_bytes != 0 {
            let id = self.extract_context_id()?;
            self.pkt.update_context_id(id);
        }
        let info = self.buf.get(self.rd).copied().unwrap_or(0);
        self.rd += 1;
        self.pkt.isync.reason = (info >> 5) & 0x3;
        let j = (info >> 4) & 1 != 0;
        let alt_isa = self.set.minor >= 3 && (info >> 2) & 1 != 0;
        self.pkt.update_ns((info >> 3) & 1 != 0);
        if self.set.virtualization {
            self.pkt.update_hyp((info >> 1) & 1 != 0);
        }
        if self.set.instruction {
            let mut addr = 0u32;
            for i in 0..4 {
                addr |= (self.buf.get(self.rd).copied().unwrap_or(0) as u32) << (8 * i);
                self.rd += 1;
            }
            let thumb = addr & 1 != 0;
            addr &= !1;
            self.pkt.addr.update(addr as u64, 32);
            let isa = if j {
                Isa::Jazelle
            } else if thumb {
                if alt_isa {
                    Isa::ThumbEE
                } else {
                    Isa::T32
                }
            } else {
                Isa::A32
            };
            self.pkt.update_isa(isa);
            if self.isync_lsip {
                // The load/store-in-progress address, compressed against the
                // main one. OpenCSD folds both into the instruction address.
                let (lsip, bits) = self.extract_branch_address()?;
                self.pkt.update_data_address(addr, 32);
                self.pkt.update_data_address(lsip, bits);
            }
        } else {
            self.pkt.isync.no_address = true;
        }
        self.state = State::Send;
        Ok(())
    }
}

/// A parser error in OpenCSD's message format (no trailing newline).
pub fn parse_error_string(trace_id: u8, e: &ParseError, index: Option<u64>) -> String {
    let (name, desc) = e.code_text();
    let mut s = format!("PKTP_ETMV3_{:04} : 0x{:04x} ({}) [{}]; ", trace_id, e.code, name, desc);
    if let Some(i) = index {
        s.push_str(&format!("TrcIdx={}; CS ID={:02x}; ", i, trace_id));
    }
    s.push_str(e.message);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(etmcr: u64, etmidr: u64, ccer: u64) -> Etm3Config {
        let regs = [("ETMCR", etmcr), ("ETMIDR", etmidr), ("ETMCCER", ccer), ("ETMTRACEIDR", 0x10)];
        Etm3Config::from_registers(|n| regs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), Some("Cortex-A7")).unwrap()
    }

    fn parse(c: &Etm3Config, data: &[u8]) -> Vec<(Etm3Packet, Vec<u8>)> {
        let mut p = Etm3Parser::new(c);
        let mut out = Vec::new();
        p.push(0, data, &mut |k: &Etm3Packet, r: &[u8]| out.push((*k, r.to_vec())));
        p.finish(&mut |k: &Etm3Packet, r: &[u8]| out.push((*k, r.to_vec())));
        out
    }

    #[test]
    fn leading_zeros_before_sync_are_split_off() {
        let c = cfg(0x1000, 0x410CF250, 0);
        // Seven zeros then 0x80: two extra zeros, then the A-sync.
        let v = parse(&c, &[0, 0, 0, 0, 0, 0, 0, 0x80, 0xa0]);
        assert_eq!(v[0].1, vec![0, 0]);
        assert_eq!(v[0].0.index, 0);
        assert_eq!(v[1].0.ptype, PacketType::ASync);
        assert_eq!(v[1].0.index, 2);
        assert_eq!(v[1].1, vec![0, 0, 0, 0, 0, 0x80]);
        assert_eq!(v[2].0.ptype, PacketType::PHeader);
    }

    #[test]
    fn fatal_on_bypass_marker_in_unformatted_trace() {
        let c = cfg(0x1000, 0x410CF250, 0);
        let mut p = Etm3Parser::new(&c);
        p.set_unformatted_source(true);
        let mut n = 0;
        let used = p.push_until(0, &[0, 0, 0, 0, 0, 0x80, 0x01, 0x84], &mut |_: &Etm3Packet, _: &[u8]| {
            n += 1;
            true
        });
        assert_eq!(n, 1);
        assert_eq!(used, 7);
        assert!(p.is_fatal());
        assert!(p.fatal_message().unwrap().starts_with("PKTP_ETMV3_0016 : 0x0017 (OCSD_ERR_HW_CFG_UNSUPP)"));
    }
}
