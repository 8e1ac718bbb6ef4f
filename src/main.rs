//! The `tracesight` command.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use tracesight::input::Snapshot;
use tracesight::protocol::etm4::display;
use tracesight::session::{run_packets, BufferPlan, Event, RunOptions, SourceKind};

#[derive(Parser)]
#[command(name = "tracesight", version, about = "Decode and browse Arm CoreSight trace (ETE, ETMv4)")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Capture to open (an OpenCSD snapshot directory). Without one, the bundled
    /// demo capture is used. Until the viewer lands this lists its packets.
    path: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Decode a capture and print its packets.
    Decode(DecodeArgs),
    /// Describe a capture: buffers, trace sources and their configuration.
    Info {
        /// OpenCSD snapshot directory.
        path: PathBuf,
    },
}

#[derive(clap::Args)]
struct DecodeArgs {
    /// OpenCSD snapshot directory.
    path: PathBuf,
    /// List packets (the only decode level in this version).
    #[arg(long)]
    packets: bool,
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
        Some(Command::Info { path }) => info(&path),
        None => {
            let path = cli.path.unwrap_or_else(demo_path);
            decode(DecodeArgs {
                path,
                packets: true,
                ids: vec![],
                source: None,
                multi_session: false,
                dstream: false,
                format: Format::Opencsd,
                output: None,
            })
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

impl Output {
    fn new(path: Option<&Path>) -> Result<Output, String> {
        match path {
            None => Ok(Output { buf: String::with_capacity(1 << 20), out: Box::new(io::stdout().lock()), tmp: None }),
            Some(p) => {
                let name = p.file_name().ok_or_else(|| format!("{}: not a file name", p.display()))?;
                let tmp = p.with_file_name(format!(".{}.tmp{}", name.to_string_lossy(), std::process::id()));
                let f = fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
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
        drop(self.out);
        if let Some((tmp, dest)) = self.tmp {
            fs::rename(&tmp, &dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        }
        Ok(())
    }
}

fn open_snapshot(path: &Path) -> Result<Snapshot, String> {
    if !path.exists() {
        return Err(format!("{}: no such file or directory", path.display()));
    }
    if !path.is_dir() {
        return Err(format!(
            "{}: expected an OpenCSD snapshot directory (with snapshot.ini); other inputs are not supported yet",
            path.display()
        ));
    }
    Snapshot::open(path).map_err(|e| e.to_string())
}

fn decode(args: DecodeArgs) -> Result<ExitCode, String> {
    if !args.packets {
        return Err("only packet listing is available in this version: add --packets".into());
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
    let mut out = Output::new(args.output.as_deref())?;
    let opencsd = args.format == Format::Opencsd;
    if opencsd {
        out.buf.push_str(&format!("Trace Packet Lister : reading snapshot from path {}\n", args.path.display()));
    }
    let opts = RunOptions { ids: args.ids.clone(), dstream: args.dstream };
    let multi = args.multi_session && args.source.is_none();
    let mut failure = None;
    for (i, buffer) in buffers.iter().enumerate() {
        let plan = BufferPlan::new(&snap, buffer).map_err(|e| e.to_string())?;
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
            for s in &plan.sources {
                if let (Some(id), SourceKind::Etm4(_)) = (s.trace_id, &s.kind) {
                    let shown = if raw { 0 } else { id };
                    out.buf.push_str(&format!(
                        "Trace Packet Lister : Protocol printer {} on Trace ID 0x{:x}\n",
                        s.protocol_name(),
                        shown
                    ));
                }
            }
        }
        let file = plan.open().map_err(|e| e.to_string())?;
        let mut io_err = None;
        let summary = run_packets(&plan, file.bytes(), &opts, |ev| {
            if io_err.is_some() {
                return;
            }
            match ev {
                Event::Etm4 { source, stream_id, packet, raw } => {
                    let ete = matches!(&source.kind, SourceKind::Etm4(c) if c.is_ete());
                    if opencsd {
                        display::write_opencsd_line(&mut out.buf, stream_id, packet, raw, ete);
                    } else {
                        let id = source.trace_id.unwrap_or(stream_id);
                        display::write_json(&mut out.buf, id, packet, raw);
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
                    if opencsd {
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
                    if let (Some(id), SourceKind::Etm4(_)) = (s.trace_id, &s.kind) {
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

fn info(path: &Path) -> Result<ExitCode, String> {
    let snap = open_snapshot(path)?;
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
                        SourceKind::Etm4(cfg) => {
                            for (k, v) in cfg.describe() {
                                o.push_str(&format!("    {k}: {v}\n"));
                            }
                        }
                        SourceKind::Unsupported { protocol } => {
                            o.push_str(&format!("    {protocol}: not decoded by this version\n"));
                        }
                    }
                }
            }
        }
    }
    print!("{o}");
    Ok(ExitCode::SUCCESS)
}
