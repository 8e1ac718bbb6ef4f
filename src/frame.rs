//! CoreSight formatter frame demultiplexer ("deformatter").
//!
//! A CoreSight trace formatter interleaves the byte streams of up to 111
//! trace sources into 16-byte frames.  [`Deformatter`] splits such a buffer
//! back into per-trace-ID byte blocks, reproducing the blocks that OpenCSD
//! 1.8.0's frame deformatter hands to its packet processors as configured by
//! `trc_pkt_lister`.
//!
//! # Frame layout
//!
//! Bytes 0, 2, .., 14 are either an ID change (bit 0 set: the new ID is in
//! bits 7:1) or a data byte whose bit 0 was moved into the auxiliary byte 15
//! (bit `k` of byte 15 belongs to byte `2k`).  Odd bytes 1..13 are always
//! data.  For an ID change at byte `2k`, bit `k` of byte 15 says whether the
//! following data byte `2k+1` still belongs to the *previous* ID (set) or to
//! the new one (clear).  An ID in byte 14 simply takes effect for the next
//! frame.
//!
//! # Block indices (the `Idx:` values of trc_pkt_lister)
//!
//! Each frame is cut into at most eight blocks, one per run of bytes with the
//! same ID.  A packet processor labels every packet with
//! `block index + offset of the packet's first byte within the block`, so the
//! block index matters:
//!
//! * the first block of a frame belongs to the ID current when the frame
//!   starts and has the index of the frame's first byte (after any FSYNCs in
//!   TPIU modes);
//! * an ID change at byte `i` of the frame starts a new block whose index is
//!   `frame start + i` - the position of the *ID byte*, not of the first data
//!   byte - unless the block being filled is still empty, in which case that
//!   block is simply re-labelled with the new ID and keeps its index;
//! * a repeated ID (same as the current one) does not start a block: its
//!   data byte is appended, so offsets inside a block need not equal file
//!   offsets.
//!
//! Blocks are delivered even when empty (possible only as the last block of
//! a frame: a delayed ID change in byte 12 followed by an ID in byte 14);
//! OpenCSD passes such zero-length blocks to the packet processor, which
//! treats them as a fatal error.  Data seen before the first ID of the
//! buffer has no ID and is never delivered to [`FrameSink::data`].  Blocks
//! for IDs 0 and 0x70..=0x7F are delivered like any other; OpenCSD never
//! attaches a decoder to them, so callers normally ignore them.
//!
//! # Modes
//!
//! * [`FrameMode::MemAligned`]: `format=coresight` buffers - frames are
//!   16-byte aligned from the first byte, no sync patterns.
//! * [`FrameMode::Tpiu`]: TPIU capture.  With `fsync`, data up to the first
//!   FSYNC (`ff ff ff 7f`, found at any byte offset) is skipped, FSYNCs are
//!   allowed (and skipped) only between frames, and an FSYNC inside a frame
//!   (checked at frame offsets 0, 4, 8, 12) is an error.  With `hsync`, the
//!   half-word `ff 7f` at an even offset is removed wherever it occurs;
//!   without it, it is an error.
//! * [`FrameMode::Dstream`]: `-dstream_format` - the file is made of 512-byte
//!   blocks whose last 8 bytes are a DSTREAM footer.  Footers are removed and
//!   the remaining stream is deformatted as TPIU with FSYNCs.  Indices are
//!   offsets in the footer-stripped stream.

use std::fmt;

/// Size of a CoreSight formatter frame.
pub const FRAME_SIZE: usize = 16;
/// Data bytes in a frame without ID bytes.
pub const FRAME_DATA: usize = 15;
/// Most frames gathered for one [`FrameSink::run`] call.
const RUN_FRAMES: usize = 64;
/// Size of a DSTREAM block in the file (payload + footer).
pub const DSTREAM_BLOCK: u64 = 512;
/// Trace payload bytes in each DSTREAM block.
pub const DSTREAM_PAYLOAD: u64 = 504;
/// Footer bytes at the end of each DSTREAM block.
pub const DSTREAM_FOOTER: usize = 8;
/// Size of the blocks trc_pkt_lister reads from a trace file (except DSTREAM).
pub const LISTER_READ_SIZE: u64 = 1024;

const FSYNC: [u8; 4] = [0xff, 0xff, 0xff, 0x7f];
/// Marker for "no ID seen yet" (real IDs are 7 bits).
const NO_ID: u8 = 0xff;

/// How frames are found in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameMode {
    /// 16-byte frames aligned to the start of the buffer.
    MemAligned,
    /// TPIU output with optional frame syncs and half-word syncs.
    Tpiu { fsync: bool, hsync: bool },
    /// DSTREAM capture: 504 bytes of TPIU data (with FSYNCs) per 512-byte block.
    Dstream,
}

impl FrameMode {
    /// Size multiple OpenCSD requires of every data block it is given.
    pub fn alignment(self) -> u64 {
        match self {
            FrameMode::MemAligned => 16,
            FrameMode::Tpiu { hsync: true, .. } => 2,
            FrameMode::Tpiu { fsync: true, .. } | FrameMode::Dstream => 4,
            FrameMode::Tpiu { .. } => 16,
        }
    }

    /// Number of leading file bytes trc_pkt_lister manages to hand to the
    /// deformatter for a `file_len`-byte buffer.
    ///
    /// trc_pkt_lister reads the file in 1024-byte blocks (504 payload bytes
    /// per 512-byte block for DSTREAM) and OpenCSD rejects, whole, a block
    /// whose size is not a multiple of [`FrameMode::alignment`]: the final
    /// short block is then not decoded at all and the run ends with
    /// "Data Path fatal error".  Feeding only this many bytes reproduces that.
    pub fn lister_accepted_len(self, file_len: u64) -> u64 {
        match self {
            FrameMode::Dstream => {
                let rem = file_len % DSTREAM_BLOCK;
                if rem.min(DSTREAM_PAYLOAD).is_multiple_of(4) {
                    file_len
                } else {
                    file_len - rem
                }
            }
            _ => {
                if file_len.is_multiple_of(self.alignment()) {
                    file_len
                } else {
                    file_len - file_len % LISTER_READ_SIZE
                }
            }
        }
    }
}

/// Whether the consumer wants more data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Stop delivering (OpenCSD: a fatal data-path response).  The rest of the
    /// current frame is dropped and later pushes are ignored until
    /// [`Deformatter::reset`].
    Stop,
}

/// Events for a raw frame monitor (trc_pkt_lister `-o_raw_packed` /
/// `-o_raw_unpacked`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawFrame<'a> {
    /// Input bytes consumed by one frame extraction (`RAW_PACKED`): a whole
    /// frame with any syncs before/inside it, or the part of a frame found
    /// before the end of an input block.  `index` is where the extraction
    /// started.
    Packed { index: u64, bytes: &'a [u8] },
    /// One demultiplexed block (`ID_DATA[..]`), reported just before it is
    /// delivered; `id` is `None` for data seen before any ID.
    IdData {
        id: Option<u8>,
        index: u64,
        bytes: &'a [u8],
    },
    /// The 8 bytes trc_pkt_lister prints as `DSTREAM footer` after each
    /// 504-byte payload block, plus once more at the end of the data (it then
    /// prints its stale read buffer; this event reproduces those bytes).
    DstreamFooter { bytes: &'a [u8; 8] },
}

/// Receiver of demultiplexed data.
///
/// Any `FnMut(u8, u64, &[u8])` closure is a sink that never stops.
pub trait FrameSink {
    /// A block of bytes for trace ID `id` (0..=0x7F) whose first byte has
    /// index `index`.  May be empty (see the module documentation).
    fn data(&mut self, id: u8, index: u64, bytes: &[u8]) -> Flow;

    /// Raw monitor event; only produced after [`Deformatter::set_raw_monitor`].
    fn raw(&mut self, _event: RawFrame<'_>) {}

    /// Blocks for one trace ID `id` that follow each other with no other
    /// ID's data between them, joined: `spans` gives (offset in `bytes`,
    /// index) of each block's first byte, in order, the first at offset 0.
    /// A sink that can take such a run at once saves a call per block and
    /// sees packets whole where they run from one block into the next; by
    /// default each block goes to [`FrameSink::data`] on its own. Returns the
    /// flow and the bytes taken in (on a stop, up to the end of the block
    /// it came in).
    fn run(&mut self, id: u8, spans: &[(usize, u64)], bytes: &[u8]) -> (Flow, usize) {
        run_as_blocks(self, id, spans, bytes)
    }
}

impl<F: FnMut(u8, u64, &[u8])> FrameSink for F {
    #[inline]
    fn data(&mut self, id: u8, index: u64, bytes: &[u8]) -> Flow {
        self(id, index, bytes);
        Flow::Continue
    }
}

/// [`FrameSink::run`] as one [`FrameSink::data`] call per block.
pub fn run_as_blocks<S: FrameSink + ?Sized>(sink: &mut S, id: u8, spans: &[(usize, u64)], bytes: &[u8]) -> (Flow, usize) {
    for (k, &(start, index)) in spans.iter().enumerate() {
        let end = spans.get(k + 1).map_or(bytes.len(), |s| s.0).min(bytes.len());
        if sink.data(id, index, bytes.get(start..end).unwrap_or(&[])) == Flow::Stop {
            return (Flow::Stop, end);
        }
    }
    (Flow::Continue, bytes.len())
}

/// One trace ID's blocks gathered for [`FrameSink::run`]: the data of
/// [`RUN_FRAMES`] frames at most (plus the part of a frame it may start
/// with), on the stack of a push, or kept by a gathering deformatter
/// ([`Gather`]).
#[derive(Clone, Debug)]
struct Run {
    id: u8,
    bytes: [u8; (RUN_FRAMES + 1) * FRAME_DATA + 1],
    len: usize,
    /// (offset in `bytes`, index) of each block.
    spans: [(usize, u64); RUN_FRAMES + 2],
    /// Where the frame of each block ends, for the position after a stop.
    ends: [u64; RUN_FRAMES + 2],
    n: usize,
}

impl Run {
    fn new() -> Run {
        Run { id: NO_ID, bytes: [0; (RUN_FRAMES + 1) * FRAME_DATA + 1], len: 0, spans: [(0, 0); RUN_FRAMES + 2], ends: [0; RUN_FRAMES + 2], n: 0 }
    }

    /// Whether a block of `len` bytes still fits.
    fn room(&self, len: usize) -> bool {
        self.n < self.spans.len() && self.len + len < self.bytes.len()
    }

    /// The frames at the start of `frames` that carry no ID byte, as many
    /// as fit (the first frame is `sof`'s): returns how many were taken.
    /// The run's length and block count are kept in locals: updated in
    /// the run for every frame, each frame's stores waited on the last
    /// frame's (a third of the frame loop's samples on juno_r1_1).
    #[inline(always)]
    fn add_plain_frames(&mut self, frames: &[u8], mut sof: u64) -> usize {
        let (mut len, mut n) = (self.len, self.n);
        let mut taken = 0;
        for chunk in frames.chunks_exact(FRAME_SIZE) {
            let Ok(f) = <&[u8; FRAME_SIZE]>::try_from(chunk) else {
                break;
            };
            // A block of 15 bytes fits where 16 can be stored (`room`).
            let (Some(dst), Some(span), Some(frame_end)) =
                (self.bytes.get_mut(len..len + FRAME_SIZE), self.spans.get_mut(n), self.ends.get_mut(n))
            else {
                break;
            };
            if has_id(f) {
                break;
            }
            let (lo, hi) = unpack(f);
            dst[..8].copy_from_slice(&lo.to_le_bytes());
            dst[8..].copy_from_slice(&hi.to_le_bytes());
            *span = (len, sof);
            sof = sof.wrapping_add(FRAME_SIZE as u64);
            *frame_end = sof;
            len += FRAME_DATA;
            n += 1;
            taken += 1;
        }
        self.len = len;
        self.n = n;
        taken
    }

    #[inline(always)]
    fn push_span(&mut self, index: u64, frame_end: u64, len: usize) {
        self.spans[self.n] = (self.len, index);
        self.ends[self.n] = frame_end;
        self.len += len;
        self.n += 1;
    }

    /// A block of `len` bytes at `start` in a frame's unpacked data `out`
    /// (see [`Blocks`]), copied as 16 bytes where the run has room for them
    /// (the bytes past the block are overwritten by what follows, or lie
    /// past the run's length): a copy of the block's own length was a call
    /// to memcpy.
    #[inline(always)]
    fn add_block(&mut self, id: u8, index: u64, frame_end: u64, out: &[u8; 2 * FRAME_SIZE], start: usize, len: usize) {
        match (self.bytes.get_mut(self.len..self.len + FRAME_SIZE), out.get(start..start + FRAME_SIZE)) {
            (Some(dst), Some(src)) => {
                self.id = id;
                dst.copy_from_slice(src);
                self.push_span(index, frame_end, len);
            }
            _ => self.add(id, index, frame_end, out.get(start..start + len).unwrap_or_default()),
        }
    }

    fn add(&mut self, id: u8, index: u64, frame_end: u64, data: &[u8]) {
        self.id = id;
        self.bytes[self.len..self.len + data.len()].copy_from_slice(data);
        self.push_span(index, frame_end, data.len());
    }
}

/// Most trace IDs with a run open at once in a gathering deformatter.
const GATHER_RUNS: usize = 8;
/// No run for this trace ID (see [`Gather::slot`]).
const NO_RUN: u8 = 0xff;

/// The runs of a gathering deformatter ([`Deformatter::set_gather`]): one
/// per trace ID, each taking that ID's blocks whatever other IDs' data lies
/// between them.
#[derive(Clone, Debug)]
struct Gather {
    /// The IDs whose blocks may be gathered, by ID.
    ids: [bool; 128],
    /// The run of each ID (indexed by the whole byte, so that no ID, 0xff,
    /// has none), or `NO_RUN`.
    slot: [u8; 256],
    runs: Vec<Run>,
    /// Runs given out since all were last delivered.
    used: usize,
}

impl Gather {
    fn new(ids: &[u8]) -> Gather {
        let mut g = Gather { ids: [false; 128], slot: [NO_RUN; 256], runs: Vec::new(), used: 0 };
        for &id in ids {
            g.ids[id as usize & 0x7f] = true;
        }
        g
    }

    /// The run of `id`, given out now if it has none; `None` when all are
    /// given out (the caller delivers them all and asks again).
    #[inline]
    fn run_for(&mut self, id: u8) -> Option<usize> {
        let s = self.slot[id as usize];
        if s != NO_RUN {
            return Some(s as usize);
        }
        if self.used == GATHER_RUNS {
            return None;
        }
        let s = self.used;
        if self.runs.len() <= s {
            self.runs.push(Run::new());
        }
        self.used += 1;
        self.slot[id as usize] = s as u8;
        self.runs[s].id = id;
        Some(s)
    }
}

/// Deformatting failure; the deformatter refuses further data until reset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// A push did not start where the previous one ended.
    NotContiguous { expected: u64, got: u64 },
    /// FSYNC found inside a frame; `index` is where the extraction of the
    /// frame started (what OpenCSD reports, and what trc_pkt_lister counts
    /// as processed).
    BadFsync { index: u64 },
    /// HSYNC found while HSYNCs are not expected.
    BadHsync { index: u64 },
    /// End of data in the middle of a memory-aligned frame.
    PartialFrame { index: u64, len: usize },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::NotContiguous { expected, got } => write!(
                f,
                "trace data not contiguous: expected index {expected}, got {got}"
            ),
            FrameError::BadFsync { index } => {
                write!(f, "frame sync (FSYNC) inside a frame at index {index}")
            }
            FrameError::BadHsync { index } => write!(
                f,
                "unexpected half-word sync (HSYNC) in frame at index {index}"
            ),
            FrameError::PartialFrame { index, len } => write!(
                f,
                "incomplete frame at end of data: {len} bytes at index {index}, \
                 formatted data must be a multiple of {FRAME_SIZE} bytes"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// Streaming frame demultiplexer; see the module documentation.
///
/// The data delivered to [`FrameSink::data`] does not depend on how the
/// input is split into [`Deformatter::push`] calls.  Raw monitor `Packed`
/// events do: like OpenCSD they report partial frames at the end of each
/// push (each 504-byte payload block for DSTREAM), so push the blocks
/// trc_pkt_lister reads when their output must match.
#[derive(Clone, Debug)]
pub struct Deformatter {
    mode: FrameMode,
    raw_monitor: bool,
    /// ID in force at the current point of the stream.
    cur_id: u8,
    started: bool,
    finished: bool,
    stopped: bool,
    error: Option<FrameError>,
    /// Input index expected for the next push.
    next_input: u64,
    /// Stream index of the next byte not yet consumed.
    pos: u64,
    /// Frame being assembled.
    frame: [u8; FRAME_SIZE],
    n: usize,
    /// Stream index of the frame start.
    sof: u64,
    // TPIU / DSTREAM state
    synced: bool,
    /// FSYNCs may still be skipped before the next frame.
    at_boundary: bool,
    /// Frame start to use if the next pair starts a frame.
    sof_cand: u64,
    /// Start of the current OpenCSD extraction call.
    call_start: u64,
    /// Unconsumed bytes kept for FSYNC look-ahead.
    carry: [u8; 4],
    carry_len: usize,
    /// Bytes of the current extraction (raw monitor only).
    raw: Vec<u8>,
    /// First 8 bytes of trc_pkt_lister's read buffer (DSTREAM footers).
    lister_buf: [u8; 8],
    /// Runs of several IDs at once, when the sink allows it.
    gather: Option<Box<Gather>>,
}

impl Deformatter {
    pub fn new(mode: FrameMode) -> Self {
        Deformatter {
            mode,
            raw_monitor: false,
            cur_id: NO_ID,
            started: false,
            finished: false,
            stopped: false,
            error: None,
            next_input: 0,
            pos: 0,
            frame: [0; FRAME_SIZE],
            n: 0,
            sof: 0,
            synced: false,
            at_boundary: true,
            sof_cand: 0,
            call_start: 0,
            carry: [0; 4],
            carry_len: 0,
            raw: Vec::new(),
            lister_buf: [0; 8],
            gather: None,
        }
    }

    pub fn mode(&self) -> FrameMode {
        self.mode
    }

    /// Enable [`FrameSink::raw`] events.
    pub fn set_raw_monitor(&mut self, on: bool) {
        self.raw_monitor = on;
        if !on {
            self.raw.clear();
        }
    }

    /// Gather the blocks of each of `ids` into runs across other IDs' data
    /// (memory-aligned frames, without the raw monitor): a run holds up to
    /// [`RUN_FRAMES`] blocks of one ID, the other IDs' data taken meanwhile
    /// into their own runs, and every run is delivered before a push
    /// returns, and before any empty block. Each ID's data comes in its
    /// order, but the order across IDs is no longer the buffer's: for a sink
    /// that only counts. The blocks of other IDs come as they are found,
    /// before the runs of data ahead of them, and must not stop the sink. A
    /// sink that stops on an empty block stops where it would in order; one
    /// that stops in a run finds other IDs' later data taken, so its caller
    /// must decode again in order. An interleaved capture of several cores
    /// (blocks of a few bytes per ID) then costs a call per run rather than
    /// per block. Empty `ids` turns it off.
    pub fn set_gather(&mut self, ids: &[u8]) {
        self.gather = (!ids.is_empty()).then(|| Box::new(Gather::new(ids)));
    }

    /// Forget all state (OpenCSD `OCSD_OP_RESET`): the next push may start
    /// at any index, the current ID becomes unknown, TPIU modes search for a
    /// FSYNC again.
    pub fn reset(&mut self) {
        let (mode, raw_monitor) = (self.mode, self.raw_monitor);
        let raw = std::mem::take(&mut self.raw);
        let gather = self.gather.take().map(|g| Box::new(Gather { ids: g.ids, ..Gather::new(&[]) }));
        *self = Deformatter::new(mode);
        self.raw_monitor = raw_monitor;
        self.gather = gather;
        self.raw = raw;
        self.raw.clear();
    }

    /// The trace ID in force for the next frame (`None` before the first ID).
    pub fn current_id(&self) -> Option<u8> {
        (self.cur_id != NO_ID).then_some(self.cur_id)
    }

    /// A memory-aligned deformatter resuming at frame boundary `index` with
    /// `id` in force, as one that had consumed everything before it (an index
    /// restarting a decode part way through a buffer).
    pub fn resume_mem_aligned(index: u64, id: Option<u8>) -> Deformatter {
        let mut d = Deformatter::new(FrameMode::MemAligned);
        d.cur_id = id.unwrap_or(NO_ID);
        d.started = true;
        d.pos = index;
        d.sof = index;
        d.sof_cand = index;
        d.call_start = index;
        d.next_input = index;
        d
    }

    /// Stream index just past the data consumed so far: after the last
    /// complete frame (memory aligned) or the last consumed byte (TPIU; the
    /// footer-stripped index for DSTREAM).  After an error or a stop this is
    /// the byte count trc_pkt_lister reports as processed when it started at
    /// index 0.
    pub fn stream_position(&self) -> u64 {
        self.pos
    }

    /// Feed `data`, whose first byte is at `index` in the input (the file
    /// offset for DSTREAM).  Calls `sink` for each block, in OpenCSD's order.
    pub fn push<S: FrameSink + ?Sized>(
        &mut self,
        index: u64,
        data: &[u8],
        sink: &mut S,
    ) -> Result<Flow, FrameError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.stopped || self.finished {
            return Ok(Flow::Stop);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        if !self.started {
            self.started = true;
            let start = match self.mode {
                FrameMode::Dstream => dstream_stream_index(index),
                _ => index,
            };
            self.pos = start;
            self.sof = start;
            self.sof_cand = start;
            self.call_start = start;
        } else if index != self.next_input {
            return Err(self.fail(FrameError::NotContiguous {
                expected: self.next_input,
                got: index,
            }));
        }
        self.next_input = index.wrapping_add(data.len() as u64);

        let result = match self.mode {
            FrameMode::MemAligned => Ok(self.push_aligned(data, sink)),
            FrameMode::Tpiu { .. } => {
                self.call_start = self.pos;
                let r = self.push_stream(data, sink);
                if let Ok(Flow::Continue) = r {
                    self.flush_raw(sink);
                }
                r
            }
            FrameMode::Dstream => self.push_dstream(index, data, sink),
        };
        match result {
            Ok(Flow::Stop) => {
                self.stopped = true;
                Ok(Flow::Stop)
            }
            other => other,
        }
    }

    /// End of data.  Memory-aligned data ending inside a frame is an error
    /// (OpenCSD rejects it; see [`FrameMode::lister_accepted_len`]); in TPIU
    /// modes an incomplete last frame is silently dropped, as OpenCSD does.
    pub fn finish<S: FrameSink + ?Sized>(&mut self, sink: &mut S) -> Result<(), FrameError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.finished || self.stopped {
            return Ok(());
        }
        self.finished = true;
        match self.mode {
            FrameMode::MemAligned => {
                if self.n > 0 {
                    let e = FrameError::PartialFrame {
                        index: self.sof,
                        len: self.n,
                    };
                    self.error = Some(e.clone());
                    return Err(e);
                }
            }
            FrameMode::Tpiu { .. } | FrameMode::Dstream => {
                let carry = self.carry;
                let len = self.carry_len;
                self.carry_len = 0;
                if len > 0 {
                    self.run_stream(&carry[..len], true, sink)?;
                }
                self.flush_raw(sink);
                if self.mode == FrameMode::Dstream && self.raw_monitor {
                    let buf = self.lister_buf;
                    sink.raw(RawFrame::DstreamFooter { bytes: &buf });
                }
            }
        }
        Ok(())
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.error = Some(e.clone());
        e
    }

    fn push_aligned<S: FrameSink + ?Sized>(&mut self, data: &[u8], sink: &mut S) -> Flow {
        let mut d = data;
        if self.n > 0 {
            let take = (FRAME_SIZE - self.n).min(d.len());
            self.frame[self.n..self.n + take].copy_from_slice(&d[..take]);
            self.n += take;
            d = &d[take..];
            if self.n < FRAME_SIZE {
                return Flow::Continue;
            }
            self.n = 0;
            let frame = self.frame;
            let sof = self.sof;
            self.pos = sof.wrapping_add(FRAME_SIZE as u64);
            if self.raw_monitor {
                sink.raw(RawFrame::Packed {
                    index: sof,
                    bytes: &frame,
                });
            }
            if self.emit_frame(&frame, sof, sink) == Flow::Stop {
                return Flow::Stop;
            }
        }
        // One ID's data from consecutive frames is gathered in `run` and
        // delivered together; the raw monitor reports every frame before its
        // data, so it gets them one at a time.
        let batch = !self.raw_monitor;
        let mut chunks = d.chunks_exact(FRAME_SIZE);
        if batch {
            if let Some(mut g) = self.gather.take() {
                let (frames, partial) = d.split_at(d.len() - chunks.remainder().len());
                let flow = self.gather_frames(frames, &mut g, sink);
                self.gather = Some(g);
                if flow == Flow::Stop {
                    return Flow::Stop;
                }
                self.keep_partial(partial);
                return Flow::Continue;
            }
        }
        let mut run = Run::new();
        for chunk in &mut chunks {
            let Ok(frame) = <&[u8; FRAME_SIZE]>::try_from(chunk) else {
                continue;
            };
            let sof = self.pos;
            self.pos = sof.wrapping_add(FRAME_SIZE as u64);
            if batch {
                if self.gather_frame(frame, sof, &mut run, sink) == Flow::Stop {
                    return Flow::Stop;
                }
                continue;
            }
            if self.raw_monitor {
                sink.raw(RawFrame::Packed {
                    index: sof,
                    bytes: frame,
                });
            }
            if self.emit_frame(frame, sof, sink) == Flow::Stop {
                return Flow::Stop;
            }
        }
        if self.flush_run(&mut run, sink) == Flow::Stop {
            return Flow::Stop;
        }
        self.keep_partial(chunks.remainder());
        Flow::Continue
    }

    /// Keep the start of a frame that the next push completes.
    fn keep_partial(&mut self, rest: &[u8]) {
        if !rest.is_empty() {
            self.frame[..rest.len()].copy_from_slice(rest);
            self.n = rest.len();
            self.sof = self.pos;
        }
    }

    /// The frames of a push gathered into runs per ID (see
    /// [`Deformatter::set_gather`]), all delivered at the end.
    /// `frames` holds whole frames only.
    fn gather_frames<S: FrameSink + ?Sized>(&mut self, frames: &[u8], g: &mut Gather, sink: &mut S) -> Flow {
        let mut at = 0;
        while let Some(chunk) = frames.get(at..at + FRAME_SIZE) {
            let Ok(f) = <&[u8; FRAME_SIZE]>::try_from(chunk) else {
                break;
            };
            let sof = self.pos;
            if !has_id(f) {
                // The common case: frames of an ID that has a run, taken
                // together until a frame with an ID byte or a full run.
                if let Some(run) = g.runs.get_mut(g.slot[self.cur_id as usize] as usize) {
                    let taken = run.add_plain_frames(frames.get(at..).unwrap_or_default(), sof);
                    if taken > 0 {
                        at += taken * FRAME_SIZE;
                        self.pos = sof.wrapping_add((taken * FRAME_SIZE) as u64);
                        continue;
                    }
                }
            }
            at += FRAME_SIZE;
            let end = sof.wrapping_add(FRAME_SIZE as u64);
            self.pos = end;
            let blocks = self.split_frame(f);
            for k in 0..blocks.n {
                let (id, index, start, bytes) = blocks.get(k, sof);
                if bytes.is_empty() {
                    // A decoded ID's empty block stops the data path (unless
                    // the sink recovers): all data before it first (whatever
                    // its ID: rare), so that such a stop leaves each ID
                    // where one in order would.
                    if self.flush_gathered(g, sink) == Flow::Stop {
                        return Flow::Stop;
                    }
                    if self.deliver(id, index, bytes, sink) == Flow::Stop {
                        return Flow::Stop;
                    }
                    continue;
                }
                if id == NO_ID || !g.ids[id as usize & 0x7f] {
                    if self.deliver(id, index, bytes, sink) == Flow::Stop {
                        return Flow::Stop;
                    }
                    continue;
                }
                let s = match g.run_for(id) {
                    Some(s) => s,
                    None => {
                        if self.flush_gathered(g, sink) == Flow::Stop {
                            return Flow::Stop;
                        }
                        // All runs are free again.
                        g.run_for(id).unwrap_or_default()
                    }
                };
                let Some(run) = g.runs.get_mut(s) else {
                    continue;
                };
                if !run.room(bytes.len()) && self.flush_run(run, sink) == Flow::Stop {
                    return Flow::Stop;
                }
                run.add_block(id, index, end, &blocks.out, start, bytes.len());
            }
        }
        self.flush_gathered(g, sink)
    }

    /// Deliver every run of `g` and free them.
    fn flush_gathered<S: FrameSink + ?Sized>(&mut self, g: &mut Gather, sink: &mut S) -> Flow {
        let used = std::mem::take(&mut g.used);
        for run in g.runs.iter().take(used) {
            g.slot[run.id as usize] = NO_RUN;
        }
        let mut flow = Flow::Continue;
        for run in g.runs.iter_mut().take(used) {
            if flow == Flow::Continue {
                flow = self.flush_run(run, sink);
            }
            // After a stop the rest is dropped, as the data after it.
            run.n = 0;
            run.len = 0;
        }
        flow
    }

    /// Unpack one frame and deliver its blocks.
    #[inline]
    fn emit_frame<S: FrameSink + ?Sized>(
        &mut self,
        f: &[u8; FRAME_SIZE],
        sof: u64,
        sink: &mut S,
    ) -> Flow {
        let blocks = self.split_frame(f);
        for k in 0..blocks.n {
            let (id, index, _, bytes) = blocks.get(k, sof);
            if self.deliver(id, index, bytes, sink) == Flow::Stop {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    /// Unpack one frame into `run`, delivering the run first when the frame
    /// brings another ID's data, and blocks that cannot join a run (another
    /// ID's data in the middle of the frame, data before the first ID, an
    /// empty block) on their own.
    #[inline]
    fn gather_frame<S: FrameSink + ?Sized>(
        &mut self,
        f: &[u8; FRAME_SIZE],
        sof: u64,
        run: &mut Run,
        sink: &mut S,
    ) -> Flow {
        let end = sof.wrapping_add(FRAME_SIZE as u64);
        // The common case, a frame of the run's ID with no ID bytes.
        if run.n > 0 && run.id == self.cur_id && run.add_plain_frames(f, sof) > 0 {
            return Flow::Continue;
        }
        let blocks = self.split_frame(f);
        for k in 0..blocks.n {
            let (id, index, start, bytes) = blocks.get(k, sof);
            let usable = !bytes.is_empty() && id != NO_ID;
            if usable && run.n > 0 && run.id == id && run.room(bytes.len()) {
                run.add_block(id, index, end, &blocks.out, start, bytes.len());
                continue;
            }
            if self.flush_run(run, sink) == Flow::Stop {
                return Flow::Stop;
            }
            // The frame's last block goes on into the next frame.
            if usable && k + 1 == blocks.n && id == self.cur_id {
                run.add_block(id, index, end, &blocks.out, start, bytes.len());
            } else if self.deliver(id, index, bytes, sink) == Flow::Stop {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    /// Cut a frame into its blocks and move to the ID in force after it.
    // Inlined: returned by value, the blocks were copied out through a call
    // to memcpy for each frame with ID bytes.
    #[inline(always)]
    fn split_frame(&mut self, f: &[u8; FRAME_SIZE]) -> Blocks {
        let aux = f[15];
        let mut b = Blocks { out: [0; 2 * FRAME_SIZE], ids: [self.cur_id; 8], offs: [0; 8], starts: [0; 16], n: 1 };
        if !has_id(f) {
            // No ID bytes: one block of 15 data bytes for the current ID.
            let (lo, hi) = unpack(f);
            b.out[..8].copy_from_slice(&lo.to_le_bytes());
            b.out[8..16].copy_from_slice(&hi.to_le_bytes());
            b.starts[1] = FRAME_DATA as u8;
            return b;
        }
        // The indices are masked to the arrays' sizes, which they never
        // reach (15 bytes and 8 blocks at most per frame): the bounds checks
        // were a sixth of this loop.
        let mut len = 0usize;
        let mut cur = self.cur_id;
        let mut nb = 1usize;
        let (out, ids, offs, starts) = (&mut b.out, &mut b.ids, &mut b.offs, &mut b.starts);
        for p in 0..7 {
            let i = 2 * p;
            let byte = f[i];
            let flag = (aux >> p) & 1;
            if byte & 1 == 0 {
                out[len & 31] = byte | flag;
                out[(len + 1) & 31] = f[i + 1];
                len += 2;
                continue;
            }
            let new_id = byte >> 1;
            if new_id == cur {
                out[len & 31] = f[i + 1];
                len += 1;
                continue;
            }
            let delayed = flag != 0;
            if delayed {
                out[len & 31] = f[i + 1];
                len += 1;
            }
            cur = new_id;
            if len > starts[(nb - 1) & 15] as usize {
                starts[nb & 15] = len as u8;
                ids[nb & 7] = cur;
                offs[nb & 7] = i as u8;
                nb += 1;
            } else {
                ids[(nb - 1) & 7] = cur;
            }
            if !delayed {
                out[len & 31] = f[i + 1];
                len += 1;
            }
        }
        if f[14] & 1 != 0 {
            cur = f[14] >> 1;
        } else {
            out[len & 31] = f[14] | (aux >> 7);
            len += 1;
        }
        b.n = nb;
        self.cur_id = cur;
        b.starts[nb & 15] = len as u8;
        b
    }

    /// Deliver what `run` gathered and empty it. On a stop the position is
    /// left after the frame of the block the sink stopped in, as if the
    /// blocks had come one by one.
    fn flush_run<S: FrameSink + ?Sized>(&mut self, run: &mut Run, sink: &mut S) -> Flow {
        if run.n == 0 {
            return Flow::Continue;
        }
        let (n, len) = (run.n, run.len);
        run.n = 0;
        run.len = 0;
        let (flow, used) = sink.run(run.id, &run.spans[..n], &run.bytes[..len]);
        if flow == Flow::Stop {
            let k = run.spans[..n].partition_point(|s| s.0 < used.max(1)).saturating_sub(1);
            self.pos = run.ends[k];
        }
        flow
    }

    /// Hand one block to the sink (data without an ID only to the monitor).
    #[inline]
    fn deliver<S: FrameSink + ?Sized>(
        &self,
        id: u8,
        index: u64,
        bytes: &[u8],
        sink: &mut S,
    ) -> Flow {
        let id = (id != NO_ID).then_some(id);
        if self.raw_monitor {
            sink.raw(RawFrame::IdData { id, index, bytes });
        }
        match id {
            Some(id) => sink.data(id, index, bytes),
            None => Flow::Continue,
        }
    }

    /// Feed stream bytes to the TPIU engine, keeping look-ahead bytes that
    /// cannot be decided yet.
    fn push_stream<S: FrameSink + ?Sized>(
        &mut self,
        data: &[u8],
        sink: &mut S,
    ) -> Result<Flow, FrameError> {
        let mut d = data;
        if self.carry_len > 0 {
            let held = self.carry_len;
            let take = d.len().min(32);
            let mut tmp = [0u8; 36];
            tmp[..held].copy_from_slice(&self.carry[..held]);
            tmp[held..held + take].copy_from_slice(&d[..take]);
            self.carry_len = 0;
            let (used, flow) = self.run_stream(&tmp[..held + take], false, sink)?;
            if flow == Flow::Stop {
                return Ok(Flow::Stop);
            }
            if used < held {
                self.keep(&tmp[used..held + take]);
                return Ok(Flow::Continue);
            }
            d = &d[used - held..];
        }
        let (used, flow) = self.run_stream(d, false, sink)?;
        if flow == Flow::Stop {
            return Ok(Flow::Stop);
        }
        self.keep(&d[used..]);
        Ok(Flow::Continue)
    }

    fn keep(&mut self, rest: &[u8]) {
        let k = rest.len().min(self.carry.len());
        self.carry[..k].copy_from_slice(&rest[..k]);
        self.carry_len = k;
    }

    /// TPIU frame extraction over `d` (stream index `self.pos`).  Returns the
    /// number of bytes consumed; unless `eof`, stops when fewer bytes remain
    /// than are needed to decide (at most 3 bytes are left).
    fn run_stream<S: FrameSink + ?Sized>(
        &mut self,
        d: &[u8],
        eof: bool,
        sink: &mut S,
    ) -> Result<(usize, Flow), FrameError> {
        let (has_fsync, has_hsync) = match self.mode {
            FrameMode::Tpiu { fsync, hsync } => (fsync, hsync),
            _ => (true, false),
        };
        let mut i = 0usize;
        if !self.synced {
            if has_fsync {
                match d.windows(4).position(|w| w == FSYNC) {
                    Some(at) => i = at,
                    None => {
                        let keep = if eof { 0 } else { d.len().min(3) };
                        let skip = d.len() - keep;
                        self.pos = self.pos.wrapping_add(skip as u64);
                        return Ok((skip, Flow::Continue));
                    }
                }
                self.pos = self.pos.wrapping_add(i as u64);
            }
            self.synced = true;
            self.at_boundary = true;
            self.sof_cand = self.pos;
            self.call_start = self.pos;
        }

        while i < d.len() {
            let avail = d.len() - i;
            if self.n == 0 && avail >= FRAME_SIZE {
                if let Some(frame) = clean_frame(&d[i..i + FRAME_SIZE]) {
                    // Fast path: a whole frame with no syncs in or before it.
                    if self.raw_monitor {
                        self.raw.extend_from_slice(&frame);
                    }
                    i += FRAME_SIZE;
                    self.pos = self.pos.wrapping_add(FRAME_SIZE as u64);
                    self.sof = self.sof_cand;
                    if self.complete_frame(&frame, sink) == Flow::Stop {
                        return Ok((i, Flow::Stop));
                    }
                    continue;
                }
            }
            if self.at_boundary && has_fsync {
                if avail >= 4 {
                    if d[i..i + 4] == FSYNC {
                        if self.raw_monitor {
                            self.raw.extend_from_slice(&FSYNC);
                        }
                        i += 4;
                        self.pos = self.pos.wrapping_add(4);
                        self.sof_cand = self.pos;
                        continue;
                    }
                } else if !eof {
                    break;
                }
            }
            let check_fsync = self.n.is_multiple_of(4);
            if avail < 2 || (check_fsync && avail < 4 && !eof) {
                break;
            }
            if check_fsync && avail >= 4 && d[i..i + 4] == FSYNC {
                self.pos = self.call_start;
                return Err(self.fail(FrameError::BadFsync {
                    index: self.call_start,
                }));
            }
            let (a, b) = (d[i], d[i + 1]);
            if a == 0xff && b == 0x7f && !has_hsync {
                self.pos = self.call_start;
                return Err(self.fail(FrameError::BadHsync {
                    index: self.call_start,
                }));
            }
            if self.raw_monitor {
                self.raw.extend_from_slice(&d[i..i + 2]);
            }
            i += 2;
            self.pos = self.pos.wrapping_add(2);
            self.at_boundary = false;
            if a == 0xff && b == 0x7f {
                continue;
            }
            if self.n == 0 {
                self.sof = self.sof_cand;
            }
            self.frame[self.n] = a;
            self.frame[self.n + 1] = b;
            self.n += 2;
            if self.n == FRAME_SIZE {
                self.n = 0;
                let frame = self.frame;
                if self.complete_frame(&frame, sink) == Flow::Stop {
                    return Ok((i, Flow::Stop));
                }
            }
        }
        Ok((i, Flow::Continue))
    }

    /// A TPIU frame has been extracted (ending at `self.pos`): report it to
    /// the monitor, deliver it, and start looking for the next one.
    fn complete_frame<S: FrameSink + ?Sized>(
        &mut self,
        frame: &[u8; FRAME_SIZE],
        sink: &mut S,
    ) -> Flow {
        self.flush_raw(sink);
        let flow = self.emit_frame(frame, self.sof, sink);
        self.at_boundary = true;
        self.sof_cand = self.pos;
        self.call_start = self.pos;
        flow
    }

    /// Report the bytes of the current extraction as `RAW_PACKED`.
    fn flush_raw<S: FrameSink + ?Sized>(&mut self, sink: &mut S) {
        if self.raw_monitor && !self.raw.is_empty() {
            sink.raw(RawFrame::Packed {
                index: self.call_start,
                bytes: &self.raw,
            });
            self.raw.clear();
        }
    }

    fn push_dstream<S: FrameSink + ?Sized>(
        &mut self,
        index: u64,
        data: &[u8],
        sink: &mut S,
    ) -> Result<Flow, FrameError> {
        let mut off = index;
        let mut d = data;
        while !d.is_empty() {
            let within = off % DSTREAM_BLOCK;
            let in_payload = within < DSTREAM_PAYLOAD;
            let end = if in_payload {
                DSTREAM_PAYLOAD
            } else {
                DSTREAM_BLOCK
            };
            let run = ((end - within) as usize).min(d.len());
            let (part, rest) = d.split_at(run);
            // trc_pkt_lister reads payload and footer into the start of the
            // same buffer; mirror its first 8 bytes.
            let base = if in_payload {
                within
            } else {
                within - DSTREAM_PAYLOAD
            } as usize;
            for (k, &byte) in part.iter().enumerate() {
                match self.lister_buf.get_mut(base + k) {
                    Some(slot) => *slot = byte,
                    None => break,
                }
            }
            if in_payload {
                if within == 0 {
                    self.call_start = self.pos;
                }
                if self.push_stream(part, sink)? == Flow::Stop {
                    return Ok(Flow::Stop);
                }
                if within + run as u64 == DSTREAM_PAYLOAD {
                    self.flush_raw(sink);
                }
            } else if within + run as u64 == DSTREAM_BLOCK && self.raw_monitor {
                let buf = self.lister_buf;
                sink.raw(RawFrame::DstreamFooter { bytes: &buf });
            }
            off = off.wrapping_add(run as u64);
            d = rest;
        }
        Ok(Flow::Continue)
    }
}

/// `bytes` (16 of them) as a frame if it holds no FSYNC at offsets 0, 4, 8,
/// 12 and no HSYNC half-word, i.e. if TPIU extraction would take it as is.
#[inline]
fn clean_frame(bytes: &[u8]) -> Option<[u8; FRAME_SIZE]> {
    let frame = <[u8; FRAME_SIZE]>::try_from(bytes).ok()?;
    let word = u128::from_le_bytes(frame);
    let fsync = u32::from_le_bytes(FSYNC) as u128;
    let hsync = 0x7fffu128;
    let any_fsync = (0..4).any(|k| (word >> (32 * k)) as u32 as u128 == fsync);
    let any_hsync = (0..8).any(|k| (word >> (16 * k)) & 0xffff == hsync);
    (!any_fsync && !any_hsync).then_some(frame)
}

/// A frame cut into blocks: block k is `out[starts[k]..starts[k + 1]]`,
/// for ID `ids[k]` at index `offs[k]` past the frame's start. (Bytes, and
/// `out` twice a frame long so that any block can be copied as a whole
/// frame's 16 bytes: see [`Run::add_block`].)
struct Blocks {
    out: [u8; 2 * FRAME_SIZE],
    ids: [u8; 8],
    offs: [u8; 8],
    starts: [u8; 16],
    n: usize,
}

impl Blocks {
    /// Block `k` of the frame at `sof`: its ID, index, offset in `out` and
    /// data.
    #[inline(always)]
    fn get(&self, k: usize, sof: u64) -> (u8, u64, usize, &[u8]) {
        let (start, end) = (self.starts[k] as usize, self.starts[k + 1] as usize);
        (self.ids[k], sof.wrapping_add(self.offs[k] as u64), start, self.out.get(start..end).unwrap_or_default())
    }
}

/// Bit 0 of the even bytes of eight frame bytes read as a little-endian u64.
const EVEN_BIT0: u64 = 0x0001_0001_0001_0001;

/// Four aux bits (a nibble) moved to bit 0 of the even bytes of eight.
const SPREAD: [u64; 16] = {
    let mut t = [0u64; 16];
    let mut n = 0;
    while n < 16 {
        let mut p = 0;
        while p < 4 {
            t[n] |= ((n as u64 >> p) & 1) << (16 * p);
            p += 1;
        }
        n += 1;
    }
    t
};

/// Whether a frame has an ID byte (bit 0 set in an even byte before the aux
/// byte).
#[inline]
fn has_id(f: &[u8; FRAME_SIZE]) -> bool {
    let (lo, hi) = halves(f);
    (lo | hi) & EVEN_BIT0 != 0
}

#[inline]
fn halves(f: &[u8; FRAME_SIZE]) -> (u64, u64) {
    let (lo, hi) = f.split_at(8);
    (u64::from_le_bytes(lo.try_into().unwrap_or_default()), u64::from_le_bytes(hi.try_into().unwrap_or_default()))
}

/// A frame with no ID byte unpacked: each even byte gets its bit 0 from the
/// aux byte, as the frame's two little-endian halves (the last byte stays
/// the aux byte). Kept in two 64-bit words and stored as such: built as one
/// 128-bit value, it was stored in halves and read back whole, a load that
/// waited on both stores (a quarter of the frame loop's time on juno_r1_1).
#[inline]
fn unpack(f: &[u8; FRAME_SIZE]) -> (u64, u64) {
    let (lo, hi) = halves(f);
    let aux = f[15] as usize;
    (lo | SPREAD[aux & 15], hi | SPREAD[aux >> 4])
}

/// Footer-stripped stream index of file offset `off` in a DSTREAM file.
pub fn dstream_stream_index(off: u64) -> u64 {
    (off / DSTREAM_BLOCK) * DSTREAM_PAYLOAD + (off % DSTREAM_BLOCK).min(DSTREAM_PAYLOAD)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(mode: FrameMode, data: &[u8]) -> Vec<(u8, u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut d = Deformatter::new(mode);
        d.push(0, data, &mut |id, ix, b: &[u8]| {
            out.push((id, ix, b.to_vec()))
        })
        .unwrap();
        d.finish(&mut |_, _, _: &[u8]| {}).unwrap();
        out
    }

    #[test]
    fn simple_frame_and_aux_bits() {
        // ID 0x10 at byte 0, data after; aux bit 1 sets bit0 of byte 2.
        let mut f = [0u8; 16];
        f[0] = (0x10 << 1) | 1;
        for (k, b) in f.iter_mut().enumerate().take(15).skip(1) {
            *b = (k as u8) << 2;
        }
        f[15] = 0b0000_0010;
        let out = collect(FrameMode::MemAligned, &f);
        assert_eq!(out.len(), 1);
        let (id, ix, bytes) = &out[0];
        assert_eq!((*id, *ix), (0x10, 0));
        assert_eq!(bytes.len(), 14);
        assert_eq!(bytes[0], 1 << 2);
        assert_eq!(bytes[1], (2 << 2) | 1);
    }

    #[test]
    fn frames_without_id_bytes_take_every_aux_bit() {
        // A first frame sets ID 0x21; then, for every aux byte, a frame
        // with no ID byte whose even bytes come back with bit 0 from the
        // aux bit of their pair (the last even byte from bit 7).
        let mut data = vec![(0x21 << 1) | 1, 0x40];
        data.extend(std::iter::repeat_n(0x44u8, 13));
        data.push(0);
        for aux in 0..=255u8 {
            let mut f = [0u8; 16];
            for (k, b) in f.iter_mut().enumerate().take(15) {
                *b = (k as u8 * 18 + aux) & !1 | if k % 2 == 1 { aux & 1 } else { 0 };
            }
            f[15] = aux;
            data.extend_from_slice(&f);
        }
        let got: Vec<u8> = collect(FrameMode::MemAligned, &data).into_iter().flat_map(|(id, _, b)| {
            assert_eq!(id, 0x21);
            b
        }).collect();
        assert_eq!(got.len(), 14 + 256 * 15);
        for (n, aux) in (0..=255u8).enumerate() {
            let f = &data[16 * (n + 1)..16 * (n + 2)];
            let want: Vec<u8> = (0..15).map(|k| if k % 2 == 0 { f[k] | ((aux >> (k / 2)) & 1) } else { f[k] }).collect();
            assert_eq!(&got[14 + 15 * n..14 + 15 * (n + 1)], &want[..], "aux {aux:#04x}");
        }
    }

    #[test]
    fn id_change_block_index_is_id_byte_position() {
        let mut f = [0u8; 16];
        f[0] = (0x10 << 1) | 1;
        f[1] = 0xa0;
        f[2] = (0x11 << 1) | 1; // change, not delayed
        f[3] = 0xb0;
        f[4] = (0x12 << 1) | 1; // change, delayed: byte 5 still for 0x11
        f[5] = 0xc0;
        f[15] = 0b100;
        let out = collect(FrameMode::MemAligned, &f);
        assert_eq!(out[0], (0x10, 0, vec![0xa0]));
        assert_eq!(out[1], (0x11, 2, vec![0xb0, 0xc0]));
        assert_eq!(out[2].0, 0x12);
        assert_eq!(out[2].1, 4);
        assert_eq!(out[2].2.len(), 9);
    }

    #[test]
    fn data_before_first_id_is_dropped_and_empty_block_delivered() {
        let mut f = [0u8; 16];
        f[12] = (0x20 << 1) | 1; // delayed change at byte 12
        f[13] = 0x55;
        f[14] = (0x21 << 1) | 1; // byte 14 is an ID: block for 0x20 stays empty
        f[15] = 0b0100_0000;
        let out = collect(FrameMode::MemAligned, &f);
        assert_eq!(out, vec![(0x20, 12, vec![])]);
    }

    #[test]
    fn tpiu_fsync_skipped_and_bad_fsync_reported() {
        let mut data = vec![0x00, 0x11];
        data.extend_from_slice(&FSYNC);
        let mut f = [0u8; 16];
        f[0] = 3;
        data.extend_from_slice(&f);
        let out = collect(FrameMode::Dstream, &data);
        assert_eq!(out, vec![(1, 6, vec![0; 14])]);

        let mut bad = FSYNC.to_vec();
        bad.extend_from_slice(&[3, 0, 0, 0]);
        bad.extend_from_slice(&FSYNC);
        bad.extend_from_slice(&[0; 12]);
        let mut d = Deformatter::new(FrameMode::Tpiu {
            fsync: true,
            hsync: false,
        });
        let e = d.push(0, &bad, &mut |_, _, _: &[u8]| {}).unwrap_err();
        assert_eq!(e, FrameError::BadFsync { index: 0 });
        assert_eq!(d.stream_position(), 0);
    }

    #[test]
    fn hsync_removed() {
        let mut data = FSYNC.to_vec();
        data.extend_from_slice(&[3, 0xaa, 0xff, 0x7f]);
        data.extend_from_slice(&[0x10; 14]);
        let out = collect(
            FrameMode::Tpiu {
                fsync: true,
                hsync: true,
            },
            &data,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 1);
        assert_eq!(out[0].1, 4);
        assert_eq!(out[0].2[0], 0xaa);
    }

    #[test]
    fn partial_frame_and_accepted_len() {
        let mut d = Deformatter::new(FrameMode::MemAligned);
        d.push(0, &[1, 2, 3], &mut |_, _, _: &[u8]| {}).unwrap();
        assert_eq!(
            d.finish(&mut |_, _, _: &[u8]| {}),
            Err(FrameError::PartialFrame { index: 0, len: 3 })
        );
        assert_eq!(FrameMode::MemAligned.lister_accepted_len(2048), 2048);
        assert_eq!(FrameMode::MemAligned.lister_accepted_len(2050), 2048);
        assert_eq!(FrameMode::MemAligned.lister_accepted_len(100), 0);
        assert_eq!(FrameMode::Dstream.lister_accepted_len(49152), 49152);
        assert_eq!(
            FrameMode::Dstream.lister_accepted_len(1024 + 506),
            1024 + 506
        );
        assert_eq!(FrameMode::Dstream.lister_accepted_len(1024 + 6), 1024);
        assert_eq!(dstream_stream_index(512 + 3), 504 + 3);
        assert_eq!(dstream_stream_index(510), 504);
    }

    #[test]
    fn not_contiguous() {
        let mut d = Deformatter::new(FrameMode::MemAligned);
        d.push(0, &[0; 16], &mut |_, _, _: &[u8]| {}).unwrap();
        let e = d.push(32, &[0; 16], &mut |_, _, _: &[u8]| {}).unwrap_err();
        assert_eq!(
            e,
            FrameError::NotContiguous {
                expected: 16,
                got: 32
            }
        );
    }
}
