//! The perf.data reader on simpleperf's recordings (`../shared/fixtures/perf`,
//! skipped with a note when absent) and on damaged copies of them.

use std::path::{Path, PathBuf};

use tracesight::input::perf::{PerfData, PerfError, PerfWarning, TraceIdSource, TraceProtocol};

fn fixture(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf/simpleperf").join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} not present", p.display());
        None
    }
}

#[test]
fn perf_etm_cpus_and_trace_ids() {
    let Some(p) = fixture("perf_etm.data") else { return };
    let d = PerfData::open(&p).unwrap();
    assert!(d.warnings().is_empty(), "{:?}", d.warnings());
    let info = d.auxtrace_info().unwrap();
    assert_eq!((info.version, info.nr_cpus, info.snapshot), (1, 8, false));
    assert_eq!(d.cpus().len(), 8);
    for (k, c) in d.cpus().iter().enumerate() {
        assert_eq!(c.cpu, k as u32);
        assert_eq!(c.protocol, TraceProtocol::Etm4);
        assert_eq!(c.trace_id, 0x10 + 2 * k as u8);
        assert_eq!(c.trace_id_source, TraceIdSource::Register);
        assert_eq!(c.register("TRCCONFIGR"), Some(0x40));
        assert_eq!(c.register("TRCTRACEIDR"), Some(0x10 + 2 * k as u64));
        assert_eq!(c.register("TRCAUTHSTATUS"), Some(0x8c));
        assert!(c.register("TRCIDR0").is_some() && c.register("TRCIDR1").is_some());
        assert!(c.register("TRCIDR2").is_some() && c.register("TRCIDR8").is_some());
        assert!(!c.is_ete());
    }
    // The configuration constructors take the lookup as it is.
    let c7 = d.cpu(7).unwrap();
    let cfg = tracesight::protocol::etm4::Etm4Config::from_registers(|n| c7.register(n), c7.is_ete(), None).unwrap();
    assert_eq!(cfg.trace_id(), 0x1e);
}

#[test]
fn perf_etm_fragments() {
    let Some(p) = fixture("perf_etm.data") else { return };
    let d = PerfData::open(&p).unwrap();
    assert_eq!(d.auxtrace_buffers(), 1);
    let f = d.fragments();
    assert_eq!(f.len(), 4);
    assert!(f.iter().all(|f| f.cpu == 7 && f.tid.is_none() && f.flags.0 == 0 && !f.flags.raw()));
    assert_eq!(f.iter().map(|f| f.aux_offset).collect::<Vec<_>>(), vec![0, 0x50, 0xa0, 0xf0]);
    assert_eq!(f.iter().map(|f| f.data.len()).collect::<Vec<_>>(), vec![0x50, 0x50, 0x50, 0x90]);
    assert_eq!(f.iter().map(|f| f.data.len()).sum::<usize>(), 0x180);
    // Contiguous pieces of the one AUXTRACE payload, in file order.
    for w in f.windows(2) {
        assert_eq!(w[0].data.end, w[1].data.start);
        assert!(w[0].record_offset < w[1].record_offset);
        assert!(w[0].time.unwrap() < w[1].time.unwrap());
    }
    // The AUXTRACE record is at 0x26a8; its 48-byte header precedes the data.
    assert_eq!(f[0].data.start, 0x26a8 + 48);
    // Formatted CoreSight frames: 16-byte frames, so every fragment is whole frames.
    assert!(f.iter().all(|f| d.fragment_data(f).len() % 16 == 0));
    assert!(d.has_trace_data());
}

#[test]
fn perf_etm_mmaps_build_ids_and_features() {
    let Some(p) = fixture("perf_etm.data") else { return };
    let d = PerfData::open(&p).unwrap();
    let m = d.mmaps().iter().find(|m| m.filename.ends_with("etm_test_loop")).unwrap();
    assert_eq!(m.addr, 0x582b2b0000);
    assert!(d.mmaps().iter().any(|x| x.filename == m.filename && x.prot.is_some_and(|p| p & 4 != 0)));
    assert_eq!(m.filename, "/data/local/tmp/etm_test_loop");
    assert_eq!((m.pid, m.len, m.pgoff, m.prot), (0x4353, 0x3000, 0, Some(1)));
    assert!(m.build_id.is_none(), "simpleperf's MMAP2 records carry no build id");
    let id = d.build_id_for(m).unwrap();
    assert_eq!(id.hex(), "0c9a20bf9c009d0e4e8bbf9fad0300ae");
    assert_eq!(id.padded_hex(), "0c9a20bf9c009d0e4e8bbf9fad0300ae00000000");
    assert!(!id.length_recorded());
    assert!(id.matches(&[0x0c, 0x9a, 0x20, 0xbf, 0x9c, 0x00, 0x9d, 0x0e, 0x4e, 0x8b, 0xbf, 0x9f, 0xad, 0x03, 0x00, 0xae]));
    assert!(!id.matches(&[0x0c, 0x9a]));
    assert_eq!(d.build_ids().len(), 8);
    let cmd = d.cmdline().unwrap();
    assert_eq!(cmd[0], "/data/local/tmp/simpleperf64");
    assert_eq!(cmd.last().unwrap(), "./etm_test_loop");
    assert_eq!(d.arch(), Some("aarch64"));
    assert_eq!(d.os_release(), Some("4.19.205-g248f514543f5-ab7734026"));
    assert!(d.comms().iter().any(|c| c.comm == "etm_test_loop" && c.exec));
    assert_eq!(d.itrace_starts().len(), 2);
    assert!(d.itrace_starts().iter().all(|s| s.sample.cpu == Some(7) && s.sample.time.is_some()));
}

#[test]
fn missing_aux_data_reads_without_fragments() {
    let Some(p) = fixture("perf_with_missing_aux_data.data") else { return };
    let d = PerfData::open(&p).unwrap();
    assert!(d.warnings().is_empty(), "{:?}", d.warnings());
    assert!(d.fragments().is_empty());
    assert!(!d.has_trace_data());
    assert_eq!(d.aux_records().len(), 6);
    assert_eq!(d.cpus().len(), 8);
    assert!(d.cpus().iter().all(|c| c.protocol == TraceProtocol::Ete && c.register("TRCDEVARCH") == Some(0x47724a13)));
}

#[test]
fn not_perf_data() {
    let e = PerfData::from_bytes(b"hello world, not a perf file".to_vec(), "x.data").unwrap_err();
    assert!(matches!(e, PerfError::BadMagic { .. }));
    assert!(e.to_string().starts_with("x.data: offset 0x0"), "{e}");
    let e = PerfData::open(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_err();
    assert!(matches!(e, PerfError::NotAFile { .. }), "{e}");
    let mut pipe = b"PERFILE2".to_vec();
    pipe.extend(16u64.to_le_bytes());
    assert!(matches!(PerfData::from_bytes(pipe, "p").unwrap_err(), PerfError::PipeMode { .. }));
}

#[test]
fn auxtrace_past_the_end_keeps_what_is_there() {
    let Some(p) = fixture("perf_etm.data") else { return };
    let bytes = std::fs::read(&p).unwrap();
    // Cut inside the AUXTRACE payload (0x26a8 + 48 + 0x100).
    let cut = 0x26a8 + 48 + 0x100;
    let d = PerfData::from_bytes(bytes[..cut].to_vec(), "cut.data").unwrap();
    assert!(d.warnings().iter().any(|w| matches!(w, PerfWarning::Truncated { what: "AUXTRACE data", needed: 0x180, available: 0x100, .. })), "{:?}", d.warnings());
    // The first three AUX records (0x50 each) fit; the fourth does not.
    assert_eq!(d.fragments().len(), 3);
    assert!(d.warnings().iter().any(|w| matches!(w, PerfWarning::AuxWithoutData { found: 0x10, .. })));
    assert_eq!(d.cpus().len(), 8);
}

#[test]
fn damaged_record_in_the_middle_is_skipped() {
    let Some(p) = fixture("perf_etm.data") else { return };
    let mut bytes = std::fs::read(&p).unwrap();
    // Give the record after the AUXTRACE_INFO a size of 0.
    let data = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    let size_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o + 6], b[o + 7]]) as usize;
    let mut at = data;
    while u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) != 70 {
        at += size_at(&bytes, at);
    }
    at += size_at(&bytes, at);
    bytes[at + 6] = 0;
    bytes[at + 7] = 0;
    let d = PerfData::from_bytes(bytes, "damaged.data").unwrap();
    let w = d.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(matches!(w[0], PerfWarning::RecordsLost { resumed_at: Some(0x26a8), .. }), "{w:?}");
    assert_eq!(w[0].offset(), at as u64);
    // Header facts and the AUXTRACE data (found through the index) are kept;
    // the AUX records in between are lost, so the buffer decodes whole.
    assert_eq!(d.cpus().len(), 8);
    assert_eq!(d.fragments().len(), 1);
    assert_eq!(d.fragments()[0].data.len(), 0x180);
}
