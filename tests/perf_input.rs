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
    assert!(f.iter().all(|f| d.fragment_data(f).len().is_multiple_of(16)));
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

mod crafted {
    //! Recordings written with the synthesizer's perf.data writer, for what
    //! the fixtures do not cover.
    use std::io::Cursor;

    use tracesight::input::perf::{PerfData, PerfWarning, TraceIdSource, TraceProtocol};
    use tracesight::synth::perf::{CpuBlock, IndexForm, PerfWriter, Sample};

    fn ete(cpu: u32, legacy_id: u64) -> CpuBlock {
        CpuBlock { cpu, ete: true, params: vec![0x1, legacy_id, 0x28000ea1, 0x4100f423, 0x20001088, 0, 0xcc, 0x47724a13] }
    }

    fn s(pid: u32, cpu: u32, time: u64) -> Sample {
        Sample { pid, tid: pid, time, cpu }
    }

    fn write(f: impl FnOnce(&mut PerfWriter<Cursor<Vec<u8>>>), index: IndexForm, sized: bool) -> Vec<u8> {
        let mut w = PerfWriter::new(Cursor::new(Vec::new())).unwrap();
        f(&mut w);
        w.finish(index, sized).unwrap().into_inner()
    }

    /// Two CPUs, v2 header with legacy IDs 0, trace IDs from HW_ID records,
    /// raw TRBE data split in two AUX records on CPU 1, one on CPU 0.
    fn two_cpus(w: &mut PerfWriter<Cursor<Vec<u8>>>) {
        w.auxtrace_info(2, &[ete(0, 0), ete(1, 0)]).unwrap();
        w.comm(100, 100, "prog", true, s(100, 0, 1)).unwrap();
        w.mmap2(s(100, 0, 2), 0x400000, 0x1000, 0, 5, "/bin/prog", Some(&[0xab; 20])).unwrap();
        w.mmap2(s(100, 0, 2), 0x7f0000, 0x2000, 0x1000, 5, "/lib/libc.so", None).unwrap();
        w.aux_output_hw_id(0x21, s(100, 0, 3)).unwrap();
        w.aux_output_hw_id(0x22, s(100, 1, 3)).unwrap();
        w.itrace_start(s(100, 1, 4)).unwrap();
        w.aux(0, 24, 0x100, s(100, 1, 5)).unwrap();
        w.aux(24, 16, 0x100 | 0x1, s(100, 1, 6)).unwrap();
        w.aux(0, 10, 0x100 | 0x4, s(100, 0, 7)).unwrap();
        w.auxtrace(&[1; 40], 0, 1, 100).unwrap();
        w.auxtrace(&[2; 10], 0, 0, 100).unwrap();
        w.build_id(-1, &[0xcd; 16], "/lib/libc.so");
        w.cmdline(&["perf".into(), "record".into()]);
        w.hostname("synth");
    }

    #[test]
    fn hw_ids_raw_flags_and_linux_index() {
        for form in [IndexForm::Linux, IndexForm::Simpleperf, IndexForm::None] {
            let d = PerfData::from_bytes(write(two_cpus, form, true), "two.data").unwrap();
            assert!(d.warnings().is_empty(), "{form:?}: {:?}", d.warnings());
            assert_eq!(d.auxtrace_info().unwrap().version, 2);
            let ids: Vec<_> = d.cpus().iter().map(|c| (c.protocol, c.trace_id, c.trace_id_source)).collect();
            assert_eq!(
                ids,
                vec![(TraceProtocol::Ete, 0x21, TraceIdSource::HwIdRecord), (TraceProtocol::Ete, 0x22, TraceIdSource::HwIdRecord)]
            );
            // The lookup gives the effective ID; the recorded legacy value stays readable.
            assert_eq!(d.cpu(1).unwrap().register("TRCTRACEIDR"), Some(0x22));
            assert_eq!(d.cpu(1).unwrap().recorded("TRCTRACEIDR"), Some(0));
            let f = d.fragments();
            assert_eq!(f.len(), 3);
            assert_eq!((f[0].cpu, f[0].data.len(), f[0].flags.raw(), f[0].time), (1, 24, true, Some(5)));
            assert_eq!((f[1].cpu, f[1].data.len(), f[1].flags.truncated()), (1, 16, true));
            assert_eq!((f[2].cpu, f[2].data.len(), f[2].flags.partial()), (0, 10, true));
            assert_eq!(d.fragment_data(&f[2]), &[2; 10]);
            assert_eq!(d.fragment_data(&f[1]), &[1; 16]);
            let prog = &d.mmaps()[0];
            assert_eq!(prog.build_id.unwrap().bytes(), &[0xab; 20]);
            assert!(prog.build_id.unwrap().length_recorded());
            let libc = &d.mmaps()[1];
            assert_eq!(d.build_id_for(libc).unwrap().bytes(), &[0xcd; 16]);
            assert_eq!(d.cmdline().unwrap(), &["perf".to_string(), "record".to_string()]);
            assert_eq!(d.hostname(), Some("synth"));
        }
    }

    #[test]
    fn per_thread_recording() {
        let bytes = write(
            |w| {
                w.auxtrace_info(1, &[ete(0, 0x10)]).unwrap();
                // AUX records carry the CPU the thread ran on; the buffers are per thread (cpu -1).
                w.aux(0, 8, 0, s(7, 3, 1)).unwrap();
                w.aux(0, 16, 0, s(8, 2, 2)).unwrap();
                w.auxtrace(&[7; 8], 0, -1, 7).unwrap();
                w.auxtrace(&[8; 16], 0, -1, 8).unwrap();
            },
            IndexForm::Linux,
            false,
        );
        let d = PerfData::from_bytes(bytes, "thread.data").unwrap();
        assert!(d.warnings().is_empty(), "{:?}", d.warnings());
        assert_eq!(d.cpus()[0].trace_id_source, TraceIdSource::Register);
        let f = d.fragments();
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].cpu, f[0].tid), (-1, Some(7)));
        assert_eq!(d.fragment_data(&f[0]), &[7; 8]);
        assert_eq!((f[1].cpu, f[1].tid), (-1, Some(8)));
        assert_eq!(d.fragment_data(&f[1]), &[8; 16]);
    }

    #[test]
    fn buffers_without_aux_records_decode_whole() {
        let bytes = write(
            |w| {
                w.auxtrace_info(1, &[ete(0, 0x10)]).unwrap();
                w.auxtrace(&[5; 12], 0, 0, 1).unwrap();
            },
            IndexForm::Simpleperf,
            false,
        );
        let d = PerfData::from_bytes(bytes, "whole.data").unwrap();
        let f = d.fragments();
        assert_eq!(f.len(), 1);
        // Padded to 8: the AUXTRACE size says 16.
        assert_eq!(f[0].data.len(), 16);
        assert_eq!(&d.fragment_data(&f[0])[..12], &[5; 12]);
    }

    #[test]
    fn snapshot_mode_offsets_point_at_the_head() {
        let bytes = write(
            |w| {
                w.auxtrace_info(1, &[ete(0, 0x10)]).unwrap();
                // Overwrite mode: the AUX offset is the head (end of the data).
                w.aux(0x1040, 0x40, 0x2, s(1, 0, 1)).unwrap();
                w.auxtrace(&[3; 0x40], 0x1000, 0, 1).unwrap();
            },
            IndexForm::Linux,
            false,
        );
        let d = PerfData::from_bytes(bytes, "snap.data").unwrap();
        assert!(d.warnings().is_empty(), "{:?}", d.warnings());
        let f = &d.fragments()[0];
        assert_eq!((f.aux_offset, f.data.len(), f.flags.overwrite()), (0x1000, 0x40, true));
    }

    #[test]
    fn bad_hw_ids_are_warnings() {
        let bytes = write(
            |w| {
                w.auxtrace_info(2, &[ete(0, 0x10)]).unwrap();
                w.aux_output_hw_id(0x7a, s(1, 0, 1)).unwrap();
                w.aux_output_hw_id(0x12, s(1, 0, 1)).unwrap();
                w.aux_output_hw_id(0x14, s(1, 0, 1)).unwrap();
            },
            IndexForm::Linux,
            false,
        );
        let d = PerfData::from_bytes(bytes, "ids.data").unwrap();
        let w = d.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.iter().all(|w| matches!(w, PerfWarning::TraceId { .. })));
        assert_eq!(d.cpus()[0].trace_id, 0x12);
    }

    #[test]
    fn mmap_switch_and_short_records() {
        let bytes = write(
            |w| {
                let mut mmap = Vec::new();
                for v in [7u64 | 8 << 32, 0xffff_0000_0800_0000, 0x10000, 0] {
                    mmap.extend(v.to_le_bytes());
                }
                mmap.extend(b"[kernel.kallsyms]_text\0\0");
                w.raw_record(1, 1, &mmap, Some(s(7, 2, 9))).unwrap();
                let mut sw = Vec::new();
                sw.extend(42u32.to_le_bytes());
                sw.extend(43u32.to_le_bytes());
                w.raw_record(15, 0x2000 | 0x4000, &sw, Some(s(7, 2, 10))).unwrap();
                w.raw_record(14, 0, &[], Some(s(7, 2, 11))).unwrap();
                // An AUX record too short for its three fields: skipped with a warning.
                w.raw_record(11, 0, &[0; 8], Some(s(7, 2, 12))).unwrap();
                // A user record type this reader does not know: ignored.
                w.raw_record(90, 0, &[1, 2, 3, 4, 5, 6, 7, 8], None).unwrap();
            },
            IndexForm::None,
            false,
        );
        let d = PerfData::from_bytes(bytes, "misc.data").unwrap();
        let m = &d.mmaps()[0];
        assert_eq!((m.pid, m.tid, m.addr, m.len, m.pgoff), (7, 8, 0xffff_0000_0800_0000, 0x10000, 0));
        assert_eq!((m.filename.as_str(), m.prot, m.build_id, m.is_kernel()), ("[kernel.kallsyms]_text", None, None, true));
        assert_eq!((m.sample.cpu, m.sample.time, m.sample.pid), (Some(2), Some(9), Some(7)));
        let sw = &d.switches()[0];
        assert_eq!((sw.out, sw.preempt, sw.next_prev_pid, sw.next_prev_tid, sw.sample.time), (true, true, Some(42), Some(43), Some(10)));
        let sw = &d.switches()[1];
        assert_eq!((sw.out, sw.next_prev_pid, sw.sample.time), (false, None, Some(11)));
        let w = d.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(matches!(w[0], PerfWarning::BadRecord { record_type: 11, size: 48, .. }), "{w:?}");
        assert!(d.aux_records().is_empty() && d.auxtrace_info().is_none() && d.cpus().is_empty());
    }

    #[test]
    fn auxtrace_info_of_wrong_size_keeps_cpus_read() {
        let mut bytes = write(|w| w.auxtrace_info(1, &[ete(0, 0x10), ete(1, 0x12)]).unwrap(), IndexForm::None, false);
        // Announce 3 CPUs: the record holds 2.
        let data = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
        bytes[data + 16 + 8] = 3;
        let d = PerfData::from_bytes(bytes, "size.data").unwrap();
        assert_eq!(d.cpus().len(), 2);
        let w = d.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(matches!(w[0], PerfWarning::AuxtraceInfo { offset, .. } if offset == data as u64));
        assert!(w[0].to_string().contains("3 CPU blocks"), "{}", w[0]);
    }
}

mod damaged {
    //! Every cut and random byte changes of the fixtures: never a panic,
    //! fragments always inside the file, and what precedes a cut still read.
    use proptest::prelude::*;
    use tracesight::input::perf::PerfData;

    fn fixture_bytes() -> Option<Vec<u8>> {
        super::fixture("perf_etm.data").map(|p| std::fs::read(p).unwrap())
    }

    fn check(bytes: Vec<u8>) -> Option<PerfData> {
        let len = bytes.len();
        let d = PerfData::from_bytes(bytes, "fuzzed.data").ok()?;
        for f in d.fragments() {
            assert!(f.data.start <= f.data.end && f.data.end <= len, "{f:?} outside {len}");
            assert_eq!(d.fragment_data(f).len(), f.data.len());
        }
        for w in d.warnings() {
            assert!(!w.to_string().is_empty());
        }
        Some(d)
    }

    #[test]
    fn every_truncation() {
        let Some(bytes) = fixture_bytes() else { return };
        let full = PerfData::from_bytes(bytes.clone(), "full").unwrap();
        let data_end = 312 + 10016;
        for cut in 0..bytes.len() {
            let d = check(bytes[..cut].to_vec());
            if cut < 104 {
                assert!(d.is_none(), "cut {cut}: a header that short is an error");
                continue;
            }
            let d = d.unwrap();
            if cut < data_end {
                assert!(!d.warnings().is_empty(), "cut {cut}: a truncated data section is reported");
            }
            // Records wholly before the cut are all read.
            // (No MMAP2 record of this file is longer than 160 bytes.)
            let before = full.mmaps().iter().filter(|m| m.offset as usize + 160 <= cut).count();
            assert!(d.mmaps().len() >= before, "cut {cut}: {} of {before} mmaps", d.mmaps().len());
            assert!(d.mmaps().len() <= full.mmaps().len());
            assert_eq!(d.cpus().len(), if cut >= 0x26a8 { 8 } else { d.cpus().len() });
            if cut >= data_end {
                assert_eq!(d.fragments(), full.fragments(), "cut {cut}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn byte_flips_never_panic(flips in proptest::collection::vec((0usize..12321, any::<u8>()), 1..16)) {
            let Some(mut bytes) = fixture_bytes() else { return Ok(()) };
            for (at, v) in flips {
                let n = bytes.len();
                bytes[at % n] = v;
            }
            check(bytes);
        }

        #[test]
        fn flips_in_the_header_and_info(flips in proptest::collection::vec((0usize..1500, any::<u8>()), 1..8)) {
            let Some(mut bytes) = fixture_bytes() else { return Ok(()) };
            for (at, v) in flips {
                bytes[at] = v;
            }
            check(bytes);
        }
    }
}

mod cli {
    //! `tracesight info PERF.DATA`.
    use std::process::Command;

    fn info(path: &std::path::Path) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_tracesight")).arg("info").arg(path).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn info_on_perf_etm() {
        let Some(p) = super::fixture("perf_etm.data") else { return };
        let (code, out, err) = info(&p);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("command line: /data/local/tmp/simpleperf64 record -e cs-etm:u"), "{out}");
        assert!(out.contains("CoreSight AUXTRACE_INFO version 1: 8 CPUs"), "{out}");
        assert_eq!(out.matches(": ETMv4, trace ID 0x").count(), 8, "{out}");
        assert!(out.contains("cpu 7: ETMv4, trace ID 0x1e"), "{out}");
        assert!(out.contains("trace data: 4 AUX fragments, 384 bytes in 1 AUXTRACE buffers, CoreSight formatter frames"), "{out}");
        assert!(out.contains("  cpu 7: 4 fragments, 384 bytes (smallest 80, largest 144)"), "{out}");
        assert!(out.contains("AUX flags: 0 truncated, 0 partial, 0 collision"), "{out}");
        assert!(
            out.contains("/data/local/tmp/etm_test_loop: build id 0c9a20bf9c009d0e4e8bbf9fad0300ae (padded 0c9a20bf9c009d0e4e8bbf9fad0300ae00000000)"),
            "{out}"
        );
        assert!(!out.contains("warning"), "{out}");
    }

    #[test]
    fn info_without_trace_data() {
        let Some(p) = super::fixture("perf_with_missing_aux_data.data") else { return };
        let (code, out, err) = info(&p);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("no trace data: 6 AUX records, 0 AUXTRACE buffers"), "{out}");
        assert_eq!(out.matches(": ETE, trace ID 0x").count(), 8, "{out}");
    }

    #[test]
    fn info_on_damaged_and_foreign_files() {
        let Some(p) = super::fixture("perf_etm.data") else { return };
        let dir = std::env::temp_dir().join(format!("tracesight-perf-info-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let cut = dir.join("cut.data");
        std::fs::write(&cut, &bytes[..0x26a8 + 48 + 0x100]).unwrap();
        let (code, out, err) = info(&cut);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("warning: offset 0x26a8: AUXTRACE data needs 384 bytes, the file has 256: file truncated"), "{out}");
        assert!(out.contains("trace data: 3 AUX fragments"), "{out}");
        let text = dir.join("text.data");
        std::fs::write(&text, "not perf").unwrap();
        let (code, _, err) = info(&text);
        assert_eq!(code, 1);
        assert!(err.contains("text.data: offset 0x0: not a perf.data file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn big_endian_file() {
    let mut f = b"2ELIFREP".to_vec();
    let comm_at = 104u64;
    for v in [104u64, 144, 104, 0, comm_at, 24, 0, 0, 0, 0, 0, 0] {
        f.extend(v.to_be_bytes());
    }
    f.extend(3u32.to_be_bytes());
    f.extend(0x2000u16.to_be_bytes());
    f.extend(24u16.to_be_bytes());
    f.extend(0x1234u32.to_be_bytes());
    f.extend(0x1235u32.to_be_bytes());
    f.extend(b"abc\0\0\0\0\0");
    let d = PerfData::from_bytes(f, "be.data").unwrap();
    let c = &d.comms()[0];
    assert_eq!((c.pid, c.tid, c.comm.as_str(), c.exec), (0x1234, 0x1235, "abc", true));
    // No attributes: a warning, and no sample_id is read.
    assert_eq!(d.warnings().len(), 1, "{:?}", d.warnings());
    assert_eq!(c.sample.time, None);
}
