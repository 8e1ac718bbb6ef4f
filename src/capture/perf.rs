//! A perf.data recorded with the `cs_etm` PMU as a capture: one plan whose
//! sources are the CPUs' trace units (configured from the AUXTRACE_INFO
//! registers), the AUX fragments as the capture's fragments, the program
//! image from the recorded mappings and the binaries found for them, and the
//! threads the context IDs name.
//!
//! Linux perf decodes each AUX fragment from a reset decoder
//! (`tools/perf/util/cs-etm.c`, `cs_etm__decode_data_block` after
//! `cs_etm_decoder__reset`); formatted fragments go through the frame
//! demultiplexer with every CPU's trace ID registered, raw ones
//! (`PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW`) straight to that CPU's decoder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::element::PeContext;
use crate::image::memory::MemoryImage;
use crate::image::ImageError;
use crate::input::perf::{BuildId, MmapRecord, PerfData, TraceProtocol};
use crate::input::{BufferFormat, TraceBuffer, TraceFile};
use crate::protocol::etm3::Etm3Config;
use crate::protocol::etm4::Etm4Config;
use crate::protocol::ptm::PtmConfig;
use crate::session::{BufferPlan, Fragment, RunOptions, Source, SourceKind};
use crate::symbols::Symbolizer;

use super::{Capture, CaptureError, CaptureOptions};

/// The first bytes of a perf.data file (`perf_file_header.magic`).
pub const MAGIC: &[u8; 8] = b"PERFILE2";

/// Whether `path` is a regular file that starts like a perf.data.
pub fn is_perf_data(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    path.is_file() && std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == MAGIC
}

/// Where a context ID comes from, as TRCCONFIGR says (Linux perf's
/// `cs_etm__get_pid_fmt`: VMID with VMIDOPT when the kernel runs at EL2,
/// else CONTEXTIDR_EL1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextIdSource {
    ContextIdr,
    Vmid,
}

/// A thread of the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    /// The command name (the last COMM record of the thread).
    pub comm: String,
}

/// How a recorded binary was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Under a `--symdir` directory.
    Symdir(PathBuf),
    /// In perf's build-id cache.
    BuildIdCache(PathBuf),
    /// At the path it was recorded with.
    Recorded(PathBuf),
    /// Named with `--image` (or `--kernel`).
    Given(PathBuf),
}

impl Found {
    pub fn path(&self) -> &Path {
        match self {
            Found::Symdir(p) | Found::BuildIdCache(p) | Found::Recorded(p) | Found::Given(p) => p,
        }
    }

    pub fn how(&self) -> &'static str {
        match self {
            Found::Symdir(_) => "--symdir",
            Found::BuildIdCache(_) => "build-id cache",
            Found::Recorded(_) => "recorded path",
            Found::Given(_) => "given",
        }
    }
}

/// An executable mapping of the recording and the file used for it.
#[derive(Clone, Debug)]
pub struct Binary {
    /// The path as recorded.
    pub filename: String,
    pub build_id: Option<BuildId>,
    pub kernel: bool,
    /// Where it was mapped: `addr..addr + len`, from file offset `pgoff`.
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub found: Option<Found>,
    /// Where the ELF's lowest segment lands (what `ELF@ADDRESS` means).
    pub load: Option<u64>,
    /// Why the binary is not used, or what is doubtful about it.
    pub note: Option<String>,
}

/// What a perf.data capture knows besides the plan.
pub struct PerfInfo {
    pub data: PerfData,
    pub binaries: Vec<Binary>,
    /// Threads by thread ID.
    pub threads: BTreeMap<u32, Thread>,
    /// Per trace ID, where its context IDs come from.
    pub context_ids: BTreeMap<u8, ContextIdSource>,
}

impl PerfInfo {
    /// The thread a context (of trace ID `trace_id`) names, if the recording
    /// knows it.
    pub fn thread(&self, trace_id: u8, ctx: &PeContext) -> Option<&Thread> {
        let tid = match self.context_ids.get(&trace_id)? {
            ContextIdSource::ContextIdr => ctx.context_id?,
            ContextIdSource::Vmid => ctx.vmid?,
        };
        self.threads.get(&tid)
    }

    /// What the trace is, for a status line: `CPU 7`, `CPUs 0,2,3`,
    /// `8 CPUs`, or `per thread` for a recording without CPU numbers.
    pub fn cpus_label(&self) -> String {
        let mut cpus: Vec<i32> = self.data.fragments().iter().filter(|f| !f.data.is_empty()).map(|f| f.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        match cpus.as_slice() {
            [] => "no trace data".into(),
            [c] if *c < 0 => "per thread".into(),
            [c] => format!("CPU {c}"),
            c if c.len() <= 4 => format!("CPUs {}", c.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")),
            c => format!("{} CPUs", c.len()),
        }
    }

    /// Why an inaccessible address had no code: the recorded binary that
    /// maps it and was not found, the kernel without `--kernel`, or no
    /// mapping at all. None for other elements, and where the binary was
    /// found (the address lies outside its loaded segments).
    pub fn missing_image(&self, e: &crate::element::Element) -> Option<String> {
        let crate::element::ElementKind::AddrNotAccessible { addr, .. } = e.kind else { return None };
        Some(match self.binary_at(addr) {
            Some(b) if b.found.is_none() => format!("no image for {} (mapped at 0x{:x})", b.filename, b.addr),
            Some(_) => return None,
            None if addr >= 0xffff_0000_0000_0000 => "no kernel image (give --kernel vmlinux)".into(),
            None => "no recorded mapping holds this address".into(),
        })
    }

    /// The binary whose mapping holds `addr`.
    pub fn binary_at(&self, addr: u64) -> Option<&Binary> {
        self.binaries.iter().find(|b| b.addr <= addr && addr - b.addr < b.len)
    }
}

/// Open a perf.data as a capture.
pub fn open(path: &Path, copts: &CaptureOptions) -> Result<Capture, CaptureError> {
    let data = PerfData::open(path)?;
    let mut warnings: Vec<String> = data.warnings().iter().map(|w| format!("{}: {w}", path.display())).collect();
    let mut notes = Vec::new();
    let mut sources = Vec::new();
    let mut context_ids = BTreeMap::new();
    for cpu in data.cpus() {
        let reg = |n: &str| cpu.register(n);
        let kind = match cpu.protocol {
            TraceProtocol::Etm4 | TraceProtocol::Ete => Etm4Config::from_registers(reg, cpu.is_ete(), None).map(|c| {
                let src = if c.vmid_tracing() && c.vmid_opt() { ContextIdSource::Vmid } else { ContextIdSource::ContextIdr };
                context_ids.insert(c.trace_id(), src);
                SourceKind::Etm4(c)
            }),
            TraceProtocol::Ptm => PtmConfig::from_registers(reg, None).map(SourceKind::Ptm),
            TraceProtocol::Etm3 => Etm3Config::from_registers(reg, None).map(SourceKind::Etm3),
        };
        match kind {
            Ok(kind) => {
                context_ids.entry(cpu.trace_id).or_insert(ContextIdSource::ContextIdr);
                sources.push(Source {
                    name: format!("CPU{}", cpu.cpu),
                    device_type: cpu.protocol.name().to_string(),
                    trace_id: Some(cpu.trace_id),
                    kind,
                    cpu: Some(cpu.cpu),
                })
            }
            Err(e) => notes.push(format!(
                "{}: CPU {} ({}, header at offset 0x{:x}): {e}; not decoded",
                path.display(),
                cpu.cpu,
                cpu.protocol.name(),
                cpu.offset
            )),
        }
    }
    sources.sort_by_key(|s| s.trace_id);
    if let Some(cpu) = copts.cpu {
        if !sources.iter().any(|s| s.cpu == Some(cpu)) {
            let known: Vec<String> = sources.iter().filter_map(|s| s.cpu).map(|c| c.to_string()).collect();
            return Err(CaptureError::NoSuchCpu { cpu, known });
        }
    }
    let fragments = fragments(&data, &sources, copts.cpu, &mut notes);
    if !data.has_trace_data() {
        warnings.push(format!("{}: the recording holds no trace data (no AUXTRACE data)", path.display()));
    }
    let mut image = MemoryImage::new();
    let (binaries, found_notes) = find_binaries(&data, copts);
    notes.extend(found_notes);
    let mut symbols = Symbolizer::new();
    let mut image_args = Vec::new();
    for b in &binaries {
        let (Some(f), Some(load)) = (&b.found, b.load) else { continue };
        if let Err(e) = image.add_elf(f.path(), Some(load)) {
            notes.push(format!("{}: not used for the program image: {e}", f.path().display()));
            continue;
        }
        match symbols.add_image(f.path(), Some(load)) {
            Ok(_) => image_args.push(format!("{}@0x{load:x}", f.path().display())),
            Err(e) => notes.push(format!("{}: not used for symbols: {e}", f.path().display())),
        }
    }
    for im in symbols.images() {
        for n in im.notes() {
            notes.push(format!("{}: {n}", im.path().display()));
        }
    }
    let plan = BufferPlan {
        buffer: TraceBuffer {
            section: String::new(),
            name: "AUX".into(),
            file: path.display().to_string(),
            format: BufferFormat::CoreSight,
            path: path.to_path_buf(),
            line: 0,
        },
        sources,
        notes,
        image: Arc::new(image),
    };
    warnings.extend(plan.notes.iter().cloned());
    let file = TraceFile::open_for(path, "the perf.data")?;
    let mut opts = RunOptions { decoder: copts.decoder, quiet_ends: true, ..RunOptions::default() };
    if let Some(cpu) = copts.cpu {
        opts.ids = plan.sources.iter().filter(|s| s.cpu == Some(cpu)).filter_map(|s| s.trace_id).collect();
    }
    let threads = threads(&data);
    let symbols = (!symbols.images().is_empty()).then_some(symbols);
    Ok(Capture {
        path: path.to_path_buf(),
        snapshot: None,
        plan,
        file,
        fragments,
        opts,
        symbols,
        image_args,
        warnings,
        perf: Some(PerfInfo { data, binaries, threads, context_ids }),
    })
}

/// The AUX fragments with data, in file order, as capture fragments: raw
/// ones name their CPU's source; with `cpu`, only that CPU's raw fragments
/// (formatted ones may hold any CPU's trace and are filtered by trace ID).
fn fragments(data: &PerfData, sources: &[Source], cpu: Option<u32>, notes: &mut Vec<String>) -> Vec<Fragment> {
    let mut out: Vec<Fragment> = Vec::new();
    for f in data.fragments() {
        if f.data.is_empty() {
            continue;
        }
        let raw_source = if f.flags.raw() {
            let Some(i) = sources.iter().position(|s| f.cpu >= 0 && s.cpu == Some(f.cpu as u32)) else {
                notes.push(format!(
                    "AUX fragment at 0x{:x}: raw trace of CPU {}, which has no decodable trace unit; skipped",
                    f.record_offset, f.cpu
                ));
                continue;
            };
            if cpu.is_some_and(|c| sources[i].cpu != Some(c)) {
                continue;
            }
            Some(i)
        } else {
            None
        };
        out.push(Fragment { start: f.data.start as u64, end: f.data.end as u64, raw_source });
    }
    out.sort_by_key(|f| f.start);
    // Fragments never overlap in a well-formed file; a damaged one could.
    let mut kept: Vec<Fragment> = Vec::with_capacity(out.len());
    for f in out {
        match kept.last() {
            Some(p) if f.start < p.end => {
                notes.push(format!("AUX data at 0x{:x}..0x{:x} overlaps the fragment before it; skipped", f.start, f.end))
            }
            _ => kept.push(f),
        }
    }
    kept
}

/// Threads from COMM, ITRACE_START and SWITCH records.
fn threads(data: &PerfData) -> BTreeMap<u32, Thread> {
    let mut t: BTreeMap<u32, Thread> = BTreeMap::new();
    fn see(t: &mut BTreeMap<u32, Thread>, pid: u32, tid: u32) -> &mut Thread {
        let th = t.entry(tid).or_insert_with(|| Thread { pid, tid, comm: String::new() });
        th.pid = pid;
        th
    }
    for s in data.itrace_starts() {
        see(&mut t, s.pid, s.tid);
    }
    for s in data.switches() {
        if let (Some(p), Some(tid)) = (s.next_prev_pid, s.next_prev_tid) {
            see(&mut t, p, tid);
        }
        if let (Some(p), Some(tid)) = (s.sample.pid, s.sample.tid) {
            see(&mut t, p, tid);
        }
    }
    for c in data.comms() {
        see(&mut t, c.pid, c.tid).comm = c.comm.clone();
    }
    t
}

/// The executable mappings of the recording and the files found for them,
/// with notes on those not found or not matching their build ID.
fn find_binaries(data: &PerfData, copts: &CaptureOptions) -> (Vec<Binary>, Vec<String>) {
    let mut out: Vec<Binary> = Vec::new();
    let mut notes = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for m in data.mmaps() {
        if m.prot.is_some_and(|p| p & 4 == 0) || m.len == 0 {
            continue;
        }
        if out.iter().any(|b| b.addr == m.addr && b.filename == m.filename) {
            continue;
        }
        let build_id = data.build_id_for(m);
        let mut b = Binary {
            filename: m.filename.clone(),
            build_id,
            kernel: m.is_kernel(),
            addr: m.addr,
            len: m.len,
            pgoff: m.pgoff,
            found: None,
            load: None,
            note: None,
        };
        let found = if b.kernel {
            copts.kernel.clone().map(Found::Given)
        } else {
            locate(m, build_id.as_ref(), copts, &mut b.note)
        };
        if let Some(f) = found {
            // vmlinux is linked at the addresses it runs at.
            let placed = if b.kernel { own_address(f.path()) } else { load_address(f.path(), m) };
            match placed {
                Ok(load) => {
                    b.load = Some(load);
                    b.found = Some(f);
                }
                Err(e) => b.note = Some(format!("{}: {e}", f.path().display())),
            }
        }
        if b.found.is_none() && !b.kernel && b.note.is_none() {
            // Simply absent: one line for all of them below, since a
            // recording maps dozens of libraries the trace may never enter.
            if !missing.contains(&b.filename) {
                missing.push(b.filename.clone());
            }
        } else if b.found.is_none() && !b.kernel {
            notes.push(format!(
                "{}{}: not found ({}); its code at 0x{:x}..0x{:x} is not decoded",
                b.filename,
                build_id.map(|i| format!(" (build id {})", i.hex())).unwrap_or_default(),
                b.note.clone().unwrap_or_default(),
                b.addr,
                b.addr.wrapping_add(b.len)
            ));
        } else if let Some(n) = &b.note {
            notes.push(format!("{}: {n}", b.filename));
        }
        out.push(b);
    }
    if data.has_trace_data() && !missing.is_empty() {
        notes.push(format!(
            "{} mapped file{} not found, {} code is not decoded (give --symdir DIR or --image FILE; `tracesight info` lists the mappings): {}",
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            if missing.len() == 1 { "its" } else { "their" },
            missing.join(", ")
        ));
    }
    (out, notes)
}

/// The first candidate file for a mapping that is an ELF file with the
/// recorded build ID (when one was recorded): `--symdir` (by name, then by
/// the recorded path under the directory), the build-id cache, the recorded
/// path, then `--image`. A file whose build ID differs is skipped with a
/// note, never used.
fn locate(m: &MmapRecord, id: Option<&BuildId>, copts: &CaptureOptions, note: &mut Option<String>) -> Option<Found> {
    let recorded = Path::new(&m.filename);
    let name = recorded.file_name()?;
    let mut candidates: Vec<Found> = Vec::new();
    for d in &copts.symdirs {
        candidates.push(Found::Symdir(d.join(name)));
        candidates.push(Found::Symdir(d.join(recorded.strip_prefix("/").unwrap_or(recorded))));
    }
    if let (Some(id), Some(home)) = (id, std::env::var_os("HOME")) {
        let hex = if id.length_recorded() { id.hex() } else { id.padded_hex() };
        if hex.len() > 2 {
            let dir = PathBuf::from(home).join(".debug/.build-id").join(&hex[..2]).join(&hex[2..]);
            candidates.push(Found::BuildIdCache(dir.join("elf")));
            // Older perf versions link the file itself.
            candidates.push(Found::BuildIdCache(dir));
        }
    }
    candidates.push(Found::Recorded(recorded.to_path_buf()));
    for a in &copts.images {
        let p = crate::image::elf::parse_image_arg(a).map(|(p, _)| p).unwrap_or_else(|_| PathBuf::from(a));
        if p.file_name() == Some(name) {
            candidates.push(Found::Given(p));
        }
    }
    for c in candidates {
        let p = c.path();
        if !p.is_file() {
            continue;
        }
        match (id, elf_build_id(p)) {
            (_, Err(_)) => continue,
            (Some(want), Ok(Some(have))) if !want.matches(&have) => {
                *note = Some(format!(
                    "{} has build id {}, the recording {}; not used",
                    p.display(),
                    hex(&have),
                    want.hex()
                ));
            }
            _ => return Some(c),
        }
    }
    None
}

/// The build ID note of an ELF file (`Ok(None)` when it has none).
fn elf_build_id(path: &Path) -> Result<Option<Vec<u8>>, CaptureError> {
    use object::Object;
    let f = TraceFile::open(path)?;
    let elf = object::File::parse(f.bytes()).map_err(ImageError::from)?;
    Ok(elf.build_id().map_err(ImageError::from)?.map(|b| b.to_vec()))
}

/// Where the ELF's lowest segment lands for mapping `m`: the segment that
/// holds the mapped file offset is placed at `addr - pgoff + its offset`
/// (the kernel maps file pages, so file offset and address differ by the
/// same amount across the mapping), and the others keep their distance.
fn load_address(path: &Path, m: &MmapRecord) -> Result<u64, CaptureError> {
    let f = TraceFile::open(path)?;
    let segs = crate::image::elf::load_segments(f.bytes())?;
    let low = segs.iter().map(|s| s.vaddr).min().ok_or(CaptureError::NoLoadSegment)?;
    let seg = segs
        .iter()
        .find(|s| s.file_offset <= m.pgoff && m.pgoff < s.file_offset + s.file_size.max(1))
        .or_else(|| segs.iter().find(|s| s.executable))
        .ok_or(CaptureError::NoMappedSegment)?;
    // bias = addr - pgoff + offset - vaddr; the lowest segment is at low + bias.
    let bias = m.addr.wrapping_sub(m.pgoff).wrapping_add(seg.file_offset).wrapping_sub(seg.vaddr);
    Ok(low.wrapping_add(bias))
}

/// The lowest segment address of an ELF file linked where it runs.
fn own_address(path: &Path) -> Result<u64, CaptureError> {
    let f = TraceFile::open(path)?;
    crate::image::elf::load_segments(f.bytes())?.iter().map(|s| s.vaddr).min().ok_or(CaptureError::NoLoadSegment)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
