//! The text `tracesight info` prints for a perf.data recording.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{AuxFlags, PerfData};

/// Describe the recording: command line and host, warnings, trace units,
/// trace data per CPU with the AUX flags counted, and the mapped binaries
/// with their build IDs (as recorded; finding them on disk is not tried).
pub fn describe(d: &PerfData) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "perf.data: {} ({} bytes)", d.path().display(), d.bytes().len());
    if let Some(c) = d.cmdline() {
        let _ = writeln!(o, "command line: {}", c.join(" "));
    }
    let host: Vec<String> = [("host", d.hostname()), ("os release", d.os_release()), ("arch", d.arch())]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} {v}")))
        .collect();
    if !host.is_empty() {
        let _ = writeln!(o, "recorded on: {}", host.join(", "));
    }
    for w in d.warnings() {
        let _ = writeln!(o, "warning: {w}");
    }
    match d.auxtrace_info() {
        None => o.push_str("no CoreSight AUXTRACE_INFO: not a cs_etm recording\n"),
        Some(i) => {
            let _ = writeln!(
                o,
                "\nCoreSight AUXTRACE_INFO version {}: {} CPUs, PMU type {}{}",
                i.version,
                i.nr_cpus,
                i.pmu_type,
                if i.snapshot { ", snapshot mode" } else { "" }
            );
        }
    }
    for c in d.cpus() {
        let src = match c.trace_id_source {
            super::TraceIdSource::HwIdRecord => "AUX_OUTPUT_HW_ID",
            super::TraceIdSource::Register => "header",
        };
        let _ = writeln!(o, "  cpu {}: {}, trace ID 0x{:02x} (from {src})", c.cpu, c.protocol.name(), c.trace_id);
        let regs: Vec<String> = c.registers.iter().map(|(n, v)| format!("{n}=0x{v:x}")).collect();
        let _ = writeln!(o, "    {}", regs.join(" "));
    }
    o.push('\n');
    o.push_str(&trace_data(d));
    o.push_str(&binaries(d));
    o
}

fn trace_data(d: &PerfData) -> String {
    let mut o = String::new();
    let frags = d.fragments();
    if !d.has_trace_data() {
        let _ = writeln!(
            o,
            "no trace data: {} AUX records, {} AUXTRACE buffers",
            d.aux_records().len(),
            d.auxtrace_buffers()
        );
    } else {
        let total: usize = frags.iter().map(|f| f.data.len()).sum();
        let raw = frags.iter().filter(|f| f.flags.raw()).count();
        let format = match raw {
            0 => "CoreSight formatter frames".to_string(),
            n if n == frags.len() => "raw (unformatted, TRBE)".to_string(),
            n => format!("{n} raw, {} formatted", frags.len() - n),
        };
        let _ = writeln!(
            o,
            "trace data: {} AUX fragments, {total} bytes in {} AUXTRACE buffers, {format}",
            frags.len(),
            d.auxtrace_buffers()
        );
        let mut per_cpu: BTreeMap<i32, (usize, usize, usize, usize)> = BTreeMap::new();
        for f in frags {
            let e = per_cpu.entry(f.cpu).or_insert((0, 0, usize::MAX, 0));
            let n = f.data.len();
            *e = (e.0 + 1, e.1 + n, e.2.min(n), e.3.max(n));
        }
        for (cpu, (n, bytes, min, max)) in per_cpu {
            let who = if cpu < 0 { "per-thread".to_string() } else { format!("cpu {cpu}") };
            let _ = writeln!(o, "  {who}: {n} fragments, {bytes} bytes (smallest {min}, largest {max})");
        }
    }
    // Lost data is told by the AUX records whether or not their data arrived.
    let flags: Vec<AuxFlags> = if d.aux_records().is_empty() {
        frags.iter().map(|f| f.flags).collect()
    } else {
        d.aux_records().iter().map(|r| r.flags).collect()
    };
    let count = |f: fn(AuxFlags) -> bool| flags.iter().filter(|&&x| f(x)).count();
    let _ = writeln!(
        o,
        "  AUX flags: {} truncated, {} partial, {} collision, {} overwrite",
        count(AuxFlags::truncated),
        count(AuxFlags::partial),
        count(AuxFlags::collision),
        count(AuxFlags::overwrite)
    );
    o
}

fn binaries(d: &PerfData) -> String {
    let mut o = String::new();
    // One line per file: its executable mappings (all mappings if none is
    // marked executable, as plain MMAP records carry no protection).
    let mut files: BTreeMap<&str, Vec<&super::MmapRecord>> = BTreeMap::new();
    for m in d.mmaps() {
        files.entry(m.filename.as_str()).or_default().push(m);
    }
    let _ = writeln!(o, "\nbinaries ({} files mapped):", files.len());
    for (name, maps) in files {
        let exec: Vec<_> = maps.iter().filter(|m| m.prot.is_none_or(|p| p & 4 != 0)).collect();
        let shown = if exec.is_empty() { maps.iter().collect() } else { exec };
        let id = maps.iter().find_map(|m| d.build_id_for(m));
        let id_text = match id {
            Some(b) if b.length_recorded() => format!("build id {}", b.hex()),
            Some(b) => format!("build id {} (padded {})", b.hex(), b.padded_hex()),
            None => "no build id".into(),
        };
        let at: Vec<String> = shown
            .iter()
            .take(4)
            .map(|m| format!("0x{:x}-0x{:x} pid {}", m.addr, m.addr.saturating_add(m.len), m.pid))
            .collect();
        let more = if shown.len() > 4 { format!(" (+{} more)", shown.len() - 4) } else { String::new() };
        let _ = writeln!(o, "  {name}: {id_text}\n    {}{more}", at.join(", "));
    }
    o
}
