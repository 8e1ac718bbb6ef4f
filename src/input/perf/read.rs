//! The perf.data container: file header, attributes, the record stream and
//! the feature sections, read over the mapped bytes without copying them.
//!
//! Layouts: Linux perf `tools/perf/util/header.c` (`perf_file_header`,
//! feature sections, `HEADER_AUXTRACE` index), the kernel's
//! `include/uapi/linux/perf_event.h` (records and `sample_id`),
//! `tools/perf/util/auxtrace.h` (`PERF_RECORD_AUXTRACE`, `_INFO`).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use super::buf::Buf;
use super::cs_etm;
use super::format::*;
use super::{
    AuxFlags, AuxFragment, AuxRecord, BuildId, BuildIdEntry, CommRecord, ItraceStart, MmapRecord, Model, PerfError,
    PerfWarning, SampleId, SwitchRecord, TraceIdSource,
};

/// Stored warnings are capped so a file of garbage does not grow the list
/// without bound; the count of the rest is reported once.
const MAX_WARNINGS: usize = 1000;

struct Warnings {
    list: Vec<PerfWarning>,
    dropped: u64,
}

impl Warnings {
    fn push(&mut self, w: PerfWarning) {
        if self.list.len() < MAX_WARNINGS {
            self.list.push(w);
        } else {
            self.dropped += 1;
        }
    }
}

/// A section `{offset, size}` of the file header.
#[derive(Clone, Copy)]
struct Section {
    offset: u64,
    size: u64,
}

impl Section {
    fn read(b: Buf<'_>, at: usize) -> Option<Section> {
        Some(Section { offset: b.u64(at)?, size: b.u64(at + 8)? })
    }
    /// The byte range clamped to `len`, and whether the whole section is there.
    fn range(&self, len: usize) -> (Range<usize>, bool) {
        let start = usize::try_from(self.offset).unwrap_or(usize::MAX).min(len);
        let end = self.offset.saturating_add(self.size);
        let end_c = usize::try_from(end).unwrap_or(usize::MAX).min(len);
        (start..end_c, end_c as u64 == end)
    }
}

/// An AUXTRACE record's buffer.
struct AuxBuffer {
    record_offset: u64,
    cpu: i32,
    tid: u32,
    aux_offset: u64,
    data: Range<usize>,
}

impl AuxBuffer {
    fn fragment(&self, aux_offset: u64, data: Range<usize>, flags: AuxFlags, time: Option<u64>, record_offset: u64) -> AuxFragment {
        AuxFragment { cpu: self.cpu, tid: (self.cpu < 0).then_some(self.tid), data, aux_offset, flags, time, record_offset }
    }
}

pub(super) fn read_all(path: &Path, bytes: &[u8]) -> Result<Model, PerfError> {
    let bad = |offset: u64, expected: String| PerfError::BadHeader { path: path.to_path_buf(), offset, expected };
    let magic = bytes.get(..8).unwrap_or(bytes);
    let big = match magic {
        b"PERFILE2" => false,
        b"2ELIFREP" => true,
        _ => return Err(PerfError::BadMagic { path: path.to_path_buf(), found: magic.to_vec() }),
    };
    let b = Buf::new(bytes, big);
    let header_size = b.u64(8).ok_or_else(|| bad(8, format!("a header size, the file has {} bytes", bytes.len())))?;
    if header_size == 16 {
        return Err(PerfError::PipeMode { path: path.to_path_buf() });
    }
    if header_size < HEADER_SIZE as u64 {
        return Err(bad(8, format!("a header size of at least {HEADER_SIZE}, found {header_size}")));
    }
    if bytes.len() < HEADER_SIZE {
        return Err(bad(
            bytes.len() as u64,
            format!("a {HEADER_SIZE}-byte header, the file has {} bytes (truncated)", bytes.len()),
        ));
    }
    // Fixed offsets of perf_file_header; all present (checked above).
    let attr_size = b.u64(16).unwrap_or(0);
    let attrs = Section::read(b, 24).ok_or_else(|| bad(24, "the attribute section".into()))?;
    let data = Section::read(b, 40).ok_or_else(|| bad(40, "the data section".into()))?;
    let features: Vec<u32> =
        (0..4u32).flat_map(|w| (0..64u32).map(move |bit| (w, bit))).filter(|&(w, bit)| {
            b.u64(72 + 8 * w as usize).is_some_and(|v| v & (1 << bit) != 0)
        }).map(|(w, bit)| w * 64 + bit).collect();

    let mut model = Model::default();
    let mut warn = Warnings { list: Vec::new(), dropped: 0 };

    let id_layout = read_attrs(b, attr_size, attrs, &mut warn);

    let (data_range, data_whole) = data.range(bytes.len());
    if !data_whole {
        warn.push(PerfWarning::Truncated {
            offset: data.offset,
            what: "the data section",
            needed: data.size,
            available: data_range.len() as u64,
        });
    }

    let index = read_features(b, data, &features, &mut model, &mut warn);

    let buffers = walk_records(b, data_range, &index, id_layout, &mut model, &mut warn);
    model.auxtrace_buffers = buffers.len();
    check_index(&index, &buffers, &mut warn);
    build_fragments(&buffers, &mut model, &mut warn);

    if warn.dropped > 0 {
        warn.list.push(PerfWarning::Unsupported {
            offset: 0,
            what: format!("{} more warnings not listed", warn.dropped),
        });
    }
    model.warnings = warn.list;
    Ok(model)
}

/// Where the `sample_id` fields sit at the end of a kernel record: the
/// `sample_type` bits that select them, when every attribute has
/// `sample_id_all` with the same bits (perf requires the same for mixed events).
#[derive(Clone, Copy)]
struct IdLayout {
    bits: u64,
    len: usize,
}

impl IdLayout {
    fn new(bits: u64) -> IdLayout {
        IdLayout { bits, len: 8 * (bits & SAMPLE_ID_BITS).count_ones() as usize }
    }

    /// Read the trailer of `body`; `None` when the body is too short.
    fn read(&self, body: Buf<'_>) -> Option<SampleId> {
        let mut at = body.len().checked_sub(self.len)?;
        let mut s = SampleId::default();
        let mut next = |bit: u64| {
            let here = at;
            if self.bits & bit != 0 {
                at += 8;
                Some(here)
            } else {
                None
            }
        };
        if let Some(o) = next(S_TID) {
            s.pid = body.u32(o);
            s.tid = body.u32(o + 4);
        }
        if let Some(o) = next(S_TIME) {
            s.time = body.u64(o);
        }
        let _ = next(S_ID);
        let _ = next(S_STREAM_ID);
        if let Some(o) = next(S_CPU) {
            s.cpu = body.u32(o);
        }
        Some(s)
    }
}

fn read_attrs(b: Buf<'_>, attr_size: u64, attrs: Section, warn: &mut Warnings) -> Option<IdLayout> {
    // Each entry is a perf_event_attr followed by its id section {offset, size}.
    let (range, whole) = attrs.range(b.len());
    if !whole || attr_size < 64 || attr_size > attrs.size.max(64) {
        warn.push(PerfWarning::BadFeature {
            offset: attrs.offset,
            feature: 0,
            expected: format!(
                "an attribute section of entries of at least 64 bytes inside the file (entry size {attr_size}, section 0x{:x}+0x{:x}); record times and CPUs not read",
                attrs.offset, attrs.size
            ),
        });
        return None;
    }
    let sec = b.sub(range.clone())?;
    let step = attr_size as usize;
    let mut layout: Option<(u64, bool)> = None;
    let mut at = 0usize;
    while at + step <= sec.len() {
        let sample_type = sec.u64(at + 24).unwrap_or(0);
        let flags = sec.u64(at + 40).unwrap_or(0);
        let this = (sample_type & SAMPLE_ID_BITS, flags & ATTR_SAMPLE_ID_ALL != 0);
        match layout {
            None => layout = Some(this),
            Some(l) if l != this => {
                warn.push(PerfWarning::Unsupported {
                    offset: range.start as u64 + at as u64,
                    what: "events with different sample_id layouts: record times and CPUs not read".into(),
                });
                return None;
            }
            Some(_) => {}
        }
        at += step;
    }
    match layout {
        Some((bits, true)) => Some(IdLayout::new(bits)),
        _ => None,
    }
}

/// Feature sections. Returns the AUXTRACE index: file offsets of AUXTRACE
/// records, sorted.
fn read_features(b: Buf<'_>, data: Section, features: &[u32], model: &mut Model, warn: &mut Warnings) -> Vec<u64> {
    let table = data.offset.saturating_add(data.size);
    let mut index = Vec::new();
    for (k, &feat) in features.iter().enumerate() {
        let at = table.saturating_add(16 * k as u64);
        let Some(sec) = usize::try_from(at).ok().and_then(|a| Section::read(b, a)) else {
            warn.push(PerfWarning::Truncated {
                offset: at,
                what: "the feature section table",
                needed: 16 * (features.len() - k) as u64,
                available: (b.len() as u64).saturating_sub(at),
            });
            break;
        };
        if !matches!(feat, FEAT_BUILD_ID | FEAT_HOSTNAME | FEAT_OSRELEASE | FEAT_ARCH | FEAT_CMDLINE | FEAT_AUXTRACE) {
            continue;
        }
        let (range, whole) = sec.range(b.len());
        let Some(s) = b.sub(range).filter(|_| whole) else {
            warn.push(PerfWarning::Truncated {
                offset: sec.offset,
                what: "a feature section",
                needed: sec.size,
                available: (b.len() as u64).saturating_sub(sec.offset),
            });
            continue;
        };
        let bad = |expected: String| PerfWarning::BadFeature { offset: sec.offset, feature: feat, expected };
        match feat {
            FEAT_HOSTNAME | FEAT_OSRELEASE | FEAT_ARCH => match header_string(s, 0) {
                Some((v, _)) => {
                    let slot = match feat {
                        FEAT_HOSTNAME => &mut model.hostname,
                        FEAT_OSRELEASE => &mut model.os_release,
                        _ => &mut model.arch,
                    };
                    *slot = Some(v);
                }
                None => warn.push(bad("a length-prefixed string".into())),
            },
            FEAT_CMDLINE => {
                let n = s.u32(0).unwrap_or(0);
                let mut args = Vec::new();
                let mut at = 4;
                // Each string takes at least 4 bytes, so the section bounds the loop.
                for _ in 0..n {
                    match header_string(s, at) {
                        Some((v, next)) => {
                            args.push(v);
                            at = next;
                        }
                        None => {
                            warn.push(bad(format!("{n} length-prefixed strings, found {}", args.len())));
                            break;
                        }
                    }
                }
                model.cmdline = Some(args);
            }
            FEAT_BUILD_ID => read_build_ids(s, sec.offset, model, warn),
            _ => index = read_auxtrace_index(s, sec.offset, warn),
        }
    }
    index.sort_unstable();
    index
}

/// A perf header string: u32 length, then that many bytes, NUL padded.
fn header_string(s: Buf<'_>, at: usize) -> Option<(String, usize)> {
    let n = s.u32(at)? as usize;
    let body = s.bytes(at + 4, n)?;
    let end = body.iter().position(|&c| c == 0).unwrap_or(body.len());
    Some((String::from_utf8_lossy(&body[..end]).into_owned(), at + 4 + n))
}

/// `BUILD_ID` entries: a record header, pid, 24 bytes of build id (20 of ID,
/// then with `PERF_RECORD_MISC_BUILD_ID_SIZE` its length), the file name.
fn read_build_ids(s: Buf<'_>, base: u64, model: &mut Model, warn: &mut Warnings) {
    let mut at = 0usize;
    while at < s.len() {
        let (Some(misc), Some(size)) = (s.u16(at + 4), s.u16(at + 6)) else { break };
        let size = usize::from(size);
        let Some(e) = s.sub(at..at.saturating_add(size)).filter(|_| size >= 36) else {
            warn.push(PerfWarning::BadFeature {
                offset: base + at as u64,
                feature: FEAT_BUILD_ID,
                expected: format!("a build-id entry of at least 36 bytes inside the section, size {size}"),
            });
            break;
        };
        let raw = e.bytes(12, 20).unwrap_or(&[]);
        let len = (misc & MISC_BUILD_ID_SIZE != 0).then(|| e.bytes(32, 1).map_or(20, |l| l[0]));
        model.build_ids.push(BuildIdEntry {
            pid: e.u32(8).unwrap_or(0) as i32,
            misc,
            build_id: BuildId::new(raw, len),
            filename: e.cstr(36),
        });
        at += size;
    }
}

/// The `HEADER_AUXTRACE` index: Linux perf writes a u64 count then
/// `{file offset, size}` pairs; simpleperf writes the pairs alone. The
/// section size tells the forms apart (8 + 16n against 16n bytes).
fn read_auxtrace_index(s: Buf<'_>, base: u64, warn: &mut Warnings) -> Vec<u64> {
    let (first, n) = if s.len() % 16 == 8 {
        let nr = s.u64(0).unwrap_or(0);
        let room = (s.len() / 16) as u64;
        if nr != room {
            warn.push(PerfWarning::BadFeature {
                offset: base,
                feature: FEAT_AUXTRACE,
                expected: format!("an index of {nr} entries, the section holds {room}"),
            });
        }
        (8, nr.min(room) as usize)
    } else if s.len().is_multiple_of(16) {
        (0, s.len() / 16)
    } else {
        warn.push(PerfWarning::BadFeature {
            offset: base,
            feature: FEAT_AUXTRACE,
            expected: format!("an index of 16-byte entries (with or without a count), found {} bytes", s.len()),
        });
        return Vec::new();
    };
    (0..n).filter_map(|k| s.u64(first + 16 * k)).collect()
}

fn walk_records(
    b: Buf<'_>,
    data: Range<usize>,
    index: &[u64],
    ids: Option<IdLayout>,
    model: &mut Model,
    warn: &mut Warnings,
) -> Vec<AuxBuffer> {
    let mut buffers = Vec::new();
    let mut hw_ids: BTreeMap<u32, (u8, u64)> = BTreeMap::new();
    let mut compressed_seen = false;
    let end = data.end;
    let mut pos = data.start;
    while pos < end {
        let (rtype, misc, size) = match (b.u32(pos), b.u16(pos + 4), b.u16(pos + 6)) {
            (Some(t), Some(m), Some(s)) if pos + 8 <= end => (t, m, usize::from(s)),
            _ => (0, 0, 0),
        };
        let rec_end = pos + size;
        if size < 8 || rec_end > end {
            let reason = if size < 8 && pos + 8 <= end {
                format!("record size {size} (a record is at least 8 bytes)")
            } else {
                format!("record of {size} bytes runs past the data section end 0x{end:x}")
            };
            // The index names later AUXTRACE records: reading can go on there.
            let next = index.iter().copied().find(|&o| o > pos as u64 && o < end as u64);
            warn.push(PerfWarning::RecordsLost { offset: pos as u64, reason, resumed_at: next });
            match next {
                Some(n) => {
                    pos = n as usize;
                    continue;
                }
                None => break,
            }
        }
        let offset = pos as u64;
        let body = b.sub(pos + 8..rec_end).unwrap_or(Buf::new(&[], b.big));
        let mut next_pos = rec_end;
        let sample = if rtype < USER_TYPE_START { ids.and_then(|l| l.read(body)) } else { None };
        // Bytes of the body before the sample_id trailer.
        let fixed_len = match (rtype < USER_TYPE_START, ids) {
            (true, Some(l)) => body.len().checked_sub(l.len),
            _ => Some(body.len()),
        };
        let sample = sample.unwrap_or_default();
        let bad = |need: usize| PerfWarning::BadRecord {
            offset,
            record_type: rtype,
            size: size as u64,
            expected: format!("at least {} bytes", 8 + need + ids.map_or(0, |l| l.len)),
        };
        let fixed = |need: usize| fixed_len.filter(|&l| l >= need);
        match rtype {
            REC_MMAP | REC_MMAP2 => {
                let need = if rtype == REC_MMAP { 32 } else { 64 };
                let Some(flen) = fixed(need) else {
                    warn.push(bad(need));
                    pos = next_pos;
                    continue;
                };
                let f = body.sub(0..flen).unwrap_or(body);
                let mmap2 = rtype == REC_MMAP2;
                let build_id = (mmap2 && misc & MISC_MMAP_BUILD_ID != 0).then(|| {
                    let len = f.bytes(32, 1).map_or(20, |l| l[0]);
                    BuildId::new(f.bytes(36, 20).unwrap_or(&[]), Some(len))
                });
                model.mmaps.push(MmapRecord {
                    offset,
                    misc,
                    pid: f.u32(0).unwrap_or(0),
                    tid: f.u32(4).unwrap_or(0),
                    addr: f.u64(8).unwrap_or(0),
                    len: f.u64(16).unwrap_or(0),
                    pgoff: f.u64(24).unwrap_or(0),
                    filename: f.cstr(need),
                    build_id,
                    prot: if mmap2 { f.u32(56) } else { None },
                    sample,
                });
            }
            REC_COMM => {
                let Some(flen) = fixed(8) else {
                    warn.push(bad(8));
                    pos = next_pos;
                    continue;
                };
                let f = body.sub(0..flen).unwrap_or(body);
                model.comms.push(CommRecord {
                    offset,
                    pid: f.u32(0).unwrap_or(0),
                    tid: f.u32(4).unwrap_or(0),
                    comm: f.cstr(8),
                    exec: misc & MISC_COMM_EXEC != 0,
                    sample,
                });
            }
            REC_ITRACE_START => {
                if fixed(8).is_none() {
                    warn.push(bad(8));
                } else {
                    model.itrace_starts.push(ItraceStart {
                        offset,
                        pid: body.u32(0).unwrap_or(0),
                        tid: body.u32(4).unwrap_or(0),
                        sample,
                    });
                }
            }
            REC_SWITCH | REC_SWITCH_CPU_WIDE => {
                let wide = rtype == REC_SWITCH_CPU_WIDE;
                if wide && fixed(8).is_none() {
                    warn.push(bad(8));
                } else {
                    model.switches.push(SwitchRecord {
                        offset,
                        out: misc & MISC_SWITCH_OUT != 0,
                        preempt: misc & MISC_SWITCH_OUT_PREEMPT != 0,
                        next_prev_pid: if wide { body.u32(0) } else { None },
                        next_prev_tid: if wide { body.u32(4) } else { None },
                        sample,
                    });
                }
            }
            REC_AUX => {
                if fixed(24).is_none() {
                    warn.push(bad(24));
                } else {
                    model.aux_records.push(AuxRecord {
                        offset,
                        aux_offset: body.u64(0).unwrap_or(0),
                        aux_size: body.u64(8).unwrap_or(0),
                        flags: AuxFlags(body.u64(16).unwrap_or(0)),
                        sample,
                    });
                }
            }
            REC_AUX_OUTPUT_HW_ID => match fixed(8).and_then(|_| body.u64(0)) {
                None => warn.push(bad(8)),
                Some(hw) => note_hw_id(offset, hw, sample.cpu, &mut hw_ids, warn),
            },
            REC_AUXTRACE_INFO => {
                let kind = body.u32(0);
                if kind != Some(AUXTRACE_TYPE_CS_ETM) {
                    warn.push(PerfWarning::Unsupported {
                        offset,
                        what: format!("AUXTRACE_INFO of type {kind:?} (not CoreSight, type 3) skipped"),
                    });
                } else if model.auxtrace_info.is_some() {
                    warn.push(PerfWarning::Unsupported { offset, what: "a second AUXTRACE_INFO record skipped".into() });
                } else {
                    let p = body.sub(8..body.len()).unwrap_or(Buf::new(&[], b.big));
                    let mut w = Vec::new();
                    if let Some(r) = cs_etm::parse_info(p, offset + 16, offset, &mut w) {
                        model.auxtrace_info = Some(r.info);
                        model.cpus = r.cpus;
                    }
                    for x in w {
                        warn.push(x);
                    }
                }
            }
            REC_AUXTRACE => {
                if body.len() < 40 {
                    warn.push(bad(40));
                } else {
                    let want = body.u64(0).unwrap_or(0);
                    let start = rec_end;
                    let avail = (end - start) as u64;
                    let take = want.min(avail) as usize;
                    if want > avail {
                        warn.push(PerfWarning::Truncated {
                            offset,
                            what: "AUXTRACE data",
                            needed: want,
                            available: avail,
                        });
                    }
                    let cpu = body.u32(32).unwrap_or(u32::MAX);
                    buffers.push(AuxBuffer {
                        record_offset: offset,
                        cpu: if cpu == u32::MAX { -1 } else { cpu.min(i32::MAX as u32) as i32 },
                        tid: body.u32(28).unwrap_or(0),
                        aux_offset: body.u64(8).unwrap_or(0),
                        data: start..start + take,
                    });
                    next_pos = start + take;
                }
            }
            REC_COMPRESSED | REC_COMPRESSED2 if !compressed_seen => {
                warn.push(PerfWarning::Unsupported {
                    offset,
                    what: "compressed records (perf record -z) are not read; record without -z".into(),
                });
                compressed_seen = true;
            }
            _ => {}
        }
        pos = next_pos;
    }
    for cpu in model.cpus.iter_mut() {
        if let Some(&(id, _)) = hw_ids.get(&cpu.cpu) {
            cpu.trace_id = id;
            cpu.trace_id_source = TraceIdSource::HwIdRecord;
        }
    }
    buffers
}

/// `PERF_RECORD_AUX_OUTPUT_HW_ID` (cs-etm.h `CS_AUX_HW_ID_*`): trace ID in
/// bits [7:0], major version in [63:56] (0 is the only one defined).
fn note_hw_id(offset: u64, hw: u64, cpu: Option<u32>, ids: &mut BTreeMap<u32, (u8, u64)>, warn: &mut Warnings) {
    let major = hw >> 56;
    let id = (hw & 0xff) as u8;
    let problem = if major != 0 {
        Some(format!("version 0, found major version {major}"))
    } else if !(1..0x70).contains(&id) {
        Some(format!("a trace ID in 0x01..0x6f, found 0x{id:x}"))
    } else if cpu.is_none() {
        Some("a CPU in the record's sample_id".into())
    } else {
        None
    };
    if let Some(expected) = problem {
        warn.push(PerfWarning::TraceId { offset, expected });
        return;
    }
    let cpu = cpu.unwrap_or(0);
    match ids.get(&cpu) {
        Some(&(prev, at)) if prev != id => warn.push(PerfWarning::TraceId {
            offset,
            expected: format!("CPU {cpu} to keep trace ID 0x{prev:x} given at 0x{at:x}, found 0x{id:x}"),
        }),
        Some(_) => {}
        None => {
            ids.insert(cpu, (id, offset));
        }
    }
}

/// Every index entry should name an AUXTRACE record that was read.
fn check_index(index: &[u64], buffers: &[AuxBuffer], warn: &mut Warnings) {
    let mut seen: Vec<u64> = buffers.iter().map(|b| b.record_offset).collect();
    seen.sort_unstable();
    if let Some(&bad) = index.iter().find(|o| seen.binary_search(o).is_err()) {
        warn.push(PerfWarning::BadFeature {
            offset: bad,
            feature: FEAT_AUXTRACE,
            expected: "the AUXTRACE index to point at AUXTRACE records".into(),
        });
    }
}

/// Which buffers an AUX record may refer to: CPU-wide buffers by CPU,
/// per-thread buffers (cpu -1) by thread, as cs-etm.c matches them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Queue {
    Cpu(i32),
    Thread(u32),
}

fn build_fragments(buffers: &[AuxBuffer], model: &mut Model, warn: &mut Warnings) {
    let mut queues: BTreeMap<Queue, Vec<usize>> = BTreeMap::new();
    for (k, buf) in buffers.iter().enumerate() {
        let q = if buf.cpu < 0 { Queue::Thread(buf.tid) } else { Queue::Cpu(buf.cpu) };
        queues.entry(q).or_default().push(k);
    }
    for q in queues.values_mut() {
        q.sort_by_key(|&k| buffers[k].aux_offset);
    }
    let mut frags = Vec::new();
    if !buffers.is_empty() {
        for rec in &model.aux_records {
            if rec.aux_size == 0 {
                continue;
            }
            let by_cpu = rec.sample.cpu.and_then(|c| queues.get(&Queue::Cpu(c.min(i32::MAX as u32) as i32)));
            let by_tid = || rec.sample.tid.and_then(|t| queues.get(&Queue::Thread(t)));
            let only = || (queues.len() == 1).then(|| queues.values().next()).flatten();
            let Some(queue) = by_cpu.or_else(by_tid).or_else(only) else {
                warn.push(PerfWarning::AuxWithoutData { offset: rec.offset, aux_offset: rec.aux_offset, aux_size: rec.aux_size, found: 0 });
                continue;
            };
            match place(rec, queue, buffers) {
                Ok(f) => frags.push(f),
                Err(found) => warn.push(PerfWarning::AuxWithoutData {
                    offset: rec.offset,
                    aux_offset: rec.aux_offset,
                    aux_size: rec.aux_size,
                    found,
                }),
            }
        }
        if frags.is_empty() {
            // No AUX records to split the buffers (older writers): each
            // buffer decodes as one piece.
            frags = buffers
                .iter()
                .map(|buf| buf.fragment(buf.aux_offset, buf.data.clone(), AuxFlags(0), None, buf.record_offset))
                .collect();
        }
    }
    model.fragments = frags;
}

/// The fragment of `rec` inside one buffer of `queue` (sorted by AUX
/// offset), or how many of its bytes were found. In overwrite (snapshot)
/// mode the record's offset is the head, the end of the data, and its size
/// is clamped to the buffer (cs-etm.c `cs_etm__queue_aux_fragment`).
fn place(rec: &AuxRecord, queue: &[usize], buffers: &[AuxBuffer]) -> Result<AuxFragment, u64> {
    // The last buffer starting at or before the byte that must be inside it.
    let probe = if rec.flags.overwrite() { rec.aux_offset.saturating_sub(1) } else { rec.aux_offset };
    let p = queue.partition_point(|&k| buffers[k].aux_offset <= probe);
    let Some(&k) = p.checked_sub(1).and_then(|i| queue.get(i)) else { return Err(0) };
    let buf = &buffers[k];
    let blen = buf.data.len() as u64;
    let (start, size) = if rec.flags.overwrite() {
        let size = rec.aux_size.min(blen);
        (rec.aux_offset.saturating_sub(size), size)
    } else {
        (rec.aux_offset, rec.aux_size)
    };
    let buf_end = buf.aux_offset.saturating_add(blen);
    if start < buf.aux_offset || start >= buf_end {
        return Err(0);
    }
    let end = start.saturating_add(size);
    if end > buf_end {
        return Err(buf_end - start);
    }
    let from = buf.data.start + (start - buf.aux_offset) as usize;
    Ok(buf.fragment(start, from..from + size as usize, rec.flags, rec.sample.time, rec.offset))
}
