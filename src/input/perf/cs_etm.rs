//! The CS_ETM private array of `PERF_RECORD_AUXTRACE_INFO` (type 70,
//! `auxtrace_type` 3): a global header and one block per CPU.
//!
//! Layout (Linux perf `tools/perf/util/cs-etm.h`, `cs_etm__process_auxtrace_info_full`):
//! the header is three u64s, `CS_HEADER_VERSION`, `CS_PMU_TYPE_CPUS`
//! (PMU type << 32 | CPU count) and `CS_ETM_SNAPSHOT`. Each CPU block starts
//! with a magic and the CPU number; version 0 then has a fixed number of
//! parameters per magic (4 for ETMv3/PTM, 7 for ETMv4, no ETE), versions 1
//! and 2 a parameter count followed by that many parameters, of which readers
//! take the ones they know and skip the rest.

use super::format::*;
use super::buf::Buf;
use super::{AuxtraceInfo, CpuTrace, PerfWarning, TraceIdSource, TraceProtocol};

/// Parameter names in block order (after magic, CPU and, from version 1,
/// the count), as snapshot `.ini` files name the registers.
pub(crate) const ETM3_PARAMS: [&str; 4] = ["ETMCR", "ETMTRACEIDR", "ETMCCER", "ETMIDR"];
pub(crate) const ETM4_PARAMS: [&str; 8] =
    ["TRCCONFIGR", "TRCTRACEIDR", "TRCIDR0", "TRCIDR1", "TRCIDR2", "TRCIDR8", "TRCAUTHSTATUS", "TS_SOURCE"];
pub(crate) const ETE_PARAMS: [&str; 9] = [
    "TRCCONFIGR",
    "TRCTRACEIDR",
    "TRCIDR0",
    "TRCIDR1",
    "TRCIDR2",
    "TRCIDR8",
    "TRCAUTHSTATUS",
    "TRCDEVARCH",
    "TS_SOURCE",
];

/// Version-0 parameter counts (`CS_ETM_NR_TRC_PARAMS_V0`, `CS_ETMV4_NR_TRC_PARAMS_V0`).
const ETM3_PARAMS_V0: usize = 4;
const ETM4_PARAMS_V0: usize = 7;

/// The newest header version whose layout is known.
const KNOWN_VERSION: u64 = 2;

/// The result of reading one AUXTRACE_INFO private array.
pub(crate) struct CsEtmInfo {
    pub info: AuxtraceInfo,
    pub cpus: Vec<CpuTrace>,
}

/// Read the private array `p`, which starts at file offset `base`;
/// `record_offset` is where the AUXTRACE_INFO record starts.
pub(crate) fn parse_info(p: Buf<'_>, base: u64, record_offset: u64, warn: &mut Vec<PerfWarning>) -> Option<CsEtmInfo> {
    let word = |i: usize| p.u64(i.checked_mul(8)?);
    let (Some(version), Some(type_cpus), Some(snapshot)) = (word(0), word(1), word(2)) else {
        warn.push(PerfWarning::AuxtraceInfo {
            offset: record_offset,
            expected: format!("a 24-byte header (version, PMU type and CPU count, snapshot), found {} bytes", p.len()),
        });
        return None;
    };
    let info = AuxtraceInfo {
        offset: record_offset,
        version,
        pmu_type: (type_cpus >> 32) as u32,
        nr_cpus: type_cpus as u32,
        snapshot: snapshot != 0,
    };
    if version > KNOWN_VERSION {
        warn.push(PerfWarning::AuxtraceInfo {
            offset: base,
            expected: format!("header version 0, 1 or 2, found {version}; read with the version 2 layout"),
        });
    }
    let words = p.len() / 8;
    let mut cpus = Vec::new();
    let mut i = 3usize;
    // At most one block per CPU announced, and every block takes at least
    // two words, so the loop ends by the smaller of the two.
    while cpus.len() < info.nr_cpus as usize && i < words {
        let block_off = base + (i as u64) * 8;
        let Some(magic) = word(i) else { break };
        let (protocol_base, names): (TraceProtocol, &[&'static str]) = match magic {
            MAGIC_ETM3 => (TraceProtocol::Etm3, &ETM3_PARAMS),
            MAGIC_ETM4 => (TraceProtocol::Etm4, &ETM4_PARAMS),
            MAGIC_ETE if version >= 1 => (TraceProtocol::Ete, &ETE_PARAMS),
            _ => {
                if version == 0 {
                    warn.push(PerfWarning::AuxtraceInfo {
                        offset: block_off,
                        expected: format!(
                            "a CPU block magic 0x{MAGIC_ETM3:x} or 0x{MAGIC_ETM4:x} (version 0), found 0x{magic:x}; the remaining CPUs are not read"
                        ),
                    });
                    break;
                }
                // Versions 1+ say how long the block is: skip it.
                let Some(n) = word(i + 2) else { break };
                warn.push(PerfWarning::AuxtraceInfo {
                    offset: block_off,
                    expected: format!(
                        "a CPU block magic 0x{MAGIC_ETM3:x}, 0x{MAGIC_ETM4:x} or 0x{MAGIC_ETE:x}, found 0x{magic:x}; block skipped"
                    ),
                });
                match usize::try_from(n).ok().and_then(|n| n.checked_add(i + 3)).filter(|&e| e <= words) {
                    Some(next) => {
                        i = next;
                        continue;
                    }
                    None => break,
                }
            }
        };
        let Some(cpu) = word(i + 1) else { break };
        let (first, count) = if version == 0 {
            (i + 2, if protocol_base == TraceProtocol::Etm3 { ETM3_PARAMS_V0 } else { ETM4_PARAMS_V0 })
        } else {
            let Some(n) = word(i + 2) else {
                warn.push(PerfWarning::AuxtraceInfo { offset: block_off, expected: "a parameter count after the CPU number".into() });
                break;
            };
            match usize::try_from(n).ok().filter(|&n| n <= words) {
                Some(n) => (i + 3, n),
                None => {
                    warn.push(PerfWarning::AuxtraceInfo {
                        offset: block_off + 16,
                        expected: format!("a parameter count that fits the record, found {n}"),
                    });
                    break;
                }
            }
        };
        let end = first.saturating_add(count);
        if end > words {
            warn.push(PerfWarning::AuxtraceInfo {
                offset: block_off,
                expected: format!(
                    "{count} parameters for CPU {cpu}, the record has room for {}; the remaining CPUs are not read",
                    words.saturating_sub(first)
                ),
            });
            break;
        }
        let registers: Vec<(&'static str, u64)> =
            names.iter().take(count).enumerate().filter_map(|(k, &n)| Some((n, word(first + k)?))).collect();
        let protocol = if protocol_base == TraceProtocol::Etm3 {
            let etmidr = registers.iter().find(|(n, _)| *n == "ETMIDR").map_or(0, |&(_, v)| v);
            // cs-etm.c: ETMIDR bits [11:8] == 3 marks a PTM.
            if etmidr & 0xf00 == 0x300 {
                TraceProtocol::Ptm
            } else {
                TraceProtocol::Etm3
            }
        } else {
            protocol_base
        };
        let id_reg = if protocol_base == TraceProtocol::Etm3 { "ETMTRACEIDR" } else { "TRCTRACEIDR" };
        let trace_id = registers.iter().find(|(n, _)| *n == id_reg).map_or(0, |&(_, v)| (v & 0x7f) as u8);
        cpus.push(CpuTrace {
            cpu: cpu as u32,
            protocol,
            trace_id,
            trace_id_source: TraceIdSource::Register,
            offset: block_off,
            registers,
        });
        i = end;
    }
    if cpus.len() != info.nr_cpus as usize || i != words || !p.len().is_multiple_of(8) {
        warn.push(PerfWarning::AuxtraceInfo {
            offset: record_offset,
            expected: format!(
                "{} CPU blocks filling the record's {} bytes of parameters, read {} CPU blocks in {} bytes",
                info.nr_cpus,
                p.len(),
                cpus.len(),
                i.min(words) * 8
            ),
        });
    }
    Some(CsEtmInfo { info, cpus })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn etm4_block(cpu: u64, id: u64, n: Option<u64>) -> Vec<u64> {
        let mut v = vec![MAGIC_ETM4, cpu];
        if let Some(n) = n {
            v.push(n);
        }
        v.extend([0x40, id, 0x28000ea1, 0x4100f422, 0x20001088, 0, 0x8c]);
        v
    }

    fn run(words: &[u64]) -> (Option<CsEtmInfo>, Vec<PerfWarning>) {
        let b = bytes(words);
        let mut w = Vec::new();
        let r = parse_info(Buf::new(&b, false), 0x100, 0xf0, &mut w);
        (r, w)
    }

    fn header(version: u64, ncpu: u64) -> Vec<u64> {
        vec![version, (8 << 32) | ncpu, 0]
    }

    /// One row per variant: the words, then CPUs read, protocols, trace IDs,
    /// and the number of warnings.
    #[test]
    fn variants_table() {
        let ete = |cpu: u64, extra: &[u64]| {
            let mut v = vec![MAGIC_ETE, cpu, 8 + extra.len() as u64, 0x1, 0x20 + cpu, 0x28000ea1, 0x4100f423, 0x20001088, 0, 0xcc, 0x47724a13];
            v.extend(extra);
            v
        };
        let etm3 = |cpu: u64, idr: u64| vec![MAGIC_ETM3, cpu, 0x1000, 0x12 + cpu, 0x344008f2, idr];
        let cat = |parts: Vec<Vec<u64>>| parts.concat();
        type Row = (&'static str, Vec<u64>, Vec<TraceProtocol>, Vec<u8>, usize);
        let rows: Vec<Row> = vec![
            ("v0 etm4", cat(vec![header(0, 2), etm4_block(0, 0x10, None), etm4_block(1, 0x12, None)]),
                vec![TraceProtocol::Etm4; 2], vec![0x10, 0x12], 0),
            ("v1 etm4", cat(vec![header(1, 2), etm4_block(0, 0x10, Some(7)), etm4_block(1, 0x12, Some(7))]),
                vec![TraceProtocol::Etm4; 2], vec![0x10, 0x12], 0),
            ("v2 ete", cat(vec![header(2, 2), ete(0, &[]), ete(1, &[])]), vec![TraceProtocol::Ete; 2], vec![0x20, 0x21], 0),
            ("v1 ete + trailing params", cat(vec![header(1, 2), ete(0, &[7, 0xdead, 0xbeef]), ete(1, &[9])]),
                vec![TraceProtocol::Ete; 2], vec![0x20, 0x21], 0),
            ("v0 etm3 and ptm", cat(vec![header(0, 2), etm3(0, 0x410cf250), etm3(1, 0x411cf300)]),
                vec![TraceProtocol::Etm3, TraceProtocol::Ptm], vec![0x12, 0x13], 0),
            ("v1 etm3", cat(vec![header(1, 1), vec![MAGIC_ETM3, 0, 4, 0x1000, 0x14, 0, 0x411cf300]]),
                vec![TraceProtocol::Ptm], vec![0x14], 0),
            ("v0 ete not allowed", cat(vec![header(0, 1), ete(0, &[])]), vec![], vec![], 2),
            ("size too small for cpus", cat(vec![header(1, 3), etm4_block(0, 0x10, Some(7))]),
                vec![TraceProtocol::Etm4], vec![0x10], 1),
            ("extra bytes after cpus", cat(vec![header(1, 1), etm4_block(0, 0x10, Some(7)), vec![1, 2]]),
                vec![TraceProtocol::Etm4], vec![0x10], 1),
            ("cut in a block", cat(vec![header(1, 2), etm4_block(0, 0x10, Some(7)), vec![MAGIC_ETM4, 1, 7, 0x40]]),
                vec![TraceProtocol::Etm4], vec![0x10], 2),
            ("unknown magic skipped in v1", cat(vec![header(1, 2), vec![0x6060606060606060, 0, 2, 1, 2], etm4_block(1, 0x12, Some(7))]),
                vec![TraceProtocol::Etm4], vec![0x12], 2),
            ("huge param count", cat(vec![header(1, 1), vec![MAGIC_ETM4, 0, u64::MAX, 1]]), vec![], vec![], 2),
            ("unknown version", cat(vec![header(3, 1), etm4_block(0, 0x10, Some(7))]), vec![TraceProtocol::Etm4], vec![0x10], 1),
            ("huge cpu count", cat(vec![header(1, 0xffff_ffff), etm4_block(0, 0x10, Some(7))]),
                vec![TraceProtocol::Etm4], vec![0x10], 1),
        ];
        for (name, words, protos, ids, nwarn) in rows {
            let (r, w) = run(&words);
            let r = r.unwrap_or_else(|| panic!("{name}: no header"));
            assert_eq!(r.cpus.iter().map(|c| c.protocol).collect::<Vec<_>>(), protos, "{name}");
            assert_eq!(r.cpus.iter().map(|c| c.trace_id).collect::<Vec<_>>(), ids, "{name}");
            assert_eq!(w.len(), nwarn, "{name}: {w:?}");
        }
    }

    #[test]
    fn register_names_and_values() {
        let (r, _) = run(&[header(1, 1), etm4_block(3, 0x1e, Some(7))].concat());
        let c = &r.unwrap().cpus[0];
        assert_eq!(c.cpu, 3);
        assert_eq!(c.register("TRCCONFIGR"), Some(0x40));
        assert_eq!(c.register("TRCIDR1"), Some(0x4100f422));
        assert_eq!(c.register("TRCAUTHSTATUS"), Some(0x8c));
        assert_eq!(c.register("TS_SOURCE"), None);
        assert_eq!(c.register("TRCDEVARCH"), None);
        assert_eq!(c.offset, 0x100 + 24);
    }

    #[test]
    fn short_header() {
        let (r, w) = run(&[1, 2]);
        assert!(r.is_none());
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].offset(), 0xf0);
    }
}
