//! Damaged or degenerate trace bytes (issue 15, finding 11): a long run of
//! zero bytes before (or without) an A-sync.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

/// An unformatted single-source snapshot: the `.ini` files of `fixture`
/// with `source` as the only trace source, reading `trace` (`tag` keeps
/// tests running side by side apart).
fn raw_snapshot(tag: &str, fixture: &str, source: &str, trace: &[u8]) -> Option<PathBuf> {
    let src = fixtures()?.join(fixture);
    let dst = std::env::temp_dir().join(format!("tracesight-trcrob-{tag}-{fixture}-{source}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name.to_string_lossy().ends_with(".ini") && name != "trace.ini" {
            std::fs::write(dst.join(&name), std::fs::read(e.path()).unwrap()).unwrap();
        }
    }
    let ini = format!(
        "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=ETB_0\nfile=cstrace.bin\nformat=source_data\n\n\
         [source_buffers]\n{source}=ETB_0\n\n[core_trace_sources]\ncpu_0={source}\n"
    );
    std::fs::write(dst.join("trace.ini"), ini).unwrap();
    std::fs::write(dst.join("cstrace.bin"), trace).unwrap();
    // The memory image is not needed (no instructions get decoded), but a
    // missing dump file stops a full decode.
    std::fs::write(dst.join("kernel_dump.bin"), b"").unwrap();
    Some(dst)
}

fn packets(dir: &Path, format: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(["decode", "--packets", "--format", format])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Three stray bytes, `zeros` zero bytes, the 0x80 that ends an A-sync, then
/// 30 more zeros (bad periodic A-syncs and an incomplete one at the end).
fn zero_run(zeros: usize) -> Vec<u8> {
    let mut t = vec![0x11, 0x22, 0x33];
    t.extend(std::iter::repeat_n(0, zeros));
    t.push(0x80);
    t.extend(std::iter::repeat_n(0, 30));
    t
}

/// Where each packet of a JSON-lines listing starts and how long it is.
fn spans(jsonl: &str) -> Vec<(u64, u64, u64)> {
    jsonl
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let index = v["index"].as_u64().unwrap();
            let offset = v.get("offset").map_or(index, |o| o.as_u64().unwrap());
            let len = v["bytes"].as_str().unwrap().len() as u64 / 2;
            (index, offset, len)
        })
        .collect()
}

/// Every byte of the buffer is in exactly one packet, in order.
fn assert_tiles(spans: &[(u64, u64, u64)], total: u64, what: &str) {
    let mut next = 0;
    for &(_, offset, len) in spans {
        assert_eq!(offset, next, "{what}: packet at {offset}, expected one at {next}");
        next += len;
    }
    assert_eq!(next, total, "{what}: packets cover {next} of {total} bytes");
}

/// Finding 11: the surplus zeros before an ETMv4/ETE A-sync are reported one
/// byte at a time; all of them carried the index where the run began (as
/// trc_pkt_lister 1.8.0 prints them, `iPktASync` never moves the packet
/// index), so nothing said where in a 100 MiB run of zeros a line was. The
/// OpenCSD listing stays as trc_pkt_lister prints it; the JSON listing gives
/// each such byte its own `offset`.
#[test]
fn etm4_zero_run_offsets_advance() {
    let zeros = 4096;
    let trace = zero_run(zeros);
    let Some(dir) = raw_snapshot("run", "juno_r1_1", "ETM_0", &trace) else { return };
    let text = packets(&dir, "opencsd");
    let single: Vec<&str> = text.lines().filter(|l| l.contains("[0x00 ];\tI_ASYNC")).collect();
    // 4096 zeros: 11 go into the A-sync, the rest are reported singly.
    assert_eq!(single.len(), zeros - 11);
    assert!(single.iter().all(|l| l.starts_with("Idx:3; ")), "trc_pkt_lister prints them all at Idx:3");

    let s = spans(&packets(&dir, "jsonl"));
    assert_tiles(&s, trace.len() as u64, "ETMv4");
    let offsets: Vec<u64> = s.iter().filter(|&&(i, _, n)| i == 3 && n == 1).map(|&(_, o, _)| o).collect();
    assert_eq!(offsets, (3..3 + (zeros as u64 - 11)).collect::<Vec<_>>());
    let _ = std::fs::remove_dir_all(&dir);
}

/// ETMv3 and PTM already advance through a run of zeros, as OpenCSD does:
/// ETMv3's packets tile the buffer with `index` alone. PTM lists a candidate
/// A-sync cut by a block boundary again and counts those bytes again (as
/// OpenCSD 1.8.0's `waitASync` does, see `ptm/parser.rs`), so its listing
/// neither tiles nor ends at the buffer's end, but its index does advance.
#[test]
fn etm3_and_ptm_zero_runs_advance() {
    let trace = zero_run(4096);
    let total = trace.len() as u64;
    for source in ["ETM_0", "PTM_0"] {
        let Some(dir) = raw_snapshot("run", "TC2", source, &trace) else { return };
        let s = spans(&packets(&dir, "jsonl"));
        assert!(s.iter().all(|&(i, o, _)| i == o), "{source}: no separate offsets");
        if source == "ETM_0" {
            assert_tiles(&s, total, source);
        } else {
            assert!(s.windows(2).all(|w| w[0].0 < w[1].0), "{source}: index did not advance");
            assert!(s.iter().any(|&(_, _, n)| n > 0), "{source}: nothing listed");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn decode_text(dir: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tracesight")).arg("decode").args(extra).arg(dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Fidelity: trc_pkt_lister 1.8.0 prints an ETMv3/PTM packet parser's
/// error message only when it lists packets (no `-decode`): in a full decode
/// the error logger is attached to the decoder alone. The message used to be
/// printed before the packet line of a decode run too, glued to it.
#[test]
fn etm3_and_ptm_parser_errors_only_in_packet_listings() {
    let trace = zero_run(40);
    for (source, prefix) in [("ETM_0", "PKTP_ETMV3"), ("PTM_0", "PKTP_PTM")] {
        let Some(dir) = raw_snapshot("err", "TC2", source, &trace) else { return };
        let packets_only = decode_text(&dir, &["--packets"]);
        assert!(packets_only.contains(prefix), "{source}: --packets lists the parser's messages");
        let full = decode_text(&dir, &[]);
        assert!(!full.contains(prefix), "{source}: a full decode has no parser messages:\n{full}");
        // The packet lines themselves are the same in both.
        let lines = |t: &str| t.lines().filter(|l| l.starts_with("Idx:") && l.contains("; [")).count();
        assert_eq!(lines(&full), packets_only.lines().filter(|l| l.contains("; [")).count(), "{source}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
