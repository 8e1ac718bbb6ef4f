//! Golden test: every ETE/ETMv4, PTM and ETMv3 capture under ../shared/fixtures/opencsd, decoded
//! with `tracesight decode --format opencsd`, must list the same packets and the
//! same decoded elements as OpenCSD 1.8.0's trc_pkt_lister (the
//! `expected/*.ppl` goldens), as judged by ../shared/tools/ppl-compare.
//!
//! The test walks the fixture directory and each snapshot's
//! `expected/COMMANDS.txt`, so a capture added later is tested with no change
//! here. Each golden whose trc_pkt_lister options we map is run; the others are
//! listed as skipped with the reason. A per-golden table is printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tracesight::input::Snapshot;
use tracesight::session::BufferPlan;

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

fn ppl_compare() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/ppl-compare")
}

/// One trc_pkt_lister run from COMMANDS.txt.
struct GoldenRun {
    golden: String,
    args: Vec<String>,
    /// Environment settings of the command (OPENCSD_...=...).
    env: Vec<(String, String)>,
}

fn parse_commands(text: &str) -> Vec<GoldenRun> {
    let mut runs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let env: Vec<(String, String)> = line
            .split_whitespace()
            .take_while(|w| w.contains('='))
            .filter_map(|w| w.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        let words: Vec<&str> = line.split_whitespace().skip_while(|w| w.contains('=')).collect();
        if words.first() != Some(&"trc_pkt_lister") {
            continue;
        }
        let mut args = Vec::new();
        let mut golden = None;
        let mut i = 1;
        while i < words.len() {
            match words[i] {
                "-logfilename" => {
                    golden = words.get(i + 1).map(|s| s.trim_start_matches("expected/").to_string());
                    i += 2;
                }
                "-ss_dir" => i += 2,
                w => {
                    args.push(w.to_string());
                    i += 1;
                }
            }
        }
        if let Some(golden) = golden {
            runs.push(GoldenRun { golden, args, env });
        }
    }
    runs
}

/// Map trc_pkt_lister options to ours; `Err` names what we cannot map. The
/// second value says whether elements are listed (and compared).
fn map_args(args: &[String]) -> Result<(Vec<String>, bool), String> {
    let mut out = vec!["decode".to_string()];
    let mut level = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-decode" => level = Some(true),
            "-pkt_mon" => level = Some(false),
            "-no_time_print" => {}
            "-src_addr_n" => out.push("--src-addr-n".into()),
            "-aa64_opcode_chk" => out.push("--aa64-opcode-check".into()),
            "-multi_session" => out.push("--multi-session".into()),
            "-dstream_format" => out.push("--dstream".into()),
            "-src_name" => {
                out.push("--source".into());
                out.push(args.get(i + 1).cloned().ok_or("-src_name without a name")?);
                i += 1;
            }
            other => return Err(format!("option {other} not mapped")),
        }
        i += 1;
    }
    match level {
        None => Err("listing without raw packet bytes (no -decode)".into()),
        Some(false) => {
            out.push("--packets".into());
            Ok((out, false))
        }
        Some(true) => Ok((out, true)),
    }
}

/// The trace IDs whose packet lines belong to a decoded protocol in this run, or None
/// when the run decodes no source.
fn decoded_ids(snap: &Snapshot, args: &[String]) -> Option<Vec<String>> {
    let src = args.iter().position(|a| a == "-src_name").and_then(|i| args.get(i + 1));
    let multi = args.iter().any(|a| a == "-multi_session") && src.is_none();
    let buffers: Vec<_> = match src {
        Some(name) => vec![snap.buffer(name).ok()?.clone()],
        None if multi => snap.buffers().to_vec(),
        None => vec![snap.default_buffer()?.clone()],
    };
    let mut ids = Vec::new();
    for b in &buffers {
        let plan = BufferPlan::new(snap, b).ok()?;
        for s in &plan.sources {
            match (s.trace_id, s.kind.is_decoded(), b.format.is_formatted()) {
                (Some(id), true, true) => ids.push(format!("{id:x}")),
                (_, true, false) => ids.push("0".to_string()),
                _ => {}
            }
        }
    }
    ids.sort();
    ids.dedup();
    (!ids.is_empty()).then_some(ids)
}

/// "packets total: expected 5, actual 5, ..." -> "5 packets".
fn summary(total: &str) -> String {
    let kind = total.split_whitespace().next().unwrap_or("");
    let n = total.split("expected ").nth(1).and_then(|r| r.split(',').next()).unwrap_or("?");
    format!("{n} {kind} identical")
}

fn read_golden(path: &Path) -> String {
    if path.extension().is_some_and(|e| e == "xz") {
        let out = Command::new("xz").arg("-dc").arg(path).output().expect("xz is needed to read .ppl.xz goldens");
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()
    }
}

/// Packet lines per ID as (Idx, bytes, name), including packet lines that
/// trc_pkt_lister glued onto the end of an unterminated decoder error message.
fn packet_lines(text: &str, ids: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut per_id: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let Some(at) = line.find("Idx:") else { continue };
        let rest = &line[at..];
        let Some((idx, rest)) = rest["Idx:".len()..].split_once("; ID:") else { continue };
        let Some((id, rest)) = rest.split_once("; ") else { continue };
        let id = id.trim_start_matches('0').to_ascii_lowercase();
        let id = if id.is_empty() { "0".to_string() } else { id };
        if !ids.contains(&id) || !rest.starts_with('[') {
            continue;
        }
        let Some((bytes, name)) = rest[1..].split_once("];") else { continue };
        let name = name.trim().split(" :").next().unwrap_or("").trim().to_string();
        let bytes = bytes.split_whitespace().collect::<Vec<_>>().join(" ");
        per_id.entry(id).or_default().push(format!("{idx} [{bytes}] {name}"));
    }
    per_id
}

#[derive(Debug)]
enum Outcome {
    Identical(String),
    Skipped(String),
    Different(String),
}

fn check_run(snap_dir: &Path, snap: &Snapshot, run: &GoldenRun, work: &Path) -> Outcome {
    let (mut ours, elements) = match map_args(&run.args) {
        Ok(a) => a,
        Err(why) => return Outcome::Skipped(why),
    };
    let Some(ids) = decoded_ids(snap, &run.args) else {
        return Outcome::Skipped("no decoded source in this run".into());
    };
    let golden = snap_dir.join("expected").join(&run.golden);
    let golden = if golden.exists() { golden } else { golden.with_extension("ppl.xz") };
    if !golden.exists() {
        return Outcome::Skipped(format!("golden {} missing", run.golden));
    }
    let out_file = work.join(format!("{}.txt", run.golden));
    ours.insert(1, snap_dir.display().to_string());
    ours.push("-o".into());
    ours.push(out_file.display().to_string());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tracesight"));
    cmd.args(&ours).env_remove("OPENCSD_INSTR_RANGE_LIMIT").env_remove("OPENCSD_ERR_ON_AA64_BAD_OPCODE");
    for (k, v) in &run.env {
        cmd.env(k, v);
    }
    let status = cmd.output().expect("run tracesight");
    if !out_file.exists() {
        return Outcome::Different(format!(
            "tracesight wrote nothing: {}",
            String::from_utf8_lossy(&status.stderr).trim()
        ));
    }
    let cmp = Command::new("python3")
        .arg(ppl_compare())
        .arg(&golden)
        .arg(&out_file)
        .arg(if elements { "--packets" } else { "--packets-only" })
        .args(["--quiet", "--ids", &ids.join(",")])
        .output()
        .expect("python3 runs ppl-compare");
    let report = String::from_utf8_lossy(&cmp.stdout).into_owned();
    let totals: Vec<&str> = report.lines().filter(|l| l.contains(" total: ")).collect();
    if cmp.status.success() && totals.iter().all(|t| t.contains("IDENTICAL")) {
        return Outcome::Identical(totals.iter().map(|t| summary(t)).collect::<Vec<_>>().join("; "));
    }
    // ppl-compare only reads lines that start with `Idx:`; trc_pkt_lister glues
    // a packet line onto an element-decoder error message that has no newline.
    // Those lines are the reference too: compare again including them.
    let gold_text = read_golden(&golden);
    let ours_text = std::fs::read_to_string(&out_file).unwrap();
    let expected = packet_lines(&gold_text, &ids);
    let actual = packet_lines(&ours_text, &ids);
    let glued = gold_text.lines().filter(|l| !l.starts_with("Idx:") && l.contains("Idx:")).count();
    if glued > 0 && expected == actual {
        return Outcome::Identical(format!("identical, with {glued} packet lines glued to decoder messages"));
    }
    Outcome::Different(report)
}

#[test]
fn listings_match_trc_pkt_lister() {
    let Some(root) = fixtures() else {
        eprintln!("../shared/fixtures/opencsd not found: golden test not run");
        return;
    };
    let work = std::env::temp_dir().join(format!("tracesight-golden-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let mut snaps: Vec<_> = std::fs::read_dir(&root).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).collect();
    snaps.sort();
    let mut table = Vec::new();
    let (mut same, mut skipped, mut different) = (0, 0, Vec::new());
    for dir in snaps.iter().filter(|d| d.join("expected/COMMANDS.txt").is_file()) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let commands = std::fs::read_to_string(dir.join("expected/COMMANDS.txt")).unwrap();
        let snap = match Snapshot::open(dir) {
            Ok(s) => s,
            Err(e) => {
                different.push(format!("{name}: snapshot does not open: {e}"));
                continue;
            }
        };
        for run in parse_commands(&commands) {
            let outcome = check_run(dir, &snap, &run, &work);
            let (status, detail) = match &outcome {
                Outcome::Identical(t) => {
                    same += 1;
                    ("IDENTICAL", t.clone())
                }
                Outcome::Skipped(why) => {
                    skipped += 1;
                    ("skipped", why.clone())
                }
                Outcome::Different(r) => {
                    different.push(format!("{name}/{}:\n{r}", run.golden));
                    ("DIFFERENT", r.lines().last().unwrap_or("").to_string())
                }
            };
            table.push(format!("{:<22} {:<40} {:<10} {}", name, run.golden, status, detail));
        }
    }
    println!("{:<22} {:<40} {:<10} detail", "snapshot", "golden", "result");
    for row in &table {
        println!("{row}");
    }
    println!("{same} identical, {skipped} skipped, {} different", different.len());
    let _ = std::fs::remove_dir_all(&work);
    assert!(same > 0, "no golden was compared");
    assert!(different.is_empty(), "listings differ from trc_pkt_lister:\n{}", different.join("\n"));
}
