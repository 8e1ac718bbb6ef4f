//! Golden test for PTM (PFT 1.0/1.1): every PTM capture under
//! ../shared/fixtures/opencsd, parsed and decoded by `protocol::ptm`, must list
//! the same packets and decoded elements as OpenCSD 1.8.0's trc_pkt_lister
//! (the `expected/*.ppl` goldens), as judged by ../shared/tools/ppl-compare.
//! On top of that, the full text of every packet line must match.
//!
//! The pipeline is built here (snapshot -> memory image -> frame
//! demultiplexer for formatted buffers, 1024-byte blocks for raw ones ->
//! parser -> decoder) so that it does not depend on the session layer.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tracesight::element;
use tracesight::frame::{Deformatter, FrameMode};
use tracesight::image::memory::MemoryImage;
use tracesight::protocol::Decoder;
use tracesight::input::{BufferFormat, Snapshot};
use tracesight::protocol::etm4::decoder::DecoderOutput;
use tracesight::protocol::ptm::{display, PtmConfig, PtmDecoder, PtmPacket, PtmPacketType, PtmParser};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

fn ppl_compare() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/ppl-compare")
}

/// One PTM source's parser and decoder.
struct Chain {
    trace_id: u8,
    parser: PtmParser,
    decoder: PtmDecoder,
}

impl Chain {
    fn push(&mut self, out: &mut String, stream_id: u8, index: u64, bytes: &[u8], overread: &[u8]) -> bool {
        let (tid, decoder) = (self.trace_id, &mut self.decoder);
        self.parser.push_with_overread(index, bytes, overread, &mut |p: &PtmPacket, raw: &[u8]| {
            packet(out, tid, stream_id, decoder, p, raw);
            !decoder.is_fatal()
        });
        !self.decoder.is_fatal()
    }

    fn finish(&mut self, out: &mut String, stream_id: u8) {
        let (tid, decoder) = (self.trace_id, &mut self.decoder);
        self.parser.finish(&mut |p: &PtmPacket, raw: &[u8]| packet(out, tid, stream_id, decoder, p, raw));
        self.decoder.finish(&mut |o| output(out, o));
        out.push_str(&format!("ID:{stream_id:x}\tEND OF TRACE DATA\n"));
    }
}

fn packet(out: &mut String, trace_id: u8, stream_id: u8, decoder: &mut PtmDecoder, p: &PtmPacket, raw: &[u8]) {
    display::write_parser_error(out, trace_id, p);
    display::write_opencsd_line(out, stream_id, p, raw);
    decoder.packet(p, &mut |o| output(out, o));
}

fn output(out: &mut String, o: DecoderOutput<'_>) {
    match o {
        DecoderOutput::Element(e) => element::write_opencsd_line(out, e),
        DecoderOutput::Message(m) => out.push_str(m),
        _ => {}
    }
}

/// OpenCSD's deformatter keeps each frame's per-ID data in fixed 15-byte
/// slots (followed in memory by the slot's byte count). The PTM packet
/// processor can list bytes past the end of a block; this recomputes what it
/// finds there, keyed by (trace ID, block index).
fn opencsd_slot_tails(data: &[u8]) -> HashMap<(u8, u64), Vec<u8>> {
    const NO_ID: u8 = 0xff;
    let mut tails = HashMap::new();
    let mut slots = [[0u8; 15]; 8];
    let mut cur_id = NO_ID;
    for (f, frame) in data.chunks_exact(16).enumerate() {
        let sof = (f * 16) as u64;
        let mut out = 0usize;
        let mut meta = [(NO_ID, sof, 0usize); 8];
        meta[0] = (cur_id, sof, 0);
        let mut flag = 1u8;
        for i in (0..14).step_by(2) {
            let mut prev_and_change = false;
            if frame[i] & 1 != 0 {
                let new_id = (frame[i] >> 1) & 0x7f;
                if new_id != cur_id {
                    prev_and_change = flag & frame[15] != 0;
                    if prev_and_change {
                        slots[out][meta[out].2] = frame[i + 1];
                        meta[out].2 += 1;
                    }
                    cur_id = new_id;
                    if meta[out].2 > 0 {
                        out += 1;
                        meta[out] = (cur_id, sof + i as u64, 0);
                    }
                    meta[out].0 = cur_id;
                }
            } else {
                slots[out][meta[out].2] = frame[i] | u8::from(flag & frame[15] != 0);
                meta[out].2 += 1;
            }
            if !prev_and_change {
                slots[out][meta[out].2] = frame[i + 1];
                meta[out].2 += 1;
            }
            flag <<= 1;
        }
        if frame[14] & 1 != 0 {
            cur_id = (frame[14] >> 1) & 0x7f;
        } else {
            slots[out][meta[out].2] = frame[14] | u8::from(flag & frame[15] != 0);
            meta[out].2 += 1;
        }
        for (k, &(id, index, valid)) in meta.iter().enumerate().take(out + 1) {
            let mut tail = slots[k][valid..].to_vec();
            tail.extend_from_slice(&(valid as u32).to_le_bytes());
            tail.extend_from_slice(&[0; 4]);
            tails.insert((id, index), tail);
        }
    }
    tails
}

struct Run {
    listing: String,
    /// IDs to compare: packet stream IDs and element trace IDs.
    ids: Vec<u8>,
}

/// Decode the default buffer of a snapshot with a PTM chain for each PTM source.
fn decode_snapshot(dir: &Path) -> Option<Run> {
    let snap = Snapshot::open(dir).ok()?;
    let buffer = snap.default_buffer()?.clone();
    let mut image = MemoryImage::new();
    for dev in snap.devices.iter().filter(|d| d.is_core()) {
        let _ = image.add_device_dumps(&snap.dir, dev);
    }
    let image = Arc::new(image);
    let mut chains: BTreeMap<u8, Chain> = BTreeMap::new();
    for dev in snap.sources_for_buffer(&buffer.name) {
        let base = dev.type_base().to_ascii_uppercase();
        if !(base.starts_with("PTM") || base.starts_with("PFT")) {
            continue;
        }
        let core = snap.core_for_source(&dev.name).map(|c| c.type_name.clone());
        let cfg = PtmConfig::from_registers(|r| dev.reg(r), core.as_deref()).ok()?;
        let chain = Chain {
            trace_id: cfg.trace_id(),
            parser: PtmParser::new(&cfg),
            decoder: PtmDecoder::new(&cfg, image.clone()),
        };
        chains.insert(cfg.trace_id(), chain);
    }
    if chains.is_empty() {
        return None;
    }
    let data = std::fs::read(&buffer.path).ok()?;
    let mut out = String::new();
    let ids;
    if buffer.format == BufferFormat::SourceData {
        let (&tid, chain) = chains.iter_mut().next()?;
        ids = vec![0, tid];
        let mut ok = true;
        let mut last_block: Vec<u8> = Vec::new();
        for (i, block) in data.chunks(1024).enumerate() {
            // After a short final block, trc_pkt_lister's read buffer still
            // holds the previous block's bytes.
            let overread = if block.len() < last_block.len() { last_block[block.len()..].to_vec() } else { Vec::new() };
            if !chain.push(&mut out, 0, (i * 1024) as u64, block, &overread) {
                ok = false;
                break;
            }
            last_block = block.to_vec();
        }
        if ok {
            chain.finish(&mut out, 0);
        }
    } else {
        ids = chains.keys().copied().collect();
        let tails = opencsd_slot_tails(&data);
        let mut blocks: Vec<(u8, u64, Vec<u8>)> = Vec::new();
        let mut demux = Deformatter::new(FrameMode::MemAligned);
        let accepted = FrameMode::MemAligned.lister_accepted_len(data.len() as u64) as usize;
        let mut sink = |id: u8, index: u64, bytes: &[u8]| blocks.push((id, index, bytes.to_vec()));
        demux.push(0, &data[..accepted], &mut sink).ok()?;
        demux.finish(&mut sink).ok()?;
        let mut ok = true;
        for (id, index, bytes) in &blocks {
            if let Some(chain) = chains.get_mut(id) {
                let tail = tails.get(&(*id, *index)).map(|t| t.as_slice()).unwrap_or(&[]);
                if !chain.push(&mut out, *id, *index, bytes, tail) {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            for (&id, chain) in chains.iter_mut() {
                chain.finish(&mut out, id);
            }
        }
    }
    Some(Run { listing: out, ids })
}

/// Full-text comparison of packet lines of the given stream IDs: returns the
/// number compared and the first mismatch.
fn compare_packet_text(golden: &str, ours: &str, ids: &[u8]) -> (usize, Option<(String, String)>) {
    let pick = |text: &str| -> Vec<String> {
        text.split('\n')
            .filter_map(|l| {
                // A line may start with an unterminated error message.
                let start = l.find("Idx:")?;
                let l = &l[start..];
                let rest = l.split_once("; ID:")?.1;
                let (id, tail) = rest.split_once(';')?;
                let id = u8::from_str_radix(id, 16).ok()?;
                (ids.contains(&id) && tail.starts_with(" [")).then(|| l.to_string())
            })
            .collect()
    };
    let g = pick(golden);
    let o = pick(ours);
    for (a, b) in g.iter().zip(o.iter()) {
        if a != b {
            return (g.len(), Some((a.clone(), b.clone())));
        }
    }
    if g.len() != o.len() {
        return (g.len(), Some((format!("{} lines", g.len()), format!("{} lines", o.len()))));
    }
    (g.len(), None)
}

#[test]
fn ptm_goldens_match_trc_pkt_lister() {
    let Some(root) = fixtures() else {
        eprintln!("fixtures not found; skipped");
        return;
    };
    let tmp = std::env::temp_dir().join(format!("tracesight-golden-ptm-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut snapshots: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().filter_map(|e| Some(e.ok()?.path())).collect();
    snapshots.sort();
    for dir in snapshots {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let golden = dir.join("expected").join(format!("{name}.ppl"));
        if !golden.is_file() {
            continue;
        }
        let Some(run) = decode_snapshot(&dir) else { continue };
        let ours = tmp.join(format!("{name}.txt"));
        std::fs::write(&ours, &run.listing).unwrap();
        let ids: Vec<String> = run.ids.iter().map(|i| format!("{i:x}")).collect();
        let res = Command::new("python3")
            .arg(ppl_compare())
            .arg(&golden)
            .arg(&ours)
            .arg("--packets")
            .arg("--quiet")
            .arg("--ids")
            .arg(ids.join(","))
            .output()
            .expect("run ppl-compare");
        let text = String::from_utf8_lossy(&res.stdout).to_string();
        let total = |kind: &str| {
            text.lines().find(|l| l.starts_with(&format!("{kind} total"))).map(|l| l.to_string()).unwrap_or_default()
        };
        let (el, pk) = (total("elements"), total("packets"));
        let golden_text = std::fs::read_to_string(&golden).unwrap();
        let (n_text, text_diff) = compare_packet_text(&golden_text, &run.listing, &run.ids);
        let ok = res.status.success() && el.ends_with("IDENTICAL") && pk.ends_with("IDENTICAL") && text_diff.is_none();
        rows.push(format!(
            "{name:<18} ids {:<8} {}\n{:<18} {}\n{:<18} packet text: {n_text} lines {}",
            ids.join(","),
            el,
            "",
            pk,
            "",
            if text_diff.is_none() { "identical" } else { "DIFFERENT" }
        ));
        if !ok {
            let detail = Command::new("python3")
                .arg(ppl_compare())
                .arg(&golden)
                .arg(&ours)
                .arg("--packets")
                .arg("--ids")
                .arg(ids.join(","))
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
                .unwrap_or_default();
            failures.push(format!("{name}:\n{detail}\nfirst packet text difference: {text_diff:?}"));
        }
    }
    println!("PTM goldens:");
    for r in &rows {
        println!("{r}");
    }
    assert!(rows.len() >= 4, "expected the four PTM snapshots, found {}", rows.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The listing does not depend on how a raw buffer is split into blocks,
/// except for NOTSYNC chunking (none in these captures).
#[test]
fn raw_capture_block_size_does_not_change_packets() {
    let Some(root) = fixtures() else { return };
    let dir = root.join("tc2-ptm-rstk-t32");
    let snap = Snapshot::open(&dir).unwrap();
    let dev = snap.sources_for_buffer(&snap.default_buffer().unwrap().name)[0].clone();
    let cfg = PtmConfig::from_registers(|r| dev.reg(r), Some("Cortex-A15")).unwrap();
    let data = std::fs::read(&snap.default_buffer().unwrap().path).unwrap();
    let list = |size: usize| {
        let mut p = PtmParser::new(&cfg);
        let mut v: Vec<(u64, PtmPacketType, Vec<u8>)> = Vec::new();
        for (i, b) in data.chunks(size).enumerate() {
            p.push((i * size) as u64, b, &mut |k: &PtmPacket, r: &[u8]| v.push((k.index, k.ptype, r.to_vec())));
        }
        p.finish(&mut |k: &PtmPacket, r: &[u8]| v.push((k.index, k.ptype, r.to_vec())));
        v
    };
    let whole = list(data.len());
    assert_eq!(whole, list(1024));
    assert_eq!(whole, list(7));
    assert_eq!(whole, list(1));
}

/// A long run of zero bytes in a raw PTM buffer: OpenCSD 1.8.0's A-sync
/// search (`TrcPktProcPtm::waitASync`) counts zeros held over from the
/// previous block again, so its packet indices run past the end of the
/// buffer (34,496 for 4,096 bytes), it prints bytes read beyond the block it
/// was handed, and the zeros it holds grow with the run (a third of it), all
/// listed again with every block: its listing grows with the square of the
/// run (118 MB for 70,000 zeros). We list the same packets at the same
/// indices with the same lengths (tests/data/ptm_zero_run_opencsd.txt, taken
/// from trc_pkt_lister 1.8.0) until more than 4,096 zeros are held, and then
/// list the held zeros once, so the listing stays linear. The bytes differ
/// where OpenCSD reads outside its buffer: for this all-zero input it prints
/// 251 non-zero bytes in the 320-byte packet at Idx:1024 (0xff, 0xfa, 0xfb,
/// ... from its heap), which cannot be trace bytes; we print zeros there, the
/// only bytes the buffer holds.
#[test]
fn zero_run_lists_opencsd_packets_without_its_overread() {
    let Some(root) = fixtures() else { return };
    let snap = Snapshot::open(&root.join("tc2-ptm-rstk-t32")).unwrap();
    let dev = snap.sources_for_buffer(&snap.default_buffer().unwrap().name)[0].clone();
    let cfg = PtmConfig::from_registers(|r| dev.reg(r), Some("Cortex-A15")).unwrap();
    let expected: Vec<(u64, usize, String)> =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ptm_zero_run_opencsd.txt"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].to_string())
            })
            .collect();
    let data = vec![0u8; 4096];
    let mut p = PtmParser::new(&cfg);
    let mut got: Vec<(u64, Vec<u8>, String)> = Vec::new();
    let mut on = |k: &PtmPacket, r: &[u8]| {
        let mut text = String::new();
        display::write_description(&mut text, k);
        let name = text.split(' ').next().unwrap_or("").to_string();
        got.push((k.index, r.to_vec(), name))
    };
    // trc_pkt_lister's 1024-byte blocks; all full, so nothing is read past
    // a block from the previous one.
    for (i, b) in data.chunks(1024).enumerate() {
        p.push_with_overread((i * 1024) as u64, b, &[], &mut |k: &PtmPacket, r: &[u8]| {
            on(k, r);
            true
        });
    }
    p.finish(&mut |k: &PtmPacket, r: &[u8]| on(k, r));
    assert_eq!(expected.len(), 225);
    let ours: Vec<(u64, usize, String)> = got.iter().map(|(i, r, n)| (*i, r.len(), n.clone())).collect();
    // OpenCSD holds at most 1,280 zeros here, under `MAX_HELD_ZEROS`: the
    // same packets. How the listing of longer runs stays linear:
    // tests/state_robustness.rs.
    assert_eq!(ours, expected);
    assert!(got.iter().all(|(_, r, _)| r.iter().all(|&b| b == 0)), "every byte listed is a byte of the buffer");
}
