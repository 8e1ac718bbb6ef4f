//! `tracesight decode`: the packets and elements of a capture, as OpenCSD's
//! trc_pkt_lister lists them or as JSON lines; with `--seek`, elements from
//! a position through the index.

use crate::cli::CliError;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use tracesight::capture::open_snapshot;
use tracesight::element;
use tracesight::export::jsonl;
use tracesight::export::listing::{self, ListingOptions, ListingOutput};
use tracesight::export::summary::DecodeCounts;
use tracesight::index;
use tracesight::input::TraceFile;
use tracesight::protocol::etm4::decoder::DecoderOptions;
use tracesight::session::{BufferPlan, Fragment, RunOptions};
use tracesight::symbols;

use super::{env_flag, env_number, open_index, refuse_input_output, PerfArgs};

#[derive(clap::Args)]
pub struct DecodeArgs {
    /// OpenCSD snapshot directory or perf.data file.
    pub path: PathBuf,
    /// Add an ELF file's code to the program image, at its own addresses or,
    /// with @ADDRESS (hex), with its lowest segment there (repeatable).
    #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
    pub images: Vec<String>,
    /// List packets only (no instruction-level decode).
    #[arg(long, conflicts_with = "elements_only")]
    pub packets: bool,
    /// List decoded elements only (no packets).
    #[arg(long)]
    pub elements_only: bool,
    /// ETE: split source-address ranges on N atoms (trc_pkt_lister's -src_addr_n).
    #[arg(long)]
    pub src_addr_n: bool,
    /// Treat A64 opcodes whose top 16 bits are zero as invalid
    /// (trc_pkt_lister's -aa64_opcode_chk; also OPENCSD_ERR_ON_AA64_BAD_OPCODE=1).
    #[arg(long)]
    pub aa64_opcode_check: bool,
    /// Add the speculation view: the fate of every speculative (P0) element as
    /// traced — committed, canceled, corrected by a mispredict, discarded, lost
    /// or unresolved — and the packets that traced and resolved it.
    #[arg(long, conflicts_with = "packets")]
    pub speculation: bool,
    /// Stop decoding an instruction range after this many instructions and
    /// report an error (also OPENCSD_INSTR_RANGE_LIMIT); 0 = the default of
    /// 16777216 (2^24), which bounds the cost of a range over code that never
    /// branches.
    #[arg(long, default_value_t = 0)]
    pub instr_range_limit: u32,
    /// Keep going after a fatal decoder error (where trc_pkt_lister stops the
    /// whole buffer): report the gap (a message and a NO_SYNC element with
    /// reason fatal-error-resync) and resume at the trace ID's next sync
    /// point. The viewer, export and profile always decode this way.
    #[arg(long)]
    pub recover: bool,
    /// Only this trace ID, in hex (repeatable). For an unformatted buffer the
    /// packets are listed under ID 0, as trc_pkt_lister does.
    #[arg(long = "id", value_parser = parse_hex_id)]
    pub ids: Vec<u8>,
    /// Trace buffer to decode, by its name in trace.ini (default: the first
    /// [bufferN] section, as trc_pkt_lister).
    #[arg(long)]
    pub source: Option<String>,
    /// Decode every buffer of the snapshot in turn, resetting between them.
    #[arg(long)]
    pub multi_session: bool,
    /// Read dstream_coresight buffers as DSTREAM captures.
    #[arg(long)]
    pub dstream: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Opencsd)]
    pub format: Format,
    /// Write to this file instead of standard output (written under a
    /// temporary name, then renamed).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Print elements from this position only, using the index (built first
    /// when missing): an element number, instr:N, ts:VALUE, cc:VALUE,
    /// off:BYTES, addr:HEX (next execution) or fn:NAME (next entry; needs
    /// --image).
    #[arg(long, value_name = "POS", conflicts_with_all = ["packets", "multi_session", "speculation"])]
    pub seek: Option<String>,
    /// Decode everything but print only counts per trace source (bytes,
    /// packets, elements per kind, instructions, errors) and the time taken,
    /// as trc_pkt_lister's -profile does; with --packets, parse only.
    #[arg(long, conflicts_with_all = ["seek", "speculation", "elements_only"])]
    pub summary: bool,
    /// With --seek: how many elements to print.
    #[arg(long, default_value_t = 50, requires = "seek")]
    pub count: u64,
    #[command(flatten)]
    pub perf: PerfArgs,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    /// Lines as OpenCSD's trc_pkt_lister prints them.
    Opencsd,
    /// One JSON object per packet.
    Jsonl,
}

fn parse_hex_id(s: &str) -> Result<u8, CliError> {
    let t = s.trim_start_matches("0x").trim_start_matches("0X");
    match u8::from_str_radix(t, 16) {
        Ok(v) if v < 0x70 => Ok(v),
        Ok(v) => Err(format!("trace ID 0x{v:x} is reserved; IDs are 0x00-0x6f").into()),
        Err(_) => Err(format!("'{s}' is not a hexadecimal trace ID").into()),
    }
}

impl DecodeArgs {
    /// The decoder options: the flags, else OpenCSD's environment switches.
    pub fn decoder(&self) -> DecoderOptions {
        let limit = if self.instr_range_limit > 0 {
            self.instr_range_limit
        } else {
            env_number("OPENCSD_INSTR_RANGE_LIMIT").unwrap_or(0)
        };
        DecoderOptions {
            src_addr_n: self.src_addr_n,
            aa64_opcode_check: self.aa64_opcode_check || env_flag("OPENCSD_ERR_ON_AA64_BAD_OPCODE"),
            instr_range_limit: limit,
            speculation: self.speculation,
            recover: self.recover,
            long_way: false,
            spec_losses_only: false,
        }
    }
}

pub fn run(args: DecodeArgs) -> Result<ExitCode, CliError> {
    if super::perf::is_perf(&args.path) {
        return super::perf::decode(&args);
    }
    let snap = open_snapshot(&args.path)?;
    for w in &snap.warnings {
        eprintln!("tracesight: warning: {}", w);
    }
    let buffers: Vec<_> = if let Some(name) = &args.source {
        vec![snap.buffer(name).map_err(|e| e.to_string())?.clone()]
    } else if args.multi_session {
        snap.buffers().to_vec()
    } else {
        vec![snap
            .default_buffer()
            .ok_or_else(|| format!("{}: the snapshot defines no trace buffers", args.path.display()))?
            .clone()]
    };
    // Plan every buffer and map its file before creating the output, so that a
    // run that cannot start leaves no file behind.
    let mut planned = Vec::with_capacity(buffers.len());
    let images = args
        .images
        .iter()
        .map(|a| tracesight::image::elf::parse_image_arg(a))
        .collect::<Result<Vec<_>, _>>()?;
    for buffer in &buffers {
        let mut plan = BufferPlan::new(&snap, buffer).map_err(|e| e.to_string())?;
        for (path, load) in &images {
            plan.add_elf_image(path, *load)?;
        }
        let file = plan.open().map_err(|e| e.to_string())?;
        planned.push((plan, file));
    }
    let opencsd = args.format == Format::Opencsd;
    // JSON lines name the function, file and line of each range's start.
    let symbolizer = if opencsd || args.images.is_empty() {
        None
    } else {
        let sym = symbols::Symbolizer::from_image_args(&args.images).map_err(|e| e.to_string())?;
        for im in sym.images() {
            for n in im.notes() {
                eprintln!("tracesight: {}: {n}", im.path().display());
            }
        }
        Some(sym)
    };
    let mut cursor = symbolizer.as_ref().map(|s| s.cursor());
    refuse_input_output(args.output.as_deref(), &args.path, Some(&snap), &args.images)?;
    let mut out = ListingOutput::new(args.output.as_deref()).map_err(|e| e.to_string())?;
    let opts = RunOptions {
        ids: args.ids.clone(),
        dstream: args.dstream,
        elements: !args.packets,
        decoder: args.decoder(),
        after_reset: false,
        quiet_ends: false,
        count_only: false,
        batched: false,
        quiet_packets: false,
        gather_ids: false,
    };
    if let Some(pos) = &args.seek {
        let (plan, file) = &planned[0];
        let code = seek_decode(plan, file, &opts, pos, args.count, &args.images, opencsd, cursor.as_mut(), &mut out)?;
        out.close().map_err(|e| e.to_string())?;
        return Ok(code);
    }
    if args.summary {
        let started = std::time::Instant::now();
        let mut counts = DecodeCounts::default();
        for (i, (plan, file)) in planned.iter().enumerate() {
            for n in &plan.notes {
                eprintln!("tracesight: warning: {n}");
            }
            let opts = RunOptions { after_reset: args.multi_session && i > 0, ..opts.clone() };
            counts.count_parallel(plan, file.bytes(), &[Fragment::whole(file.len())], &opts, &index::IndexOptions::default());
        }
        return write_summary(&counts, started.elapsed().as_secs_f64(), opencsd, out);
    }
    let lo = ListingOptions {
        snapshot: args.path.clone(),
        opencsd,
        packets: !args.elements_only,
        multi_session: args.multi_session && args.source.is_none(),
        dstream: args.dstream,
    };
    let summary = match listing::write_listing(&planned, &opts, &lo, cursor.as_mut(), &mut out, &mut |w| eprintln!("tracesight: {w}")) {
        Err(e) if e.is_broken_pipe() => return Ok(ExitCode::SUCCESS),
        r => r.map_err(|e| e.to_string())?,
    };
    out.close().map_err(|e| e.to_string())?;
    Ok(if summary.failure.is_some() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Print a summary's report; exit 1 when a decode stopped, as a listing does.
pub fn write_summary(counts: &DecodeCounts, seconds: f64, text: bool, mut out: ListingOutput) -> Result<ExitCode, CliError> {
    if text {
        counts.write_text(&mut out.buf, seconds);
    } else {
        counts.write_json(&mut out.buf, seconds);
    }
    out.close().map_err(|e| e.to_string())?;
    Ok(if counts.stops.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn parse_seek(pos: &str, images: &[String]) -> Result<index::SeekTarget, CliError> {
    use index::SeekTarget as T;
    use tracesight::capture::parse_number;
    let (kind, value) = pos.split_once(':').unwrap_or(("", pos));
    Ok(match kind {
        "" => T::Element(parse_number(value)?),
        "instr" => T::Instruction(parse_number(value)?),
        "ts" => T::Timestamp(parse_number(value)?),
        "cc" => T::Cycles(parse_number(value)?),
        "off" => T::Offset(parse_number(value)?),
        "addr" => T::Address(symbols::parse_address(value)?),
        "fn" => {
            if images.is_empty() {
                return Err(format!("--seek {pos}: finding a function needs its ELF file (--image)").into());
            }
            let sym = symbols::Symbolizer::from_image_args(images).map_err(|e| e.to_string())?;
            let (target, fuzzy) = tracesight::capture::function_entries(&sym, value).map_err(|e| format!("--seek {pos}: {e}"))?;
            if let Some(name) = fuzzy {
                eprintln!("tracesight: no function is named '{value}'; using the best match, {name}");
            }
            target
        }
        _ => {
            return Err(format!(
                "--seek {pos}: expected an element number, instr:N, ts:VALUE, cc:VALUE, off:BYTES, addr:HEX or fn:NAME"
            ).into())
        }
    })
}

/// `decode --seek`: elements from a position, through the index.
#[allow(clippy::too_many_arguments)]
fn seek_decode(
    plan: &BufferPlan,
    file: &TraceFile,
    opts: &RunOptions,
    pos: &str,
    count: u64,
    images: &[String],
    opencsd: bool,
    mut cursor: Option<&mut symbols::Cursor<'_>>,
    out: &mut ListingOutput,
) -> Result<ExitCode, CliError> {
    let target = parse_seek(pos, images)?;
    let mut idx = open_index(plan, file, &[Fragment::whole(file.len())], opts, &index::IndexOptions::default(), false)?;
    for r in &idx.rejected {
        eprintln!("tracesight: index {r}");
    }
    let mut io_err = None;
    // Elements already written: when the index turns out wrong for the
    // trace part way (a changed segment, wrong totals), it is rebuilt once
    // and the seek goes on after them. What was written came from segments
    // that checked out, which the rebuilt index numbers the same way.
    let mut written = 0u64;
    let mut rebuilt = false;
    loop {
        let seeker = index::Seeker::over_file(plan, file, opts, &idx.file);
        let res = seeker.find(&target).and_then(|start| {
            let Some(start) = start else { return Ok(None) };
            seeker
                .each(start + written, count - written, |n| {
                    if io_err.is_some() {
                        return;
                    }
                    written += 1;
                    if opencsd {
                        element::write_opencsd_line(&mut out.buf, n.element);
                    } else {
                        jsonl::write_element(&mut out.buf, Some(n.number), n.element, cursor.as_deref_mut());
                        out.buf.push('\n');
                    }
                    if let Err(e) = out.maybe_flush() {
                        io_err = Some(e);
                    }
                })
                .map(|()| Some(start))
        });
        match res {
            Err(e) if e.needs_rebuild() && !rebuilt && io_err.is_none() => {
                eprintln!("tracesight: index {}: {e}; rebuilt", idx.path.display());
                idx = open_index(plan, file, &[Fragment::whole(file.len())], opts, &index::IndexOptions::default(), true)?;
                rebuilt = true;
            }
            Err(e) => return Err(e.to_string().into()),
            Ok(None) if written == 0 => {
                eprintln!("tracesight: --seek {pos}: no element there (the trace has {} elements)", idx.file.totals().elements);
                return Ok(ExitCode::from(1));
            }
            Ok(_) => break,
        }
    }
    match io_err {
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Some(e) => Err(format!("writing output: {e}").into()),
        None => Ok(ExitCode::SUCCESS),
    }
}
