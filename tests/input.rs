//! Snapshot reading: synthetic snapshots for the corner cases, and every
//! OpenCSD fixture snapshot.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use tracesight::input::{BufferFormat, InputError, Snapshot, TraceFile};

fn fixtures() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("note: {} not found; skipping fixture tests", dir.display());
        None
    }
}

/// A scratch snapshot directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(files: &[(&str, &str)]) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tracesight-input-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const SNAPSHOT: &str = "; DS-5 snapshot\r\n\
[snapshot]\r\n\
version=1.0\r\n\
description = test ; trailing comment\r\n\
\r\n\
[device_list]\r\n\
device0=cpu_0.ini\r\n\
;device1=commented.ini\r\n\
# device2=hashed.ini\r\n\
device3=etm_0.ini\r\n\
device4=missing.ini\r\n\
\r\n\
[trace]\r\n\
metadata=trace.ini\r\n";

const CPU: &str = "[device]
name=cpu_0
class=core
type=Cortex-A57

[regs]
PC(size:64)=0xFFFFFFC000081000
SP(size:64)=0
CPSR=452
BAD=0x12zz

[dump1]
file=\"kernel.bin\"
address=0xffffffc000081000
length=0x1000
space=EL1N

[dump2]
file=other.bin
address=0x400000
offset=16
#length=0x10

[dump3]
file=no_address.bin
";

const ETM: &str = "[device]
name=ETM_0
class=trace_source
type=ETM4.1

[regs]
TRCCONFIGR(id:0x4)=0x000000C1
TRCTRACEIDR(0x010)=0x10
trcidr0(id:0x78)=0x28000EA1
ETMCR(id:0x0)=0x10001860
TRCIDR1=1234
";

const TRACE: &str = "[trace_buffers]
buffers=buffer1,buffer0,bufferX,

[buffer0]
name=ETB_0
file=etb0.bin
format=coresight

[buffer1]
name=ETB_1
file=etb1.bin
format=source_data

[bufferX]
name=DS
file=ds.bin
format=dstream_coresight

[buffer9]
name=NOT_LISTED
file=x.bin

[source_buffers]
ETM_0=ETB_0
STM_0=ETB_1
GHOST=ETB_0

[core_trace_sources]
cpu_0=ETM_0
";

fn synthetic() -> Scratch {
    Scratch::new(&[
        ("snapshot.ini", SNAPSHOT),
        ("cpu_0.ini", CPU),
        ("etm_0.ini", ETM),
        ("trace.ini", TRACE),
        ("etb0.bin", ""),
    ])
}

#[test]
fn comments_device_list_and_missing_device() {
    let s = synthetic();
    let snap = Snapshot::open(&s.0).unwrap();
    assert_eq!(snap.version.as_deref(), Some("1.0"));
    assert_eq!(snap.description.as_deref(), Some("test"));
    assert_eq!(snap.device_files, ["cpu_0.ini", "etm_0.ini", "missing.ini"]);
    assert_eq!(snap.devices.len(), 2);
    let missing: Vec<_> = snap
        .warnings
        .iter()
        .filter(|w| w.path.ends_with("missing.ini"))
        .collect();
    assert_eq!(missing.len(), 1, "{:?}", snap.warnings);
    assert!(missing[0].to_string().contains("missing.ini"));
}

#[test]
fn registers_with_suffixes_and_number_formats() {
    let s = synthetic();
    let snap = Snapshot::open(&s.0).unwrap();
    let cpu = snap.device("cpu_0").unwrap();
    assert!(cpu.is_core());
    assert_eq!(cpu.device_type(), "Cortex-A57");
    assert_eq!(cpu.reg("pc"), Some(0xFFFF_FFC0_0008_1000));
    assert_eq!(cpu.reg("SP"), Some(0));
    assert_eq!(cpu.reg("CPSR"), Some(452));
    let pc = cpu.register("PC").unwrap();
    assert_eq!(pc.key, "PC(size:64)");
    assert_eq!(pc.name, "PC");
    // Unparsable: kept, with a warning; OpenCSD's strtoul takes the prefix.
    let bad = cpu.register("BAD").unwrap();
    assert_eq!(bad.value, None);
    assert_eq!(bad.c_value(), 0x12);
    assert!(snap.warnings.iter().any(|w| w.msg.contains("BAD")));

    let etm = snap.device("ETM_0").unwrap();
    assert!(etm.is_trace_source());
    assert_eq!(etm.device_type(), "ETM4.1");
    assert_eq!(etm.type_base(), "ETM4");
    assert_eq!(etm.reg("TRCCONFIGR"), Some(0xC1));
    assert_eq!(etm.reg("TRCTRACEIDR"), Some(0x10));
    assert_eq!(etm.reg("TRCIDR0"), Some(0x2800_0EA1));
    assert_eq!(etm.register("TRCIDR0").unwrap().key, "trcidr0(id:0x78)");
    assert_eq!(etm.reg("ETMCR"), Some(0x1000_1860));
    assert_eq!(etm.reg("TRCIDR1"), Some(1234));
    assert_eq!(etm.reg("TRCIDR2"), None);
}

#[test]
fn dump_sections() {
    let s = synthetic();
    let snap = Snapshot::open(&s.0).unwrap();
    let cpu = snap.device("cpu_0").unwrap();
    assert_eq!(cpu.dumps.len(), 2, "dump without address is dropped");
    let d = &cpu.dumps[0];
    assert_eq!(d.file, "kernel.bin");
    assert_eq!(d.address, 0xffff_ffc0_0008_1000);
    assert_eq!(d.length, Some(0x1000));
    assert_eq!(d.offset, None);
    assert_eq!(d.space.as_deref(), Some("EL1N"));
    let d = &cpu.dumps[1];
    assert_eq!(
        (d.offset, d.length, d.space.as_deref()),
        (Some(16), None, None)
    );
    assert!(snap.warnings.iter().any(|w| w.msg.contains("dump3")));
}

#[test]
fn buffer_order_formats_and_sources() {
    let s = synthetic();
    let snap = Snapshot::open(&s.0).unwrap();
    assert_eq!(snap.buffer_list, ["buffer1", "buffer0", "bufferX", ""]);
    // Section order, not list order; unlisted sections ignored.
    assert_eq!(snap.buffer_names(), ["ETB_0", "ETB_1", "DS"]);
    let def = snap.default_buffer().unwrap();
    assert_eq!(def.name, "ETB_0");
    assert_eq!(def.format, BufferFormat::CoreSight);
    assert!(def.format.is_formatted());
    assert_eq!(
        snap.buffer("ETB_1").unwrap().format,
        BufferFormat::SourceData
    );
    assert!(!BufferFormat::SourceData.is_formatted());
    assert_eq!(
        snap.buffer("DS").unwrap().format,
        BufferFormat::DstreamCoreSight
    );
    assert_eq!(
        BufferFormat::parse("weird"),
        BufferFormat::Unknown("weird".into())
    );
    assert!(BufferFormat::parse("").is_formatted());
    assert_eq!(def.path, s.0.join("etb0.bin"));

    match snap.buffer("NOT_LISTED") {
        Err(e @ InputError::UnknownBuffer { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("NOT_LISTED") && msg.contains("ETB_0, ETB_1, DS"),
                "{msg}"
            );
        }
        other => panic!("{other:?}"),
    }

    assert_eq!(snap.source_names_for_buffer("ETB_0"), ["ETM_0", "GHOST"]);
    let devs = snap.sources_for_buffer("ETB_0");
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0].name, "ETM_0");
    assert_eq!(snap.core_name_for_source("ETM_0"), Some("cpu_0"));
    assert_eq!(snap.core_for_source("ETM_0").unwrap().name, "cpu_0");
    assert_eq!(snap.core_for_source("STM_0"), None);
    assert_eq!(snap.buffer_of_source("STM_0"), Some("ETB_1"));
}

#[test]
fn missing_files_are_errors() {
    let s = Scratch::new(&[("snapshot.ini", SNAPSHOT)]);
    match Snapshot::open(&s.0) {
        Err(e @ InputError::MissingFile { .. }) => {
            assert!(e.to_string().contains("trace.ini"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let empty = Scratch::new(&[]);
    match Snapshot::open(&empty.0) {
        Err(e @ InputError::MissingFile { .. }) => {
            assert!(e.to_string().contains("snapshot.ini"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let no_meta = Scratch::new(&[("snapshot.ini", "[snapshot]\nversion=1.0\n")]);
    assert!(matches!(
        Snapshot::open(&no_meta.0),
        Err(InputError::MissingKey { .. })
    ));
}

#[test]
fn trace_files() {
    let s = synthetic();
    std::fs::write(s.0.join("etb1.bin"), [1u8, 2, 3]).unwrap();
    let snap = Snapshot::open(&s.0).unwrap();
    let empty = TraceFile::open(&snap.default_buffer().unwrap().path).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.bytes(), &[] as &[u8]);
    let three = TraceFile::open(&snap.buffer("ETB_1").unwrap().path).unwrap();
    assert_eq!(&three[..], &[1, 2, 3]);
    match TraceFile::open(&snap.buffer("DS").unwrap().path) {
        Err(e @ InputError::MissingFile { .. }) => assert!(e.to_string().contains("ds.bin")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn garbage_never_panics() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    for round in 0..200 {
        let mut bytes = Vec::new();
        for _ in 0..(round * 7 % 300) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let pick = b"[]=;#\r\n \tab0x1(\xff";
            bytes.push(pick[(seed % pick.len() as u64) as usize]);
        }
        let s = Scratch::new(&[]);
        std::fs::write(s.0.join("snapshot.ini"), &bytes).unwrap();
        std::fs::write(s.0.join("trace.ini"), &bytes).unwrap();
        let _ = Snapshot::open(&s.0);
    }
}

#[test]
fn every_fixture_snapshot_parses() {
    let Some(root) = fixtures() else { return };
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("snapshot.ini").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 46, "found {} snapshots", dirs.len());
    for dir in &dirs {
        let snap = Snapshot::open(dir).unwrap_or_else(|e| panic!("{e}"));
        let name = dir.file_name().unwrap().to_string_lossy();
        for w in &snap.warnings {
            eprintln!("{name}: warning: {w}");
        }
        assert!(
            snap.warnings
                .iter()
                .all(|w| w.msg.contains("failed to open device file")),
            "{name}: unexpected warnings"
        );
        let buf = snap
            .default_buffer()
            .unwrap_or_else(|| panic!("{name}: no buffer"));
        let data = TraceFile::open(&buf.path).unwrap();
        assert!(buf.path.is_file(), "{name}");
        assert!(
            !snap.source_names_for_buffer(&buf.name).is_empty(),
            "{name}"
        );
        for dev in &snap.devices {
            assert!(!dev.name.is_empty(), "{name}: {}", dev.file);
            for r in &dev.regs {
                assert!(r.value.is_some(), "{name}: {} = {}", r.key, r.raw_value);
            }
        }
        // Every trace source of the buffer has an ID register.
        for dev in snap.sources_for_buffer(&buf.name) {
            let has_id = ["TRCTRACEIDR", "ETMTRACEIDR", "STMTCSR", "ITMTCR"]
                .iter()
                .any(|r| dev.reg(r).is_some());
            assert!(has_id, "{name}: {} has no trace ID register", dev.name);
        }
        eprintln!(
            "{name}: {} devices, buffers {:?}, default {} ({} bytes, {})",
            snap.devices.len(),
            snap.buffer_names(),
            buf.name,
            data.len(),
            buf.format.as_str()
        );
    }
}

#[test]
fn fixture_quirks() {
    let Some(root) = fixtures() else { return };
    let open = |n: &str| Snapshot::open(&root.join(n)).unwrap();

    // Default buffer = first [bufferN] section, not first in buffers=.
    assert_eq!(
        open("ete-ite-instr").default_buffer().unwrap().name,
        "ETB_2"
    );
    assert_eq!(open("q_elem").default_buffer().unwrap().name, "ETB_2");
    assert_eq!(open("pauth_lr").default_buffer().unwrap().name, "ETB_1");

    let a55 = open("a55-test-tpiu");
    let buf = a55.default_buffer().unwrap();
    assert_eq!(buf.format, BufferFormat::DstreamCoreSight);
    let etm = a55.sources_for_buffer(&buf.name)[0];
    assert_eq!(etm.device_type(), "ETM4.2");
    assert_eq!(etm.reg("TRCTRACEIDR"), Some(1));
    let core = a55.core_for_source(&etm.name).unwrap();
    assert_eq!(core.device_type(), "Cortex-A55");
    assert_eq!(core.reg("X0"), Some(0x2971C8));
    assert_eq!(core.dumps[0].space.as_deref(), Some("EL2"));

    let juno = open("juno_r1_1");
    let etms = juno.sources_for_buffer("ETB_0");
    let ids: Vec<_> = etms.iter().map(|d| d.reg("TRCTRACEIDR").unwrap()).collect();
    assert_eq!(ids, [0x10, 0x11, 0x12, 0x13, 0x14, 0x15]);
    let stm = juno.sources_for_buffer("ETB_1");
    assert_eq!(stm.len(), 1);
    assert_eq!(stm[0].device_type(), "STM");
    assert_eq!(juno.core_for_source(&stm[0].name), None);

    // trace.ini names six sources; only one device file exists.
    let mem = open("test-file-mem-offsets");
    assert_eq!(mem.source_names_for_buffer("ETB_0").len(), 6);
    let found = mem.sources_for_buffer("ETB_0");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name, "ETM_3");
    let cpu = mem.core_for_source("ETM_3").unwrap();
    let ld: Vec<_> = cpu
        .dumps
        .iter()
        .filter(|d| d.file == "ld-2.21.bin")
        .collect();
    assert_eq!(ld.len(), 2);
    assert_eq!(ld[0].length, Some(0x11000), "#length comment ignored");
    assert_eq!(ld[1].offset, Some(0x11000));

    let tc2 = open("TC2");
    let types: Vec<_> = tc2
        .sources_for_buffer("ETB_0")
        .iter()
        .map(|d| d.device_type().to_string())
        .collect();
    assert!(types.contains(&"PTM1.1".to_string()) && types.contains(&"ITM".to_string()));
    assert_eq!(tc2.device("ETM_0").unwrap().reg("ETMCR"), Some(0x10001860));

    let wfet = open("ete-wfet");
    let empty = TraceFile::open(&wfet.buffer("ETB_2").unwrap().path).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn cores_give_their_sources_cpu_numbers() {
    let Some(root) = fixtures() else { return };
    let open = |n: &str| Snapshot::open(&root.join(n)).unwrap();
    // cpu_N names: the number in the name.
    let juno = open("juno_r1_1");
    let cpus: Vec<_> = (0..6).map(|i| juno.cpu_for_source(&format!("ETM_{i}"))).collect();
    assert_eq!(cpus, (0..6).map(Some).collect::<Vec<_>>());
    assert_eq!(juno.cpu_for_source("STM_12"), None, "not a core's trace");
    // Several sources on one core share its CPU.
    let cmpbr = open("feat_cmpbr");
    assert_eq!(cmpbr.cpu_for_source("ETE_0_s1"), Some(0));
    assert_eq!(cmpbr.cpu_for_source("ETE_0_s6"), Some(0));
    // Cortex-A7_0 .. Cortex-A15_1: the numbers collide, so the listed order.
    let tc2 = open("trace_cov_a15");
    let cpus: Vec<_> = ["ETM_0_4", "ETM_1_5", "ETM_2_6", "PTM_0_2", "PTM_1_3"].iter().map(|s| tc2.cpu_for_source(s)).collect();
    assert_eq!(cpus, (0..5).map(Some).collect::<Vec<_>>());
}
