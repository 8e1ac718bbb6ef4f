//! One opened capture: the snapshot, the buffer to decode, its mapped trace,
//! the run options, the symbols of its program, and positions in it.
//!
//! The command line (`decode --seek`, `export`) and the viewer open captures
//! the same way through this module, so a position typed in either means the
//! same element.

pub mod perf;

use std::path::{Path, PathBuf};

use crate::index::{self, BuildProgress, Index, IndexOptions, SeekTarget, Seeker};
use crate::input::{Snapshot, TraceFile};
use crate::protocol::etm4::decoder::DecoderOptions;
use crate::session::{BufferPlan, Fragment, RunOptions};
use crate::symbols::{self, Symbolizer};

/// Why a capture could not be opened or a position in it not read.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The snapshot could not be read.
    #[error("{0}")]
    Input(#[from] crate::input::InputError),
    /// The perf.data could not be read.
    #[error("{0}")]
    Perf(#[from] crate::input::perf::PerfError),
    /// The buffer could not be planned or opened.
    #[error("{0}")]
    Session(#[from] crate::session::SessionError),
    /// An `--image` file could not be mapped.
    #[error("{0}")]
    Image(#[from] crate::image::ImageError),
    /// An `--image` file could not be read for symbols, or an address
    /// did not parse.
    #[error("{0}")]
    Symbols(#[from] crate::symbols::SymbolError),
    /// The index could not be opened or built.
    #[error("{0}")]
    Index(#[from] index::IndexError),
    #[error("{}: no such file or directory", path.display())]
    NoSuchPath { path: PathBuf },
    #[error("{}: expected an OpenCSD snapshot directory (with snapshot.ini) or a perf.data file", path.display())]
    NotACapture { path: PathBuf },
    #[error("{}: the snapshot defines no trace buffers", path.display())]
    NoBuffers { path: PathBuf },
    /// `--cpu` names a CPU the recording has no trace of.
    #[error("--cpu {cpu}: the recording has no trace of that CPU (CPUs: {})", known.join(", "))]
    NoSuchCpu { cpu: u32, known: Vec<String> },
    /// An ELF file has no loadable segment to place.
    #[error("no loadable segment")]
    NoLoadSegment,
    /// No segment of an ELF file holds the file offset a mapping starts at.
    #[error("no segment holds the mapped part")]
    NoMappedSegment,
    #[error("'{text}' is not a number")]
    BadNumber { text: String },
    /// A position (`fn:NAME`, `addr:HEX`...) that could not be used.
    #[error("{position}: {source}")]
    Position { position: String, source: Box<CaptureError> },
    #[error("{position}: finding a function needs its ELF file (--image)")]
    NeedsImage { position: String },
    #[error("{position}: expected an element number, instr:N, ts:VALUE, cc:VALUE, off:BYTES, addr:HEX or fn:NAME")]
    UnknownPosition { position: String },
    #[error("no function matches '{name}'")]
    NoFunction { name: String },
}

/// How to open a capture.
#[derive(Clone, Debug, Default)]
pub struct CaptureOptions {
    /// `ELF[@ADDRESS]` arguments: code for the program image and symbols.
    pub images: Vec<String>,
    /// Buffer name in trace.ini (default: the first buffer).
    pub source: Option<String>,
    /// Read DSTREAM-framed buffers as DSTREAM captures.
    pub dstream: bool,
    /// Decoder options (OpenCSD's switches).
    pub decoder: DecoderOptions,
    /// Do not look for ELF files inside the snapshot directory.
    pub no_auto_images: bool,
    /// perf.data: directories to look for the recorded binaries in.
    pub symdirs: Vec<PathBuf>,
    /// perf.data: the kernel image (vmlinux) for kernel addresses.
    pub kernel: Option<PathBuf>,
    /// perf.data: decode only this CPU's trace.
    pub cpu: Option<u32>,
    /// Do not read symbols from the images (a command that only decodes,
    /// such as `index`, need not pay for DWARF).
    pub no_symbols: bool,
    /// Where the viewer looks for source files first (`--source-root`),
    /// before the places next to the capture.
    pub source_roots: Vec<PathBuf>,
    /// Source path rewrites, OLD to NEW (`--substitute-path OLD=NEW`).
    pub substitutions: Vec<(String, String)>,
    /// Timestamp ticks per second, when the user knows them (`--ts-freq`).
    pub ts_freq: Option<f64>,
}

/// A capture ready to decode and seek.
pub struct Capture {
    pub path: PathBuf,
    /// The snapshot a snapshot capture was read from (`None` for a perf.data).
    pub snapshot: Option<Snapshot>,
    pub plan: BufferPlan,
    pub file: TraceFile,
    /// The stretches of `file` decoded from fresh decoders, in file order:
    /// the whole buffer for a snapshot, the AUX fragments of a perf.data.
    pub fragments: Vec<Fragment>,
    pub opts: RunOptions,
    /// Symbols of the `--image` files and of ELF files found in the
    /// snapshot directory; `None` when there are none.
    pub symbols: Option<Symbolizer>,
    /// The image arguments the symbols came from (given and found).
    pub image_args: Vec<String>,
    /// Warnings worth showing (snapshot, plan and image notes).
    pub warnings: Vec<String>,
    /// What a perf.data capture knows besides the plan (`None` for a
    /// snapshot).
    pub perf: Option<perf::PerfInfo>,
}

impl Capture {
    /// Open a snapshot directory or a perf.data file.
    pub fn open(path: &Path, copts: &CaptureOptions) -> Result<Capture, CaptureError> {
        if perf::is_perf_data(path) {
            return perf::open(path, copts);
        }
        let snapshot = open_snapshot(path)?;
        let mut warnings: Vec<String> = snapshot.warnings.iter().map(|w| w.to_string()).collect();
        let buffer = match &copts.source {
            Some(name) => snapshot.buffer(name)?.clone(),
            None => snapshot.default_buffer().ok_or_else(|| CaptureError::NoBuffers { path: path.to_path_buf() })?.clone(),
        };
        let mut plan = BufferPlan::new(&snapshot, &buffer)?;
        for a in &copts.images {
            let (p, load) = crate::image::elf::parse_image_arg(a)?;
            plan.add_elf_image(&p, load)?;
        }
        warnings.extend(plan.notes.iter().cloned());
        let file = plan.open()?;
        let mut image_args = copts.images.clone();
        if !copts.no_auto_images {
            image_args.extend(elf_files_in(path).into_iter().map(|p| p.display().to_string()));
        }
        let symbols = if image_args.is_empty() || copts.no_symbols {
            None
        } else {
            let mut sym = Symbolizer::new();
            for a in &image_args {
                match sym.add_image_arg(a) {
                    Ok(_) => {}
                    // Given files must load; found ones are only a convenience.
                    Err(e) if copts.images.contains(a) => return Err(e.into()),
                    Err(e) => warnings.push(format!("{a}: not used for symbols: {e}")),
                }
            }
            for im in sym.images() {
                for n in im.notes() {
                    warnings.push(format!("{}: {n}", im.path().display()));
                }
            }
            (!sym.images().is_empty()).then_some(sym)
        };
        let opts = RunOptions { dstream: copts.dstream, decoder: copts.decoder, ..RunOptions::default() };
        let fragments = vec![Fragment::whole(file.len())];
        Ok(Capture {
            path: path.to_path_buf(),
            snapshot: Some(snapshot),
            plan,
            file,
            fragments,
            opts,
            symbols,
            image_args,
            warnings,
            perf: None,
        })
    }

    /// The buffer's index: reused when valid, else built on all cores
    /// (`progress` can be read from another thread meanwhile). Pages behind
    /// the build are given back so a multi-gigabyte capture does not stay
    /// resident.
    pub fn open_index(&self, iopts: &IndexOptions, rebuild: bool, progress: &BuildProgress) -> Result<Index, CaptureError> {
        let file = &self.file;
        let release = |a: usize, b: usize| file.release(a, b);
        index::open_or_build_fragments(
            &self.plan,
            self.file.bytes(),
            &self.fragments,
            &self.opts,
            iopts,
            rebuild,
            progress,
            Some(&release),
        )
        .map_err(CaptureError::from)
    }

    /// The element a position ([`Capture::parse_position`]) given as the
    /// option `--flag` names, found through `seeker`; `None` past the last
    /// element. A function name that matches none exactly is told to
    /// `on_fuzzy` (with the name used) before the search, which may take a
    /// while.
    pub fn find_position(
        &self,
        seeker: &Seeker<'_>,
        flag: &str,
        pos: &str,
        on_fuzzy: impl FnOnce(&str),
    ) -> Result<Option<u64>, PositionError> {
        let (target, fuzzy) = self.parse_position(pos).map_err(|source| PositionError::Invalid {
            flag: flag.to_string(),
            position: pos.to_string(),
            source: Box::new(source),
        })?;
        if let Some(name) = fuzzy {
            on_fuzzy(&name);
        }
        Ok(seeker.find(&target)?)
    }

    /// [`Capture::find_position`] for a command's `--flag` option, saying
    /// on standard error which function a fuzzy name was taken for.
    pub fn find_option(&self, seeker: &Seeker<'_>, flag: &str, pos: &str) -> Result<Option<u64>, PositionError> {
        self.find_position(seeker, flag, pos, |name| {
            eprintln!("tracesight: --{flag} {pos}: no function has that name; using the best match, {name}")
        })
    }

    pub fn seeker<'a>(&'a self, index: &'a index::format::IndexFile) -> Seeker<'a> {
        Seeker::with_fragments(&self.plan, self.file.bytes(), &self.fragments, &self.opts, index).releasing(&self.file)
    }

    /// The CPU whose trace `trace_id` is (a perf.data's sources know it).
    pub fn cpu_of(&self, trace_id: u8) -> Option<u32> {
        self.plan.sources.iter().find(|s| s.trace_id == Some(trace_id)).and_then(|s| s.cpu)
    }

    /// Parse a position: an element number, `instr:N`, `ts:VALUE`,
    /// `cc:VALUE`, `off:BYTES`, `addr:HEX` or `fn:NAME`. A function name that
    /// matches none exactly takes the best fuzzy match, named in the second
    /// value.
    pub fn parse_position(&self, pos: &str) -> Result<(SeekTarget, Option<String>), CaptureError> {
        let (kind, value) = pos.split_once(':').unwrap_or(("", pos));
        Ok((
            match kind {
                "" => SeekTarget::Element(parse_number(value)?),
                "instr" => SeekTarget::Instruction(parse_number(value)?),
                "ts" => SeekTarget::Timestamp(parse_number(value)?),
                "cc" => SeekTarget::Cycles(parse_number(value)?),
                "off" => SeekTarget::Offset(parse_number(value)?),
                "addr" => SeekTarget::Address(symbols::parse_address(value)?),
                "fn" => {
                    let Some(sym) = &self.symbols else {
                        return Err(CaptureError::NeedsImage { position: pos.to_string() });
                    };
                    return function_entries(sym, value)
                        .map_err(|e| CaptureError::Position { position: pos.to_string(), source: Box::new(e) });
                }
                _ => return Err(CaptureError::UnknownPosition { position: pos.to_string() }),
            },
            None,
        ))
    }
}

/// Why a position could not be found.
#[derive(Debug, thiserror::Error)]
pub enum PositionError {
    /// The position given with `--flag` is not one of the forms
    /// [`Capture::parse_position`] reads (or names a function the symbols
    /// do not have); `source` says what was expected.
    #[error("--{flag} {source}")]
    Invalid { flag: String, position: String, source: Box<CaptureError> },
    /// The index could not be used to find it.
    #[error(transparent)]
    Seek(#[from] index::IndexError),
}

/// What `index` reports about a capture's index `idx`, opened or built
/// (taking `took`) with checkpoints every `interval` bytes: why an older
/// file was rejected, the file, the totals, and per trace ID (per CPU for a
/// perf.data) the elements and instructions.
pub fn index_report(cap: &Capture, idx: &Index, took: std::time::Duration, interval: u64) -> String {
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
    if cap.perf.is_some() {
        let bytes: usize = cap.fragments.iter().map(|f| f.len()).sum();
        o.push_str(&format!(
            "perf.data: {} AUX fragments, {bytes} bytes of trace, {} checkpoints, {} packets, {} elements, {} instructions\n",
            cap.fragments.len(),
            f.len(),
            t.packets,
            t.elements,
            t.instructions
        ));
    } else {
        let len = cap.file.len();
        o.push_str(&format!(
            "buffer {}: {} bytes, {} checkpoints, {} packets, {} elements, {} instructions\n",
            cap.plan.buffer.name,
            len,
            f.len(),
            t.packets,
            t.elements,
            t.instructions
        ));
        if f.len() == 1 && len as u64 > interval {
            o.push_str("  note: this buffer's decode state cannot be saved (TPIU/DSTREAM framing): seeks decode from the start\n");
        }
    }
    if let Some(s) = f.stop() {
        o.push_str(&format!("  decode stopped early: {s}\n"));
    }
    let span = |a: u64, b: u64| if a == index::format::NONE { "none".to_string() } else { format!("{a}..{b}") };
    for s in f.id_summaries() {
        if cap.perf.is_some() {
            let cpu = cap.cpu_of(s.trace_id as u8).map_or("?".into(), |c| c.to_string());
            o.push_str(&format!(
                "  CPU {cpu} (trace ID 0x{:02x}): {} elements, {} instructions\n",
                s.trace_id, s.elements, s.instructions
            ));
        } else {
            o.push_str(&format!(
                "  trace ID 0x{:02x}: {} elements, {} instructions, timestamps {}, cycles {}\n",
                s.trace_id,
                s.elements,
                s.instructions,
                span(s.first_ts, s.last_ts),
                span(s.first_cc, s.last_cc)
            ));
        }
    }
    o
}

/// The functions the trace of a snapshot's default buffer enters (`info
/// --image`). An entry is an instruction range that starts at a function's
/// first address (a call, a tail call or a jump to its start); returns into
/// the middle of a function are not counted.
pub struct FunctionEntries {
    /// The buffer decoded.
    pub buffer: String,
    /// Every function of the symbols, with `entries` counted.
    pub table: symbols::FunctionTable,
    /// Instruction ranges decoded.
    pub ranges: u64,
    /// The decode stopped before the end of the buffer.
    pub stopped_early: bool,
}

impl FunctionEntries {
    /// The entered functions, most entered first (then by address).
    pub fn ranked(&self) -> Vec<&symbols::FunctionEntry> {
        let mut order: Vec<&symbols::FunctionEntry> = self.table.functions.iter().filter(|f| f.entries > 0).collect();
        order.sort_by(|a, b| b.entries.cmp(&a.entries).then(a.start().cmp(&b.start())));
        order
    }
}

/// Why a report on a capture could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// An `--image` argument was not usable.
    #[error(transparent)]
    Image(#[from] crate::image::ImageError),
    /// The buffer could not be planned, mapped or decoded.
    #[error(transparent)]
    Session(#[from] crate::session::SessionError),
}

/// Count how often the trace of `snap`'s default buffer (decoded over the
/// images of `image_args`) enters each function of `sym`; `None` when the
/// snapshot has no buffer.
pub fn count_function_entries(snap: &Snapshot, sym: &Symbolizer, image_args: &[String]) -> Result<Option<FunctionEntries>, ReportError> {
    use crate::element::ElementKind;
    use crate::session::Event;
    let mut table = sym.function_table();
    let Some(buffer) = snap.default_buffer() else { return Ok(None) };
    let mut plan = BufferPlan::new(snap, buffer)?;
    for a in image_args {
        let (path, load) = crate::image::elf::parse_image_arg(a)?;
        plan.add_elf_image(&path, load)?;
    }
    let file = plan.open()?;
    let opts = RunOptions { elements: true, ..RunOptions::default() };
    let mut ranges = 0u64;
    let summary = crate::session::run(&plan, file.bytes(), &opts, |ev| {
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
    })?;
    Ok(Some(FunctionEntries {
        buffer: buffer.name.clone(),
        table,
        ranges,
        stopped_early: summary.fatal.is_some() || summary.frame_error.is_some(),
    }))
}

/// The entry addresses of the function `name` (exact name, raw name or
/// alias; else the best fuzzy match, whose name is returned).
pub fn function_entries(sym: &Symbolizer, name: &str) -> Result<(SeekTarget, Option<String>), CaptureError> {
    let table = sym.function_table();
    let exact: Vec<&symbols::FunctionEntry> = table
        .functions
        .iter()
        .filter(|f| f.name == name || f.raw_name == name || f.aliases.iter().any(|a| a == name))
        .collect();
    let (chosen, note) = if !exact.is_empty() {
        (exact, None)
    } else {
        let hits = table.search(&symbols::SkimMatcher::new(), name);
        match hits.first() {
            Some(h) => {
                let f = &table.functions[h.index];
                (vec![f], Some(f.name.clone()))
            }
            None => return Err(CaptureError::NoFunction { name: name.to_string() }),
        }
    };
    Ok((SeekTarget::Entry(chosen.iter().flat_map(|f| f.ranges.iter().map(|r| r.start)).collect()), note))
}

/// Open a snapshot directory, saying what is wrong with a path that is not
/// one.
pub fn open_snapshot(path: &Path) -> Result<Snapshot, CaptureError> {
    if !path.exists() {
        return Err(CaptureError::NoSuchPath { path: path.to_path_buf() });
    }
    if !path.is_dir() {
        return Err(CaptureError::NotACapture { path: path.to_path_buf() });
    }
    Ok(Snapshot::open(path)?)
}

/// A decimal or 0x-prefixed hexadecimal number.
pub fn parse_number(s: &str) -> Result<u64, CaptureError> {
    let t = s.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    }
    .map_err(|_| CaptureError::BadNumber { text: s.to_string() })
}

/// ELF files directly inside a snapshot directory (the program a
/// synthesized or hand-made snapshot was taken of), by name.
fn elf_files_in(dir: &Path) -> Vec<PathBuf> {
    use std::io::Read;
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        if !p.is_file() {
            continue;
        }
        let mut magic = [0u8; 4];
        let is_elf = std::fs::File::open(&p).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"\x7fELF";
        if is_elf {
            out.push(p);
        }
    }
    out.sort();
    out
}
