//! The `tracesight` command.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod cli_perf;
use cli_perf::PerfArgs;

use tracesight::element::{self, ElementKind};
use tracesight::export::{self as export_lib, jsonl, ExportFormat, ExportRequest};
use tracesight::index;
use tracesight::symbols;
use tracesight::input::{Snapshot, TraceFile};
use tracesight::protocol::etm4::decoder::{DecoderOptions, SpecKind, SpecRecord};
use tracesight::session::{run, BufferPlan, Event, Fragment, RunOptions, SourceKind};

#[derive(Parser)]
#[command(
    name = "tracesight",
    version,
    about = "Decode and browse Arm CoreSight trace (ETE, ETMv4, ETMv3, PTM)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Capture to open in the viewer (an OpenCSD snapshot directory or a
    /// perf.data file). Without
    /// one, the bundled demo capture is opened.
    path: Option<PathBuf>,
    #[command(flatten)]
    capture: CaptureArgs,
}

/// How to open a capture (the viewer and `export`).
#[derive(clap::Args)]
struct CaptureArgs {
    /// ELF file with code and symbols, at its own addresses or with its lowest
    /// segment at @ADDRESS (hex) (repeatable). ELF files inside the snapshot
    /// directory are used for symbols without this.
    #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
    images: Vec<String>,
    /// Trace buffer to open, by its name in trace.ini (default: the first).
    #[arg(long)]
    source: Option<String>,
    /// Read dstream_coresight buffers as DSTREAM captures.
    #[arg(long)]
    dstream: bool,
    #[command(flatten)]
    perf: PerfArgs,
}

impl CaptureArgs {
    fn options(&self) -> tracesight::capture::CaptureOptions {
        tracesight::capture::CaptureOptions {
            images: self.images.clone(),
            source: self.source.clone(),
            dstream: self.dstream,
            decoder: DecoderOptions {
                instr_range_limit: env_number("OPENCSD_INSTR_RANGE_LIMIT").unwrap_or(0),
                aa64_opcode_check: env_flag("OPENCSD_ERR_ON_AA64_BAD_OPCODE"),
                // The viewer and export keep going after damage.
                recover: true,
                ..DecoderOptions::default()
            },
            no_auto_images: false,
            symdirs: self.perf.symdirs.clone(),
            kernel: self.perf.kernel.clone(),
            cpu: self.perf.cpu,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Decode a capture and print its packets.
    Decode(DecodeArgs),
    /// Describe a capture: buffers, trace sources and their configuration;
    /// with --image, the images and the functions the trace enters.
    Info {
        /// OpenCSD snapshot directory, or a perf.data file recorded with cs_etm.
        path: PathBuf,
        /// ELF file with symbols (and code), at its own addresses or with its
        /// lowest segment at @ADDRESS (hex) (repeatable).
        #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
        images: Vec<String>,
        /// How many functions to list, most entered first (0 = all).
        #[arg(long, default_value_t = 20)]
        functions: usize,
        #[command(flatten)]
        perf: PerfArgs,
    },
    /// Run an AArch64 program under qemu-aarch64 and write the ETE trace of its
    /// execution as an OpenCSD snapshot directory.
    Synth(tracesight::synth::cli::SynthArgs),
    /// Build (or refresh) the index of a capture and describe it: checkpoints,
    /// elements, instructions and time span per trace ID.
    Index(IndexArgs),
    /// Write a range of elements to a file: the OpenCSD listing, JSON lines,
    /// CSV, or function slices for ui.perfetto.dev.
    Export(ExportArgs),
    /// Print the function and file:line of each address, inline frames
    /// innermost first, in the layout of `addr2line -a -f -i -C`.
    Symbolize(SymbolizeArgs),
    /// Function statistics and profiles (stats, AutoFDO, BOLT, folded stacks,
    /// call graph) of a capture; `profile merge` sums profiles.
    Profile(tracesight::profile::cli::ProfileArgs),
}

#[derive(clap::Args)]
struct SymbolizeArgs {
    /// ELF file, at its own addresses or with its lowest segment at
    /// @ADDRESS (hex) (repeatable).
    #[arg(long = "image", value_name = "ELF[@ADDRESS]", required = true)]
    images: Vec<String>,
    /// Addresses in hex (with or without 0x); read from standard input when
    /// none are given.
    addrs: Vec<String>,
    /// Print each frame's source line under its file:line.
    #[arg(long)]
    show_source: bool,
    /// Directory to look for source files in (repeatable).
    #[arg(long = "source-root", value_name = "DIR")]
    source_roots: Vec<PathBuf>,
    /// Rewrite a source path prefix, as debuggers do (repeatable).
    #[arg(long = "substitute-path", value_name = "OLD=NEW")]
    substitutions: Vec<String>,
}

#[derive(clap::Args)]
struct DecodeArgs {
    /// OpenCSD snapshot directory or perf.data file.
    path: PathBuf,
    /// Add an ELF file's code to the program image, at its own addresses or,
    /// with @ADDRESS (hex), with its lowest segment there (repeatable).
    #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
    images: Vec<String>,
    /// List packets only (no instruction-level decode).
    #[arg(long, conflicts_with = "elements_only")]
    packets: bool,
    /// List decoded elements only (no packets).
    #[arg(long)]
    elements_only: bool,
    /// ETE: split source-address ranges on N atoms (trc_pkt_lister's -src_addr_n).
    #[arg(long)]
    src_addr_n: bool,
    /// Treat A64 opcodes whose top 16 bits are zero as invalid
    /// (trc_pkt_lister's -aa64_opcode_chk; also OPENCSD_ERR_ON_AA64_BAD_OPCODE=1).
    #[arg(long)]
    aa64_opcode_check: bool,
    /// Add the speculation view: the fate of every speculative (P0) element as
    /// traced — committed, canceled, corrected by a mispredict, discarded, lost
    /// or unresolved — and the packets that traced and resolved it.
    #[arg(long, conflicts_with = "packets")]
    speculation: bool,
    /// Stop decoding an instruction range after this many instructions and
    /// report an error (also OPENCSD_INSTR_RANGE_LIMIT); 0 = the default of
    /// 16777216 (2^24), which bounds the cost of a range over code that never
    /// branches.
    #[arg(long, default_value_t = 0)]
    instr_range_limit: u32,
    /// Keep going after a fatal decoder error (where trc_pkt_lister stops the
    /// whole buffer): report the gap (a message and a NO_SYNC element with
    /// reason fatal-error-resync) and resume at the trace ID's next sync
    /// point. The viewer, export and profile always decode this way.
    #[arg(long)]
    recover: bool,
    /// Only this trace ID, in hex (repeatable). For an unformatted buffer the
    /// packets are listed under ID 0, as trc_pkt_lister does.
    #[arg(long = "id", value_parser = parse_hex_id)]
    ids: Vec<u8>,
    /// Trace buffer to decode, by its name in trace.ini (default: the first
    /// [bufferN] section, as trc_pkt_lister).
    #[arg(long)]
    source: Option<String>,
    /// Decode every buffer of the snapshot in turn, resetting between them.
    #[arg(long)]
    multi_session: bool,
    /// Read dstream_coresight buffers as DSTREAM captures.
    #[arg(long)]
    dstream: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Opencsd)]
    format: Format,
    /// Write to this file instead of standard output (written under a
    /// temporary name, then renamed).
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Print elements from this position only, using the index (built first
    /// when missing): an element number, instr:N, ts:VALUE, cc:VALUE,
    /// off:BYTES, addr:HEX (next execution) or fn:NAME (next entry; needs
    /// --image).
    #[arg(long, value_name = "POS", conflicts_with_all = ["packets", "multi_session", "speculation"])]
    seek: Option<String>,
    /// With --seek: how many elements to print.
    #[arg(long, default_value_t = 50, requires = "seek")]
    count: u64,
    #[command(flatten)]
    perf: PerfArgs,
}

#[derive(clap::Args)]
struct ExportArgs {
    /// OpenCSD snapshot directory or perf.data file.
    path: PathBuf,
    /// First element: an element number, instr:N, ts:VALUE, cc:VALUE,
    /// off:BYTES, addr:HEX or fn:NAME (as decode --seek).
    #[arg(long, value_name = "POS", default_value = "0")]
    from: String,
    /// Where to stop (that element is not written), a position as for
    /// --from; default: the end of the trace.
    #[arg(long, value_name = "POS", conflicts_with = "count")]
    to: Option<String>,
    /// Write this many elements (instead of --to).
    #[arg(long)]
    count: Option<u64>,
    /// opencsd, jsonl, csv or perfetto; default: from the extension of the
    /// output file (.txt, .jsonl, .csv, .json).
    #[arg(long)]
    format: Option<ExportFormat>,
    /// The file to write (under a temporary name, renamed when complete).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    capture: CaptureArgs,
}

#[derive(clap::Args)]
struct IndexArgs {
    /// OpenCSD snapshot directory or perf.data file.
    path: PathBuf,
    /// Ignore any existing index and build it again.
    #[arg(long)]
    rebuild: bool,
    /// Trace buffer to index (default: the first, as decode).
    #[arg(long)]
    source: Option<String>,
    /// ELF files of the program image, as for decode (repeatable).
    #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
    images: Vec<String>,
    /// Read dstream_coresight buffers as DSTREAM captures.
    #[arg(long)]
    dstream: bool,
    /// Bytes of trace between checkpoints, in KiB.
    #[arg(long, default_value_t = 256)]
    interval_kib: u64,
    #[command(flatten)]
    perf: PerfArgs,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    /// Lines as OpenCSD's trc_pkt_lister prints them.
    Opencsd,
    /// One JSON object per packet.
    Jsonl,
}

fn parse_hex_id(s: &str) -> Result<u8, String> {
    let t = s.trim_start_matches("0x").trim_start_matches("0X");
    match u8::from_str_radix(t, 16) {
        Ok(v) if v < 0x70 => Ok(v),
        Ok(v) => Err(format!("trace ID 0x{v:x} is reserved; IDs are 0x00-0x6f")),
        Err(_) => Err(format!("'{s}' is not a hexadecimal trace ID")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Decode(args)) => decode(args),
        Some(Command::Info { path, images, perf, .. }) if cli_perf::is_perf(&path) => cli_perf::info(&path, &images, &perf),
        Some(Command::Info { path, images, functions, .. }) => info(&path, &images, functions),
        Some(Command::Symbolize(args)) => symbolize(args),
        Some(Command::Index(args)) => index_command(args),
        Some(Command::Export(args)) => export_command(args),
        Some(Command::Synth(args)) => tracesight::synth::cli::run(args).map_err(|e| e.to_string()),
        Some(Command::Profile(args)) => tracesight::profile::cli::run(args).map_err(|e| e.to_string()),
        None => {
            let path = cli.path.unwrap_or_else(demo_path);
            let copts = cli.capture.options();
            // Open once here so a bad path fails before the screen switches.
            tracesight::capture::Capture::open(&path, &copts)
                .map_err(|e| e.to_string())
                .and_then(|_| tracesight::tui::run(&path, &copts).map_err(|e| e.to_string()))
                .map(|_| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("tracesight: {msg}");
            ExitCode::from(1)
        }
    }
}

fn demo_path() -> PathBuf {
    let beside_exe = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.join("../../assets/demo/snapshot")));
    let p = match beside_exe {
        Some(p) if p.is_dir() => p,
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/snapshot"),
    };
    p.canonicalize().unwrap_or(p)
}

/// Output sink: standard output, or a temporary file renamed into place at
/// the end so a reader never sees half a file.
struct Output {
    buf: String,
    out: Box<dyn Write>,
    tmp: Option<(PathBuf, PathBuf)>,
}

impl Drop for Output {
    /// An output that was never completed leaves no temporary file behind.
    fn drop(&mut self) {
        if let Some((tmp, _)) = &self.tmp {
            tracesight::outfile::discard(tmp);
        }
    }
}

impl Output {
    fn new(path: Option<&Path>) -> Result<Output, String> {
        match path {
            None => Ok(Output { buf: String::with_capacity(1 << 20), out: Box::new(io::stdout().lock()), tmp: None }),
            Some(p) => {
                tracesight::outfile::remove_on_signals();
                let (tmp, f) = tracesight::outfile::create_temp(p).map_err(|e| e.to_string())?;
                Ok(Output {
                    buf: String::with_capacity(1 << 20),
                    out: Box::new(io::BufWriter::with_capacity(1 << 20, f)),
                    tmp: Some((tmp, p.to_path_buf())),
                })
            }
        }
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 20 {
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
    fn close(mut self) -> Result<(), String> {
        let name = self.tmp.as_ref().map(|(_, p)| p.display().to_string()).unwrap_or_else(|| "stdout".into());
        match self.flush_buf().and_then(|_| self.out.flush()) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            r => r.map_err(|e| format!("{name}: {e}"))?,
        }
        self.out = Box::new(io::sink());
        if let Some((tmp, dest)) = self.tmp.take() {
            tracesight::outfile::commit(&tmp, &dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        }
        Ok(())
    }
}

use tracesight::capture::open_snapshot;

/// Refuse an output file that is one of the run's inputs: the capture file
/// itself (a perf.data), a file of its snapshot, or an `--image` ELF.
fn refuse_input_output(out: Option<&Path>, capture: &Path, snap: Option<&Snapshot>, images: &[String]) -> Result<(), String> {
    let Some(out) = out else { return Ok(()) };
    let mut inputs = vec![capture.to_path_buf()];
    inputs.extend(snap.map(Snapshot::input_files).unwrap_or_default());
    inputs.extend(images.iter().filter_map(|a| tracesight::image::elf::parse_image_arg(a).ok()).map(|(p, _)| p));
    tracesight::outfile::refuse_inputs(out, &inputs).map_err(|e| e.to_string())
}

/// OpenCSD's environment switches, honoured for scripts written for it.
fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

fn env_number(name: &str) -> Option<u32> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn decode(args: DecodeArgs) -> Result<ExitCode, String> {
    if cli_perf::is_perf(&args.path) {
        return cli_perf::decode(&args);
    }
    let snap = open_snapshot(&args.path).map_err(|e| e.to_string())?;
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
        .collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    for buffer in &buffers {
        let mut plan = BufferPlan::new(&snap, buffer).map_err(|e| e.to_string())?;
        for (path, load) in &images {
            plan.add_elf_image(path, *load).map_err(|e| e.to_string())?;
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
    let mut out = Output::new(args.output.as_deref())?;
    if opencsd && args.seek.is_none() {
        out.buf.push_str(&format!("Trace Packet Lister : reading snapshot from path {}\n", args.path.display()));
    }
    let show_packets = !args.elements_only;
    let elements = !args.packets;
    let limit = if args.instr_range_limit > 0 {
        args.instr_range_limit
    } else {
        env_number("OPENCSD_INSTR_RANGE_LIMIT").unwrap_or(0)
    };
    let mut opts = RunOptions {
        ids: args.ids.clone(),
        dstream: args.dstream,
        elements,
        decoder: DecoderOptions {
            src_addr_n: args.src_addr_n,
            aa64_opcode_check: args.aa64_opcode_check || env_flag("OPENCSD_ERR_ON_AA64_BAD_OPCODE"),
            instr_range_limit: limit,
            speculation: args.speculation,
            recover: args.recover,
        },
        after_reset: false,
        quiet_ends: false,
    };
    if let Some(pos) = &args.seek {
        let (plan, file) = &planned[0];
        let code = seek_decode(plan, file, &opts, pos, args.count, &args.images, opencsd, cursor.as_mut(), &mut out)?;
        out.close()?;
        return Ok(code);
    }
    let multi = args.multi_session && args.source.is_none();
    let mut failure = None;
    for (i, (plan, file)) in planned.iter().enumerate() {
        let buffer = &plan.buffer;
        for n in &plan.notes {
            eprintln!("tracesight: warning: {n}");
        }
        if opencsd {
            if multi {
                out.buf.push_str(&format!(
                    "####### Multi Session decode: Buffer {} of {}; Source name = {}.\n\n",
                    i + 1,
                    buffers.len(),
                    buffer.name
                ));
            } else {
                out.buf.push_str(&format!("Using {} as trace source\n", buffer.name));
            }
            let raw = plan.frame_mode(args.dstream).is_none();
            for s in plan.sources.iter().filter(|_| show_packets) {
                if let (Some(id), true) = (s.trace_id, s.kind.is_decoded()) {
                    let shown = if raw { 0 } else { id };
                    out.buf.push_str(&format!(
                        "Trace Packet Lister : Protocol printer {} on Trace ID 0x{:x}\n",
                        s.protocol_name(),
                        shown
                    ));
                }
            }
        }
        if opencsd && elements && i == 0 {
            out.buf.push_str("Trace Packet Lister : Set trace element decode printer\n");
            out.buf.push_str("Gen_Info : Mapped Memory Accessors\n");
            for r in plan.image.regions() {
                out.buf.push_str(&format!(
                    "Gen_Info : FileAcc; Range::0x{:x}:{:x}; Mem Space::{}\nFilename={}\n",
                    r.start,
                    r.last,
                    r.space.name(),
                    r.path.display()
                ));
            }
            out.buf.push_str("Gen_Info : ========================\n");
        }
        opts.after_reset = multi && i > 0;
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
                        jsonl::write_element(&mut out.buf, None, e, cursor.as_mut());
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
                    eprintln!("tracesight: {}: trace ID 0x{trace_id:x} skipped: {reason}", buffer.path.display());
                }
                Event::EndOfTrace { stream_id, .. } => {
                    if opencsd && show_packets {
                        out.buf.push_str(&format!("ID:{stream_id:x}\tEND OF TRACE DATA\n"));
                    }
                }
            }
        })
        .map_err(|e| e.to_string())?;
        if let Some(e) = io_err {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(format!("writing output: {e}"));
        }
        if let Some(f) = &summary.fatal {
            eprintln!("tracesight: {}: decode stopped: {f}", buffer.path.display());
            failure = Some(f.clone());
            if opencsd {
                out.buf.push_str("Trace Packet Lister : Data Path fatal error\n");
            }
        }
        if let Some(f) = &summary.fatal_at_end {
            // trc_pkt_lister's listing has no line for this; stderr says it.
            eprintln!("tracesight: {}: decode stopped at the end of the trace: {f}", buffer.path.display());
        }
        if let Some(e) = &summary.frame_error {
            eprintln!("tracesight: {}: {e}", buffer.path.display());
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
            out.buf.push_str(&format!(
                "Trace Packet Lister : Trace buffer done, processed {} bytes.\n",
                summary.bytes_processed
            ));
        }
    }
    out.close()?;
    Ok(if failure.is_some() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Speculation-view line; it starts with `Idx:` like the others but is neither
/// a packet nor an OCSD element, so OpenCSD-format comparisons ignore it.
fn write_spec_line(out: &mut String, r: &SpecRecord) {
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

fn write_spec_json(out: &mut String, r: &SpecRecord) {
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

/// Progress of a long job on standard error, when it is a terminal: `f`
/// stores its progress, `describe` turns it into the text shown. Jobs of less
/// than `threshold` show nothing.
fn with_progress<T>(
    total: u64,
    threshold: u64,
    describe: impl Fn(u64) -> String + Sync,
    f: impl FnOnce(&std::sync::atomic::AtomicU64) -> T,
) -> T {
    use std::io::IsTerminal;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let done = AtomicU64::new(0);
    let finished = AtomicBool::new(false);
    if !io::stderr().is_terminal() || total < threshold {
        return f(&done);
    }
    std::thread::scope(|sc| {
        sc.spawn(|| {
            while !finished.load(Ordering::Relaxed) {
                eprint!("\rtracesight: {}", describe(done.load(Ordering::Relaxed)));
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            eprint!("\r\x1b[K");
        });
        let r = f(&done);
        finished.store(true, Ordering::Relaxed);
        r
    })
}

use tracesight::capture::parse_number;

/// `tracesight export`: a range of elements to a file, through the index.
fn export_command(args: ExportArgs) -> Result<ExitCode, String> {
    let format = match args.format {
        Some(f) => f,
        None => ExportFormat::from_path(&args.output).ok_or_else(|| {
            format!(
                "{}: give --format (opencsd, jsonl, csv or perfetto); the file name does not say which",
                args.output.display()
            )
        })?,
    };
    let copts = args.capture.options();
    let cap = tracesight::capture::Capture::open(&args.path, &copts).map_err(|e| e.to_string())?;
    for w in &cap.warnings {
        eprintln!("tracesight: warning: {w}");
    }
    let idx = open_index(&cap.plan, &cap.file, &cap.fragments, &cap.opts, &index::IndexOptions::default(), false)?;
    for r in &idx.rejected {
        eprintln!("tracesight: index {r}");
    }
    let seeker = cap.seeker(&idx.file);
    let total = idx.file.totals().elements;
    let find = |flag: &str, pos: &str| -> Result<Option<u64>, String> {
        let (target, fuzzy) = cap.parse_position(pos).map_err(|e| format!("--{flag} {e}"))?;
        if let Some(name) = fuzzy {
            eprintln!("tracesight: --{flag} {pos}: no function has that name; using the best match, {name}");
        }
        seeker.find(&target).map_err(|e| e.to_string())
    };
    let from = match find("from", &args.from)? {
        Some(n) => n,
        // The end itself is a valid start: an empty export (a trace with no
        // elements still gives a well-formed file).
        None if parse_number(&args.from).ok() == Some(total) => total,
        None => return Err(format!("--from {}: no element there (the trace has {total} elements)", args.from)),
    };
    let to = match (&args.to, args.count) {
        // A position past the last element means the end of the trace.
        (Some(pos), _) => find("to", pos)?.unwrap_or(total),
        (None, Some(n)) => from.saturating_add(n).min(total),
        (None, None) => total,
    };
    if to < from {
        return Err(format!("--to {}: element {to} comes before the --from element {from}", args.to.unwrap_or_default()));
    }
    refuse_input_output(Some(&args.output), &cap.path, cap.snapshot.as_ref(), &cap.image_args)?;
    tracesight::outfile::remove_on_signals();
    let req = ExportRequest { from, to, format, path: args.output.clone() };
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let todo = to - from;
    let summary = with_progress(
        todo,
        1 << 20,
        |d| format!("exporting {:>5.1}% ({d} of {todo} elements)", d as f64 * 100.0 / todo.max(1) as f64),
        |p| export_lib::export(&cap, &seeker, &req, p, &cancel),
    )
    .map_err(|e| e.to_string())?;
    if io::IsTerminal::is_terminal(&io::stderr()) {
        eprintln!(
            "tracesight: wrote elements {from}..{} ({} elements, {} bytes) to {}",
            from + summary.elements,
            summary.elements,
            summary.bytes,
            summary.path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Open a buffer's index, building it (with a progress bar when standard
/// error is a terminal) when needed. The build reads the trace once: pages
/// behind each decoder are given back so a multi-gigabyte capture does not
/// stay resident.
fn open_index(
    plan: &BufferPlan,
    file: &TraceFile,
    fragments: &[Fragment],
    opts: &RunOptions,
    iopts: &index::IndexOptions,
    rebuild: bool,
) -> Result<index::Index, String> {
    use std::io::IsTerminal;
    use std::sync::atomic::{AtomicBool, Ordering};
    let data = file.bytes();
    let progress = index::BuildProgress::new();
    let release = |a: usize, b: usize| file.release(a, b);
    let over = AtomicBool::new(false);
    let show = io::stderr().is_terminal() && data.len() >= (64 << 20);
    std::thread::scope(|sc| {
        if show {
            sc.spawn(|| {
                let mut bar = None;
                while !over.load(Ordering::Relaxed) {
                    // Only once a build has started: an index that is up to
                    // date opens without one.
                    if progress.total() > 0 {
                        let b = bar.get_or_insert_with(|| {
                            let b = indicatif::ProgressBar::new(progress.total());
                            b.set_style(
                                indicatif::ProgressStyle::with_template(
                                    "indexing {bar:24} {percent:>3}% {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
                                )
                                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                            );
                            b
                        });
                        b.set_position(progress.done());
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
            });
        }
        let r = index::open_or_build_fragments(plan, data, fragments, opts, iopts, rebuild, &progress, Some(&release));
        over.store(true, Ordering::Relaxed);
        r
    })
    .map_err(|e| e.to_string())
}

fn parse_seek(pos: &str, images: &[String]) -> Result<index::SeekTarget, String> {
    use index::SeekTarget as T;
    let (kind, value) = pos.split_once(':').unwrap_or(("", pos));
    Ok(match kind {
        "" => T::Element(parse_number(value).map_err(|e| e.to_string())?),
        "instr" => T::Instruction(parse_number(value).map_err(|e| e.to_string())?),
        "ts" => T::Timestamp(parse_number(value).map_err(|e| e.to_string())?),
        "cc" => T::Cycles(parse_number(value).map_err(|e| e.to_string())?),
        "off" => T::Offset(parse_number(value).map_err(|e| e.to_string())?),
        "addr" => T::Address(symbols::parse_address(value).map_err(|e| e.to_string())?),
        "fn" => {
            if images.is_empty() {
                return Err(format!("--seek {pos}: finding a function needs its ELF file (--image)"));
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
            ))
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
    out: &mut Output,
) -> Result<ExitCode, String> {
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
            Err(e) => return Err(e.to_string()),
            Ok(None) if written == 0 => {
                eprintln!("tracesight: --seek {pos}: no element there (the trace has {} elements)", idx.file.totals().elements);
                return Ok(ExitCode::from(1));
            }
            Ok(_) => break,
        }
    }
    match io_err {
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Some(e) => Err(format!("writing output: {e}")),
        None => Ok(ExitCode::SUCCESS),
    }
}

fn index_command(args: IndexArgs) -> Result<ExitCode, String> {
    if cli_perf::is_perf(&args.path) {
        return cli_perf::index(&args);
    }
    let snap = open_snapshot(&args.path).map_err(|e| e.to_string())?;
    let buffer = match &args.source {
        Some(name) => snap.buffer(name).map_err(|e| e.to_string())?.clone(),
        None => snap
            .default_buffer()
            .ok_or_else(|| format!("{}: the snapshot defines no trace buffers", args.path.display()))?
            .clone(),
    };
    let mut plan = BufferPlan::new(&snap, &buffer).map_err(|e| e.to_string())?;
    for a in &args.images {
        let (path, load) = tracesight::image::elf::parse_image_arg(a).map_err(|e| e.to_string())?;
        plan.add_elf_image(&path, load).map_err(|e| e.to_string())?;
    }
    let file = plan.open().map_err(|e| e.to_string())?;
    let data = file.bytes();
    let opts = RunOptions {
        dstream: args.dstream,
        decoder: DecoderOptions {
            instr_range_limit: env_number("OPENCSD_INSTR_RANGE_LIMIT").unwrap_or(0),
            aa64_opcode_check: env_flag("OPENCSD_ERR_ON_AA64_BAD_OPCODE"),
            ..DecoderOptions::default()
        },
        ..RunOptions::default()
    };
    // `index` reads the whole trace to check it against an existing index:
    // the only command that does (seeks check what they decode).
    let iopts = index::IndexOptions { interval: args.interval_kib.max(1) * 1024, verify: true, ..Default::default() };
    let t0 = std::time::Instant::now();
    let idx = open_index(&plan, &file, &[Fragment::whole(file.len())], &opts, &iopts, args.rebuild)?;
    let took = t0.elapsed();
    let f = &idx.file;
    let mut o = String::new();
    for r in &idx.rejected {
        o.push_str(&format!("rejected {r}\n"));
    }
    o.push_str(&format!(
        "index {} ({}, {} bytes)\n",
        idx.path.display(),
        if idx.built { format!("built in {:.2} s", took.as_secs_f64()) } else { "up to date".into() },
        f.file_len()
    ));
    let t = f.totals();
    o.push_str(&format!(
        "buffer {}: {} bytes, {} checkpoints, {} packets, {} elements, {} instructions\n",
        buffer.name,
        data.len(),
        f.len(),
        t.packets,
        t.elements,
        t.instructions
    ));
    if f.len() == 1 && data.len() as u64 > iopts.interval {
        o.push_str("  note: this buffer's decode state cannot be saved (TPIU/DSTREAM framing): seeks decode from the start\n");
    }
    if let Some(s) = f.stop() {
        o.push_str(&format!("  decode stopped early: {s}\n"));
    }
    let span = |a: u64, b: u64| {
        if a == index::format::NONE {
            "none".to_string()
        } else {
            format!("{a}..{b}")
        }
    };
    for s in f.id_summaries() {
        o.push_str(&format!(
            "  trace ID 0x{:02x}: {} elements, {} instructions, timestamps {}, cycles {}\n",
            s.trace_id,
            s.elements,
            s.instructions,
            span(s.first_ts, s.last_ts),
            span(s.first_cc, s.last_cc)
        ));
    }
    print!("{o}");
    Ok(ExitCode::SUCCESS)
}

fn symbolize(args: SymbolizeArgs) -> Result<ExitCode, String> {
    let sym = symbols::Symbolizer::from_image_args(&args.images).map_err(|e| e.to_string())?;
    for im in sym.images() {
        for n in im.notes() {
            eprintln!("tracesight: {}: {n}", im.path().display());
        }
    }
    let mut words = args.addrs.clone();
    if words.is_empty() {
        let mut text = String::new();
        io::Read::read_to_string(&mut io::stdin(), &mut text).map_err(|e| format!("standard input: {e}"))?;
        words = text.split_whitespace().map(str::to_string).collect();
    }
    let addrs = words.iter().map(|a| symbols::parse_address(a)).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    let text = if args.show_source {
        let resolver = symbols::SourceResolver::from_args(&args.source_roots, &args.substitutions).map_err(|e| e.to_string())?;
        with_source_lines(&symbols::symbolize_text(&sym, &addrs), &resolver)
    } else {
        symbols::symbolize_text(&sym, &addrs)
    };
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|_| stdout.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Under every `file:line` line of an addr2line-style listing, the source
/// line itself (indented), or why it cannot be shown.
fn with_source_lines(listing: &str, resolver: &symbols::SourceResolver) -> String {
    let mut files: std::collections::HashMap<String, Result<Vec<String>, String>> = Default::default();
    let mut out = String::with_capacity(listing.len() * 2);
    for line in listing.lines() {
        out.push_str(line);
        out.push('\n');
        let loc = line.split(" (discriminator").next().unwrap_or(line);
        let Some((file, num)) = loc.rsplit_once(':') else { continue };
        let Ok(num) = num.trim().parse::<usize>() else { continue };
        if file == "??" || file.starts_with("0x") {
            continue;
        }
        let text = files.entry(file.to_string()).or_insert_with(|| match resolver.resolve(file) {
            symbols::SourceLookup::Found(p) => fs::read_to_string(&p)
                .map(|t| t.lines().map(str::to_string).collect())
                .map_err(|e| format!("{}: {e}", p.display())),
            nf => Err(nf.to_string()),
        });
        match text {
            Ok(lines) => match num.checked_sub(1).and_then(|i| lines.get(i)) {
                Some(t) => out.push_str(&format!("    {}\n", t.trim_end())),
                None if num == 0 => {}
                None => out.push_str(&format!("    ({file} has {} lines, not {num})\n", lines.len())),
            },
            Err(why) => out.push_str(&format!("    (source not shown: {why})\n")),
        }
    }
    out
}

fn info(path: &Path, image_args: &[String], top: usize) -> Result<ExitCode, String> {
    if path.is_file() {
        return perf_info(path);
    }
    let snap = open_snapshot(path).map_err(|e| e.to_string())?;
    let mut o = String::new();
    o.push_str(&format!("snapshot: {}\n", path.display()));
    if let Some(d) = &snap.description {
        o.push_str(&format!("description: {d}\n"));
    }
    for w in &snap.warnings {
        o.push_str(&format!("warning: {w}\n"));
    }
    for buffer in snap.buffers() {
        let size = fs::metadata(&buffer.path).map(|m| m.len().to_string()).unwrap_or_else(|_| "missing".into());
        o.push_str(&format!(
            "\nbuffer {} ({}): {}, {} bytes\n",
            buffer.name,
            buffer.file,
            buffer.format.as_str(),
            size
        ));
        match BufferPlan::new(&snap, buffer) {
            Err(e) => o.push_str(&format!("  error: {e}\n")),
            Ok(plan) => {
                for n in &plan.notes {
                    o.push_str(&format!("  warning: {n}\n"));
                }
                for s in &plan.sources {
                    let id = s.trace_id.map(|i| format!("0x{i:02x}")).unwrap_or_else(|| "?".into());
                    o.push_str(&format!("  source {} ({}), trace ID {id}\n", s.name, s.device_type));
                    match &s.kind {
                        SourceKind::Unsupported { protocol } => {
                            o.push_str(&format!("    {protocol}: not decoded by this version\n"));
                        }
                        kind => {
                            for (k, v) in kind.describe() {
                                o.push_str(&format!("    {k}: {v}\n"));
                            }
                        }
                    }
                }
            }
        }
    }
    if !image_args.is_empty() {
        o.push_str(&function_report(&snap, image_args, top)?);
    }
    print!("{o}");
    Ok(ExitCode::SUCCESS)
}

/// `info` on a perf.data file: the recording as read (binaries as recorded;
/// finding them on disk is the capture layer's).
fn perf_info(path: &Path) -> Result<ExitCode, String> {
    let data = tracesight::input::perf::PerfData::open(path).map_err(|e| e.to_string())?;
    print!("{}", tracesight::input::perf::describe(&data));
    Ok(ExitCode::SUCCESS)
}

/// The images and their symbol detail, then the functions the trace of the
/// default buffer enters, most entered first. An entry is an instruction
/// range that starts at a function's first address (a call, a tail call or a
/// jump to its start); returns into the middle of a function are not counted.
fn function_report(snap: &Snapshot, image_args: &[String], top: usize) -> Result<String, String> {
    let mut o = String::new();
    let sym = symbols::Symbolizer::from_image_args(image_args).map_err(|e| e.to_string())?;
    o.push_str("\nimages:\n");
    for im in sym.images() {
        o.push_str(&format!("  {}\n", im.summary()));
        for n in im.notes() {
            o.push_str(&format!("    note: {n}\n"));
        }
    }
    let mut table = sym.function_table();
    let Some(buffer) = snap.default_buffer() else { return Ok(o) };
    let mut plan = BufferPlan::new(snap, buffer).map_err(|e| e.to_string())?;
    for a in image_args {
        let (path, load) = tracesight::image::elf::parse_image_arg(a).map_err(|e| e.to_string())?;
        plan.add_elf_image(&path, load).map_err(|e| e.to_string())?;
    }
    let file = plan.open().map_err(|e| e.to_string())?;
    let opts = RunOptions { elements: true, ..RunOptions::default() };
    let mut ranges = 0u64;
    let summary = run(&plan, file.bytes(), &opts, |ev| {
        if let Event::Element { element, .. } = ev {
            if let ElementKind::InstrRange { start, .. } = element.kind {
                ranges += 1;
                if let Some(i) = table.function_at(start) {
                    if table.functions[i].ranges.iter().any(|r| r.start == start) {
                        table.functions[i].entries += 1;
                    }
                }
            }
        }
    })
    .map_err(|e| e.to_string())?;
    let mut order: Vec<usize> = (0..table.functions.len()).filter(|&i| table.functions[i].entries > 0).collect();
    order.sort_by(|&a, &b| {
        let (fa, fb) = (&table.functions[a], &table.functions[b]);
        fb.entries.cmp(&fa.entries).then(fa.start().cmp(&fb.start()))
    });
    let shown = if top == 0 { order.len() } else { top.min(order.len()) };
    o.push_str(&format!(
        "\nfunctions entered in buffer {} ({} of {} functions; {ranges} instruction ranges decoded{}):\n",
        buffer.name,
        order.len(),
        table.functions.len(),
        if summary.fatal.is_some() || summary.frame_error.is_some() { ", decode stopped early" } else { "" }
    ));
    for &i in &order[..shown] {
        let f = &table.functions[i];
        o.push_str(&format!("  {:>10}  0x{:x}  {}\n", f.entries, f.start(), f.name));
    }
    if shown < order.len() {
        o.push_str(&format!("  ... {} more (--functions 0 lists all)\n", order.len() - shown));
    }
    Ok(o)
}
