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
        let symbols = if image_args.is_empty() {
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

    pub fn seeker<'a>(&'a self, index: &'a index::format::IndexFile) -> Seeker<'a> {
        Seeker::with_fragments(&self.plan, self.file.bytes(), &self.fragments, &self.opts, index).releasing(&self.file)
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
