//! ETMv3: the TC2 capture (three Cortex-A7 ETMs on trace IDs 0x10-0x12 in a
//! CoreSight-formatted ETB buffer) decoded packet by packet and element by
//! element must list exactly what OpenCSD 1.8.0's trc_pkt_lister lists in
//! `TC2/expected/TC2.ppl`, judged by `../shared/tools/ppl-compare` and, for the
//! packet lines, also text for text.
//!
//! The pipeline is built here from the library parts (snapshot, memory image,
//! deformatter, the ETMv3 parser and decoder), so it does not depend on the
//! session layer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tracesight::element;
use tracesight::frame::{Deformatter, Flow, FrameMode, FrameSink};
use tracesight::image::memory::MemoryImage;
use tracesight::protocol::Decoder;
use tracesight::input::Snapshot;
use tracesight::protocol::etm3::{display, Etm3Config, Etm3Decoder, Etm3Packet, Etm3Parser};
use tracesight::protocol::etm4::decoder::DecoderOutput;
use tracesight::session::BufferPlan;

const IDS: [u8; 3] = [0x10, 0x11, 0x12];

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

struct Chain {
    parser: Etm3Parser,
    decoder: Etm3Decoder,
}

/// Appends the listing of every ETMv3 ID as trc_pkt_lister writes it.
struct Lister {
    chains: BTreeMap<u8, Chain>,
    out: String,
    fatal: bool,
}

fn forward(out: &mut String, o: DecoderOutput<'_>) {
    match o {
        DecoderOutput::Element(e) => element::write_opencsd_line(out, e),
        // Messages are printed without a newline, as OpenCSD does.
        DecoderOutput::Message(m) => out.push_str(m),
        _ => {}
    }
}

impl Chain {
    fn packet(decoder: &mut Etm3Decoder, out: &mut String, id: u8, pkt: &Etm3Packet, raw: &[u8]) -> bool {
        display::write_opencsd_line(out, id, pkt, raw);
        decoder.packet(pkt, &mut |o| forward(out, o));
        !decoder.is_fatal()
    }
}

impl FrameSink for Lister {
    fn data(&mut self, id: u8, index: u64, bytes: &[u8]) -> Flow {
        let Some(c) = self.chains.get_mut(&id) else { return Flow::Continue };
        assert!(!bytes.is_empty(), "empty data block for ID 0x{id:x} at {index}");
        let out = &mut self.out;
        let decoder = &mut c.decoder;
        c.parser.push_until(index, bytes, &mut |p: &Etm3Packet, r: &[u8]| Chain::packet(decoder, out, id, p, r));
        if c.decoder.is_fatal() || c.parser.is_fatal() {
            self.fatal = true;
            return Flow::Stop;
        }
        Flow::Continue
    }
}

fn list_tc2(dir: &Path) -> String {
    let snap = Snapshot::open(dir).expect("TC2 snapshot opens");
    let buffer = snap.default_buffer().expect("TC2 has a trace buffer").clone();
    let plan = BufferPlan::new(&snap, &buffer).expect("TC2 buffer plan");
    let image: Arc<MemoryImage> = plan.image.clone();
    assert!(!image.is_empty(), "kernel_dump.bin is mapped");
    let mut chains = BTreeMap::new();
    for dev in snap.sources_for_buffer(&buffer.name) {
        if !dev.type_base().to_ascii_uppercase().starts_with("ETM3") {
            continue;
        }
        let core = snap.core_for_source(&dev.name).map(|c| c.type_name.clone());
        let cfg = Etm3Config::from_registers(|r| dev.reg(r), core.as_deref()).expect("ETMv3 registers");
        chains.insert(cfg.trace_id(), Chain { parser: Etm3Parser::new(&cfg), decoder: Etm3Decoder::new(&cfg, image.clone()) });
    }
    assert_eq!(chains.keys().copied().collect::<Vec<_>>(), IDS.to_vec());

    let file = plan.open().expect("trace buffer opens");
    let data = file.bytes();
    let mode = FrameMode::MemAligned;
    let accepted = mode.lister_accepted_len(data.len() as u64) as usize;
    let mut lister = Lister { chains, out: String::new(), fatal: false };
    let mut demux = Deformatter::new(mode);
    let flow = demux.push(0, &data[..accepted], &mut lister).expect("frames decode");
    assert_eq!(flow, Flow::Continue);
    demux.finish(&mut lister).expect("frames end cleanly");
    assert!(!lister.fatal, "no fatal error in TC2");
    // End of trace, per ID in ID order: the parser's partial packet, then the
    // decoder's end-of-trace processing.
    let Lister { chains, mut out, .. } = lister;
    for (id, mut c) in chains {
        let decoder = &mut c.decoder;
        let o = &mut out;
        c.parser.finish(&mut |p: &Etm3Packet, r: &[u8]| {
            Chain::packet(decoder, o, id, p, r);
        });
        c.decoder.finish(&mut |e| forward(&mut out, e));
        out.push_str(&format!("ID:{id:x}\tEND OF TRACE DATA\n"));
    }
    out
}

/// Packet lines of the given IDs, in order, text for text.
fn packet_lines(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let Some(at) = line.find("Idx:") else { continue };
        let rest = &line[at..];
        let Some(id) = rest.split("; ID:").nth(1).and_then(|r| r.split(';').next()) else { continue };
        if !IDS.iter().any(|i| format!("{i:x}") == id) || !rest.contains("; [") {
            continue;
        }
        m.entry(id.to_string()).or_default().push(rest.to_string());
    }
    m
}

#[test]
fn tc2_etm3_matches_trc_pkt_lister() {
    let Some(root) = fixtures() else {
        eprintln!("../shared/fixtures/opencsd not found: golden test not run");
        return;
    };
    let dir = root.join("TC2");
    let golden = dir.join("expected/TC2.ppl");
    let ours = list_tc2(&dir);
    let work = std::env::temp_dir().join(format!("tracesight-etm3-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let ours_path = work.join("TC2.txt");
    std::fs::write(&ours_path, &ours).unwrap();

    let cmp = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/ppl-compare"))
        .arg(&golden)
        .arg(&ours_path)
        .args(["--packets", "--ids", "10,11,12"])
        .output()
        .expect("python3 runs ppl-compare");
    let report = String::from_utf8_lossy(&cmp.stdout).into_owned();
    println!("{report}");

    // The packet descriptions too, which ppl-compare does not judge.
    let gold_text = String::from_utf8_lossy(&std::fs::read(&golden).unwrap()).into_owned();
    let (expected, actual) = (packet_lines(&gold_text), packet_lines(&ours));
    let mut text_diffs = Vec::new();
    for (id, exp) in &expected {
        let act = actual.get(id).cloned().unwrap_or_default();
        let same = exp.iter().zip(&act).filter(|(a, b)| a == b).count();
        println!("packet text ID:{id} expected {}, actual {}, identical {same}", exp.len(), act.len());
        if let Some(i) = (0..exp.len().max(act.len())).find(|&i| exp.get(i) != act.get(i)) {
            text_diffs.push(format!("ID:{id} #{i}\n  expected {:?}\n  actual   {:?}", exp.get(i), act.get(i)));
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    let totals: Vec<&str> = report.lines().filter(|l| l.contains(" total: ")).collect();
    assert!(cmp.status.success(), "ppl-compare reports differences:\n{report}");
    assert_eq!(totals.len(), 2, "packets and elements compared:\n{report}");
    assert!(totals.iter().all(|t| t.contains("IDENTICAL")), "{report}");
    assert!(text_diffs.is_empty(), "packet text differs:\n{}", text_diffs.join("\n"));
}
