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
    pub fn open(path: &Path, copts: &CaptureOptions) -> Result<Capture, String> {
        if perf::is_perf_data(path) {
            return perf::open(path, copts);
        }
        let snapshot = open_snapshot(path)?;
        let mut warnings: Vec<String> = snapshot.warnings.iter().map(|w| w.to_string()).collect();
        let buffer = match &copts.source {
            Some(name) => snapshot.buffer(name).map_err(|e| e.to_string())?.clone(),
            None => snapshot
                .default_buffer()
                .ok_or_else(|| format!("{}: the snapshot defines no trace buffers", path.display()))?
                .clone(),
        };
        let mut plan = BufferPlan::new(&snapshot, &buffer).map_err(|e| e.to_string())?;
        for a in &copts.images {
            let (p, load) = crate::image::elf::parse_image_arg(a)?;
            plan.add_elf_image(&p, load)?;
        }
        warnings.extend(plan.notes.iter().cloned());
        let file = plan.open().map_err(|e| e.to_string())?;
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
                    Err(e) if copts.images.contains(a) => return Err(e.to_string()),
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
    pub fn open_index(&self, iopts: &IndexOptions, rebuild: bool, progress: &BuildProgress) -> Result<Index, String> {
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
        .map_err(|e| e.to_string())
    }

    pub fn seeker<'a>(&'a self, index: &'a index::format::IndexFile) -> Seeker<'a> {
        Seeker::with_fragments(&self.plan, self.file.bytes(), &self.fragments, &self.opts, index).releasing(&self.file)
    }

    /// Parse a position: an element number, `instr:N`, `ts:VALUE`,
    /// `cc:VALUE`, `off:BYTES`, `addr:HEX` or `fn:NAME`. A function name that
    /// matches none exactly takes the best fuzzy match, named in the second
    /// value.
    pub fn parse_position(&self, pos: &str) -> Result<(SeekTarget, Option<String>), String> {
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
                        return Err(format!("{pos}: finding a function needs its ELF file (--image)"));
                    };
                    return function_entries(sym, value).map_err(|e| format!("{pos}: {e}"));
                }
                _ => {
                    return Err(format!(
                        "{pos}: expected an element number, instr:N, ts:VALUE, cc:VALUE, off:BYTES, addr:HEX or fn:NAME"
                    ))
                }
            },
            None,
        ))
    }
}

/// The entry addresses of the function `name` (exact name, raw name or
/// alias; else the best fuzzy match, whose name is returned).
pub fn function_entries(sym: &Symbolizer, name: &str) -> Result<(SeekTarget, Option<String>), String> {
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
            None => return Err(format!("no function matches '{name}'")),
        }
    };
    Ok((SeekTarget::Entry(chosen.iter().flat_map(|f| f.ranges.iter().map(|r| r.start)).collect()), note))
}

/// Open a snapshot directory, saying what is wrong with a path that is not
/// one.
pub fn open_snapshot(path: &Path) -> Result<Snapshot, String> {
    if !path.exists() {
        return Err(format!("{}: no such file or directory", path.display()));
    }
    if !path.is_dir() {
        return Err(format!(
            "{}: expected an OpenCSD snapshot directory (with snapshot.ini) or a perf.data file",
            path.display()
        ));
    }
    Snapshot::open(path).map_err(|e| e.to_string())
}

/// A decimal or 0x-prefixed hexadecimal number.
pub fn parse_number(s: &str) -> Result<u64, String> {
    let t = s.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    }
    .map_err(|_| format!("'{s}' is not a number"))
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
