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
fn program(name: &str) -> Option<PathBuf> {
    let works = |c: &str| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success());
    if !works("qemu-aarch64") || !works("aarch64-linux-gnu-gcc") {
        eprintln!("note: skipped: qemu-aarch64 or aarch64-linux-gnu-gcc not found");
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-synth-programs");
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
    let Some(prog) = program("threads") else { return };
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
