//! One profiling pass over a capture (serial or on all cores) and the
//! profile it writes: what `tracesight profile` runs.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::autofdo::{AutofdoProfile, Binary, BinaryMap, Mapping, TargetReader};
use super::bolt::BoltProfile;
use super::callstack::Origin;
use super::folded::Weight;
use super::stats::{Column, Group};
use super::{callgraph, folded, stats, CodeMap, Collector, FunctionMap, NoCode, ProfileError};
use crate::capture::{Capture, CaptureOptions};
use rayon::prelude::*;

use crate::element::{Element, Isa, MemSpace};
use crate::image::memory::MemoryImage;
use crate::index::{self, IndexFile, Numbered, SeekTarget, Seeker, SeekerParts};

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

/// What a profile of a capture collects and writes (the options of
/// `tracesight profile`, which parses them straight into this).
#[derive(clap::Args, Debug, Clone)]
pub struct ProfileOptions {
    /// What to write.
    #[arg(long, value_enum, default_value_t = Format::Stats)]
    pub format: Format,
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
    /// Threads decoding the trace (0: all cores; 1: one pass on one core).
    /// The output is the same whatever the number.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
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

/// The stream of an element of a capture: its source's trace ID, else the
/// element's own.
pub fn stream_of(n: &Numbered<'_>) -> u32 {
    n.source.trace_id.unwrap_or(n.element.trace_id) as u32
}

/// Close what is open at the end of the pass.
fn finish(col: &mut Collector<'_>) {
    col.finish();
    if let Some(b) = &mut col.branches {
        b.finish();
    }
}

/// Feed elements `from..to` of a capture (through its index) to `col` and
/// finish it, on the calling thread; `progress` is told how many elements
/// are done now and then.
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
        col.feed(Origin { stream: stream_of(&n), thread: None }, n.number, n.element);
        if n.number % 65536 == 0 {
            progress(n.number - from);
        }
        true
    })?;
    finish(col);
    Ok(())
}

/// How a pass is split over cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallel {
    /// Threads decoding parts (0: all cores; 1: the serial [`collect`]).
    pub threads: usize,
    /// Index checkpoints per part (at least 1). Small parts cross many
    /// boundaries (the tests force 1); larger ones cost fewer hand-overs.
    pub part_checkpoints: usize,
}

impl Default for Parallel {
    fn default() -> Self {
        // Four checkpoints of the default 256 KiB interval: a part is 1 MiB
        // of trace, a few hundred thousand elements.
        Parallel { threads: 0, part_checkpoints: 4 }
    }
}

/// One part of a parallel pass: decoded from checkpoint `checkpoint`, it
/// owns the elements numbered `from..to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub checkpoint: usize,
    pub from: u64,
    pub to: u64,
}

/// The parts covering elements `from..to`: every `per_part` checkpoints a
/// new part starts at the first element after that checkpoint. Parts are in
/// element order, do not overlap and leave nothing out.
pub fn parts(index: &IndexFile, first: usize, from: u64, to: u64, per_part: usize) -> Vec<Part> {
    let per_part = per_part.max(1);
    let n = index.len();
    let mut out = Vec::new();
    let mut k = first;
    let mut start = from;
    // Bounded by the checkpoints: each turn moves `k` forward.
    while start < to && k < n {
        let next = k.saturating_add(per_part);
        let end = if next < n { index.checkpoint(next).elements_before.clamp(start, to) } else { to };
        if end > start {
            out.push(Part { checkpoint: k, from: start, to: end });
            start = end;
        }
        k = next;
    }
    out
}

/// An element of a part, kept until the reconstruction takes it.
type Held = (u32, u64, Element);

/// The elements of one part. A checkpoint whose saved decoder state does not
/// load is passed over for the one before it (down to the first, which
/// starts from fresh decoders), as the serial pass would have decoded
/// through it: the part still gets exactly its elements.
fn decode_part(seeker: &Seeker<'_>, p: Part) -> Result<Vec<Held>, index::IndexError> {
    let mut k = p.checkpoint;
    loop {
        let mut out = Vec::new();
        let run = seeker.run_from(k, |n| {
            if n.number < p.from {
                return true;
            }
            if n.number >= p.to {
                return false;
            }
            out.push((stream_of(&n), n.number, *n.element));
            true
        });
        match run {
            Err(index::IndexError::BadState { .. }) if k > 0 => k -= 1,
            Err(e) => return Err(e),
            Ok(()) => return Ok(out),
        }
    }
}

/// [`collect`] on all cores: the result is the serial pass's, element for
/// element, for every format.
///
/// **How the work is split, and why the join needs no rule.** The index's
/// checkpoints hold the decoder state, so the elements of any stretch of
/// trace can be decoded on their own ([`parts`]); decoding is most of the
/// cost of a profile. The call-stack reconstruction, on the other hand, is a
/// state machine whose every decision may read frames opened long before: a
/// return is matched against the return address of the innermost open call,
/// a longjmp or C++ unwind searches the open calls for its landing address,
/// an exception return looks for the open exception frame, the statistics
/// ask whether a closing frame's function is open further out (recursion
/// totals) and the call tree hangs every count under the whole open path. A
/// part started with an unknown stack could decide none of these until the
/// part before it is done, and would have to keep what it saw to decide
/// them later. So the parts are decoded in parallel, a window of them at a
/// time (`threads` parts decoding while the previous window is fed), and
/// the reconstruction takes their elements in element order on one thread:
/// a frame open across a part boundary is simply still on the stack when
/// the next part's first element arrives, exactly as in the serial pass. The
/// branch counts of AutoFDO and BOLT, whose state per stream (a branch
/// waiting for its target, the start of a fall-through run) also crosses
/// boundaries, are fed the same way.
///
/// Memory: the stacks (bounded by [`super::callstack::MAX_DEPTH`] per
/// thread), the counters (bounded by the distinct functions, ranges and
/// branches) and at most two windows of decoded parts, each part at most
/// `part_checkpoints` checkpoint intervals of trace: bounded by the part
/// size, never by the trace.
pub fn collect_parallel(
    seeker: &Seeker<'_>,
    from: u64,
    to: u64,
    col: &mut Collector<'_>,
    how: Parallel,
    mut progress: impl FnMut(u64),
) -> Result<(), index::IndexError> {
    let threads = if how.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { how.threads };
    let first = seeker.checkpoint_for(&SeekTarget::Element(from));
    let parts = parts(seeker.index(), first, from, to, how.part_checkpoints);
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) if threads > 1 && parts.len() > 1 => p,
        _ => return collect(seeker, from, to, col, progress),
    };
    // Each part decodes on a seeker of its own (a plan's image is not shared
    // between threads), made here and sent along.
    let jobs = |window: &[Part]| -> Vec<(Part, SeekerParts<'_>)> { window.iter().map(|&p| (p, seeker.for_thread())).collect() };
    let decode = |jobs: Vec<(Part, SeekerParts<'_>)>| -> Vec<Result<Vec<Held>, index::IndexError>> {
        pool.install(|| jobs.into_par_iter().map(|(p, s)| s.with(|s| decode_part(s, p))).collect())
    };
    let mut windows = parts.chunks(threads);
    let mut ready = windows.next().map(|w| decode(jobs(w)));
    while let Some(done) = ready.take() {
        let next = windows.next().map(jobs);
        let mut fed = Ok(());
        ready = std::thread::scope(|s| {
            let ahead = next.map(|j| s.spawn(|| decode(j)));
            // Feed the decoded window while the next one decodes.
            for part in done {
                match part {
                    Ok(elements) => {
                        for (stream, number, element) in &elements {
                            col.feed(Origin { stream: *stream, thread: None }, *number, element);
                        }
                        if let Some((_, number, _)) = elements.last() {
                            progress(number + 1 - from);
                        }
                    }
                    Err(e) => {
                        fed = Err(e);
                        break;
                    }
                }
            }
            ahead.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        });
        fed?;
    }
    finish(col);
    Ok(())
}

/// Decode the capture (or its --from/--to part) and write the profile.
pub fn profile_capture(path: &Path, args: &ProfileOptions) -> Result<String, ProfileError> {
    let how = Parallel { threads: args.threads, ..Parallel::default() };
    profile_capture_with(path, args, &index::IndexOptions::default(), how)
}

/// [`profile_capture`] with the index built as `iopts` says (when the
/// capture has none yet) and the pass split as `how` says.
pub fn profile_capture_with(path: &Path, args: &ProfileOptions, iopts: &index::IndexOptions, how: Parallel) -> Result<String, ProfileError> {
    let mut images = args.images.clone();
    let perf = crate::capture::perf::is_perf_data(path);
    for d in &args.symdirs {
        if !d.is_dir() {
            return Err(ProfileError::NotADirectory { path: d.clone() });
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
            let re = regex::Regex::new(re).map_err(|source| ProfileError::BadPattern { pattern: re.clone(), source })?;
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

    let idx = cap.open_index(iopts, false, &index::BuildProgress::new())?;
    for r in &idx.rejected {
        eprintln!("tracesight: index {r}");
    }
    let seeker = cap.seeker(&idx.file);
    let total = idx.file.totals().elements;
    let find = |flag: &str, pos: &str| cap.find_option(&seeker, flag, pos).map_err(ProfileError::from);
    let from = match &args.from {
        Some(p) => find("from", p)?.ok_or_else(|| ProfileError::NoElementAt { position: p.clone(), total })?,
        None => 0,
    };
    let to = match &args.to {
        Some(p) => find("to", p)?.unwrap_or(total),
        None => total,
    };
    if to < from {
        return Err(ProfileError::Backwards { from, to });
    }
    let bar = (std::io::stderr().is_terminal() && to - from >= 1 << 20).then(|| {
        let b = indicatif::ProgressBar::new(to - from);
        b.set_style(
            indicatif::ProgressStyle::with_template("profiling {bar:24} {percent:>3}% {human_pos}/{human_len} elements eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    collect_parallel(&seeker, from, to, &mut col, how, |done| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    })?;
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
                return Err(ProfileError::NeedsBinaries { path: path.to_path_buf(), format: args.format });
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
