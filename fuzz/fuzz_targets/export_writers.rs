//! The export writers (`export::export`: OpenCSD text, JSON lines, CSV,
//! Perfetto) over what an ETE capture decodes to: the input is the trace of a
//! one-source snapshot generated in a scratch directory, with its first 64
//! bytes also mapped as program code at 0x1000.
//!
//! Input: `[cfg, code x 64, trace...]`; `cfg` picks the trace unit (see
//! `common::etm4`, with ETE forced on).
//!
//! Checks: every format writes the number of elements the export reports;
//! JSON lines are one valid JSON object each; the Perfetto file is valid
//! JSON; every CSV row has as many fields as the header.
#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};

use libfuzzer_sys::fuzz_target;
use tracesight::capture::{Capture, CaptureOptions};
use tracesight::export::{export, ExportFormat, ExportRequest};
use tracesight::index::{BuildProgress, IndexOptions};
use tracesight::protocol::etm4::decoder::DecoderOptions;

fn dir() -> PathBuf {
    std::env::temp_dir().join(format!("tracesight-fuzz-export-{}", std::process::id()))
}

const SNAPSHOT: &str = "[snapshot]\nversion=1.0\n\n[device_list]\ndevice0=cpu_0.ini\ndevice1=ete.ini\n\n[trace]\nmetadata=trace.ini\n";
const TRACE: &str = "[trace_buffers]\nbuffers=buffer1\n\n[buffer1]\nname=ETB_1\nfile=trace.bin\nformat=source_data\n\n\
                     [source_buffers]\nETE_0=ETB_1\n\n[core_trace_sources]\ncpu_0=ETE_0\n";
const CPU: &str = "[device]\nname=cpu_0\nclass=core\ntype=ARM-AA64\n\n[regs]\nPC(size:64)=0x0\n\n\
                   [dump1]\nfile=code.bin\naddress=0x1000\nlength=0x100\n";

/// Fields of a CSV row, quotes honoured.
fn csv_fields(line: &str) -> usize {
    let (mut n, mut quoted) = (1, false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => n += 1,
            _ => {}
        }
    }
    n
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 65 {
        return;
    }
    let d = dir();
    let _ = std::fs::create_dir_all(&d);
    let cfg = input[0] | 1;
    let maxspec = [0u64, 1, 2, 4, 8, 16, 32, 78][(cfg >> 5) as usize];
    let ete = format!(
        "[device]\nname=ETE_0\nclass=trace_source\ntype=ETE\n\n[regs]\nTRCCONFIGR=0x{:x}\nTRCTRACEIDR=0x1\n\
         TRCDEVARCH=0x47715a13\nTRCIDR0=0x28c1c2a1\nTRCIDR1=0x4100fff0\nTRCIDR2=0xd0001088\nTRCIDR8=0x{maxspec:x}\n",
        0x1 | ((cfg as u32 >> 1) & 1) << 4 | ((cfg as u32 >> 3) & 1) << 11 | ((cfg as u32 >> 2) & 1) << 12
    );
    let mut code = input[1..65].to_vec();
    for _ in 0..48 {
        code.extend_from_slice(&0xd65f_03c0u32.to_le_bytes()); // RET
    }
    for (name, bytes) in [
        ("snapshot.ini", SNAPSHOT.as_bytes()),
        ("trace.ini", TRACE.as_bytes()),
        ("cpu_0.ini", CPU.as_bytes()),
        ("ete.ini", ete.as_bytes()),
        ("code.bin", &code[..]),
        ("trace.bin", &input[65..]),
    ] {
        if std::fs::write(d.join(name), bytes).is_err() {
            return;
        }
    }
    let copts = CaptureOptions {
        decoder: DecoderOptions { recover: true, instr_range_limit: 4096, ..DecoderOptions::default() },
        no_auto_images: true,
        ..CaptureOptions::default()
    };
    let Ok(cap) = Capture::open(&d, &copts) else { return };
    let Ok(idx) = cap.open_index(&IndexOptions::default(), true, &BuildProgress::default()) else { return };
    let seeker = cap.seeker(&idx.file);
    let (progress, cancel) = (AtomicU64::new(0), AtomicBool::new(false));
    for format in ExportFormat::ALL {
        let path = d.join(format!("out.{}", format.extension()));
        let req = ExportRequest { from: 0, to: 2000, format, path: path.clone(), speculation: false, keep: None };
        let Ok(summary) = export(&cap, &seeker, &req, &progress, &cancel) else { continue };
        let text = std::fs::read_to_string(&path).expect("an export is UTF-8");
        assert_eq!(summary.bytes, text.len() as u64);
        match format {
            ExportFormat::Opencsd => assert_eq!(text.lines().count() as u64, summary.elements),
            ExportFormat::Jsonl => {
                assert_eq!(text.lines().count() as u64, summary.elements);
                for line in text.lines() {
                    let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
                    assert!(v.is_object());
                }
            }
            ExportFormat::Csv => {
                let mut lines = text.lines();
                let header = lines.next().map(csv_fields).unwrap_or(0);
                for l in lines {
                    assert_eq!(csv_fields(l), header, "CSV row {l:?}");
                }
            }
            ExportFormat::Perfetto => {
                let _: serde_json::Value = serde_json::from_str(&text).expect("Perfetto JSON");
            }
        }
        let _ = std::fs::remove_file(&path);
    }
});
