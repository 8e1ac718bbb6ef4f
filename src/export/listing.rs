//! The listing `decode` prints: packets and elements of whole trace buffers
//! as OpenCSD's trc_pkt_lister prints them, or as JSON lines, written to
//! standard output or to a file that appears only when complete.
//!
//! [`write_listing`] is the whole `decode` of a snapshot without `--seek`:
//! a script or another program gets the same text the command prints.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::element;
use crate::export::jsonl;
use crate::input::TraceFile;
use crate::outfile::{self, OutputError};
use crate::protocol::etm4::decoder::{SpecKind, SpecRecord};
use crate::session::{run, BufferPlan, Event, RunOptions, SessionError};
use crate::symbols::Cursor;

/// Text is gathered in memory and written in pieces of about this size.
const WRITE_SIZE: usize = 1 << 20;

/// Why a listing could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    /// The output file could not be created.
    #[error(transparent)]
    Create(#[from] OutputError),
    /// Flushing the output or renaming it into place failed; `name` is the
    /// destination (`stdout` for standard output).
    #[error("{name}: {source}")]
    Close { name: String, source: io::Error },
    /// Writing part of the listing failed.
    #[error("writing output: {0}")]
    Write(#[source] io::Error),
    /// A buffer could not be decoded at all.
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl ListingError {
    /// Whether the reader went away (a closed pipe, as with `| head`): not
    /// worth reporting.
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            ListingError::Write(e) | ListingError::Close { source: e, .. } => e.kind() == io::ErrorKind::BrokenPipe,
            _ => false,
        }
    }
}

/// Where a listing goes: standard output, or a temporary file renamed into
/// place by [`ListingOutput::close`] so a reader never sees half a file.
pub struct ListingOutput {
    /// Text not yet written.
    pub buf: String,
    out: Box<dyn Write>,
    tmp: Option<(PathBuf, PathBuf)>,
}

impl Drop for ListingOutput {
    /// An output that was never completed leaves no temporary file behind.
    fn drop(&mut self) {
        if let Some((tmp, _)) = &self.tmp {
            outfile::discard(tmp);
        }
    }
}

impl ListingOutput {
    /// Standard output for `None`, else a temporary file beside `path`
    /// (removed on SIGINT and SIGTERM).
    pub fn new(path: Option<&Path>) -> Result<ListingOutput, ListingError> {
        match path {
            None => Ok(ListingOutput { buf: String::with_capacity(WRITE_SIZE), out: Box::new(io::stdout().lock()), tmp: None }),
            Some(p) => {
                outfile::remove_on_signals();
                let (tmp, f) = outfile::create_temp(p)?;
                Ok(ListingOutput {
                    buf: String::with_capacity(WRITE_SIZE),
                    out: Box::new(io::BufWriter::with_capacity(WRITE_SIZE, f)),
                    tmp: Some((tmp, p.to_path_buf())),
                })
            }
        }
    }

    /// Write the gathered text once there is enough of it.
    pub fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= WRITE_SIZE {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        self.out.write_all(self.buf.as_bytes())?;
        self.buf.clear();
        Ok(())
    }

    /// Finish the output. A failed run still keeps what it decoded: the file
    /// is renamed into place either way. A reader that went away (a closed
    /// pipe, as with `| head`) is not an error.
    pub fn close(mut self) -> Result<(), ListingError> {
        let name = self.tmp.as_ref().map(|(_, p)| p.display().to_string()).unwrap_or_else(|| "stdout".into());
        match self.flush_buf().and_then(|_| self.out.flush()) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            r => r.map_err(|source| ListingError::Close { name, source })?,
        }
        self.out = Box::new(io::sink());
        if let Some((tmp, dest)) = self.tmp.take() {
            outfile::commit(&tmp, &dest).map_err(|source| ListingError::Close { name: dest.display().to_string(), source })?;
        }
        Ok(())
    }
}

/// What to list, as `decode`'s options say.
#[derive(Clone, Debug)]
pub struct ListingOptions {
    /// The snapshot directory, named in the OpenCSD header.
    pub snapshot: PathBuf,
    /// trc_pkt_lister's text (else JSON lines).
    pub opencsd: bool,
    /// List packets (`decode --elements-only` leaves them out).
    pub packets: bool,
    /// Every buffer of the snapshot in turn, as trc_pkt_lister's
    /// multi-session decode (headers and resets between buffers).
    pub multi_session: bool,
    /// Read dstream_coresight buffers as DSTREAM captures.
    pub dstream: bool,
}

/// How a listing ended.
#[derive(Clone, Debug, Default)]
pub struct ListingSummary {
    /// The first buffer whose decode stopped on a fatal error, and why.
    pub failure: Option<String>,
}

/// List the `buffers` (planned and mapped) into `out`, decoding with `opts`
/// (`opts.elements` false lists packets only). Warnings (plan notes,
/// skipped trace IDs, decodes that stopped) go to `warn` as they happen,
/// without the program's name. Symbols for the JSON lines come from
/// `cursor`. The caller closes `out`.
pub fn write_listing(
    buffers: &[(BufferPlan, TraceFile)],
    opts: &RunOptions,
    lo: &ListingOptions,
    mut cursor: Option<&mut Cursor<'_>>,
    out: &mut ListingOutput,
    warn: &mut dyn FnMut(String),
) -> Result<ListingSummary, ListingError> {
    let opencsd = lo.opencsd;
    let show_packets = lo.packets;
    let elements = opts.elements;
    let mut opts = opts.clone();
    if opencsd {
        out.buf.push_str(&format!("Trace Packet Lister : reading snapshot from path {}\n", lo.snapshot.display()));
    }
    let multi = lo.multi_session;
    let mut failure = None;
    for (i, (plan, file)) in buffers.iter().enumerate() {
        let buffer = &plan.buffer;
        for n in &plan.notes {
            warn(format!("warning: {n}"));
        }
        if opencsd {
            write_buffer_header(&mut out.buf, plan, i, buffers.len(), lo);
        }
        if opencsd && elements && i == 0 {
            write_image_header(&mut out.buf, plan);
        }
        opts.after_reset = multi && i > 0;
        // A listing prints every element.
        opts.batched = false;
        let mut io_err = None;
        let summary = run(plan, file.bytes(), &opts, |ev| {
            if io_err.is_some() {
                return;
            }
            match ev {
                Event::Element { element: e, .. } => {
                    if opencsd {
                        element::write_opencsd_line(&mut out.buf, e);
                    } else {
                        jsonl::write_element(&mut out.buf, None, e, cursor.as_deref_mut());
                        out.buf.push('\n');
                    }
                    if let Err(e) = out.maybe_flush() {
                        io_err = Some(e);
                    }
                }
                Event::Message { text, .. } => {
                    if opencsd {
                        // trc_pkt_lister prints decoder messages unterminated.
                        out.buf.push_str(text);
                    } else {
                        out.buf.push_str("{\"message\":");
                        element::write_json_string(&mut out.buf, text);
                        out.buf.push_str("}\n");
                    }
                }
                Event::Spec { record, .. } => {
                    if opencsd {
                        write_spec_line(&mut out.buf, record);
                    } else {
                        write_spec_json(&mut out.buf, record);
                    }
                }
                Event::TransactionFailed { source, first_seq, last_seq, index } => {
                    let id = source.trace_id.unwrap_or(0);
                    if opencsd {
                        out.buf.push_str(&format!(
                            "Idx:{index}; ID:{id:x}; SPECULATION(transaction failed: seq {first_seq}..{last_seq} undone)\n"
                        ));
                    } else {
                        out.buf.push_str(&format!(
                            "{{\"index\":{index},\"id\":{id},\"type\":\"transaction_failed\",\"first_seq\":{first_seq},\"last_seq\":{last_seq}}}\n"
                        ));
                    }
                }
                // Batches are off (above).
                Event::Batch { .. } => {}
                Event::Packet { .. } if !show_packets => {}
                Event::Packet { source, stream_id, packet, raw } => {
                    if opencsd {
                        packet.write_opencsd(&mut out.buf, source, stream_id, raw, !elements);
                    } else {
                        packet.write_json(&mut out.buf, source.trace_id.unwrap_or(stream_id), raw);
                        out.buf.push('\n');
                    }
                    if let Err(e) = out.maybe_flush() {
                        io_err = Some(e);
                    }
                }
                Event::Skipped { trace_id, reason } => {
                    warn(format!("{}: trace ID 0x{trace_id:x} skipped: {reason}", buffer.path.display()));
                }
                Event::EndOfTrace { stream_id, .. } => {
                    if opencsd && show_packets {
                        out.buf.push_str(&format!("ID:{stream_id:x}\tEND OF TRACE DATA\n"));
                    }
                }
            }
        })?;
        if let Some(e) = io_err {
            return Err(ListingError::Write(e));
        }
        if let Some(f) = &summary.fatal {
            warn(format!("{}: decode stopped: {f}", buffer.path.display()));
            failure = Some(f.to_string());
            if opencsd {
                out.buf.push_str("Trace Packet Lister : Data Path fatal error\n");
            }
        }
        if let Some(f) = &summary.fatal_at_end {
            // trc_pkt_lister's listing has no line for this; the warning says it.
            warn(format!("{}: decode stopped at the end of the trace: {f}", buffer.path.display()));
        }
        if let Some(e) = &summary.frame_error {
            warn(format!("{}: {e}", buffer.path.display()));
            failure = Some(e.to_string());
            if opencsd {
                out.buf.push_str("Trace Packet Lister : Data Path fatal error\n");
            }
        }
        if opencsd {
            if multi && i + 1 < buffers.len() {
                for s in &plan.sources {
                    if let (Some(id), true) = (s.trace_id, s.kind.is_decoded()) {
                        out.buf.push_str(&format!("ID:{id:x}\tRESET operation on trace decode path\n"));
                    }
                }
            }
            if multi {
                out.buf.push_str(&format!("####### Buffer {} : {} Complete\n\n", i + 1, buffer.name));
            }
            out.buf.push_str(&format!("Trace Packet Lister : Trace buffer done, processed {} bytes.\n", summary.bytes_processed));
        }
    }
    Ok(ListingSummary { failure })
}

/// The lines trc_pkt_lister prints before a buffer's packets: which buffer,
/// and a protocol printer per decoded trace ID.
fn write_buffer_header(out: &mut String, plan: &BufferPlan, i: usize, count: usize, lo: &ListingOptions) {
    if lo.multi_session {
        out.push_str(&format!(
            "####### Multi Session decode: Buffer {} of {count}; Source name = {}.\n\n",
            i + 1,
            plan.buffer.name
        ));
    } else {
        out.push_str(&format!("Using {} as trace source\n", plan.buffer.name));
    }
    if !lo.packets {
        return;
    }
    let raw = plan.frame_mode(lo.dstream).is_none();
    for s in &plan.sources {
        if let (Some(id), true) = (s.trace_id, s.kind.is_decoded()) {
            let shown = if raw { 0 } else { id };
            out.push_str(&format!("Trace Packet Lister : Protocol printer {} on Trace ID 0x{:x}\n", s.protocol_name(), shown));
        }
    }
}

/// The element printer's header: the memory accessors of the image.
fn write_image_header(out: &mut String, plan: &BufferPlan) {
    out.push_str("Trace Packet Lister : Set trace element decode printer\n");
    out.push_str("Gen_Info : Mapped Memory Accessors\n");
    for r in plan.image.regions() {
        out.push_str(&format!(
            "Gen_Info : FileAcc; Range::0x{:x}:{:x}; Mem Space::{}\nFilename={}\n",
            r.start,
            r.last,
            r.space.name(),
            r.path.display()
        ));
    }
    out.push_str("Gen_Info : ========================\n");
}

/// Speculation-view line; it starts with `Idx:` like the others but is neither
/// a packet nor an OCSD element, so OpenCSD-format comparisons ignore it.
pub fn write_spec_line(out: &mut String, r: &SpecRecord) {
    let at = match r.resolved {
        Some(i) => format!("at Idx:{i}"),
        None => "at end of trace".to_string(),
    };
    out.push_str(&format!(
        "Idx:{}; ID:{:x}; SPECULATION(seq {}: {} {} {at})\n",
        r.created,
        r.trace_id,
        r.seq,
        r.kind.name(),
        r.state.name()
    ));
}

/// The speculation record as one JSON object.
pub fn write_spec_json(out: &mut String, r: &SpecRecord) {
    let (kind, executed) = match r.kind {
        SpecKind::Atom { executed } => ("atom", Some(executed)),
        k => (k.name(), None),
    };
    out.push_str(&format!(
        "{{\"index\":{},\"id\":{},\"type\":\"speculation\",\"seq\":{},\"kind\":\"{kind}\",\"state\":\"{}\"",
        r.created,
        r.trace_id,
        r.seq,
        r.state.name()
    ));
    if let Some(e) = executed {
        out.push_str(&format!(",\"executed\":{e}"));
    }
    if let Some(i) = r.resolved {
        out.push_str(&format!(",\"resolved_index\":{i}"));
    }
    out.push_str("}\n");
}
