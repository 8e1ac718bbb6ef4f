//! Writing a perf.data recording of CoreSight trace, as Linux perf's
//! `perf record -e cs_etm//` lays it out: one cs_etm event with
//! `sample_id_all`, a CS_ETM AUXTRACE_INFO (version 1 or 2), AUX data in
//! AUXTRACE records split by AUX records, MMAP2/COMM/ITRACE_START records,
//! and the BUILD_ID, CMDLINE and AUXTRACE (index) feature sections.
//!
//! Records are streamed to the output as they are added (a multi-gigabyte
//! recording is never held in memory); the file header is written last.
//! Layouts as read by [`crate::input::perf`] (which cites the sources).

use std::io::{self, Seek, SeekFrom, Write};

use crate::input::perf::format::*;

/// The file name of the perf.data in a synthesis directory.
pub const PERF_FILE: &str = "perf.data";

/// The cs_etm PMU type number written in the attribute and AUXTRACE_INFO
/// (any dynamic PMU number; Linux assigns one at boot).
pub const PMU_TYPE: u32 = 8;

/// `sample_type` of the event: IP, TID, TIME, ID, CPU, PERIOD, as both perf
/// and simpleperf record cs_etm; the `sample_id` of other records is then
/// pid/tid, time, id, cpu.
const SAMPLE_TYPE: u64 = 0x1 | S_TID | S_TIME | S_ID | S_CPU | 0x100;
const ATTR_SIZE: usize = 128;
/// Attribute entry in the file: the attribute and its id section.
const ATTR_ENTRY: usize = ATTR_SIZE + 16;
const DATA_START: u64 = (HEADER_SIZE + ATTR_ENTRY) as u64;

/// `sample_id` fields of a record.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
}

/// One CPU's block of the AUXTRACE_INFO record.
#[derive(Clone, Debug)]
pub struct CpuBlock {
    pub cpu: u32,
    /// `MAGIC_ETE` registers: TRCCONFIGR, TRCTRACEIDR, TRCIDR0, TRCIDR1,
    /// TRCIDR2, TRCIDR8, TRCAUTHSTATUS, TRCDEVARCH; ETMv4 the same without
    /// TRCDEVARCH.
    pub ete: bool,
    pub params: Vec<u64>,
}

/// How the `HEADER_AUXTRACE` index is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexForm {
    /// A u64 count, then `{offset, size}` pairs (Linux perf).
    Linux,
    /// The pairs alone (simpleperf).
    Simpleperf,
    /// No index feature.
    None,
}

/// A perf.data being written to `out`.
pub struct PerfWriter<W: Write + Seek> {
    out: W,
    pos: u64,
    index: Vec<(u64, u64)>,
    build_ids: Vec<(i32, Vec<u8>, String)>,
    cmdline: Vec<String>,
    hostname: Option<String>,
}

impl<W: Write + Seek> PerfWriter<W> {
    /// Start a file: space for the header, then the one attribute.
    pub fn new(mut out: W) -> io::Result<PerfWriter<W>> {
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&[0u8; HEADER_SIZE])?;
        let mut attr = Vec::with_capacity(ATTR_ENTRY);
        attr.extend(PMU_TYPE.to_le_bytes());
        attr.extend((ATTR_SIZE as u32).to_le_bytes());
        attr.extend(0u64.to_le_bytes()); // config
        attr.extend(1u64.to_le_bytes()); // sample_period
        attr.extend(SAMPLE_TYPE.to_le_bytes());
        attr.extend(0u64.to_le_bytes()); // read_format
        // disabled, enable_on_exec, sample_id_all
        attr.extend((1u64 | (1 << 12) | ATTR_SAMPLE_ID_ALL).to_le_bytes());
        attr.resize(ATTR_ENTRY, 0); // rest of the attribute; id section {0, 0}
        out.write_all(&attr)?;
        Ok(PerfWriter {
            out,
            pos: DATA_START,
            index: Vec::new(),
            build_ids: Vec::new(),
            cmdline: Vec::new(),
            hostname: None,
        })
    }

    fn record(&mut self, rtype: u32, misc: u16, body: &[u8], sample: Option<Sample>) -> io::Result<u64> {
        let at = self.pos;
        let trailer = if sample.is_some() { 32 } else { 0 };
        let size = 8 + body.len() + trailer;
        let size16 = u16::try_from(size).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "record too long"))?;
        let mut r = Vec::with_capacity(size);
        r.extend(rtype.to_le_bytes());
        r.extend(misc.to_le_bytes());
        r.extend(size16.to_le_bytes());
        r.extend(body);
        if let Some(s) = sample {
            for v in [u64::from(s.pid) | u64::from(s.tid) << 32, s.time, 0, u64::from(s.cpu)] {
                r.extend(v.to_le_bytes());
            }
        }
        self.out.write_all(&r)?;
        self.pos += size as u64;
        Ok(at)
    }

    /// Any record: type, `misc`, the body before the `sample_id`, and the
    /// `sample_id` (kernel records, types below 64) or none (user records).
    pub fn raw_record(&mut self, rtype: u32, misc: u16, body: &[u8], sample: Option<Sample>) -> io::Result<()> {
        self.record(rtype, misc, body, sample).map(|_| ())
    }

    /// The CS_ETM AUXTRACE_INFO record (`version` 1 or 2).
    pub fn auxtrace_info(&mut self, version: u64, cpus: &[CpuBlock]) -> io::Result<()> {
        let mut b = Vec::new();
        b.extend(AUXTRACE_TYPE_CS_ETM.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        let words = [version, u64::from(PMU_TYPE) << 32 | cpus.len() as u64, 0];
        words.iter().for_each(|w| b.extend(w.to_le_bytes()));
        for c in cpus {
            let magic = if c.ete { MAGIC_ETE } else { MAGIC_ETM4 };
            for w in [magic, u64::from(c.cpu), c.params.len() as u64].iter().chain(&c.params) {
                b.extend(w.to_le_bytes());
            }
        }
        self.record(REC_AUXTRACE_INFO, 0, &b, None).map(|_| ())
    }

    /// `PERF_RECORD_COMM`.
    pub fn comm(&mut self, pid: u32, tid: u32, name: &str, exec: bool, s: Sample) -> io::Result<()> {
        let mut b = Vec::new();
        b.extend(pid.to_le_bytes());
        b.extend(tid.to_le_bytes());
        push_padded_str(&mut b, name);
        self.record(REC_COMM, if exec { MISC_COMM_EXEC } else { 0 } | 2, &b, Some(s)).map(|_| ())
    }

    /// `PERF_RECORD_MMAP2`, with the build ID in the record when given.
    #[allow(clippy::too_many_arguments)]
    pub fn mmap2(
        &mut self,
        s: Sample,
        addr: u64,
        len: u64,
        pgoff: u64,
        prot: u32,
        filename: &str,
        build_id: Option<&[u8]>,
    ) -> io::Result<()> {
        let mut b = Vec::new();
        for v in [u64::from(s.pid) | u64::from(s.tid) << 32, addr, len, pgoff] {
            b.extend(v.to_le_bytes());
        }
        let mut misc = 2; // user
        match build_id {
            Some(id) => {
                let n = id.len().min(20);
                b.push(n as u8);
                b.extend([0u8; 3]);
                b.extend(&id[..n]);
                b.resize(b.len() + 20 - n, 0);
                misc |= MISC_MMAP_BUILD_ID;
            }
            None => b.extend([0u8; 24]),
        }
        b.extend(prot.to_le_bytes());
        b.extend(2u32.to_le_bytes()); // MAP_PRIVATE
        push_padded_str(&mut b, filename);
        self.record(REC_MMAP2, misc, &b, Some(s)).map(|_| ())
    }

    /// `PERF_RECORD_ITRACE_START`.
    pub fn itrace_start(&mut self, s: Sample) -> io::Result<()> {
        let mut b = Vec::new();
        b.extend(s.pid.to_le_bytes());
        b.extend(s.tid.to_le_bytes());
        self.record(REC_ITRACE_START, 0, &b, Some(s)).map(|_| ())
    }

    /// `PERF_RECORD_AUX_OUTPUT_HW_ID` giving CPU `s.cpu` trace ID `id`.
    pub fn aux_output_hw_id(&mut self, id: u8, s: Sample) -> io::Result<()> {
        self.record(REC_AUX_OUTPUT_HW_ID, 0, &u64::from(id).to_le_bytes(), Some(s)).map(|_| ())
    }

    /// `PERF_RECORD_AUX`: `size` bytes at `aux_offset` of the CPU's AUX area.
    pub fn aux(&mut self, aux_offset: u64, size: u64, flags: u64, s: Sample) -> io::Result<()> {
        let mut b = Vec::new();
        [aux_offset, size, flags].iter().for_each(|v| b.extend(v.to_le_bytes()));
        self.record(REC_AUX, 0, &b, Some(s)).map(|_| ())
    }

    /// `PERF_RECORD_AUXTRACE` carrying `data` (padded to 8 bytes) from
    /// `aux_offset` of CPU `cpu`'s AUX area (-1 and `tid` per thread).
    pub fn auxtrace(&mut self, data: &[u8], aux_offset: u64, cpu: i32, tid: u32) -> io::Result<()> {
        self.auxtrace_from(data, data.len() as u64, aux_offset, cpu, tid)
    }

    /// [`PerfWriter::auxtrace`] with the `len` bytes of data read from `data`
    /// (a file of any size, copied through a small buffer).
    pub fn auxtrace_from(&mut self, data: impl io::Read, len: u64, aux_offset: u64, cpu: i32, tid: u32) -> io::Result<()> {
        let padded = len.div_ceil(8) * 8;
        let mut b = Vec::new();
        [padded, aux_offset, 0].iter().for_each(|v| b.extend(v.to_le_bytes()));
        let idx = cpu.max(0) as u32;
        [idx, tid, cpu as u32, 0].iter().for_each(|v| b.extend(v.to_le_bytes()));
        let at = self.record(REC_AUXTRACE, 0, &b, None)?;
        let copied = io::copy(&mut data.take(len), &mut self.out)?;
        if copied != len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("AUX data: {copied} of {len} bytes")));
        }
        self.out.write_all(&[0u8; 8][..(padded - len) as usize])?;
        self.pos += padded;
        self.index.push((at, 48));
        Ok(())
    }

    /// A `BUILD_ID` feature entry (see `finish` for how its length is written).
    pub fn build_id(&mut self, pid: i32, id: &[u8], filename: &str) {
        self.build_ids.push((pid, id.to_vec(), filename.to_string()));
    }

    pub fn cmdline(&mut self, args: &[String]) {
        self.cmdline = args.to_vec();
    }

    pub fn hostname(&mut self, name: &str) {
        self.hostname = Some(name.to_string());
    }

    /// Write the feature sections and the header; returns the output.
    pub fn finish(mut self, index: IndexForm, sized_build_ids: bool) -> io::Result<W> {
        let data_size = self.pos - DATA_START;
        let mut feats: Vec<(u32, Vec<u8>)> = Vec::new();
        if !self.build_ids.is_empty() {
            let mut s = Vec::new();
            for (pid, id, name) in &self.build_ids {
                let mut name_b = Vec::new();
                push_padded_str(&mut name_b, name);
                let size = 8 + 4 + 24 + name_b.len();
                let misc = 2 | if sized_build_ids { MISC_BUILD_ID_SIZE } else { 0 };
                s.extend(67u32.to_le_bytes()); // PERF_RECORD_HEADER_BUILD_ID
                s.extend(misc.to_le_bytes());
                s.extend((size as u16).to_le_bytes());
                s.extend(pid.to_le_bytes());
                let n = id.len().min(20);
                s.extend(&id[..n]);
                s.resize(s.len() + 20 - n, 0);
                s.push(if sized_build_ids { n as u8 } else { 0 });
                s.extend([0u8; 3]);
                s.extend(name_b);
            }
            feats.push((FEAT_BUILD_ID, s));
        }
        if let Some(h) = &self.hostname {
            feats.push((FEAT_HOSTNAME, header_string(h)));
        }
        feats.push((FEAT_ARCH, header_string("aarch64")));
        if !self.cmdline.is_empty() {
            let mut s = (self.cmdline.len() as u32).to_le_bytes().to_vec();
            self.cmdline.iter().for_each(|a| s.extend(header_string(a)));
            feats.push((FEAT_CMDLINE, s));
        }
        if index != IndexForm::None && !self.index.is_empty() {
            let mut s = Vec::new();
            if index == IndexForm::Linux {
                s.extend((self.index.len() as u64).to_le_bytes());
            }
            self.index.iter().for_each(|(o, n)| [o, n].iter().for_each(|v| s.extend(v.to_le_bytes())));
            feats.push((FEAT_AUXTRACE, s));
        }
        // Section table right after the data, then the sections.
        let mut at = self.pos + 16 * feats.len() as u64;
        for (_, s) in &feats {
            self.out.write_all(&at.to_le_bytes())?;
            self.out.write_all(&(s.len() as u64).to_le_bytes())?;
            at += s.len() as u64;
        }
        let mut bits = [0u64; 4];
        for (f, s) in &feats {
            self.out.write_all(s)?;
            bits[(*f / 64) as usize] |= 1 << (f % 64);
        }
        let mut h = Vec::with_capacity(HEADER_SIZE);
        h.extend(b"PERFILE2");
        for v in [HEADER_SIZE as u64, ATTR_ENTRY as u64, HEADER_SIZE as u64, ATTR_ENTRY as u64, DATA_START, data_size, 0, 0] {
            h.extend(v.to_le_bytes());
        }
        bits.iter().for_each(|b| h.extend(b.to_le_bytes()));
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&h)?;
        self.out.seek(SeekFrom::End(0))?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A NUL-terminated string padded to 8 bytes, as records carry names.
fn push_padded_str(b: &mut Vec<u8>, s: &str) {
    b.extend(s.as_bytes());
    b.push(0);
    b.resize(b.len().div_ceil(8) * 8, 0);
}

/// A header string: u32 length (padded to 64 as perf does), then the bytes.
fn header_string(s: &str) -> Vec<u8> {
    let len = (s.len() + 1).div_ceil(64) * 64;
    let mut v = (len as u32).to_le_bytes().to_vec();
    v.extend(s.as_bytes());
    v.resize(4 + len, 0);
    v
}

/// The encoder's output spooled per trace unit (one file per CPU, raw or in
/// that CPU's own formatter frames, as a per-CPU TRBE or ETR sink holds it),
/// then assembled into a perf.data by [`PerfSink::finish`].
pub struct PerfSink {
    dir: std::path::PathBuf,
    formatted: bool,
    spools: std::collections::BTreeMap<u8, super::snapshot::TraceOut>,
}

/// What the perf.data describes besides the trace.
pub struct PerfRecording<'a> {
    pub streams: &'a [super::encoder::StreamResult],
    pub image: &'a super::program::CodeImage,
    /// The traced command line (program path first).
    pub command: &'a [String],
    /// Process ID (the traced context ID); thread `k` has tid `pid + k`.
    pub pid: u32,
}

impl PerfSink {
    pub fn new(dir: &std::path::Path, formatted: bool) -> PerfSink {
        PerfSink { dir: dir.to_path_buf(), formatted, spools: Default::default() }
    }

    fn spool_path(&self, id: u8) -> std::path::PathBuf {
        self.dir.join(format!("aux-{id:02x}.tmp"))
    }

    /// Write `out` (a perf.data) from the spooled data; returns the bytes of
    /// trace written. One CPU per stream (stream `k` is CPU `k`), each with
    /// one AUX record covering its AUXTRACE data, so each CPU's trace decodes
    /// from its start as one fragment.
    pub fn finish(mut self, rec: &PerfRecording<'_>, out: &std::path::Path) -> Result<u64, super::SynthError> {
        let err = super::SynthError::io(out);
        let mut lens = std::collections::BTreeMap::new();
        for (id, spool) in std::mem::take(&mut self.spools) {
            lens.insert(id, spool.finish()?);
        }
        let file = std::fs::File::create(out).map_err(err)?;
        let mut w = PerfWriter::new(io::BufWriter::with_capacity(1 << 20, file)).map_err(err)?;
        let blocks: Vec<CpuBlock> = rec
            .streams
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let r = &s.registers;
                let mut params = vec![
                    u64::from(r.trcconfigr),
                    u64::from(r.trctraceidr),
                    u64::from(r.trcidr0),
                    u64::from(r.trcidr1),
                    u64::from(r.trcidr2),
                    u64::from(r.trcidr8),
                    0xcc, // TRCAUTHSTATUS: non-secure invasive and non-invasive debug implemented
                ];
                params.extend(r.trcdevarch.map(u64::from));
                CpuBlock { cpu: k as u32, ete: r.is_ete(), params }
            })
            .collect();
        w.auxtrace_info(1, &blocks).map_err(err)?;
        let name = rec.command.first().map_or("program", |p| p.rsplit('/').next().unwrap_or(p));
        let mut time = 1000u64;
        let mut at = |cpu: u32, tid: u32| {
            time += 10;
            Sample { pid: rec.pid, tid, time, cpu }
        };
        w.comm(rec.pid, rec.pid, name, true, at(0, rec.pid)).map_err(err)?;
        for k in 1..rec.streams.len() as u32 {
            w.comm(rec.pid, rec.pid + k, name, false, at(k, rec.pid + k)).map_err(err)?;
        }
        for elf in &rec.image.elfs {
            let (segments, id) = elf_mappings(&elf.path)?;
            let path = std::fs::canonicalize(&elf.path).unwrap_or_else(|_| elf.path.clone());
            let path = path.to_string_lossy();
            for (vaddr, size, offset) in segments {
                // Mappings start on a page; the file offset moves with them.
                let skew = vaddr & 0xfff;
                let s = at(0, rec.pid);
                w.mmap2(s, elf.bias + vaddr - skew, size + skew, offset - skew.min(offset), 5, &path, id.as_deref())
                    .map_err(err)?;
            }
            if let Some(id) = &id {
                w.build_id(rec.pid as i32, id, &path);
            }
        }
        let flags = if self.formatted { 0 } else { crate::input::perf::AuxFlags::RAW };
        let mut total = 0;
        for (k, s) in rec.streams.iter().enumerate() {
            let (cpu, tid) = (k as u32, rec.pid + k as u32);
            w.itrace_start(at(cpu, tid)).map_err(err)?;
            let len = lens.get(&s.trace_id).copied().unwrap_or(0);
            if len == 0 {
                continue;
            }
            w.aux(0, len, flags, at(cpu, tid)).map_err(err)?;
            let path = self.spool_path(s.trace_id);
            let f = std::fs::File::open(&path).map_err(super::SynthError::io(&path))?;
            w.auxtrace_from(io::BufReader::new(f), len, 0, cpu as i32, tid).map_err(err)?;
            let _ = std::fs::remove_file(&path);
            total += len;
        }
        w.cmdline(rec.command);
        w.hostname("tracesight-synth");
        w.finish(IndexForm::Linux, true).map_err(err)?;
        Ok(total)
    }
}

impl super::encoder::StreamSink for PerfSink {
    fn write(&mut self, id: u8, bytes: &[u8]) -> io::Result<()> {
        if !self.spools.contains_key(&id) {
            let spool = super::snapshot::TraceOut::create_file(&self.spool_path(id), self.formatted)
                .map_err(io::Error::other)?;
            self.spools.insert(id, spool);
        }
        match self.spools.get_mut(&id) {
            Some(s) => s.write(id, bytes),
            None => Ok(()),
        }
    }
}

/// An executable segment: address, size, file offset.
type Segment = (u64, u64, u64);

/// The executable segments of an ELF file and its build ID.
fn elf_mappings(path: &std::path::Path) -> Result<(Vec<Segment>, Option<Vec<u8>>), super::SynthError> {
    use object::{Object, ObjectSegment, SegmentFlags};
    let data = std::fs::read(path).map_err(super::SynthError::io(path))?;
    let file = object::File::parse(&*data).map_err(|source| super::SynthError::Object { path: path.to_path_buf(), source })?;
    let id = file.build_id().ok().flatten().map(|b| b.to_vec());
    let segs = file
        .segments()
        .filter(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags, .. } if p_flags.contains(object::elf::PF_X)))
        .map(|s| (s.address(), s.size(), s.file_range().0))
        .collect();
    Ok((segs, id))
}
