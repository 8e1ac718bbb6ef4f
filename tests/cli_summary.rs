//! `decode --summary` counts what the listing would show: on every fixture
//! with a plain `-decode` golden, its packets and its elements per kind equal
//! the lines of trc_pkt_lister 1.8.0's listing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

/// Our kind names as OpenCSD prints them (`trigger` prints as EVENT too).
fn opencsd_name(kind: &str) -> &'static str {
    match kind {
        "no_sync" => "NO_SYNC",
        "trace_on" => "TRACE_ON",
        "pe_context" => "PE_CONTEXT",
        "instr_range" => "INSTR_RANGE",
        "range_no_path" => "I_RANGE_NOPATH",
        "addr_not_accessible" => "ADDR_NACC",
        "exception" => "EXCEPTION",
        "exception_return" => "EXCEPTION_RET",
        "timestamp" => "TIMESTAMP",
        "cycle_count" => "CYCLE_COUNT",
        "event" | "trigger" => "EVENT",
        "addr_unknown" => "ADDR_UNKNOWN",
        "timestamp_marker" => "SYNC_MARKER",
        "memtrans" => "MEMTRANS",
        "instrumentation" => "INSTRUMENTATION",
        "end_of_trace" => "EO_TRACE",
        other => panic!("unknown element kind {other}"),
    }
}

/// Packets and elements per OpenCSD kind in a listing, leaving out the
/// trace IDs of protocols we list packets of only without decoding (ITM and
/// STM: their lines are not in the summary's counts).
fn listing_counts(text: &str) -> (u64, BTreeMap<String, u64>) {
    let mut packets = 0;
    let mut kinds = BTreeMap::new();
    let mut undecoded = Vec::new();
    for line in text.lines() {
        for proto in ["ITM", "STM"] {
            if let Some((_, id)) = line.split_once(&format!("Protocol printer {proto} on Trace ID 0x")) {
                undecoded.push(format!("ID:{}; ", id.trim()));
            }
        }
    }
    // Decoder messages are printed unterminated, so a packet line can follow
    // one on the same line: every "Idx:" starts a packet or element.
    for line in text.lines().flat_map(|l| l.split("Idx:").skip(1)) {
        if undecoded.iter().any(|u| line.contains(u.as_str())) {
            continue;
        }
        match line.split_once("OCSD_GEN_TRC_ELEM_") {
            Some((_, rest)) => {
                let name = rest.split('(').next().unwrap_or(rest);
                *kinds.entry(name.to_string()).or_insert(0) += 1;
            }
            None => packets += 1,
        }
    }
    (packets, kinds)
}

/// The plain full decodes among a fixture's goldens.
fn plain_goldens(dir: &Path) -> Vec<PathBuf> {
    let Ok(commands) = std::fs::read_to_string(dir.join("expected/COMMANDS.txt")) else { return Vec::new() };
    commands
        .lines()
        .filter_map(|l| l.strip_prefix("trc_pkt_lister -ss_dir . -decode -no_time_print -logfilename "))
        .filter(|f| !f.contains(' ') && f.ends_with(".ppl"))
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect()
}

#[test]
fn summary_counts_equal_the_golden_listings() {
    let Some(fx) = fixtures() else {
        eprintln!("skipped: no fixtures");
        return;
    };
    let mut checked = 0;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&fx).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    for dir in dirs {
        for golden in plain_goldens(&dir) {
            let (want_packets, want_kinds) = listing_counts(&std::fs::read_to_string(&golden).unwrap());
            let out = Command::new(env!("CARGO_BIN_EXE_tracesight"))
                .args(["decode", "--summary", "--format", "jsonl"])
                .arg(&dir)
                .output()
                .unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            let v: serde_json::Value = serde_json::from_str(stdout.trim())
                .unwrap_or_else(|e| panic!("{}: not one JSON object ({e}): {stdout}", dir.display()));
            let total = &v["total"];
            let mut kinds = BTreeMap::new();
            for (k, n) in total["elements"].as_object().unwrap() {
                *kinds.entry(opencsd_name(k).to_string()).or_insert(0) += n.as_u64().unwrap();
            }
            assert_eq!(kinds, want_kinds, "{}: elements per kind", golden.display());
            assert_eq!(total["packets"].as_u64(), Some(want_packets), "{}: packets", golden.display());
            let per_source: u64 = v["sources"].as_array().unwrap().iter().map(|s| s["packets"].as_u64().unwrap()).sum();
            assert_eq!(per_source, want_packets, "{}: packets of the sources add up", golden.display());
            assert!(v["seconds"].as_f64().is_some());
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} goldens checked");
}

/// The text report names every trace ID with data and the totals; a decode
/// that stops (here a range limit is not a stop) exits 0.
#[test]
fn summary_text_lists_each_trace_id() {
    let Some(fx) = fixtures() else {
        eprintln!("skipped: no fixtures");
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_tracesight")).args(["decode", "--summary"]).arg(fx.join("juno_r1_1")).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for id in ["0x10", "0x11", "0x12", "0x13", "0x15"] {
        assert!(text.lines().any(|l| l.starts_with(id)), "no row for {id}:\n{text}");
    }
    // Elements: 15,403 in the golden listing (INDEX.md), 6,733 ranges.
    let total = text.lines().find(|l| l.trim_start().starts_with("total")).expect("a total row");
    assert!(total.split_whitespace().any(|w| w == "15403"), "{total}");
    let ranges = text.lines().find(|l| l.starts_with("instr_range")).expect("an instr_range row");
    assert_eq!(ranges.split_whitespace().last(), Some("6733"));
    assert!(text.contains("MiB/s"));
}
