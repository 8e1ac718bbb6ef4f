//! A packet decode session over one trace buffer of a snapshot: which sources
//! write to the buffer, how each is configured, and the run that feeds the
//! buffer through the frame demultiplexer into one packet parser per trace ID.
//!
//! This is the glue the CLI, the tests and the benchmarks share; it knows
//! nothing about output formats.

pub mod marks;
pub mod tally;

use std::sync::Arc;

use crate::element::Element;
use crate::frame::{Deformatter, Flow, FrameError, FrameMode, FrameSink};
use crate::image::memory::MemoryImage;
use crate::input::{BufferFormat, Device, InputError, Snapshot, TraceBuffer, TraceFile};
use crate::protocol::etm4::decoder::{DecoderOptions, DecoderOutput, Etm4Decoder, PacketRun, SpecRecord};
use crate::protocol::etm3::parser::Etm3Sink;
use crate::protocol::etm3::{Etm3Config, Etm3Decoder, Etm3Packet, Etm3Parser};
use crate::protocol::etm4::{ConfigError, Etm4Config, Etm4Parser, Packet, PacketSink, PacketType};
use crate::protocol::ptm::{PtmConfig, PtmDecoder, PtmPacket, PtmParser};
use self::marks::Mark;
use self::tally::{SourceTally, Tally};
use crate::protocol::decoder::ElementCounts;
pub use crate::protocol::output::ElementBatch;
use crate::protocol::Decoder;

/// The protocol a trace source speaks, as far as this version decodes it.
#[derive(Clone, Debug)]
pub enum SourceKind {
    /// ETMv4 or ETE instruction trace.
    Etm4(Etm4Config),
    /// PTM (PFT 1.0/1.1) instruction trace.
    Ptm(PtmConfig),
    /// ETMv3 instruction trace.
    Etm3(Etm3Config),
    /// A protocol recognised but not decoded yet (STM, ITM, ...).
    Unsupported { protocol: String },
}

impl SourceKind {
    /// True for the protocols this version decodes.
    pub fn is_decoded(&self) -> bool {
        !matches!(self, SourceKind::Unsupported { .. })
    }

    /// The decoder's view of the source's configuration, as (name, value) rows.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        match self {
            SourceKind::Etm4(c) => c.describe(),
            SourceKind::Ptm(c) => c.describe(),
            SourceKind::Etm3(c) => c.describe(),
            SourceKind::Unsupported { .. } => Vec::new(),
        }
    }
}

/// One trace source writing to a buffer.
#[derive(Clone, Debug)]
pub struct Source {
    /// The source's device name in the snapshot (`ETM_0`, `ETE_0_s1`, ...).
    pub name: String,
    /// Device type as the snapshot names it (`ETE`, `ETM4`, `PTM1.1`, ...).
    pub device_type: String,
    /// CoreSight trace ID, when the registers give one.
    pub trace_id: Option<u8>,
    pub kind: SourceKind,
    /// The CPU the source traces, when the capture says (a perf.data names
    /// each CPU; a snapshot leaves it unknown).
    pub cpu: Option<u32>,
}

impl Source {
    /// Protocol name as trc_pkt_lister prints it (`ETE`, `ETMV4I`, `PTM`, ...).
    pub fn protocol_name(&self) -> String {
        match &self.kind {
            SourceKind::Etm4(cfg) => cfg.protocol_name().to_string(),
            SourceKind::Ptm(cfg) => cfg.protocol_name().to_string(),
            SourceKind::Etm3(cfg) => cfg.protocol_name().to_string(),
            SourceKind::Unsupported { protocol } => protocol.clone(),
        }
    }
}

/// What to decode: one buffer and its sources.
#[derive(Clone, Debug)]
pub struct BufferPlan {
    pub buffer: TraceBuffer,
    /// Sources in increasing trace ID order (those without an ID last).
    pub sources: Vec<Source>,
    /// Set-up problems found while planning (a source whose registers do not
    /// configure a decoder, a memory image that cannot be mapped, ...).
    /// Decoding goes on without that part.
    pub notes: Vec<String>,
    /// The program image: every core's memory dumps, shared by all sources.
    pub image: Arc<MemoryImage>,
}

/// A stretch of a capture's bytes that is decoded from fresh decoders, as
/// Linux perf decodes each AUX fragment of a perf.data (`cs_etm__run_decoder`
/// resets the decoder at every buffer). A snapshot buffer is one fragment
/// over the whole file. Offsets are those of the mapped file, so packets and
/// elements carry file offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fragment {
    pub start: u64,
    pub end: u64,
    /// `Some(i)`: unformatted data of `sources[i]` alone (perf's raw TRBE
    /// data); `None`: as the plan's buffer format says.
    pub raw_source: Option<usize>,
}

impl Fragment {
    /// The whole of a buffer of `len` bytes, read as its plan says.
    pub fn whole(len: usize) -> Fragment {
        Fragment { start: 0, end: len as u64, raw_source: None }
    }

    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// The fragment's bytes, or `None` when it does not lie inside `data`.
    pub fn bytes<'d>(&self, data: &'d [u8]) -> Option<&'d [u8]> {
        data.get(usize::try_from(self.start).ok()?..usize::try_from(self.end).ok()?)
    }
}

/// Why a session could not run or resume.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0}")]
    Input(#[from] InputError),
    /// The buffer's `format=` is not one this version reads.
    #[error("trace buffer {buffer}: format '{format}' is not supported (expected coresight, source_data or dstream_coresight)")]
    UnknownFormat { buffer: String, format: String },
    /// A raw (`source_data`) buffer needs exactly one source.
    #[error("trace buffer {buffer} holds unformatted single-source data but {count} sources write to it; expected exactly one")]
    RawBufferSources { buffer: String, count: usize },
    /// The frame demultiplexer rejected the data; what was decoded before
    /// `offset` has been delivered.
    #[error("{file}: {error}")]
    Frame { file: String, #[source] error: FrameError },
    /// An ELF file for the program image could not be mapped.
    #[error("{0}")]
    Image(#[from] crate::image::ImageError),
    /// A saved parser or decoder state is unusable.
    #[error("{0}")]
    State(#[from] crate::protocol::ProtocolError),
    /// The saved state has decoder states and the run wants none, or the
    /// other way round.
    #[error("run state was saved with another decode level")]
    StateLevel,
    /// The saved state belongs to a protocol other than the source's.
    #[error("run state for a source whose protocol cannot be resumed")]
    StateProtocol,
    /// The saved state has a chain for a trace ID this decode has not.
    #[error("run state names trace ID 0x{id:x}, which this decode does not have")]
    StateTraceId { id: u8 },
}

/// Trace ID register of a non-ETMv4 source, for notices about what is skipped.
fn other_trace_id(dev: &Device) -> Option<u8> {
    let base = dev.type_base().to_ascii_uppercase();
    let v = if base.starts_with("STM") {
        dev.reg("STMTCSR").map(|v| (v >> 16) & 0x7f)
    } else if base.starts_with("ITM") {
        dev.reg("ITMTCR").map(|v| (v >> 16) & 0x7f)
    } else {
        dev.reg("ETMTRACEIDR").map(|v| v & 0x7f)
    };
    v.map(|v| v as u8)
}

impl BufferPlan {
    /// Plan the decode of `buffer`.
    pub fn new(snap: &Snapshot, buffer: &TraceBuffer) -> Result<BufferPlan, SessionError> {
        match buffer.format {
            BufferFormat::CoreSight | BufferFormat::SourceData | BufferFormat::DstreamCoreSight => {}
            BufferFormat::Unknown(ref f) => {
                return Err(SessionError::UnknownFormat { buffer: buffer.name.clone(), format: f.clone() })
            }
        }
        let mut notes = Vec::new();
        for name in snap.source_names_for_buffer(&buffer.name) {
            if snap.device(name).is_none() {
                notes.push(format!("source {name} writes to {} but has no device description; skipped", buffer.name));
            }
        }
        let mut sources = Vec::new();
        for dev in snap.sources_for_buffer(&buffer.name) {
            let base = dev.type_base().to_ascii_uppercase();
            let core = snap.core_for_source(&dev.name).map(|c| c.type_name.clone());
            let make = |trace_id: u8, kind: SourceKind| Source {
                name: dev.name.clone(),
                device_type: dev.type_name.clone(),
                trace_id: Some(trace_id),
                kind,
                cpu: None,
            };
            let configured = if base == "ETE" || base == "ETM4" {
                Etm4Config::from_registers(|r| dev.reg(r), base == "ETE", core.as_deref())
                    .map(|cfg| make(cfg.trace_id(), SourceKind::Etm4(cfg)))
            } else if base.starts_with("PTM") || base.starts_with("PFT") {
                PtmConfig::from_registers(|r| dev.reg(r), core.as_deref())
                    .map(|cfg| make(cfg.trace_id(), SourceKind::Ptm(cfg)))
            } else if base.starts_with("ETM3") {
                Etm3Config::from_registers(|r| dev.reg(r), core.as_deref()).map(|cfg| {
                    if let Some(m) = cfg.decoder_config_message() {
                        notes.push(format!("trace source {}: {m}", dev.name));
                    }
                    make(cfg.trace_id(), SourceKind::Etm3(cfg))
                })
            } else {
                let protocol = if base.starts_with("STM") {
                    "STM"
                } else if base.starts_with("ITM") {
                    "ITM"
                } else {
                    dev.type_name.as_str()
                };
                Ok(Source {
                    name: dev.name.clone(),
                    device_type: dev.type_name.clone(),
                    trace_id: other_trace_id(dev),
                    kind: SourceKind::Unsupported { protocol: protocol.to_string() },
                    cpu: None,
                })
            };
            let source = match configured {
                Ok(s) => s,
                Err(e) => {
                    notes.push(config_note(dev, &e));
                    continue;
                }
            };
            sources.push(source);
        }
        if buffer.format.is_formatted() {
            // Frames cannot carry ID 0 (null data) or the reserved IDs.
            sources.retain(|s| match (s.trace_id, &s.kind) {
                (Some(id), kind) if kind.is_decoded() && (id == 0 || id >= 0x70) => {
                    notes.push(format!(
                        "trace source {}: {}",
                        s.name,
                        ConfigError::BadTraceId(id)
                    ));
                    false
                }
                _ => true,
            });
        }
        sources.sort_by_key(|s| s.trace_id.map(|i| i as u16).unwrap_or(u16::MAX));
        if buffer.format == BufferFormat::SourceData && sources.len() != 1 {
            return Err(SessionError::RawBufferSources { buffer: buffer.name.clone(), count: sources.len() });
        }
        let mut image = MemoryImage::new();
        for dev in snap.devices.iter().filter(|d| d.is_core()) {
            notes.extend(image.add_device_dumps(&snap.dir, dev));
        }
        Ok(BufferPlan { buffer: buffer.clone(), sources, notes, image: Arc::new(image) })
    }

    /// The frame mode for this buffer, or `None` for unformatted data.
    /// `dstream` reads a DSTREAM capture as such (trc_pkt_lister's
    /// `-dstream_format`); without it the buffer is read as plain frames, as
    /// trc_pkt_lister does.
    pub fn frame_mode(&self, dstream: bool) -> Option<FrameMode> {
        match self.buffer.format {
            BufferFormat::SourceData => None,
            BufferFormat::DstreamCoreSight if dstream => Some(FrameMode::Dstream),
            // Without DSTREAM handling, trc_pkt_lister still reads such a buffer
            // as TPIU output with frame syncs (and then trips on the footers).
            BufferFormat::DstreamCoreSight => Some(FrameMode::Tpiu { fsync: true, hsync: false }),
            _ => Some(FrameMode::MemAligned),
        }
    }

    /// Add an ELF file's loadable segments to the program image (at `load` for
    /// a position-independent image). Returns how many segments were mapped.
    pub fn add_elf_image(&mut self, path: &std::path::Path, load: Option<u64>) -> Result<usize, SessionError> {
        Ok(Arc::make_mut(&mut self.image).add_elf(path, load)?)
    }

    /// Open the buffer's trace file (memory-mapped).
    pub fn open(&self) -> Result<TraceFile, SessionError> {
        Ok(TraceFile::open_for(&self.buffer.path, &format!("trace buffer {}", self.buffer.name))?)
    }
}

fn config_note(dev: &Device, e: &ConfigError) -> String {
    format!("{}: trace source {} ({}): {e}; not decoded", dev.path.display(), dev.name, dev.type_name)
}

/// A packet of any decoded protocol.
#[derive(Clone, Copy)]
pub enum PacketRef<'a> {
    Etm4(&'a Packet),
    Ptm(&'a PtmPacket),
    Etm3(&'a Etm3Packet),
}

impl PacketRef<'_> {
    /// The trc_pkt_lister packet line (with newline). With `parser_errors`
    /// (a packets-only listing) an ETMv3/PTM parser's error message for a
    /// malformed packet comes first, as the lister prints it without
    /// `-decode`. In a full decode OpenCSD 1.8.0 gives the error logger to
    /// the decoder only (`DecoderMngrBase::createDecoder` hands back the
    /// decoder, `DecodeTree` attaches the logger to that), so the packet
    /// processor's messages go nowhere.
    pub fn write_opencsd(&self, out: &mut String, source: &Source, stream_id: u8, raw: &[u8], parser_errors: bool) {
        let trace_id = source.trace_id.unwrap_or(stream_id);
        match self {
            PacketRef::Etm4(p) => {
                let ete = matches!(&source.kind, SourceKind::Etm4(c) if c.is_ete());
                crate::protocol::etm4::display::write_opencsd_line(out, stream_id, p, raw, ete)
            }
            PacketRef::Ptm(p) => {
                if parser_errors {
                    crate::protocol::ptm::display::write_parser_error(out, trace_id, p);
                }
                crate::protocol::ptm::display::write_opencsd_line(out, stream_id, p, raw)
            }
            PacketRef::Etm3(p) => {
                if parser_errors {
                    crate::protocol::etm3::display::write_parser_error(out, trace_id, p);
                }
                crate::protocol::etm3::display::write_opencsd_line(out, stream_id, p, raw)
            }
        }
    }

    /// One JSON object (no newline), under the source's trace ID.
    pub fn write_json(&self, out: &mut String, trace_id: u8, raw: &[u8]) {
        match self {
            PacketRef::Etm4(p) => crate::protocol::etm4::display::write_json(out, trace_id, p, raw),
            PacketRef::Ptm(p) => crate::protocol::ptm::display::write_json(out, trace_id, p, raw),
            PacketRef::Etm3(p) => crate::protocol::etm3::display::write_json(out, trace_id, p, raw),
        }
    }

    /// True for an alignment synchronisation packet (A-sync), where a
    /// decoder that lost the stream starts to look for its way back.
    pub fn is_async(&self) -> bool {
        match self {
            PacketRef::Etm4(p) => p.ptype == crate::protocol::etm4::packet::PacketType::Async,
            PacketRef::Ptm(p) => p.ptype == crate::protocol::ptm::PtmPacketType::ASync,
            PacketRef::Etm3(p) => p.ptype == crate::protocol::etm3::PacketType::ASync,
        }
    }

    /// True for the packet that gives a decoder its full state after an
    /// A-sync: Trace Info (ETE/ETMv4) or I-sync (PTM, ETMv3).
    pub fn is_state_sync(&self) -> bool {
        use crate::protocol::etm3::PacketType as E3;
        match self {
            PacketRef::Etm4(p) => p.ptype == crate::protocol::etm4::packet::PacketType::TraceInfo,
            PacketRef::Ptm(p) => p.ptype == crate::protocol::ptm::PtmPacketType::ISync,
            PacketRef::Etm3(p) => matches!(p.ptype, E3::ISync | E3::ISyncCycle),
        }
    }

    /// Offset of the packet's first byte.
    pub fn index(&self) -> u64 {
        match self {
            PacketRef::Etm4(p) => p.index,
            PacketRef::Ptm(p) => p.index,
            PacketRef::Etm3(p) => p.index,
        }
    }
}

/// What the run reports to its caller, in stream order.
pub enum Event<'a> {
    /// A packet. `stream_id` is the ID the data arrived under (0 for an
    /// unformatted buffer, as trc_pkt_lister prints it).
    Packet { source: &'a Source, stream_id: u8, packet: PacketRef<'a>, raw: &'a [u8] },
    /// A decoded element (when elements are requested).
    Element { source: &'a Source, element: &'a Element },
    /// A decoder message, in OpenCSD's error format without a newline.
    Message { source: &'a Source, text: &'a str },
    /// The fate of a speculative element (speculation view).
    Spec { source: &'a Source, record: &'a SpecRecord },
    /// A failed transaction undid the committed elements `first_seq..=last_seq`.
    TransactionFailed { source: &'a Source, first_seq: u64, last_seq: u64, index: u64 },
    /// Data for a trace ID that is not decoded (unsupported protocol, or no
    /// source describes it); reported once per ID.
    Skipped { trace_id: u8, reason: String },
    /// End of one ID's data (after its last packet and element).
    EndOfTrace { source: &'a Source, stream_id: u8 },
    /// Elements in the place of [`Event::Element`]s, only in a run with
    /// [`RunOptions::batched`].
    Batch { source: &'a Source, batch: &'a ElementBatch },
}

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Only these trace IDs (empty = all).
    pub ids: Vec<u8>,
    /// Read DSTREAM-framed buffers as DSTREAM.
    pub dstream: bool,
    /// Decode packets into elements too.
    pub elements: bool,
    pub decoder: DecoderOptions,
    /// The decoders continue from an earlier buffer and were reset in
    /// between (a multi-session decode): they report `reset-decoder`.
    pub after_reset: bool,
    /// No end of trace for trace IDs that had no data in the buffer (a
    /// perf.data fragment names every CPU's ID, most of them idle there);
    /// trc_pkt_lister ends every ID, so snapshots leave this off.
    pub quiet_ends: bool,
    /// Count packets and elements per source ([`Runner::take_tally`])
    /// instead of sending them as events: what a summary needs, without an
    /// event per packet (a third of a summary's time went to them).
    /// Messages, skips and ends are still sent.
    pub count_only: bool,
    /// Elements that carry nothing but their number may come as
    /// [`Event::Batch`] (see [`ElementBatch`]): what an index build needs,
    /// without building each (half of a build's time went to them).
    pub batched: bool,
    /// Packets are counted but not sent as [`Event::Packet`] (an index build
    /// reads none). In a batched run, batches in a row with nothing between
    /// them and the same time context then come merged into one (their
    /// index the last one's).
    pub quiet_packets: bool,
    /// Each decoded trace ID's data of formatted frames may reach its decoder
    /// in runs that skip over other IDs' data
    /// ([`Deformatter::set_gather`]): the order across IDs is lost, and a
    /// decoder that stops finds other IDs' later data already taken (a stop
    /// on an empty block excepted: everything before it is delivered
    /// first). For a run that only counts: one that decodes elements, and
    /// is decoded again in order when it stops (the parallel summary), or
    /// one of packets only, which nothing else stops (the summary of
    /// packets). A capture of several interleaved cores then costs a call
    /// per run of up to 64 blocks rather than one per block.
    pub gather_ids: bool,
}

/// Totals of a finished run.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// Bytes of the buffer handed to the decoders (trc_pkt_lister's
    /// "processed N bytes").
    pub bytes_processed: u64,
    pub packets: u64,
    pub elements: u64,
    /// The frame layer stopped early; packets before the error were delivered.
    pub frame_error: Option<FrameError>,
    /// A decoder stopped the data path (OpenCSD's "Data Path fatal error").
    pub fatal: Option<String>,
    /// A decoder stopped on the packets flushed at the end of the buffer, so
    /// what it held back never came out. trc_pkt_lister prints nothing for
    /// this (it does not look at its end-of-trace call's answer), so the
    /// listing has no line for it; callers should still say so.
    pub fatal_at_end: Option<String>,
}

/// One trace ID's parser and (optional) decoder.
struct Chain {
    proto: Proto,
    source: usize,
    /// Recovery mode ([`DecoderOptions::recover`]).
    recover: bool,
    /// A run that only counts ([`RunOptions::count_only`]): the source's
    /// packets and elements, counted here instead of sent as events.
    tally: Option<Box<SourceTally>>,
    /// [`RunOptions::batched`].
    batched: bool,
    /// [`RunOptions::quiet_packets`].
    quiet: bool,
}

/// The run's counters and, in a run that only counts, the chain's tally:
/// what every packet and element of a chain passes through.
struct Tot<'a> {
    counts: &'a mut Counts,
    tally: Option<&'a mut SourceTally>,
    /// [`RunOptions::quiet_packets`].
    quiet: bool,
    /// Batches are merged while nothing else comes between them (a batched
    /// run with quiet packets): the one being added to.
    merge: bool,
    pending: Option<ElementBatch>,
}

/// The protocol-specific half of a [`Chain`].
// An ETMv4 decoder is some KiB larger than the others, but each `Proto` is
// already in its trace ID's boxed `Chain`, so the size costs the slot table
// nothing; boxing the variant would add a second indirection on every
// packet's way to its decoder.
#[allow(clippy::large_enum_variant)]
enum Proto {
    Etm4 { parser: Etm4Parser, decoder: Option<Etm4Decoder> },
    /// `prev` keeps the previous block of an unformatted buffer: OpenCSD's PTM
    /// parser can read past a short block into what its buffer held before,
    /// and listings reproduce that.
    Ptm { parser: PtmParser, decoder: Option<PtmDecoder>, prev: Option<Vec<u8>> },
    Etm3 { parser: Etm3Parser, decoder: Option<Etm3Decoder> },
}

/// Counters a run keeps (and an index records).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub packets: u64,
    pub elements: u64,
    /// Instructions in the instruction-range elements.
    pub instructions: u64,
}

/// Feed one packet to an optional decoder; false when it stopped the data
/// path. In recovery mode a decoder that stops is taken past the error to
/// wait for the next sync point instead (see [`DecoderOptions::recover`]).
/// Generic over the protocol, so each packet goes to its decoder without a
/// dynamic call.
#[inline]
fn decode_packet<D: Decoder, F: FnMut(Event<'_>)>(
    decoder: &mut Option<D>,
    recover: bool,
    pk: &D::Packet,
    source: &Source,
    on_event: &mut F,
    tot: &mut Tot<'_>,
) -> bool {
    match decoder {
        Some(d) => take_packet(d, recover, pk, &mut |o| forward(source, o, on_event, tot)),
        None => true,
    }
}

/// Decode one packet into `sink`, recovering after a fatal error when
/// `recover` says so; false when the decoder stopped the data path.
#[inline(always)]
fn take_packet<D: Decoder, G: FnMut(DecoderOutput<'_>)>(d: &mut D, recover: bool, pk: &D::Packet, sink: &mut G) -> bool {
    d.packet(pk, sink);
    let fatal = d.is_fatal();
    if recover && fatal {
        d.recover(sink);
        return !d.is_fatal();
    }
    !fatal
}

/// A decoder for `cfg` when the run decodes elements.
fn new_decoder<D: Decoder>(cfg: &D::Config, plan: &BufferPlan, opts: &RunOptions) -> Option<D> {
    opts.elements.then(|| {
        let mut d = D::create(cfg, plan.image.clone(), opts.decoder);
        if opts.after_reset {
            d.reset();
        }
        d
    })
}

/// A decoder from its saved state, when one was saved.
fn load_decoder<D: Decoder>(cfg: &D::Config, plan: &BufferPlan, state: Option<Vec<u8>>) -> Result<Option<D>, SessionError> {
    Ok(state.map(|d| D::load_state(cfg, plan.image.clone(), &d)).transpose()?)
}

fn is_fatal<D: Decoder>(decoder: &Option<D>) -> bool {
    decoder.as_ref().is_some_and(D::is_fatal)
}

impl Chain {
    fn new(plan: &BufferPlan, si: usize, opts: &RunOptions, raw: bool) -> Option<Chain> {
        let proto = match &plan.sources[si].kind {
            SourceKind::Etm4(cfg) => Proto::Etm4 { parser: Etm4Parser::new(cfg), decoder: new_decoder(cfg, plan, opts) },
            SourceKind::Ptm(cfg) => {
                Proto::Ptm { parser: PtmParser::new(cfg), decoder: new_decoder(cfg, plan, opts), prev: raw.then(Vec::new) }
            }
            SourceKind::Etm3(cfg) => Proto::Etm3 { parser: Etm3Parser::new(cfg), decoder: new_decoder(cfg, plan, opts) },
            SourceKind::Unsupported { .. } => return None,
        };
        let tally = opts.count_only.then(Box::default);
        let mut chain = Chain { proto, source: si, recover: opts.decoder.recover, tally, batched: opts.batched, quiet: opts.quiet_packets };
        chain.count_in();
        Some(chain)
    }

    /// In a run that only counts, the decoder counts its elements itself
    /// rather than handing each over (a call per element: 4% of a summary
    /// of raw ETE); [`Chain::take_counted`] takes the counts after each
    /// [`Runner::feed`].
    /// Likewise a run that takes batches ([`RunOptions::batched`]) tells
    /// its decoder so.
    fn count_in(&mut self) {
        fn on<D: Decoder>(d: &mut Option<D>, count: bool, batched: bool, merge: bool) {
            if let Some(d) = d {
                let core = d.core_mut();
                if count {
                    core.counted.get_or_insert_with(Box::default);
                }
                core.batched = batched;
                core.merge_batches = merge;
            }
        }
        // As Tot merges them (see `forward`).
        let (count, batched, merge) = (self.tally.is_some(), self.batched, self.batched && self.quiet);
        match &mut self.proto {
            Proto::Etm4 { decoder, .. } => on(decoder, count, batched, merge),
            Proto::Ptm { decoder, .. } => on(decoder, count, batched, merge),
            Proto::Etm3 { decoder, .. } => on(decoder, count, batched, merge),
        }
    }

    fn is_fatal(&self) -> bool {
        match &self.proto {
            Proto::Etm4 { decoder, .. } => is_fatal(decoder),
            Proto::Ptm { decoder, .. } => is_fatal(decoder),
            Proto::Etm3 { decoder, .. } => is_fatal(decoder),
        }
    }

    fn bytes_in(&self) -> u64 {
        match &self.proto {
            Proto::Etm4 { parser, .. } => parser.bytes_in(),
            Proto::Ptm { parser, .. } => parser.bytes_in(),
            Proto::Etm3 { parser, .. } => parser.bytes_in(),
        }
    }

    /// Push a block; false when a decoder stopped the data path.
    fn push<F: FnMut(Event<'_>)>(
        &mut self,
        plan: &BufferPlan,
        stream_id: u8,
        index: u64,
        bytes: &[u8],
        on_event: &mut F,
        counts: &mut Counts,
    ) -> bool {
        let source = &plan.sources[self.source];
        let recover = self.recover;
        let tot = &mut Tot::new(counts, self.tally.as_deref_mut(), self.quiet, self.batched);
        match &mut self.proto {
            Proto::Etm4 { parser, decoder } => {
                push_etm4(parser, decoder, Place::At(index), recover, source, stream_id, bytes, on_event, tot);
                tot.flush(source, on_event);
            }
            Proto::Ptm { parser, decoder, prev } => {
                let overread = match prev.as_deref() {
                    Some(p) if p.len() > bytes.len() => &p[bytes.len()..],
                    _ => &[],
                };
                let mut sink = DecodeSink { decoder, recover, source, stream_id, on_event, tot };
                parser.push_with_overread(index, bytes, overread, &mut |pk: &PtmPacket, raw: &[u8]| {
                    sink.take(pk, PacketRef::Ptm(pk), raw)
                });
                tot.flush(source, on_event);
                if let Some(p) = prev {
                    p.clear();
                    p.extend_from_slice(bytes);
                }
            }
            Proto::Etm3 { parser, decoder } => {
                parser.push_until(index, bytes, &mut DecodeSink { decoder, recover, source, stream_id, on_event, tot });
                tot.flush(source, on_event);
            }
        }
        !self.is_fatal()
    }

    /// Take what the decoder counted itself ([`Chain::count_in`]) into
    /// `counts` and the chain's tally. Once per [`Runner::feed`], not per
    /// block: adding up and clearing every element kind's counter after each
    /// block was 1.4% of the instructions of a summary of juno_r1_1 (six
    /// IDs, a block every few frames), and nothing reads the counters during
    /// a feed.
    fn take_counted(&mut self, counts: &mut Counts) {
        let tot = &mut Tot::new(counts, self.tally.as_deref_mut(), self.quiet, self.batched);
        match &mut self.proto {
            Proto::Etm4 { decoder, .. } => tot.take_counted(decoder),
            Proto::Ptm { decoder, .. } => tot.take_counted(decoder),
            Proto::Etm3 { decoder, .. } => tot.take_counted(decoder),
        }
    }

    /// Push one ID's blocks joined (see [`crate::frame::FrameSink::run`]) in
    /// one go, when the protocol's parser can take them so: whether the
    /// data path goes on, and the bytes used.
    #[allow(clippy::too_many_arguments)]
    fn push_run<F: FnMut(Event<'_>)>(
        &mut self,
        plan: &BufferPlan,
        stream_id: u8,
        spans: &[(usize, u64)],
        bytes: &[u8],
        on_event: &mut F,
        counts: &mut Counts,
    ) -> Option<(bool, usize)> {
        let source = &plan.sources[self.source];
        let recover = self.recover;
        let tot = &mut Tot::new(counts, self.tally.as_deref_mut(), self.quiet, self.batched);
        let (used, fatal) = match &mut self.proto {
            Proto::Etm4 { parser, decoder } => {
                let used = push_etm4(parser, decoder, Place::Spans(spans), recover, source, stream_id, bytes, on_event, tot);
                (used, is_fatal(decoder))
            }
            // Formatted data only (no previous block kept: see `Proto::Ptm`),
            // once synchronised (before, what the parsers list depends on
            // where each block ends).
            Proto::Ptm { parser, decoder, prev: None } if parser.is_synced() => {
                let mut sink = DecodeSink { decoder, recover, source, stream_id, on_event, tot };
                let used = parser.push_spans_until(spans, bytes, &mut |pk: &PtmPacket, raw: &[u8]| {
                    sink.take(pk, PacketRef::Ptm(pk), raw)
                });
                (used, is_fatal(decoder))
            }
            Proto::Etm3 { parser, decoder } if parser.is_synced() => {
                let used = parser.push_spans_until(spans, bytes, &mut DecodeSink { decoder, recover, source, stream_id, on_event, tot });
                (used, is_fatal(decoder))
            }
            _ => return None,
        };
        tot.flush(source, on_event);
        Some((!fatal, used))
    }

    /// Flush the parser and decoder; false when the decoder stopped on what
    /// was flushed.
    fn finish<F: FnMut(Event<'_>)>(&mut self, plan: &BufferPlan, stream_id: u8, on_event: &mut F, counts: &mut Counts) -> bool {
        let source = &plan.sources[self.source];
        let recover = self.recover;
        let tot = &mut Tot::new(counts, self.tally.as_deref_mut(), self.quiet, self.batched);
        macro_rules! flush {
            ($parser:expr, $decoder:expr, $pkty:ty, $variant:ident) => {{
                let mut sink = DecodeSink { decoder: &mut *$decoder, recover, source, stream_id, on_event, tot: &mut *tot };
                $parser.finish(&mut |pk: &$pkty, raw: &[u8]| {
                    sink.take(pk, PacketRef::$variant(pk), raw);
                });
                let ok = match $decoder.as_mut() {
                    Some(d) if d.is_fatal() => false,
                    Some(d) => {
                        d.finish(&mut |o| forward(source, o, on_event, tot));
                        true
                    }
                    None => true,
                };
                tot.flush(source, on_event);
                tot.take_counted($decoder);
                ok
            }};
        }
        let ok = match &mut self.proto {
            Proto::Etm4 { parser, decoder } => flush!(parser, decoder, Packet, Etm4),
            Proto::Ptm { parser, decoder, .. } => flush!(parser, decoder, PtmPacket, Ptm),
            Proto::Etm3 { parser, decoder } => flush!(parser, decoder, Etm3Packet, Etm3),
        };
        on_event(Event::EndOfTrace { source, stream_id });
        ok
    }

    /// Parser and decoder state, for the protocols that can be resumed.
    fn save_state(&self) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        match &self.proto {
            Proto::Etm4 { parser, decoder } => Some((parser.save_state(), decoder.as_ref().map(|d| d.save_state()))),
            Proto::Etm3 { parser, decoder } => Some((parser.save_state(), decoder.as_ref().map(|d| d.save_state()))),
            Proto::Ptm { parser, decoder, prev } => {
                // The previous block goes with the parser: after a short block
                // the listing shows bytes the parser reads past its end.
                let p = bincode::serialize(&(parser.save_state(), prev)).ok()?;
                Some((p, decoder.as_ref().map(|d| d.save_state())))
            }
        }
    }

    /// Where the counters are in the parts [`Chain::save_state`] gave (see
    /// [`marks`]); `None` when they cannot be located.
    fn locate_counters(&self, id: u8, p: &[u8], d: Option<&[u8]>) -> Option<(Vec<Mark>, Vec<Mark>)> {
        fn part<T: serde::Serialize>(x: Option<&T>, id: u8, bytes: Option<&[u8]>) -> Option<Vec<Mark>> {
            match (x, bytes) {
                (Some(x), Some(b)) => marks::locate(x, id, b),
                (None, None) => Some(Vec::new()),
                _ => None,
            }
        }
        match &self.proto {
            Proto::Etm4 { parser, decoder } => Some((marks::locate(parser, id, p)?, part(decoder.as_ref(), id, d)?)),
            Proto::Etm3 { parser, decoder } => Some((marks::locate(parser, id, p)?, part(decoder.as_ref(), id, d)?)),
            Proto::Ptm { parser, decoder, .. } => {
                // The parser's own state leads the (state, previous block) pair.
                let len = u64::from_le_bytes(p.get(..8)?.try_into().ok()?) as usize;
                let mut pm = marks::locate(parser, id, p.get(8..8usize.checked_add(len)?)?)?;
                for m in &mut pm {
                    m.at += 8;
                }
                Some((pm, part(decoder.as_ref(), id, d)?))
            }
        }
    }

    fn load_state(&mut self, plan: &BufferPlan, opts: &RunOptions, pstate: &[u8], dstate: Option<Vec<u8>>) -> Result<(), SessionError> {
        if dstate.is_some() != opts.elements {
            return Err(SessionError::StateLevel);
        }
        match (&mut self.proto, &plan.sources[self.source].kind) {
            (Proto::Etm4 { parser, decoder }, SourceKind::Etm4(cfg)) => {
                *parser = Etm4Parser::load_state(cfg, pstate)?;
                *decoder = load_decoder(cfg, plan, dstate)?;
            }
            (Proto::Etm3 { parser, decoder }, SourceKind::Etm3(cfg)) => {
                *parser = Etm3Parser::load_state(cfg, pstate)?;
                *decoder = load_decoder(cfg, plan, dstate)?;
            }
            (Proto::Ptm { parser, decoder, prev }, SourceKind::Ptm(cfg)) => {
                let (p, saved_prev): (Vec<u8>, Option<Vec<u8>>) =
                    crate::protocol::read_state("PTM chain", pstate)?;
                *parser = PtmParser::load_state(cfg, &p)?;
                *decoder = load_decoder(cfg, plan, dstate)?;
                *prev = saved_prev;
            }
            _ => return Err(SessionError::StateProtocol),
        }
        self.count_in();
        Ok(())
    }
}

/// Where a block handed to a parser lies in the buffer.
#[derive(Clone, Copy)]
enum Place<'a> {
    /// From this index on.
    At(u64),
    /// Joined blocks: (offset in the data, index) of each.
    Spans(&'a [(usize, u64)]),
}

/// Parse a block of ETMv4/ETE data, each packet out as an event and into
/// the decoder; returns the bytes used.
#[allow(clippy::too_many_arguments)]
#[inline]
fn push_etm4<F: FnMut(Event<'_>)>(
    parser: &mut Etm4Parser,
    decoder: &mut Option<Etm4Decoder>,
    place: Place<'_>,
    recover: bool,
    source: &Source,
    stream_id: u8,
    bytes: &[u8],
    on_event: &mut F,
    tot: &mut Tot<'_>,
) -> usize {
    // Without a decoder (a packets-only run) nothing can stop the parser, so
    // the sink need not ask each time. The packets are counted in locals
    // and added once the push is done (nothing reads the counters in
    // between), and whether they are sent is asked once per push: per
    // packet, the counters behind `tot` and its two tests cost a listing's
    // packet loop a fifth of its instructions.
    match decoder {
        None => {
            let (mut packets, mut bytes_in) = (0u64, 0u64);
            let used = if tot.sends_packets() {
                parse_etm4(parser, place, bytes, &mut |pk: &Packet, raw: &[u8]| {
                    packets += 1;
                    on_event(Event::Packet { source, stream_id, packet: PacketRef::Etm4(pk), raw });
                    true
                })
            } else {
                let mut sink = CountSink { packets: &mut packets, bytes: &mut bytes_in };
                parse_etm4(parser, place, bytes, &mut sink)
            };
            tot.packets(packets, bytes_in);
            used
        }
        Some(d) if tot.quiet => {
            // Counted here, added once the push is done: nothing reads the
            // counters in between.
            let (mut packets, mut bytes_in) = (0u64, 0u64);
            let used = {
                let mut fwd = |o: DecoderOutput<'_>| forward(source, o, on_event, tot);
                let mut sink =
                    QuietSink { decoder: d, recover, packets: &mut packets, bytes: &mut bytes_in, fwd: &mut fwd, run: PacketRun::default() };
                let used = parse_etm4(parser, place, bytes, &mut sink);
                sink.decoder.flush_batch(sink.fwd);
                used
            };
            tot.packets(packets, bytes_in);
            used
        }
        // Packets handed over: batches are not merged (see `Chain::count_in`),
        // so the decoder keeps none open.
        Some(_) => parse_etm4(parser, place, bytes, &mut DecodeSink { decoder, recover, source, stream_id, on_event, tot }),
    }
}

/// The parser's sink when packets are only counted: runs of the common
/// packets come as numbers ([`PacketSink::COUNTS`]).
struct CountSink<'r> {
    packets: &'r mut u64,
    bytes: &'r mut u64,
}

impl PacketSink for CountSink<'_> {
    const SMALL: bool = true;
    const COUNTS: bool = true;

    #[inline(always)]
    fn packet(&mut self, _: &Packet, raw: &[u8]) -> bool {
        *self.packets += 1;
        *self.bytes += raw.len() as u64;
        true
    }

    #[inline(always)]
    fn counted(&mut self, packets: usize, bytes: usize) {
        *self.packets += packets as u64;
        *self.bytes += bytes as u64;
    }
}

/// The parser's sink when packets are decoded and go nowhere: each packet
/// counted in locals and decoded, and runs of atom, address and cycle count packets
/// taken by the decoder in steps ([`Etm4Decoder::run_begin`]).
struct QuietSink<'r, G> {
    decoder: &'r mut Etm4Decoder,
    recover: bool,
    // Apart, and outside: held here side by side they were added as one
    // vector, 4 instructions more a packet than two adds.
    packets: &'r mut u64,
    bytes: &'r mut u64,
    fwd: &'r mut G,
    run: PacketRun,
}

impl<G: FnMut(DecoderOutput<'_>)> PacketSink for QuietSink<'_, G> {
    const RUNS: bool = true;
    const ROWS: bool = true;

    #[inline(always)]
    fn packet(&mut self, pk: &Packet, raw: &[u8]) -> bool {
        *self.packets += 1;
        *self.bytes += raw.len() as u64;
        take_packet(self.decoder, self.recover, pk, self.fwd)
    }

    #[inline(always)]
    fn run_begin(&mut self) -> bool {
        match self.decoder.run_begin(self.fwd) {
            Some(run) => {
                self.run = run;
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn run_atom(&mut self, bits: u32, count: u8, index: u64) -> bool {
        self.decoder.run_atom(&mut self.run, bits, count, index, self.fwd)
    }

    #[inline(always)]
    fn run_row_begin(&mut self, first: u64) -> bool {
        self.decoder.run_row_begin(&self.run, first, self.fwd)
    }

    #[inline(always)]
    fn run_atoms(&mut self, bytes: u64, avail: u8, first: u64) -> usize {
        self.decoder.run_atoms(&mut self.run, bytes, avail, first) as usize
    }

    #[inline(always)]
    fn run_row(&mut self, packets: u8) {
        self.decoder.run_row(packets)
    }

    #[inline(always)]
    fn run_addr(&mut self, addr: u64, is: u8) -> bool {
        self.decoder.run_addr(&self.run, addr, is)
    }

    #[inline(always)]
    fn run_cc(&mut self, cc: u32, ptype: PacketType, index: u64) -> bool {
        self.decoder.run_cc(&mut self.run, cc, ptype, index)
    }

    #[inline(always)]
    fn run_end(&mut self, packets: usize, bytes: usize, last: u64) {
        *self.packets += packets as u64;
        *self.bytes += bytes as u64;
        self.decoder.run_end(self.run, last, self.fwd);
    }

    #[inline(always)]
    fn skips(&mut self) -> bool {
        self.decoder.waits_for_async()
    }

    #[inline(always)]
    fn skipped(&mut self, packets: usize, bytes: usize, last: u64) {
        *self.packets += packets as u64;
        *self.bytes += bytes as u64;
        self.decoder.skipped_to(last);
    }
}

/// The parser's sink when packets are decoded and may be handed over: each
/// packet counted, sent unless the run only counts, and decoded. (With
/// quiet packets `push_etm4` uses [`QuietSink`], which counts in locals and
/// gets the decoder's sink once per push: 5-7% fewer instructions in the
/// summaries of the benchmark captures.)
///
/// The ETMv3 parser takes one too; where packets are not handed
/// over (a run that only counts them, or quiet packets) it gives runs of
/// P-headers to the decoder whole ([`Etm3Decoder::phdr_run`]).
struct DecodeSink<'r, 'c, D, F> {
    decoder: &'r mut Option<D>,
    recover: bool,
    source: &'r Source,
    stream_id: u8,
    on_event: &'r mut F,
    tot: &'r mut Tot<'c>,
}

impl<D: Decoder, F: FnMut(Event<'_>)> DecodeSink<'_, '_, D, F> {
    /// `pk`, whose reference as an event is `as_ref`: counted, sent unless
    /// the run only counts, and decoded.
    #[inline(always)]
    fn take(&mut self, pk: &D::Packet, as_ref: PacketRef<'_>, raw: &[u8]) -> bool {
        let (source, stream_id) = (self.source, self.stream_id);
        self.tot.packet(raw, || Event::Packet { source, stream_id, packet: as_ref, raw }, self.on_event);
        decode_packet(self.decoder, self.recover, pk, source, self.on_event, self.tot)
    }
}

impl<F: FnMut(Event<'_>)> PacketSink for DecodeSink<'_, '_, Etm4Decoder, F> {
    #[inline(always)]
    fn packet(&mut self, pk: &Packet, raw: &[u8]) -> bool {
        self.take(pk, PacketRef::Etm4(pk), raw)
    }
}

impl<F: FnMut(Event<'_>)> Etm3Sink for DecodeSink<'_, '_, Etm3Decoder, F> {
    #[inline(always)]
    fn packet(&mut self, pk: &Etm3Packet, raw: &[u8]) -> bool {
        self.take(pk, PacketRef::Etm3(pk), raw)
    }

    #[inline(always)]
    fn phdr_run(&mut self, index: u64, bytes: &[u8], last: &Etm3Packet, cycle_accurate: bool) -> usize {
        let (Some(d), false) = (self.decoder.as_mut(), self.tot.sends_packets()) else {
            return 0;
        };
        let (source, on_event, tot) = (self.source, &mut *self.on_event, &mut *self.tot);
        let n = d.phdr_run(index, bytes, last, cycle_accurate, &mut |o| forward(source, o, on_event, tot));
        // One byte each.
        tot.packets(n as u64, n as u64);
        n
    }
}

#[inline]
fn parse_etm4<S: PacketSink>(parser: &mut Etm4Parser, place: Place<'_>, bytes: &[u8], sink: &mut S) -> usize {
    match place {
        Place::At(index) => parser.push_until(index, bytes, sink),
        Place::Spans(spans) => parser.push_spans_until(spans, bytes, sink),
    }
}

impl<'a> Tot<'a> {
    fn new(counts: &'a mut Counts, tally: Option<&'a mut SourceTally>, quiet: bool, batched: bool) -> Tot<'a> {
        Tot { counts, tally, quiet, merge: quiet && batched, pending: None }
    }

    /// Send the batch being merged, if any: before anything else is sent,
    /// and at the end of each block a chain is given.
    #[inline(always)]
    fn flush<F: FnMut(Event<'_>)>(&mut self, source: &Source, on_event: &mut F) {
        if let Some(b) = self.pending.take() {
            on_event(Event::Batch { source, batch: &b });
        }
    }

    /// Take what a decoder that counts its own elements ([`Chain::count_in`])
    /// counted into the run's counters and the chain's tally. Called after
    /// each block, so the counters are whole wherever anyone reads them
    /// (between blocks).
    fn take_counted<D: Decoder>(&mut self, decoder: &mut Option<D>) {
        let (Some(t), Some(c)) = (self.tally.as_deref_mut(), decoder.as_mut().and_then(|d| d.core_mut().counted.as_deref_mut())) else {
            return;
        };
        self.counts.elements += c.elements();
        self.counts.instructions += c.range_instructions;
        t.counted(c);
        *c = ElementCounts::default();
    }

    /// Whether [`Tot::packet`] sends packets as events (nothing tallies
    /// them and they are not quiet).
    #[inline(always)]
    fn sends_packets(&self) -> bool {
        self.tally.is_none() && !self.quiet
    }

    /// `n` packets of `bytes` bytes in all, counted as [`Tot::packet`]
    /// counts them one by one (the bytes only matter to a tally).
    #[inline(always)]
    fn packets(&mut self, n: u64, bytes: u64) {
        self.counts.packets += n;
        if let Some(t) = &mut self.tally {
            t.packets += n;
            t.bytes += bytes;
        }
    }

    /// A packet of `raw` bytes: counted, and sent as `ev` unless the run
    /// only counts.
    #[inline(always)]
    fn packet<'e, F: FnMut(Event<'_>)>(&mut self, raw: &[u8], ev: impl FnOnce() -> Event<'e>, on_event: &mut F) {
        self.counts.packets += 1;
        match &mut self.tally {
            Some(t) => t.packet(raw),
            // Nothing is merged unless packets are quiet.
            None if !self.quiet => on_event(ev()),
            None => {}
        }
    }
}

// Once per element, into each decoder's element path: out of line it cost
// the index build 5% more instructions.
#[inline(always)]
fn forward<F: FnMut(Event<'_>)>(source: &Source, o: DecoderOutput<'_>, on_event: &mut F, tot: &mut Tot<'_>) {
    if let DecoderOutput::Batch(b) = o {
        tot.counts.elements += b.elements();
        tot.counts.instructions += b.instructions;
        if !tot.merge {
            on_event(Event::Batch { source, batch: b });
            return;
        }
        if let Some(p) = &mut tot.pending {
            if p.trace_id == b.trace_id && p.time == b.time {
                p.index = p.index.max(b.index);
                p.ranges += b.ranges;
                p.instructions += b.instructions;
                p.addr_not_accessible += b.addr_not_accessible;
                p.exception_returns += b.exception_returns;
                return;
            }
        }
        tot.flush(source, on_event);
        tot.pending = Some(*b);
        return;
    }
    tot.flush(source, on_event);
    match o {
        DecoderOutput::Element(e) => {
            tot.counts.elements += 1;
            if let crate::element::ElementKind::InstrRange { count, .. } = e.kind {
                tot.counts.instructions += count as u64;
            }
            // In a run that only counts, the decoder counted its elements
            // itself (Chain::count_in): none come this way.
            on_event(Event::Element { source, element: e });
        }
        DecoderOutput::Message(text) => on_event(Event::Message { source, text }),
        DecoderOutput::Spec(record) => on_event(Event::Spec { source, record }),
        DecoderOutput::TransactionFailed { first_seq, last_seq, index, .. } => {
            on_event(Event::TransactionFailed { source, first_seq, last_seq, index })
        }
        // Taken above.
        DecoderOutput::Batch(_) => {}
    }
}

enum Slot {
    Empty,
    Chain(Box<Chain>),
    Skip,
}

/// Every chain of a runner: those of the trace IDs, then the unformatted
/// buffer's. (Over the two fields, not the runner, so that its counters can
/// be borrowed beside them.)
fn chains_mut<'c>(slots: &'c mut [Slot], raw: &'c mut Option<Chain>) -> impl Iterator<Item = &'c mut Chain> {
    let ids = slots.iter_mut().filter_map(|s| match s {
        Slot::Chain(c) => Some(&mut **c),
        _ => None,
    });
    ids.chain(raw.as_mut())
}

/// One chain's saved state: trace ID, parser state, decoder state.
type SavedChain = (u8, Vec<u8>, Option<Vec<u8>>);

/// The serialized state of a [`Runner`] between two blocks.
#[derive(serde::Serialize, serde::Deserialize)]
struct RunnerState {
    offset: u64,
    frame_id: Option<u8>,
    /// Per trace ID: parser state and decoder state.
    chains: Vec<SavedChain>,
    /// Trace IDs already reported as skipped.
    skipped: Vec<u8>,
    counts: Counts,
}

/// A decode of one buffer that can be fed block by block, paused and resumed
/// from a saved state (what the index stores).
pub struct Runner<'p> {
    plan: &'p BufferPlan,
    mode: Option<FrameMode>,
    demux: Option<Deformatter>,
    slots: Vec<Slot>,
    /// The raw-buffer chain (unformatted data).
    raw: Option<Chain>,
    /// The source whose unformatted data this is (`sources[0]` of a raw
    /// snapshot buffer; any source for a raw perf fragment).
    raw_source: usize,
    /// Offset of the fragment's first byte (0 for a snapshot buffer).
    start: u64,
    quiet_ends: bool,
    /// [`RunOptions::gather_ids`].
    gather_ids: bool,
    /// Next offset to feed.
    offset: u64,
    pub counts: Counts,
    fatal: Option<String>,
    /// A decoder stopped on what the end of the buffer flushed.
    fatal_at_end: Option<String>,
    frame_error: Option<FrameError>,
    done: bool,
}

impl<'p> Runner<'p> {
    pub fn new(plan: &'p BufferPlan, opts: &RunOptions) -> Runner<'p> {
        Runner::for_fragment(plan, opts, &Fragment { start: 0, end: 0, raw_source: None })
    }

    /// A decode of `frag` from fresh decoders, fed from `frag.start` on.
    pub fn for_fragment(plan: &'p BufferPlan, opts: &RunOptions, frag: &Fragment) -> Runner<'p> {
        let wanted = |id: u8| opts.ids.is_empty() || opts.ids.contains(&id);
        let raw_source = frag.raw_source.filter(|&i| i < plan.sources.len());
        let mode = if raw_source.is_some() { None } else { plan.frame_mode(opts.dstream) };
        let rs = raw_source.unwrap_or(0);
        let mut r = Runner {
            plan,
            mode,
            demux: mode.map(Deformatter::new),
            slots: (0..128).map(|_| Slot::Empty).collect(),
            raw: None,
            raw_source: rs,
            start: frag.start,
            quiet_ends: opts.quiet_ends,
            gather_ids: opts.gather_ids,
            offset: frag.start,
            counts: Counts::default(),
            fatal: None,
            fatal_at_end: None,
            frame_error: None,
            done: false,
        };
        match mode {
            None => {
                // trc_pkt_lister lists raw-buffer packets under ID 0 and filters on it.
                let id = plan.sources.get(rs).and_then(|s| s.trace_id).unwrap_or(0);
                if (wanted(0) || wanted(id)) && rs < plan.sources.len() {
                    r.raw = Chain::new(plan, rs, opts, true);
                }
            }
            Some(_) => {
                for (i, s) in plan.sources.iter().enumerate() {
                    match (s.trace_id, &s.kind) {
                        (Some(id), kind) if kind.is_decoded() && wanted(id) => {
                            r.slots[id as usize] = Slot::Chain(Box::new(Chain::new(plan, i, opts, false).unwrap()));
                        }
                        (Some(id), _) if !wanted(id) => r.slots[id as usize] = Slot::Skip,
                        _ => {}
                    }
                }
            }
        }
        r.set_gather();
        r
    }

    /// Let the deformatter gather the blocks of the IDs that are decoded
    /// ([`RunOptions::gather_ids`]); the others' (skipped, which nothing
    /// stops and whose first block says so) keep their order.
    fn set_gather(&mut self) {
        if !self.gather_ids {
            return;
        }
        let ids: Vec<u8> = (0..128u8).filter(|&id| matches!(self.slots[id as usize], Slot::Chain(_))).collect();
        if let Some(d) = self.demux.as_mut() {
            d.set_gather(&ids);
        }
    }

    /// The frame mode of the buffer (`None` for unformatted data).
    pub fn frame_mode(&self) -> Option<FrameMode> {
        self.mode
    }

    /// The plan the run decodes (its sources are what events point into).
    pub fn plan(&self) -> &'p BufferPlan {
        self.plan
    }

    /// Offset of the next byte to feed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// In a run that only counts ([`RunOptions::count_only`]): the packets
    /// and elements counted per source since the last call (indexed as the
    /// plan's sources), the counts starting again from zero. Empty in other
    /// runs: their counts are in the events.
    pub fn take_tally(&mut self) -> Tally {
        let mut t = Tally::new(self.plan.sources.len());
        for c in chains_mut(&mut self.slots, &mut self.raw) {
            if let (Some(ct), Some(st)) = (c.tally.as_deref_mut(), t.sources.get_mut(c.source)) {
                st.add(ct);
                *ct = SourceTally::default();
            }
        }
        t
    }

    /// True once the data path stopped (fatal error) or the run finished.
    pub fn stopped(&self) -> bool {
        self.fatal.is_some() || self.frame_error.is_some() || self.done
    }

    /// Feed the next block of the buffer (it must start at [`Runner::offset`]).
    /// Returns false when the data path stopped.
    pub fn feed<F: FnMut(Event<'_>)>(&mut self, bytes: &[u8], on_event: &mut F) -> bool {
        if self.stopped() {
            return false;
        }
        let ok = self.feed_blocks(bytes, on_event);
        self.take_counted();
        ok
    }

    /// What the decoders counted themselves, into the run's counters.
    fn take_counted(&mut self) {
        for c in chains_mut(&mut self.slots, &mut self.raw) {
            c.take_counted(&mut self.counts);
        }
    }

    fn feed_blocks<F: FnMut(Event<'_>)>(&mut self, bytes: &[u8], on_event: &mut F) -> bool {
        let index = self.offset;
        let plan = self.plan;
        match self.demux.as_mut() {
            None => {
                if let Some(chain) = self.raw.as_mut() {
                    // Blocks of the size trc_pkt_lister reads, so that a decoder
                    // that stops the data path stops it at the same place.
                    for (i, block) in bytes.chunks(1024).enumerate() {
                        let at = index + (i * 1024) as u64;
                        if !chain.push(plan, 0, at, block, on_event, &mut self.counts) {
                            self.offset = self.start + chain.bytes_in();
                            self.fatal = Some(format!(
                                "trace ID 0x{:x}: the decoder stopped on an error",
                                plan.sources[self.raw_source].trace_id.unwrap_or(0)
                            ));
                            return false;
                        }
                    }
                } else if let Some(src) = plan.sources.get(self.raw_source) {
                    if let (Some(id), true) = (src.trace_id, index == self.start && !src.kind.is_decoded()) {
                        on_event(Event::Skipped { trace_id: id, reason: skip_reason(src) });
                    }
                }
                self.offset = index + bytes.len() as u64;
                true
            }
            Some(demux) => {
                let mut fatal = None;
                let mut sink =
                    DemuxSink { plan, slots: &mut self.slots, on_event, counts: &mut self.counts, fatal: &mut fatal };
                let res = demux.push(index, bytes, &mut sink);
                self.offset = index + bytes.len() as u64;
                match res {
                    Err(e) => {
                        self.frame_error = Some(e);
                        false
                    }
                    Ok(Flow::Stop) => {
                        self.fatal = fatal.or(Some("the data path stopped".into()));
                        false
                    }
                    Ok(Flow::Continue) => true,
                }
            }
        }
    }

    /// End of the buffer: flush every decoder (unless the data path stopped).
    pub fn finish<F: FnMut(Event<'_>)>(&mut self, on_event: &mut F) {
        if self.stopped() {
            return;
        }
        if self.start > 0 {
            // A decoder that saw no data of this fragment ends at offset 0;
            // within a fragment that is its start, so offsets stay in order.
            let start = self.start;
            let mut rebased = |ev: Event<'_>| match ev {
                Event::Element { source, element } if element.index < start => {
                    let e = Element { index: start, ..*element };
                    on_event(Event::Element { source, element: &e })
                }
                ev => on_event(ev),
            };
            self.finish_fragment(&mut rebased);
        } else {
            self.finish_fragment(on_event);
        }
        // The flush took its own counts; a frame error at the end leaves
        // those of the last frames' blocks.
        self.take_counted();
    }

    fn finish_fragment<F: FnMut(Event<'_>)>(&mut self, on_event: &mut F) {
        let plan = self.plan;
        if let Some(demux) = self.demux.as_mut() {
            let mut fatal = None;
            let mut sink =
                DemuxSink { plan, slots: &mut self.slots, on_event, counts: &mut self.counts, fatal: &mut fatal };
            if let Err(e) = demux.finish(&mut sink) {
                self.frame_error = Some(e);
                return;
            }
            let quiet = self.quiet_ends;
            for (id, slot) in self.slots.iter_mut().enumerate() {
                if let Slot::Chain(c) = slot {
                    if quiet && c.bytes_in() == 0 {
                        continue;
                    }
                    if !c.finish(plan, id as u8, on_event, &mut self.counts) && self.fatal_at_end.is_none() {
                        self.fatal_at_end = Some(format!("trace ID 0x{id:x}: the decoder stopped on an error"));
                    }
                }
            }
        } else if let Some(chain) = self.raw.as_mut() {
            if !chain.finish(plan, 0, on_event, &mut self.counts) {
                let id = plan.sources.get(self.raw_source).and_then(|s| s.trace_id).unwrap_or(0);
                self.fatal_at_end = Some(format!("trace ID 0x{id:x}: the decoder stopped on an error"));
            }
        }
        self.done = true;
    }

    /// The state between two blocks, to resume with [`Runner::resume`]. Only
    /// memory-aligned frames and unformatted buffers can be resumed.
    pub fn save_state(&self) -> Option<Vec<u8>> {
        self.state(false).map(|(s, _)| s)
    }

    /// [`Runner::save_state`], and where the counters that run from the start
    /// of the decode are in it (`None` when they cannot be located), for the
    /// parallel index build to compare and shift states.
    pub(crate) fn save_state_marked(&self) -> Option<(Vec<u8>, Option<Vec<Mark>>)> {
        self.state(true)
    }

    fn state(&self, marked: bool) -> Option<(Vec<u8>, Option<Vec<Mark>>)> {
        if self.stopped() || !matches!(self.mode, None | Some(FrameMode::MemAligned)) {
            return None;
        }
        let mut chains = Vec::new();
        let mut skipped = Vec::new();
        let mut inner = Some(Vec::new());
        let mut add = |id: u8, c: &Chain, chains: &mut Vec<SavedChain>| -> Option<()> {
            let (p, d) = c.save_state()?;
            if marked {
                inner = inner.take().and_then(|mut v| {
                    v.push(c.locate_counters(id, &p, d.as_deref())?);
                    Some(v)
                });
            }
            chains.push((id, p, d));
            Some(())
        };
        if let Some(c) = &self.raw {
            add(0, c, &mut chains)?;
        }
        for (id, slot) in self.slots.iter().enumerate() {
            match slot {
                Slot::Chain(c) => add(id as u8, c, &mut chains)?,
                Slot::Skip => skipped.push(id as u8),
                Slot::Empty => {}
            }
        }
        let st = RunnerState {
            offset: self.offset,
            frame_id: self.demux.as_ref().and_then(|d| d.current_id()),
            chains,
            skipped,
            counts: self.counts,
        };
        let bytes = bincode::serialize(&st).ok()?;
        let marks = inner.filter(|_| marked).and_then(|inner| state_marks(&st, inner, &bytes));
        Some((bytes, marks))
    }

    /// A decode that starts at `offset` (a frame boundary in a formatted
    /// buffer) knowing nothing of what came before: every parser and decoder
    /// starts unsynchronised, the counts from zero. The parallel index build
    /// starts one per part of the buffer.
    pub(crate) fn starting_at(plan: &'p BufferPlan, opts: &RunOptions, frag: &Fragment, offset: u64) -> Runner<'p> {
        let mut r = Runner::for_fragment(plan, opts, frag);
        r.offset = offset;
        if r.demux.is_some() {
            r.demux = Some(Deformatter::resume_mem_aligned(offset, None));
            r.set_gather();
        }
        r
    }

    /// A runner continuing from a saved state.
    pub fn resume(plan: &'p BufferPlan, opts: &RunOptions, state: &[u8]) -> Result<Runner<'p>, SessionError> {
        Runner::resume_fragment(plan, opts, &Fragment { start: 0, end: 0, raw_source: None }, state)
    }

    /// A runner continuing from a state saved inside `frag`.
    pub fn resume_fragment(plan: &'p BufferPlan, opts: &RunOptions, frag: &Fragment, state: &[u8]) -> Result<Runner<'p>, SessionError> {
        let st: RunnerState = crate::protocol::read_state("run", state)?;
        let mut r = Runner::for_fragment(plan, opts, frag);
        r.offset = st.offset;
        r.counts = st.counts;
        if r.demux.is_some() {
            r.demux = Some(Deformatter::resume_mem_aligned(st.offset, st.frame_id));
            r.set_gather();
        }
        for (id, pstate, dstate) in st.chains {
            let chain = match (&mut r.raw, &mut r.slots[id as usize & 0x7f]) {
                (Some(c), _) if r.mode.is_none() => c,
                (_, Slot::Chain(c)) => &mut **c,
                _ => return Err(SessionError::StateTraceId { id }),
            };
            chain.load_state(plan, opts, &pstate, dstate)?;
        }
        for id in st.skipped {
            if matches!(r.slots[id as usize & 0x7f], Slot::Empty) {
                r.slots[id as usize & 0x7f] = Slot::Skip;
            }
        }
        Ok(r)
    }

    /// Totals after [`Runner::finish`] (or a stop).
    pub fn summary(&self, data_len: u64) -> RunSummary {
        let bytes_processed = match (&self.demux, self.mode) {
            (Some(d), Some(m)) if self.stopped() && !self.done || m == FrameMode::Dstream => {
                d.stream_position().saturating_sub(self.start)
            }
            (None, _) if self.fatal.is_some() => self.offset - self.start,
            _ => data_len,
        };
        RunSummary {
            bytes_processed,
            packets: self.counts.packets,
            elements: self.counts.elements,
            frame_error: self.frame_error.clone(),
            fatal: self.fatal.clone(),
            fatal_at_end: self.fatal_at_end.clone(),
        }
    }
}

/// The counters of a serialized [`RunnerState`]: those of each chain's parts
/// (`inner`, in chain order) moved to where bincode put the parts, and the
/// run's counts.
fn state_marks(st: &RunnerState, inner: Vec<(Vec<Mark>, Vec<Mark>)>, bytes: &[u8]) -> Option<Vec<Mark>> {
    // offset, frame ID option, chain count
    let mut at = 8 + 1 + st.frame_id.map_or(0, |_| 1) + 8;
    let mut out = Vec::new();
    let moved = |v: Vec<Mark>, base: usize, out: &mut Vec<Mark>| {
        out.extend(v.into_iter().map(|m| Mark { at: m.at + base, ..m }));
    };
    for ((_, p, d), (pm, dm)) in st.chains.iter().zip(inner) {
        at += 1 + 8;
        moved(pm, at, &mut out);
        at += p.len() + 1;
        if let Some(d) = d {
            at += 8;
            moved(dm, at, &mut out);
            at += d.len();
        }
    }
    at += 8 + st.skipped.len();
    for (i, kind) in [marks::Kind::Packets, marks::Kind::Elements, marks::Kind::Instructions].into_iter().enumerate() {
        out.push(Mark { at: at + 8 * i, kind, chain: 0, value: Some([st.counts.packets, st.counts.elements, st.counts.instructions][i]) });
    }
    let fits = at + 24 == bytes.len()
        && out.iter().all(|m| match m.value {
            Some(v) => bytes.get(m.at..m.at + 8) == Some(&v.to_le_bytes()[..]),
            None => bytes.get(m.at) == Some(&0),
        });
    fits.then_some(out)
}

/// Decode `data` (the buffer's bytes) into packets, and elements when asked.
pub fn run<F: FnMut(Event<'_>)>(
    plan: &BufferPlan,
    data: &[u8],
    opts: &RunOptions,
    mut on_event: F,
) -> Result<RunSummary, SessionError> {
    let mut tally = Tally::new(0);
    Ok(run_fragment(plan, data, &Fragment::whole(data.len()), opts, &mut on_event, &mut tally))
}

/// Decode one fragment of `data` from fresh decoders; what a run that only
/// counts counted goes into `tally`.
fn run_fragment<F: FnMut(Event<'_>)>(
    plan: &BufferPlan,
    data: &[u8],
    frag: &Fragment,
    opts: &RunOptions,
    on_event: &mut F,
    tally: &mut Tally,
) -> RunSummary {
    let bytes = frag.bytes(data).unwrap_or(&[]);
    let mut r = Runner::for_fragment(plan, opts, frag);
    let accepted = match r.mode {
        Some(m) => m.lister_accepted_len(bytes.len() as u64) as usize,
        None => bytes.len(),
    };
    // A buffer trc_pkt_lister cannot read whole ends in a fatal error: no
    // end-of-trace processing then.
    if r.feed(&bytes[..accepted], on_event) && accepted == bytes.len() {
        r.finish(on_event);
    }
    if opts.count_only {
        tally.add(&r.take_tally());
    }
    let mut summary = r.summary(bytes.len() as u64);
    if accepted != bytes.len() && summary.frame_error.is_none() {
        summary.frame_error =
            Some(FrameError::PartialFrame { index: frag.start + accepted as u64, len: bytes.len() - accepted });
        summary.bytes_processed = accepted as u64;
    }
    summary
}

/// Decode the fragments of a capture one after the other, each from fresh
/// decoders (a perf.data's AUX fragments). A fragment whose decode stops
/// does not stop the next one; the summary keeps the first stop.
pub fn run_fragments<F: FnMut(Event<'_>)>(
    plan: &BufferPlan,
    data: &[u8],
    fragments: &[Fragment],
    opts: &RunOptions,
    on_event: F,
) -> RunSummary {
    count_fragments(plan, data, fragments, opts, on_event).0
}

/// [`run_fragments`], and in a run that only counts
/// ([`RunOptions::count_only`]) what it counted per source (indexed as the
/// plan's sources; the events still sent are not in it).
pub fn count_fragments<F: FnMut(Event<'_>)>(
    plan: &BufferPlan,
    data: &[u8],
    fragments: &[Fragment],
    opts: &RunOptions,
    mut on_event: F,
) -> (RunSummary, Tally) {
    let mut total = RunSummary::default();
    let mut tally = Tally::new(plan.sources.len());
    for frag in fragments {
        let s = run_fragment(plan, data, frag, opts, &mut on_event, &mut tally);
        total.bytes_processed += s.bytes_processed;
        total.packets += s.packets;
        total.elements += s.elements;
        if total.frame_error.is_none() && total.fatal.is_none() {
            total.frame_error = s.frame_error;
            total.fatal = s.fatal.map(|f| format!("fragment at 0x{:x}: {f}", frag.start));
        }
        if total.fatal_at_end.is_none() {
            total.fatal_at_end = s.fatal_at_end.map(|f| format!("fragment at 0x{:x}: {f}", frag.start));
        }
    }
    (total, tally)
}

/// Decode `data` into packets only (no element decode).
pub fn run_packets<F: FnMut(Event<'_>)>(
    plan: &BufferPlan,
    data: &[u8],
    opts: &RunOptions,
    on_event: F,
) -> Result<RunSummary, SessionError> {
    let opts = RunOptions { elements: false, ..opts.clone() };
    run(plan, data, &opts, on_event)
}

fn skip_reason(s: &Source) -> String {
    format!("{} ({}) trace is not decoded by this version", s.protocol_name(), s.device_type)
}

struct DemuxSink<'p, 's, F> {
    plan: &'p BufferPlan,
    slots: &'s mut Vec<Slot>,
    on_event: &'s mut F,
    counts: &'s mut Counts,
    fatal: &'s mut Option<String>,
}

impl<F: FnMut(Event<'_>)> FrameSink for DemuxSink<'_, '_, F> {
    #[inline]
    fn data(&mut self, id: u8, index: u64, bytes: &[u8]) -> Flow {
        let plan = self.plan;
        match &mut self.slots[id as usize & 0x7f] {
            Slot::Chain(c) if bytes.is_empty() => {
                // OpenCSD's packet processors reject an empty block as a fatal
                // data-path error, which ends the whole decode; an empty block
                // holds nothing to lose, so recovery mode passes over it.
                if c.recover {
                    return Flow::Continue;
                }
                *self.fatal = Some(format!("zero-length data block for trace ID 0x{id:x}"));
                Flow::Stop
            }
            Slot::Chain(c) => {
                if c.push(plan, id, index, bytes, self.on_event, self.counts) {
                    Flow::Continue
                } else {
                    *self.fatal = Some(format!("trace ID 0x{id:x}: the decoder stopped on an error"));
                    Flow::Stop
                }
            }
            Slot::Skip => Flow::Continue,
            slot @ Slot::Empty => {
                // ID 0 is null data and 0x70-0x7f are reserved: never trace.
                if bytes.is_empty() || id == 0 || id >= 0x70 {
                    return Flow::Continue;
                }
                let reason = match plan.sources.iter().find(|s| s.trace_id == Some(id)) {
                    Some(s) => skip_reason(s),
                    None => "no trace source in the snapshot has this trace ID".to_string(),
                };
                *slot = Slot::Skip;
                (self.on_event)(Event::Skipped { trace_id: id, reason });
                Flow::Continue
            }
        }
    }

    #[inline]
    fn run(&mut self, id: u8, spans: &[(usize, u64)], bytes: &[u8]) -> (Flow, usize) {
        if let Slot::Chain(c) = &mut self.slots[id as usize & 0x7f] {
            if let Some((ok, used)) = c.push_run(self.plan, id, spans, bytes, self.on_event, self.counts) {
                if ok {
                    return (Flow::Continue, bytes.len());
                }
                *self.fatal = Some(format!("trace ID 0x{id:x}: the decoder stopped on an error"));
                return (Flow::Stop, used);
            }
        }
        crate::frame::run_as_blocks(self, id, spans, bytes)
    }
}
