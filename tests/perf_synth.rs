//! `synth --format perf` read back with the perf.data reader: per CPU, the AUX
//! data equals the trace unit's stream in a snapshot synthesized from the same
//! execution (whose decode the synth round-trip tests check against qemu), raw
//! (TRBE style) and in per-CPU formatter frames; the mappings carry the
//! program's build id. Needs qemu-aarch64 and aarch64-linux-gnu-gcc; skipped
//! with a note without them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tracesight::frame::{Deformatter, FrameMode};
use tracesight::input::perf::{PerfData, TraceProtocol};
use tracesight::synth::qemu::{self, QemuRun};
use tracesight::synth::{self, Output, SynthConfig};

/// Build `name` from tests/data/synth (static), or None when the tools are missing.
fn program(name: &str, tag: &str) -> Option<PathBuf> {
    let works = |c: &str| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success());
    if !works("qemu-aarch64") || !works("aarch64-linux-gnu-gcc") {
        eprintln!("note: skipped: qemu-aarch64 or aarch64-linux-gnu-gcc not found");
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-synth-programs").join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/synth").join(format!("{name}.c"));
    let out = dir.join(name);
    let st = Command::new("aarch64-linux-gnu-gcc")
        .args(["-O1", "-g", "-static", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "building {name}");
    Some(out)
}

/// Each trace ID's bytes in a formatted buffer.
/// An address of the JSON lines: a hex string.
fn hex(v: &serde_json::Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("an address as a hex string: {v}"));
    u64::from_str_radix(s.strip_prefix("0x").expect("0x prefix"), 16).unwrap()
}

fn demux(bytes: &[u8]) -> BTreeMap<u8, Vec<u8>> {
    let mut streams: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
    let mut d = Deformatter::new(FrameMode::MemAligned);
    let mut sink = |id: u8, _index: u64, b: &[u8]| streams.entry(id).or_default().extend_from_slice(b);
    d.push(0, bytes, &mut sink).unwrap();
    d.finish(&mut sink).unwrap();
    streams.remove(&0); // padding of the last frame
    streams
}

#[test]
fn synthesized_perf_data_round_trips() {
    let Some(prog) = program("threads", "aux") else { return };
    let r = qemu::run(&QemuRun { qemu: "qemu-aarch64".into(), sysroot: None, program: prog.clone(), args: vec![], keep_log: None })
        .unwrap();
    assert!(r.exec.threads() > 1, "threads runs several threads");
    let cfg = SynthConfig::default();
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-synth");
    let synth_to = |tag: &str, perf: bool, formatted: Option<bool>| {
        let mut out = Output::new(tmp.join(tag));
        out.perf = perf;
        out.formatted = formatted;
        let s = synth::synthesize(&r.exec, &prog, None, &cfg, &out).unwrap();
        (s, out.dir)
    };
    let (snap, snap_dir) = synth_to("snapshot", false, Some(true));
    let expected = demux(&std::fs::read(snap_dir.join("trace.bin")).unwrap());
    assert_eq!(expected.len(), snap.streams.len());

    let elf_id = {
        use object::Object;
        let data = std::fs::read(&prog).unwrap();
        object::File::parse(&*data).unwrap().build_id().unwrap().unwrap().to_vec()
    };
    for formatted in [false, true] {
        let (s, dir) = synth_to(if formatted { "perf-frames" } else { "perf-raw" }, true, Some(formatted));
        assert_eq!(s.streams.len(), snap.streams.len());
        let d = PerfData::open(&dir.join("perf.data")).unwrap();
        assert!(d.warnings().is_empty(), "{:?}", d.warnings());
        assert_eq!(d.cpus().len(), s.streams.len());
        assert_eq!(d.fragments().len(), s.streams.len());
        for (k, stream) in s.streams.iter().enumerate() {
            let cpu = d.cpu(k as u32).unwrap();
            assert_eq!(cpu.protocol, TraceProtocol::Ete);
            assert_eq!(cpu.trace_id, stream.trace_id);
            // The header's registers give the stream's configuration back.
            let cfg = tracesight::protocol::etm4::Etm4Config::from_registers(|n| cpu.register(n), true, None).unwrap();
            assert_eq!((cfg.trcconfigr, cfg.trcidr0, cfg.trcidr8), (stream.registers.trcconfigr, stream.registers.trcidr0, stream.registers.trcidr8));
            let f = d.fragments().iter().find(|f| f.cpu == k as i32).unwrap();
            assert_eq!(f.flags.raw(), !formatted);
            let got = if formatted {
                let mut m = demux(d.fragment_data(f));
                assert_eq!(m.len(), 1, "CPU {k}'s frames carry its ID alone");
                m.remove(&stream.trace_id).unwrap()
            } else {
                d.fragment_data(f).to_vec()
            };
            assert_eq!(got, expected[&stream.trace_id], "CPU {k} (trace ID 0x{:x}) formatted={formatted}", stream.trace_id);
        }
        let m = d.mmaps().iter().find(|m| m.filename.ends_with("/threads")).unwrap();
        assert_eq!(m.prot, Some(5));
        assert!(m.build_id.unwrap().matches(&elf_id));
        assert!(d.build_id_for(m).unwrap().length_recorded());
        assert!(d.build_ids().iter().any(|e| e.build_id.bytes() == elf_id));
        // Code of the program is inside its executable mapping.
        assert!(s.image.segments.iter().any(|seg| seg.addr >= m.addr && seg.addr < m.addr + m.len));
        assert!(d.comms().iter().any(|c| c.comm == "threads" && c.exec));
        assert_eq!(d.comms().len(), s.streams.len());
        assert!(dir.join("threads").is_file(), "the program is beside the perf.data");
    }
}

/// What `tracesight decode PERF.DATA --symdir DIR --format jsonl` executed at
/// EL0 on each CPU, as canonical runs (the synthetic EL1 handler left out, as
/// in the synth round-trip tests).
fn decoded_runs(perf: &Path, symdir: &Path) -> BTreeMap<u64, Vec<(u64, u64)>> {
    let out = Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .arg("decode")
        .arg(perf)
        .arg("--symdir")
        .arg(symdir)
        .args(["--elements-only", "--format", "jsonl"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut el: BTreeMap<u64, u64> = BTreeMap::new();
    let mut runs: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let cpu = v["cpu"].as_u64().expect("every element names its CPU");
        match v["type"].as_str().unwrap() {
            "pe_context" => {
                el.insert(cpu, v["el"].as_u64().unwrap());
            }
            "instr_range" if el.get(&cpu) == Some(&0) => {
                let (start, end, count) = (hex(&v["start"]), hex(&v["end"]), v["count"].as_u64().unwrap());
                assert_eq!(end - start, 4 * count, "{line}");
                qemu::push_run(runs.entry(cpu).or_default(), start, count);
            }
            "addr_nacc" | "range_no_path" => panic!("CPU {cpu}: {line}"),
            _ => {}
        }
    }
    runs
}

/// Issue 12's acceptance: a synthesized perf.data, raw and formatted, decodes
/// through the capture path (binary found by build id in `--symdir`) to
/// exactly the instructions qemu executed, thread by thread on its CPU.
#[test]
fn synthesized_perf_data_decodes_to_the_executed_path_per_cpu() {
    let Some(prog) = program("threads", "path") else { return };
    let r = qemu::run(&QemuRun { qemu: "qemu-aarch64".into(), sysroot: None, program: prog.clone(), args: vec![], keep_log: None })
        .unwrap();
    let threads = r.exec.threads();
    assert!(threads > 1, "threads runs several threads");
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-synth-path");
    for formatted in [false, true] {
        let mut out = Output::new(tmp.join(if formatted { "frames" } else { "raw" }));
        out.perf = true;
        out.formatted = Some(formatted);
        let s = synth::synthesize(&r.exec, &prog, None, &SynthConfig::default(), &out).unwrap();
        assert_eq!(s.streams.len(), threads);
        // The binary in a directory of its own, named by --symdir.
        let symdir = tmp.join("symdir");
        std::fs::create_dir_all(&symdir).unwrap();
        std::fs::copy(&prog, symdir.join("threads")).unwrap();
        let info = Command::new(env!("CARGO_BIN_EXE_tracesight"))
            .arg("info")
            .arg(out.dir.join("perf.data"))
            .arg("--symdir")
            .arg(&symdir)
            .output()
            .unwrap();
        let info = String::from_utf8_lossy(&info.stdout);
        assert!(info.contains("found (--symdir)"), "{info}");
        let runs = decoded_runs(&out.dir.join("perf.data"), &symdir);
        assert_eq!(runs.len(), threads, "a CPU per thread decoded");
        for t in 0..threads {
            let want = r.exec.instruction_runs(t);
            assert!(!want.is_empty());
            assert!(runs[&(t as u64)] == want, "CPU {t} (formatted={formatted}): decoded path differs from qemu's");
        }
    }
}
