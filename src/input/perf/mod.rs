//! perf.data files recorded with the CoreSight `cs_etm` PMU, by Linux perf
//! (`perf record -e cs_etm//`) or Android's simpleperf (`-e cs-etm`).
//!
//! [`PerfData::open`] maps the file and reads, in one pass over its records:
//! the CS_ETM `AUXTRACE_INFO` header (the trace unit registers of every CPU,
//! see [`CpuTrace`]), the AUX fragments of trace data ([`AuxFragment`], which
//! point into the mapping and are never copied), the process and mapping
//! records (`MMAP`/`MMAP2`, `COMM`, `ITRACE_START`, `SWITCH_CPU_WIDE`) and the
//! feature sections that matter for decoding (`BUILD_ID`, command line,
//! hostname, OS release, `AUXTRACE` index).
//!
//! Layouts: the kernel's `include/uapi/linux/perf_event.h` (records, AUX
//! flags), Linux perf's `tools/perf/util/header.c` (file header, features),
//! `tools/perf/util/cs-etm.h` and `cs-etm.c` (AUXTRACE_INFO private array,
//! AUX_OUTPUT_HW_ID, AUX fragments) and simpleperf's `record.cpp` /
//! `ETMRecorder.cpp` (its variants, noted where they differ).
//!
//! The file is untrusted: every length is checked against the bytes present,
//! nothing is allocated by a count read from the file, and a damaged part is
//! skipped with a [`PerfWarning`] naming its offset while the rest is kept.
//! Only a file that is not a perf.data at all gives a [`PerfError`].

mod buf;
mod cs_etm;
mod describe;
mod error;
pub(crate) mod format;
mod read;

use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

pub use describe::describe;
pub use error::{PerfError, PerfWarning};

/// The trace protocol of one CPU's trace unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceProtocol {
    /// ETMv3 (AUXTRACE_INFO magic 0x3030303030303030, ETMIDR not a PTM).
    Etm3,
    /// PTM / PFT (same magic as ETMv3; ETMIDR bits \[11:8\] = 3, as perf's
    /// `cs_etm__get_v7_protocol_version` tells them apart).
    Ptm,
    /// ETMv4 (magic 0x4040404040404040).
    Etm4,
    /// ETE (magic 0x5050505050505050, AUXTRACE_INFO version 1 and later).
    Ete,
}

impl TraceProtocol {
    /// Short name as `tracesight info` prints it.
    pub fn name(self) -> &'static str {
        match self {
            TraceProtocol::Etm3 => "ETMv3",
            TraceProtocol::Ptm => "PTM",
            TraceProtocol::Etm4 => "ETMv4",
            TraceProtocol::Ete => "ETE",
        }
    }
}

/// Where a CPU's trace ID came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceIdSource {
    /// A `PERF_RECORD_AUX_OUTPUT_HW_ID` record (type 21) of that CPU, as
    /// kernels that allocate IDs dynamically write (AUXTRACE_INFO version 2).
    HwIdRecord,
    /// The TRCTRACEIDR / ETMTRACEIDR value of the header (bits \[6:0\]).
    Register,
}

/// One CPU's trace unit as the AUXTRACE_INFO header describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTrace {
    /// The CPU number the block names (`CS_ETM_CPU`).
    pub cpu: u32,
    pub protocol: TraceProtocol,
    /// The CoreSight trace ID this CPU's trace carries (see [`TraceIdSource`]).
    pub trace_id: u8,
    pub trace_id_source: TraceIdSource,
    /// Offset in the file of this CPU's block inside the AUXTRACE_INFO record.
    pub offset: u64,
    /// The parameters as recorded, in header order, under the register names
    /// snapshot files use (`TRCCONFIGR`, `TRCIDR0`, ..., `ETMCR`, ...), plus
    /// `TS_SOURCE` when recorded. Unknown trailing parameters are not kept.
    pub registers: Vec<(&'static str, u64)>,
}

impl CpuTrace {
    /// A register value by its snapshot name, as the configuration
    /// constructors take it (`Etm4Config::from_registers(|n| cpu.register(n), ..)`).
    ///
    /// `TRCTRACEIDR` and `ETMTRACEIDR` read as the effective trace ID
    /// ([`CpuTrace::trace_id`]), which differs from the recorded value when an
    /// AUX_OUTPUT_HW_ID record gave the ID; [`CpuTrace::recorded`] gives the
    /// value as the header holds it.
    pub fn register(&self, name: &str) -> Option<u64> {
        let v = self.recorded(name)?;
        Some(if name == "TRCTRACEIDR" || name == "ETMTRACEIDR" { (v & !0x7f) | u64::from(self.trace_id) } else { v })
    }

    /// A parameter exactly as the AUXTRACE_INFO header recorded it.
    pub fn recorded(&self, name: &str) -> Option<u64> {
        self.registers.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }

    /// ETE (true) or ETMv4 (false) interpretation for `Etm4Config::from_registers`.
    pub fn is_ete(&self) -> bool {
        self.protocol == TraceProtocol::Ete
    }
}

/// The CS_ETM AUXTRACE_INFO record's global header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxtraceInfo {
    /// Offset of the record in the file.
    pub offset: u64,
    /// `CS_HEADER_VERSION`: 0, 1 or 2 (others are read with a warning).
    pub version: u64,
    /// The cs_etm PMU's type number (`CS_PMU_TYPE_CPUS` bits \[63:32\]).
    pub pmu_type: u32,
    /// CPU blocks announced (`CS_PMU_TYPE_CPUS` bits \[31:0\]).
    pub nr_cpus: u32,
    /// Recorded in snapshot mode (`CS_ETM_SNAPSHOT`).
    pub snapshot: bool,
}

/// The `flags` of a `PERF_RECORD_AUX` (perf_event.h `PERF_AUX_FLAG_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuxFlags(pub u64);

impl AuxFlags {
    pub const TRUNCATED: u64 = 0x1;
    pub const OVERWRITE: u64 = 0x2;
    pub const PARTIAL: u64 = 0x4;
    pub const COLLISION: u64 = 0x8;
    /// `PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW`: unformatted single-source data
    /// (TRBE); without it the data is CoreSight formatter frames.
    pub const RAW: u64 = 0x100;

    /// The AUX buffer was full: trace was lost after this fragment.
    pub fn truncated(self) -> bool {
        self.0 & Self::TRUNCATED != 0
    }
    /// Snapshot (overwrite) mode: the fragment may have been overwritten.
    pub fn overwrite(self) -> bool {
        self.0 & Self::OVERWRITE != 0
    }
    /// The fragment holds only part of a trace record (e.g. a TRBE wrap).
    pub fn partial(self) -> bool {
        self.0 & Self::PARTIAL != 0
    }
    /// The sample collided with another: some data may be missing.
    pub fn collision(self) -> bool {
        self.0 & Self::COLLISION != 0
    }
    /// Raw (unformatted) trace of one source rather than formatter frames.
    pub fn raw(self) -> bool {
        self.0 & Self::RAW != 0
    }
}

/// The `sample_id` fields a non-sample record carries when its event has
/// `sample_id_all` (perf_event.h): absent fields are `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleId {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub cpu: Option<u32>,
}

/// A piece of trace data that decodes on its own: the part of an AUXTRACE
/// buffer that one AUX record covers (decoding restarts at each, as Linux
/// perf's cs-etm does), or a whole AUXTRACE buffer when the file has no AUX
/// records to split it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxFragment {
    /// The CPU whose trace this is, -1 for a per-thread recording.
    pub cpu: i32,
    /// The thread of a per-thread recording (the AUXTRACE record's tid).
    pub tid: Option<u32>,
    /// Byte range of the trace data in the file ([`PerfData::fragment_data`]).
    pub data: Range<usize>,
    /// Offset of the data in the AUX area's stream (`aux_offset`).
    pub aux_offset: u64,
    pub flags: AuxFlags,
    /// The AUX record's timestamp (`sample_id_all` with `PERF_SAMPLE_TIME`).
    pub time: Option<u64>,
    /// Offset in the file of the AUX record (of the AUXTRACE record when the
    /// fragment is a whole buffer).
    pub record_offset: u64,
}

/// A `PERF_RECORD_AUX` (type 11) as recorded, matched to data or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxRecord {
    pub offset: u64,
    pub aux_offset: u64,
    pub aux_size: u64,
    pub flags: AuxFlags,
    pub sample: SampleId,
}

/// A build ID as perf.data records it: up to 20 bytes.
///
/// Linux perf sets `PERF_RECORD_MISC_BUILD_ID_SIZE` and records the length;
/// simpleperf does not and pads every ID with zeros to 20 bytes. Without the
/// length, [`BuildId::bytes`] trims the trailing zero padding, which is what
/// an ELF note of 16 or 20 bytes gives back in all practical cases; compare
/// with [`BuildId::matches`], which pads as simpleperf and perf do.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BuildId {
    raw: [u8; 20],
    len: u8,
    sized: bool,
}

impl BuildId {
    /// An ID from a record: `recorded_len` when the writer gave the length.
    pub fn new(bytes: &[u8], recorded_len: Option<u8>) -> BuildId {
        let mut raw = [0u8; 20];
        let n = bytes.len().min(20);
        raw[..n].copy_from_slice(&bytes[..n]);
        match recorded_len {
            Some(l) => BuildId { raw, len: l.min(20), sized: true },
            None => {
                let len = raw.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1) as u8;
                BuildId { raw, len, sized: false }
            }
        }
    }

    /// The ID's bytes (trailing padding trimmed when no length was recorded).
    pub fn bytes(&self) -> &[u8] {
        &self.raw[..usize::from(self.len)]
    }

    /// The writer recorded the length (Linux perf); false for simpleperf's
    /// zero-padded IDs.
    pub fn length_recorded(&self) -> bool {
        self.sized
    }

    /// Lower-case hex of [`BuildId::bytes`].
    pub fn hex(&self) -> String {
        hex(self.bytes())
    }

    /// Lower-case hex of the 20 bytes with zero padding, as perf's build-id
    /// cache and simpleperf's AutoFDO output name an unsized ID.
    pub fn padded_hex(&self) -> String {
        hex(&self.raw)
    }

    /// Whether an ELF file's build-id note equals this ID: exactly when the
    /// length was recorded, else after padding both to 20 bytes.
    pub fn matches(&self, elf_id: &[u8]) -> bool {
        if self.sized {
            return elf_id == self.bytes();
        }
        if elf_id.len() > 20 {
            return false;
        }
        let mut padded = [0u8; 20];
        padded[..elf_id.len()].copy_from_slice(elf_id);
        padded == self.raw
    }
}

impl std::fmt::Debug for BuildId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BuildId({}{})", self.hex(), if self.sized { "" } else { ", padded" })
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A `PERF_RECORD_MMAP` (1) or `PERF_RECORD_MMAP2` (10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmapRecord {
    pub offset: u64,
    /// The record header's `misc` (cpumode in bits \[2:0\]).
    pub misc: u16,
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    /// The mapped file's path as recorded (lossy UTF-8).
    pub filename: String,
    /// MMAP2 with `PERF_RECORD_MISC_MMAP_BUILD_ID`: the ID in the record.
    pub build_id: Option<BuildId>,
    /// MMAP2 only: `PROT_*` bits (executable mappings have `PROT_EXEC` = 4).
    pub prot: Option<u32>,
    pub sample: SampleId,
}

impl MmapRecord {
    /// Recorded in kernel mode (`PERF_RECORD_MISC_KERNEL` or guest kernel).
    pub fn is_kernel(&self) -> bool {
        matches!(self.misc & 7, 1 | 4)
    }
}

/// A `PERF_RECORD_COMM` (3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommRecord {
    pub offset: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// `PERF_RECORD_MISC_COMM_EXEC`: the name changed because of an exec.
    pub exec: bool,
    pub sample: SampleId,
}

/// A `PERF_RECORD_ITRACE_START` (12): tracing started for a thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItraceStart {
    pub offset: u64,
    pub pid: u32,
    pub tid: u32,
    pub sample: SampleId,
}

/// A `PERF_RECORD_SWITCH_CPU_WIDE` (15) or `PERF_RECORD_SWITCH` (14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchRecord {
    pub offset: u64,
    /// Switch out of the sample's thread (`PERF_RECORD_MISC_SWITCH_OUT`);
    /// otherwise into it.
    pub out: bool,
    /// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`.
    pub preempt: bool,
    /// CPU-wide switches: the thread switched to (out) or from (in).
    pub next_prev_pid: Option<u32>,
    pub next_prev_tid: Option<u32>,
    pub sample: SampleId,
}

/// One entry of the `BUILD_ID` feature section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildIdEntry {
    pub pid: i32,
    pub misc: u16,
    pub build_id: BuildId,
    pub filename: String,
}

/// A perf.data file read into a model.
pub struct PerfData {
    path: PathBuf,
    bytes: Backing,
    model: Model,
}

enum Backing {
    Map(Mmap),
    Owned(Vec<u8>),
}

/// Everything read from the file; filled by `read::read_all`.
#[derive(Default)]
struct Model {
    auxtrace_info: Option<AuxtraceInfo>,
    cpus: Vec<CpuTrace>,
    fragments: Vec<AuxFragment>,
    aux_records: Vec<AuxRecord>,
    mmaps: Vec<MmapRecord>,
    comms: Vec<CommRecord>,
    itrace_starts: Vec<ItraceStart>,
    switches: Vec<SwitchRecord>,
    build_ids: Vec<BuildIdEntry>,
    cmdline: Option<Vec<String>>,
    hostname: Option<String>,
    os_release: Option<String>,
    arch: Option<String>,
    auxtrace_buffers: usize,
    warnings: Vec<PerfWarning>,
}

impl PerfData {
    /// Map and read the perf.data file at `path` (a regular file only).
    pub fn open(path: &Path) -> Result<PerfData, PerfError> {
        let io_err = |source: io::Error| PerfError::Io { path: path.to_path_buf(), source };
        let meta = std::fs::metadata(path).map_err(io_err)?;
        if !meta.is_file() {
            return Err(PerfError::NotAFile { path: path.to_path_buf() });
        }
        let file = File::open(path).map_err(io_err)?;
        let bytes = if meta.len() == 0 {
            Backing::Owned(Vec::new())
        } else {
            // SAFETY: read-only mapping of an input file that nothing in this
            // crate writes; a concurrent writer could change the bytes seen
            // (or truncate the file and fault), as for every mapped input.
            let map = unsafe { Mmap::map(&file) }.map_err(io_err)?;
            super::read_ahead(&map);
            Backing::Map(map)
        };
        PerfData::build(path.to_path_buf(), bytes)
    }

    /// Read a perf.data held in memory (`name` is used in messages). For
    /// tests and the fuzz target.
    pub fn from_bytes(bytes: Vec<u8>, name: &str) -> Result<PerfData, PerfError> {
        PerfData::build(PathBuf::from(name), Backing::Owned(bytes))
    }

    fn build(path: PathBuf, bytes: Backing) -> Result<PerfData, PerfError> {
        let model = {
            let b: &[u8] = match &bytes {
                Backing::Map(m) => m,
                Backing::Owned(v) => v,
            };
            read::read_all(&path, b)?
        };
        Ok(PerfData { path, bytes, model })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
        }
    }

    /// The CS_ETM AUXTRACE_INFO header, when the file has one.
    pub fn auxtrace_info(&self) -> Option<&AuxtraceInfo> {
        self.model.auxtrace_info.as_ref()
    }

    /// The trace units, in header order.
    pub fn cpus(&self) -> &[CpuTrace] {
        &self.model.cpus
    }

    /// The trace unit of CPU `cpu`.
    pub fn cpu(&self, cpu: u32) -> Option<&CpuTrace> {
        self.model.cpus.iter().find(|c| c.cpu == cpu)
    }

    /// The AUX fragments in file order.
    pub fn fragments(&self) -> &[AuxFragment] {
        &self.model.fragments
    }

    /// The trace bytes of a fragment (empty if it does not belong to this file).
    pub fn fragment_data(&self, f: &AuxFragment) -> &[u8] {
        self.bytes().get(f.data.clone()).unwrap_or(&[])
    }

    /// Whether any trace data was recorded.
    pub fn has_trace_data(&self) -> bool {
        self.model.fragments.iter().any(|f| !f.data.is_empty())
    }

    /// Number of AUXTRACE records (buffers of trace data) in the file.
    pub fn auxtrace_buffers(&self) -> usize {
        self.model.auxtrace_buffers
    }

    /// Every AUX record, with data or not.
    pub fn aux_records(&self) -> &[AuxRecord] {
        &self.model.aux_records
    }

    pub fn mmaps(&self) -> &[MmapRecord] {
        &self.model.mmaps
    }

    pub fn comms(&self) -> &[CommRecord] {
        &self.model.comms
    }

    pub fn itrace_starts(&self) -> &[ItraceStart] {
        &self.model.itrace_starts
    }

    pub fn switches(&self) -> &[SwitchRecord] {
        &self.model.switches
    }

    /// The `BUILD_ID` feature's entries.
    pub fn build_ids(&self) -> &[BuildIdEntry] {
        &self.model.build_ids
    }

    /// The build ID of a mapping: the MMAP2 record's own, else the `BUILD_ID`
    /// feature entry with the same file name (that pid's entry first).
    pub fn build_id_for(&self, m: &MmapRecord) -> Option<BuildId> {
        if let Some(b) = m.build_id {
            return Some(b);
        }
        let same = |e: &&BuildIdEntry| e.filename == m.filename;
        let by_pid = self.model.build_ids.iter().filter(same).find(|e| e.pid >= 0 && e.pid as u32 == m.pid);
        by_pid.or_else(|| self.model.build_ids.iter().find(same)).map(|e| e.build_id)
    }

    /// The recording's command line (`CMDLINE` feature).
    pub fn cmdline(&self) -> Option<&[String]> {
        self.model.cmdline.as_deref()
    }

    pub fn hostname(&self) -> Option<&str> {
        self.model.hostname.as_deref()
    }

    pub fn os_release(&self) -> Option<&str> {
        self.model.os_release.as_deref()
    }

    /// The machine architecture (`ARCH` feature, e.g. `aarch64`).
    pub fn arch(&self) -> Option<&str> {
        self.model.arch.as_deref()
    }

    /// Problems found while reading; each names its offset in the file.
    pub fn warnings(&self) -> &[PerfWarning] {
        &self.model.warnings
    }
}

impl std::fmt::Debug for PerfData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfData")
            .field("path", &self.path)
            .field("len", &self.bytes().len())
            .field("cpus", &self.model.cpus.len())
            .field("fragments", &self.model.fragments.len())
            .field("warnings", &self.model.warnings.len())
            .finish()
    }
}
