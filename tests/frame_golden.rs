//! Checks the deformatter against OpenCSD's trc_pkt_lister golden logs.
//!
//! For every CoreSight-formatted buffer with a golden decode log, each packet
//! line (`Idx:N; ID:x; [0x.. ];\t...`) must be found in that ID's
//! demultiplexed stream: the raw bytes of an ID's packets, laid back to back,
//! must equal the stream from the first packet on, and each packet's `Idx`
//! must equal `block index + offset in block` of its first byte.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tracesight::frame::{Deformatter, Flow, FrameError, FrameMode, FrameSink, RawFrame};
use tracesight::input::{BufferFormat, Snapshot, TraceFile};

fn fixtures() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "note: {} not found; skipping golden frame tests",
            dir.display()
        );
        None
    }
}

/// One trace ID's demultiplexed bytes, each with the index a packet
/// starting at that byte would get.
#[derive(Default)]
struct IdStream {
    bytes: Vec<u8>,
    labels: Vec<u64>,
    blocks: usize,
    empty_blocks: Vec<u64>,
}

#[derive(Default)]
struct Demux {
    ids: BTreeMap<u8, IdStream>,
}

impl FrameSink for Demux {
    fn data(&mut self, id: u8, index: u64, bytes: &[u8]) -> Flow {
        let s = self.ids.entry(id).or_default();
        s.blocks += 1;
        if bytes.is_empty() {
            s.empty_blocks.push(index);
        }
        for (k, &b) in bytes.iter().enumerate() {
            s.bytes.push(b);
            s.labels.push(index + k as u64);
        }
        Flow::Continue
    }
}

fn demux(mode: FrameMode, data: &[u8], chunk: usize) -> (Demux, Result<(), FrameError>) {
    let mut d = Deformatter::new(mode);
    let mut sink = Demux::default();
    for (n, c) in data.chunks(chunk).enumerate() {
        if let Err(e) = d.push((n * chunk) as u64, c, &mut sink) {
            return (sink, Err(e));
        }
    }
    let r = d.finish(&mut sink);
    (sink, r)
}

struct Packet {
    idx: u64,
    id: u8,
    bytes: Vec<u8>,
    line: usize,
    /// Not-synchronised data: packet processors label these chunks by their
    /// own byte count, not by block index + offset (see `check_packets`).
    not_sync: bool,
}

/// Packet lines (with raw bytes) and protocol printers of a golden log.
#[derive(Default)]
struct Golden {
    packets: Vec<Packet>,
    /// Trace ID -> printer name (`ETMV4I`, `PTM`, `STM`, ...).
    protocols: BTreeMap<u8, String>,
}

/// A packet may follow an error message on the same physical line, so
/// every `Idx:` is tried.
fn parse_golden(text: impl BufRead) -> Golden {
    let mut g = Golden::default();
    for (n, line) in text.split(b'\n').enumerate() {
        let line = String::from_utf8_lossy(&line.unwrap()).into_owned();
        if let Some((_, rest)) = line.split_once("Trace Packet Lister : Protocol printer ") {
            if let Some((name, id)) = rest.split_once(" on Trace ID 0x") {
                if let Ok(id) = u8::from_str_radix(id.trim(), 16) {
                    g.protocols.insert(id, name.to_string());
                }
            }
            continue;
        }
        if !line.contains("[0x") {
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("Idx:") {
            rest = &rest[at + 4..];
            if let Some(p) = parse_packet_at(rest, n + 1) {
                g.packets.push(p);
            }
        }
    }
    g
}

fn parse_packet_at(s: &str, line: usize) -> Option<Packet> {
    let (idx, s) = s.split_once("; ID:")?;
    let idx = idx.parse().ok()?;
    let (id, s) = s.split_once("; [")?;
    let id = u8::from_str_radix(id, 16).ok()?;
    let (bytes, desc) = s.split_once("];\t")?;
    let bytes = bytes
        .split_whitespace()
        .map(|b| u8::from_str_radix(b.strip_prefix("0x")?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let not_sync = ["I_NOT_SYNC", "NOTSYNC", "ITM_NOTSYNC"]
        .iter()
        .any(|t| desc.starts_with(t));
    Some(Packet {
        idx,
        id,
        bytes,
        line,
        not_sync,
    })
}

/// Parse a golden log, decompressing `.xz` files with the `xz` tool.
fn load_golden(path: &Path) -> Golden {
    if path.extension().is_some_and(|e| e == "xz") {
        let mut child = Command::new("xz")
            .arg("-dc")
            .arg(path)
            .stdout(Stdio::piped())
            .spawn()
            .expect("xz needed to read compressed golden");
        let out = child.stdout.take().unwrap();
        let golden = parse_golden(BufReader::with_capacity(1 << 20, out));
        assert!(child.wait().unwrap().success(), "xz -dc {}", path.display());
        golden
    } else {
        parse_golden(BufReader::new(std::fs::File::open(path).unwrap()))
    }
}

#[derive(Default, Debug)]
struct Report {
    checked: usize,
    not_sync: usize,
    problems: Vec<String>,
}

/// Compare golden packets with the demultiplexed streams.
///
/// * ETMv4/ETE/ETMv3/PTM: packets after synchronisation must lie back to
///   back in the stream with `Idx` = block index + offset of the first byte.
/// * ITM: the same for `Idx`; the printed bytes are not always the raw ones.
/// * STM: packets start at nibbles and printed bytes are re-packed, so only
///   check that each `Idx` labels a stream byte (or is one past it, for a
///   packet starting in a byte's upper nibble), in order.
/// * Not-synchronised packets: the ETMv4/ETE processor dumps them in chunks
///   of up to 8 raw bytes; a chunk after the first is labelled one past the
///   previous chunk's last byte (`block index + block length` when that
///   chunk ended a block, not the next block's index).  Other processors'
///   not-sync packets are skipped (PTM/STM print a byte from beyond the
///   block) and the next synced packet is searched for.
fn check_packets(demux: &Demux, golden: &Golden) -> Report {
    let mut by_id: BTreeMap<u8, Vec<&Packet>> = BTreeMap::new();
    for p in &golden.packets {
        by_id.entry(p.id).or_default().push(p);
    }
    let mut r = Report::default();
    for (id, pkts) in by_id {
        let proto = golden.protocols.get(&id).map(String::as_str).unwrap_or("?");
        let Some(s) = demux.ids.get(&id) else {
            r.problems
                .push(format!("ID {id:#x}: no demultiplexed data"));
            continue;
        };
        let mut pos = 0usize;
        let mut resync = true;
        for p in pkts {
            let etm4 = matches!(proto, "ETMV4I" | "ETE");
            if p.not_sync && !etm4 {
                r.not_sync += 1;
                resync = true;
                continue;
            }
            let fits = |q: usize| -> bool {
                let Some(&label) = s.labels.get(q) else {
                    return false;
                };
                if proto == "STM" {
                    // A packet starting in the upper nibble of a byte is
                    // labelled one past that byte.
                    return label == p.idx || label + 1 == p.idx;
                }
                // ETMv4 not-synchronised chunks after the first are labelled
                // one past the previous chunk's last byte.
                let prev_plus_one = q > 0 && s.labels[q - 1] + 1 == p.idx;
                if label != p.idx && !(p.not_sync && prev_plus_one) {
                    return false;
                }
                match proto {
                    "ITM" => q + p.bytes.len() <= s.bytes.len(),
                    _ => s.bytes[q..].starts_with(&p.bytes),
                }
            };
            let found = if resync || proto == "STM" {
                (pos..s.bytes.len()).find(|&q| fits(q))
            } else {
                Some(pos).filter(|&q| fits(q))
            };
            let Some(q) = found else {
                let end = (pos + p.bytes.len()).min(s.bytes.len());
                r.problems.push(format!(
                    "ID {id:#x} ({proto}): line {} Idx {} {:02x?}: stream has Idx {:?} {:02x?}",
                    p.line,
                    p.idx,
                    p.bytes,
                    s.labels.get(pos),
                    &s.bytes[pos.min(end)..end]
                ));
                break;
            };
            if p.not_sync {
                r.not_sync += 1;
            } else {
                r.checked += 1;
            }
            resync = false;
            pos = if proto == "STM" { q } else { q + p.bytes.len() };
        }
    }
    r
}

/// Formatted (`coresight`) buffers that have a golden full decode.
fn formatted_cases(root: &Path) -> Vec<(String, PathBuf, PathBuf)> {
    let mut cases = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("snapshot.ini").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let snap = Snapshot::open(&dir).unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for (k, buf) in snap.buffers().iter().enumerate() {
            if buf.format != BufferFormat::CoreSight {
                continue;
            }
            let golden = if k == 0 {
                let plain = dir.join("expected").join(format!("{name}.ppl"));
                if plain.is_file() {
                    plain
                } else {
                    dir.join("expected").join(format!("{name}.ppl.xz"))
                }
            } else {
                dir.join("expected")
                    .join(format!("{name}_src_{}.ppl", buf.name))
            };
            if golden.is_file() {
                cases.push((format!("{name}/{}", buf.name), buf.path.clone(), golden));
            }
        }
    }
    cases
}

#[test]
fn formatted_buffers_match_golden_packet_indices() {
    let Some(root) = fixtures() else { return };
    let cases = formatted_cases(&root);
    assert!(
        cases.len() >= 10,
        "expected the formatted fixtures, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    let mut total = 0;
    for (label, bin, golden) in &cases {
        let data = TraceFile::open(bin).unwrap();
        // trc_pkt_lister pushes 1024-byte blocks; the result must not depend on it.
        let (demux, result) = demux(FrameMode::MemAligned, &data, 1024);
        result.unwrap();
        let golden = load_golden(golden);
        let r = check_packets(&demux, &golden);
        eprintln!(
            "{label}: {} bytes, {} packets: {} checked, {} not-sync; protocols {:x?}",
            data.len(),
            golden.packets.len(),
            r.checked,
            r.not_sync,
            golden.protocols
        );
        if r.checked + r.not_sync != golden.packets.len() || !r.problems.is_empty() {
            failures.push(format!("{label}: {r:#?}"));
        }
        total += r.checked;
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(total > 900_000, "only {total} packets checked");
}

#[test]
fn chunking_does_not_change_output() {
    let Some(root) = fixtures() else { return };
    let data = TraceFile::open(&root.join("juno_r1_1/cstrace.bin")).unwrap();
    let (a, _) = demux(FrameMode::MemAligned, &data, 1024);
    for chunk in [1, 7, 16, 333, data.len()] {
        let (b, _) = demux(FrameMode::MemAligned, &data, chunk);
        assert_eq!(a.ids.len(), b.ids.len());
        for (id, s) in &a.ids {
            let t = &b.ids[id];
            assert_eq!(s.bytes, t.bytes, "chunk {chunk} id {id:#x}");
            assert_eq!(s.labels, t.labels, "chunk {chunk} id {id:#x}");
            assert_eq!(s.blocks, t.blocks, "chunk {chunk} id {id:#x}");
        }
    }
}

#[test]
fn stm_only_juno_ends_with_empty_block() {
    // OpenCSD's STM packet processor stops with a fatal error on the
    // zero-length block of the last frame.
    let Some(root) = fixtures() else { return };
    let data = TraceFile::open(&root.join("stm_only-juno/cstraceitm.bin")).unwrap();
    let (demux, r) = demux(FrameMode::MemAligned, &data, 1024);
    r.unwrap();
    let s = &demux.ids[&0x20];
    assert_eq!(s.empty_blocks.len(), 1);
    assert!(s.empty_blocks[0] >= data.len() as u64 - 16);
}

/// Raw frame printer output as trc_pkt_lister writes it.
#[derive(Default)]
struct RawPrinter {
    lines: Vec<String>,
    demux: Demux,
}

fn hex_lines(head: String, bytes: &[u8]) -> Vec<String> {
    let mut lines = vec![head];
    for (k, b) in bytes.iter().enumerate() {
        if k > 0 && k % 16 == 0 {
            lines.push(String::new());
        }
        lines.last_mut().unwrap().push_str(&format!("{b:02x} "));
    }
    lines
}

impl FrameSink for RawPrinter {
    fn data(&mut self, id: u8, index: u64, bytes: &[u8]) -> Flow {
        self.demux.data(id, index, bytes)
    }

    fn raw(&mut self, ev: RawFrame<'_>) {
        let lines = match ev {
            RawFrame::Packed { index, bytes } => hex_lines(
                format!("Frame Data; Index{index:7};    RAW_PACKED; "),
                bytes,
            ),
            RawFrame::IdData { id, index, bytes } => {
                let id = match id {
                    Some(id) => format!("0x{id:02x}"),
                    None => "????".into(),
                };
                hex_lines(
                    format!("Frame Data; Index{index:7};   ID_DATA[{id}]; "),
                    bytes,
                )
            }
            RawFrame::DstreamFooter { bytes } => {
                let mut s = String::from("DSTREAM footer [");
                for b in bytes {
                    s.push_str(&format!("0x{b:x} "));
                }
                s.push(']');
                vec![s]
            }
        };
        self.lines.extend(lines);
    }
}

fn golden_raw_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_frame = false;
    for line in text.lines() {
        let hex_only = !line.is_empty()
            && line
                .split(' ')
                .filter(|t| !t.is_empty())
                .all(|t| t.len() == 2 && t.bytes().all(|c| c.is_ascii_hexdigit()));
        if line.starts_with("Frame Data;") {
            in_frame = true;
            out.push(line.to_string());
        } else if line.starts_with("DSTREAM footer") {
            in_frame = false;
            out.push(line.to_string());
        } else if in_frame && hex_only {
            out.push(line.to_string());
        } else {
            in_frame = false;
        }
    }
    out
}

#[test]
fn dstream_raw_frames_and_indices_match_golden() {
    let Some(root) = fixtures() else { return };
    let dir = root.join("a55-test-tpiu");
    let snap = Snapshot::open(&dir).unwrap();
    let buf = snap.default_buffer().unwrap();
    assert_eq!(buf.format, BufferFormat::DstreamCoreSight);
    let data = TraceFile::open(&buf.path).unwrap();

    // -dstream_format -o_raw_packed -o_raw_unpacked: trc_pkt_lister reads
    // 504 payload bytes, then the 8-byte footer.
    let mut d = Deformatter::new(FrameMode::Dstream);
    d.set_raw_monitor(true);
    let mut printer = RawPrinter::default();
    let mut off = 0usize;
    while off < data.len() {
        for len in [504, 8] {
            let end = (off + len).min(data.len());
            d.push(off as u64, &data[off..end], &mut printer).unwrap();
            off = end;
        }
    }
    d.finish(&mut printer).unwrap();
    assert_eq!(d.stream_position(), 48384);

    let mut golden = String::new();
    std::fs::File::open(dir.join("expected/a55-test-tpiu.ppl"))
        .unwrap()
        .read_to_string(&mut golden)
        .unwrap();
    let want = golden_raw_lines(&golden);
    assert!(want.len() > 5000);
    for (k, (got, want)) in printer.lines.iter().zip(&want).enumerate() {
        assert_eq!(got.trim_end(), want.trim_end(), "raw line {k}");
    }
    assert_eq!(printer.lines.len(), want.len());

    // Packet indices in the footer-stripped stream.
    let golden = load_golden(&dir.join("expected/a55-test-tpiu_decode_dstream.ppl"));
    let r = check_packets(&printer.demux, &golden);
    assert!(r.problems.is_empty(), "{r:#?}");
    assert_eq!(r.checked + r.not_sync, golden.packets.len());
    assert!(r.checked > 30000);

    // Whole-file push gives the same data.
    let (whole, r) = demux(FrameMode::Dstream, &data, data.len());
    r.unwrap();
    assert_eq!(whole.ids[&1].bytes, printer.demux.ids[&1].bytes);
    assert_eq!(whole.ids[&1].labels, printer.demux.ids[&1].labels);
}

#[test]
fn dstream_buffer_without_footer_stripping_hits_bad_fsync() {
    // a55-test-tpiu_decode.ppl: without -dstream_format the buffer is read
    // as TPIU with FSYNCs and processing stops after 516 bytes.
    let Some(root) = fixtures() else { return };
    let data = TraceFile::open(&root.join("a55-test-tpiu/DSTREAM_0.bin")).unwrap();
    let mut d = Deformatter::new(FrameMode::Tpiu {
        fsync: true,
        hsync: false,
    });
    let mut sink = Demux::default();
    let mut result = Ok(Flow::Continue);
    for (n, c) in data.chunks(1024).enumerate() {
        result = d.push((n * 1024) as u64, c, &mut sink);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(FrameError::BadFsync { index: 516 }));
    assert_eq!(d.stream_position(), 516);
    let golden = load_golden(&root.join("a55-test-tpiu/expected/a55-test-tpiu_decode.ppl"));
    let r = check_packets(&sink, &golden);
    assert!(r.problems.is_empty(), "{r:#?}");
    assert_eq!(r.checked + r.not_sync, golden.packets.len());
}
