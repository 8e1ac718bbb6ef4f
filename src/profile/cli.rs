//! `tracesight profile`: function statistics and profiles of a capture, and
//! `tracesight profile merge`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use super::autofdo::{AutofdoProfile, Binary, BinaryMap, Mapping, TargetReader};
use super::bolt::BoltProfile;
use super::callstack::Origin;
use super::folded::Weight;
use super::merge::MergeFormat;
use super::stats::{Column, Group};
use super::{callgraph, folded, stats, CodeMap, Collector, FunctionMap, NoCode};
use crate::capture::{Capture, CaptureOptions};
use crate::element::{Isa, MemSpace};
use crate::image::memory::MemoryImage;
use crate::index::{self, SeekTarget, Seeker};

/// What `profile` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The function statistics table (text, or JSON with --json).
    Stats,
    /// AutoFDO text, as `simpleperf inject` writes it.
    Autofdo,
    /// BOLT's pre-aggregated profile (`perf2bolt --pa`).
    Bolt,
    /// Folded stacks for flamegraph.pl, inferno and speedscope.
    Folded,
    /// The call tree with counts, as JSON.
    Callgraph,
}

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ProfileArgs {
    #[command(subcommand)]
    pub command: Option<ProfileCommand>,
    /// The capture (an OpenCSD snapshot directory or a perf.data file).
    #[arg(required = true)]
    pub capture: Option<PathBuf>,
    /// What to write.
    #[arg(long, value_enum, default_value_t = Format::Stats)]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Directory with the traced binaries (repeatable): a perf.data finds
    /// its binaries there by name and build ID; for a snapshot every ELF
    /// file in it is added as an image at its own addresses.
    #[arg(long = "symdir", value_name = "DIR")]
    pub symdirs: Vec<PathBuf>,
    /// ELF file with code and symbols, at its own addresses or with its
    /// lowest segment at @ADDRESS (hex) (repeatable).
    #[arg(long = "image", value_name = "ELF[@ADDRESS]")]
    pub images: Vec<String>,
    /// AutoFDO and BOLT: only binaries whose path matches this regular
    /// expression.
    #[arg(long, value_name = "REGEX")]
    pub binary: Option<String>,
    /// First element (a position as in export: N, instr:N, ts:V, cc:V,
    /// off:B, addr:HEX, fn:NAME).
    #[arg(long, value_name = "POS")]
    pub from: Option<String>,
    /// Element to stop before (same forms as --from).
    #[arg(long, value_name = "POS")]
    pub to: Option<String>,
    /// stats: the column to sort by (largest first; names A to Z).
    #[arg(long, value_enum, default_value_t = Column::SelfInstructions)]
    pub sort: Column,
    /// stats: JSON instead of the text table.
    #[arg(long)]
    pub json: bool,
    /// stats: one table for everything, per stream (trace ID), or per thread.
    #[arg(long, value_enum, default_value_t = Group::All)]
    pub by: Group,
    /// folded: what a stack's weight counts.
    #[arg(long, value_enum, default_value_t = Weight::Instructions)]
    pub weight: Weight,
    /// Trace buffer to open, by its name in trace.ini (default: the first).
    #[arg(long)]
    pub source: Option<String>,
    /// Read dstream_coresight buffers as DSTREAM captures.
    #[arg(long)]
    pub dstream: bool,
}

#[derive(clap::Subcommand, Debug)]
pub enum ProfileCommand {
    /// Sum profiles of one format (AutoFDO by binary and build ID, BOLT,
    /// folded stacks); counts saturate at 2^64-1 with a warning.
    Merge(MergeArgs),
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// Profiles to add up.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Where to write the sum.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Read every input as this format (default: recognised from the text).
    #[arg(long, value_enum)]
    pub format: Option<MergeFormat>,
}

pub fn run(args: ProfileArgs) -> Result<ExitCode, String> {
    if let Some(ProfileCommand::Merge(m)) = args.command {
        let merged = super::merge::merge_files(&m.inputs, m.format).map_err(|e| e.to_string())?;
        if merged.saturated {
            eprintln!("tracesight: warning: a count reached 2^64-1 and stays there (saturated)");
        }
        write_output(Some(&m.output), &merged.text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let capture = args.capture.clone().ok_or("give a capture, or 'merge'")?;
    let text = profile_capture(&capture, &args)?;
    write_output(args.output.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}

fn write_output(path: Option<&Path>, text: &str) -> Result<(), String> {
    match path {
        Some(p) => std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display())),
        None => {
            let mut o = std::io::stdout().lock();
            match o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing output: {e}")),
                _ => Ok(()),
            }
        }
    }
}

/// ELF files directly inside `dir`.
fn elf_files(dir: &Path) -> Vec<PathBuf> {
    use std::io::Read;
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        let mut magic = [0u8; 4];
        if p.is_file() && std::fs::File::open(&p).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"\x7fELF" {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The binaries of the capture: a perf.data's recorded mappings (with the
/// recorded path and build ID, which AutoFDO names), else the images,
/// mapped where the symbols put them.
fn binaries(cap: &Capture) -> BinaryMap {
    let mut map = BinaryMap::default();
    if let Some(perf) = &cap.perf {
        for pb in &perf.binaries {
            let Some(found) = &pb.found else { continue };
            let Ok(bytes) = std::fs::read(found.path()) else { continue };
            let Ok(mut b) = Binary::from_elf(&pb.filename, &bytes) else { continue };
            if let Some(id) = pb.build_id {
                b.build_id = Some(id.bytes().to_vec());
            }
            let i = map.add_binary(b);
            map.add_mapping(Mapping { start: pb.addr, end: pb.addr.saturating_add(pb.len), pgoff: pb.pgoff, binary: i });
        }
        return map;
    }
    let Some(sym) = &cap.symbols else { return map };
    for im in sym.images() {
        let Ok(bytes) = std::fs::read(im.path()) else { continue };
        let Ok(b) = Binary::from_elf(&im.path().display().to_string(), &bytes) else { continue };
        let i = map.add_binary(b);
        map.map_at_bias(i, im.bias());
    }
    map
}

/// Direct branch targets from the program image.
fn target_reader(image: Arc<MemoryImage>) -> TargetReader {
    Box::new(move |addr, isa| {
        let op = image.read_u32(addr, MemSpace::ANY)?;
        let mut it = crate::image::arm32::ItState::default();
        let (first, second) = match isa {
            Isa::T32 => (op & 0xffff, (op >> 16) as u16),
            _ => (op, 0),
        };
        let i = crate::image::instr::decode(isa, first, second, addr, &Default::default(), &mut it).ok()?;
        (i.itype == crate::element::InstrType::Branch).then_some(i.target)
    })
}

/// Feed elements `from..to` of a capture (through its index) to `col` and
/// finish it; `progress` is told how many elements are done now and then.
pub fn collect(
    seeker: &Seeker<'_>,
    from: u64,
    to: u64,
    col: &mut Collector<'_>,
    mut progress: impl FnMut(u64),
) -> Result<(), index::IndexError> {
    let k = seeker.checkpoint_for(&SeekTarget::Element(from));
    seeker.run_from(k, |n| {
        if n.number < from {
            return true;
        }
        if n.number >= to {
            return false;
        }
        let stream = n.source.trace_id.unwrap_or(n.element.trace_id) as u32;
        col.feed(Origin { stream, thread: None }, n.number, n.element);
        if n.number % 65536 == 0 {
            progress(n.number - from);
        }
        true
    })?;
    col.finish();
    if let Some(b) = &mut col.branches {
        b.finish();
    }
    Ok(())
}

/// Decode the capture (or its --from/--to part) and write the profile.
pub fn profile_capture(path: &Path, args: &ProfileArgs) -> Result<String, String> {
    let mut images = args.images.clone();
    let perf = crate::capture::perf::is_perf_data(path);
    for d in &args.symdirs {
        if !d.is_dir() {
            return Err(format!("--symdir {}: not a directory", d.display()));
        }
        // A perf.data capture finds its binaries there by name and build
        // ID; a snapshot takes every ELF file in it as an image.
        if !perf {
            images.extend(elf_files(d).into_iter().map(|p| p.display().to_string()));
        }
    }
    let copts = CaptureOptions {
        images,
        source: args.source.clone(),
        dstream: args.dstream,
        symdirs: if perf { args.symdirs.clone() } else { Vec::new() },
        // A profile keeps going after damage (see `decode --recover`).
        decoder: crate::protocol::etm4::decoder::DecoderOptions { recover: true, ..Default::default() },
        ..CaptureOptions::default()
    };
    let cap = Capture::open(path, &copts)?;
    for w in &cap.warnings {
        eprintln!("tracesight: warning: {w}");
    }
    let keep: Box<dyn Fn(&str) -> bool> = match &args.binary {
        Some(re) => {
            let re = regex::Regex::new(re).map_err(|e| format!("--binary {re}: {e}"))?;
            Box::new(move |p: &str| re.is_match(p))
        }
        None => Box::new(|_: &str| true),
    };
    let fmap = cap.symbols.as_ref().map(|s| FunctionMap::from_table(&s.function_table()));
    let code: &dyn CodeMap = match &fmap {
        Some(m) => m,
        None => &NoCode,
    };
    let tree = matches!(args.format, Format::Folded | Format::Callgraph);
    let branches = matches!(args.format, Format::Autofdo | Format::Bolt);
    let mut col = Collector::new(code, args.by, tree, branches);
    if let Some(b) = &mut col.branches {
        b.target_of = Some(target_reader(cap.plan.image.clone()));
    }

    let idx = cap.open_index(&index::IndexOptions::default(), false, &index::BuildProgress::new())?;
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
    let from = match &args.from {
        Some(p) => find("from", p)?.ok_or_else(|| format!("--from {p}: no element there (the trace has {total} elements)"))?,
        None => 0,
    };
    let to = match &args.to {
        Some(p) => find("to", p)?.unwrap_or(total),
        None => total,
    };
    if to < from {
        return Err(format!("--to: element {to} comes before the --from element {from}"));
    }
    let bar = (std::io::stderr().is_terminal() && to - from >= 1 << 20).then(|| {
        let b = indicatif::ProgressBar::new(to - from);
        b.set_style(
            indicatif::ProgressStyle::with_template("profiling {bar:24} {percent:>3}% {human_pos}/{human_len} elements eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    collect(&seeker, from, to, &mut col, |done| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    })
    .map_err(|e| e.to_string())?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let saturated = col.stats.saturated || col.tree.as_ref().is_some_and(|t| t.saturated);
    let text = match args.format {
        Format::Stats if args.json => stats::write_json(&col.stats, code, args.sort),
        Format::Stats => stats::write_text(&col.stats, code, args.sort),
        Format::Folded => folded::write(&folded::from_tree(col.tree.as_ref().expect("tree"), code, args.weight)),
        Format::Callgraph => callgraph::write_json(col.tree.as_ref().expect("tree"), code),
        Format::Autofdo | Format::Bolt => {
            let map = binaries(&cap);
            if map.binaries.is_empty() {
                return Err(format!(
                    "{}: --format {:?} needs the traced binaries (--image or --symdir)",
                    path.display(),
                    args.format
                ));
            }
            let counts = col.branches.as_ref().expect("branches");
            if args.format == Format::Autofdo {
                AutofdoProfile::from_counts(counts, &map, &*keep).write()
            } else {
                BoltProfile::from_counts(counts, &map, &*keep).write()
            }
        }
    };
    if saturated {
        eprintln!("tracesight: warning: a count reached 2^64-1 and stays there (saturated)");
    }
    Ok(text)
}
