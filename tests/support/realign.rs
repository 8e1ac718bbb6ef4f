//! Single-bit flips in a capture and whether the decode finds its way back:
//! shared by `examples/bitflip_realign.rs` (the figures in README) and
//! `tests/recover.rs` (a small sample asserted).
//!
//! A flip *realigns* when, for every trace ID, the element listing from that
//! ID's next sync point after the flipped byte on equals the clean listing
//! from the same point. A sync point is an A-sync and the Trace Info (ETE,
//! ETMv4) or I-sync (PTM, ETMv3) after it, which is where a decoder that lost
//! the stream has its state back: the comparison starts at the latter, leaving out the elements that only say where the decoder
//! stands in the stream (NO_SYNC, TRACE_ON, PE_CONTEXT: a decoder that had to
//! resynchronise reports them where a clean one carries on). Element lines
//! carry the buffer offset of their packet, which a flip does not move.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use tracesight::element::{self, ElementKind};
use tracesight::input::Snapshot;
use tracesight::protocol::etm4::decoder::DecoderOptions;
use tracesight::session::{run, BufferPlan, Event, RunOptions, SourceKind};

/// A capture's buffer read into memory.
pub struct Capture {
    pub name: String,
    pub plan: BufferPlan,
    pub data: Vec<u8>,
}

impl Capture {
    /// The default buffer of the snapshot at `dir` (or `buffer`).
    pub fn load(dir: &Path, buffer: Option<&str>) -> Result<Capture, String> {
        let snap = Snapshot::open(dir).map_err(|e| e.to_string())?;
        let b = match buffer {
            Some(n) => snap.buffer(n).map_err(|e| e.to_string())?,
            None => snap.default_buffer().ok_or("no trace buffer")?,
        };
        let plan = BufferPlan::new(&snap, b).map_err(|e| e.to_string())?;
        let data = plan.open().map_err(|e| e.to_string())?.bytes().to_vec();
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Capture { name, plan, data })
    }
}

/// What a decode of a (possibly damaged) buffer said.
#[derive(Default)]
pub struct Listing {
    /// Per trace ID: (packet offset, element line) of the elements compared.
    pub elements: BTreeMap<u8, Vec<(u64, String)>>,
    /// Per trace ID: its sync points, in order, as the offsets of the A-sync
    /// and of the Trace Info / I-sync after it (`None` until one is seen).
    pub syncs: BTreeMap<u8, Vec<(u64, Option<u64>)>>,
    /// (packet offset, trace ID) of every packet, in order of offset: which
    /// ID a byte of the buffer belongs to.
    pub owners: Vec<(u64, u8)>,
    /// Protocol family of each trace ID ("ETE/ETMv4", "ETMv3", "PTM").
    pub protocols: BTreeMap<u8, &'static str>,
    /// The run stopped on a fatal error.
    pub stopped: bool,
}

fn family(kind: &SourceKind) -> &'static str {
    match kind {
        SourceKind::Etm4(_) => "ETE/ETMv4",
        SourceKind::Etm3(_) => "ETMv3",
        SourceKind::Ptm(_) => "PTM",
        SourceKind::Unsupported { .. } => "other",
    }
}

/// Decode `data` under `plan`, exact or in recovery mode.
pub fn listing(plan: &BufferPlan, data: &[u8], recover: bool) -> Listing {
    let opts = RunOptions { elements: true, decoder: DecoderOptions { recover, ..Default::default() }, ..Default::default() };
    let mut l = Listing::default();
    let summary = run(plan, data, &opts, |ev| match ev {
        Event::Packet { source, stream_id, packet, .. } => {
            let id = source.trace_id.unwrap_or(stream_id);
            l.protocols.insert(id, family(&source.kind));
            l.owners.push((packet.index(), id));
            let syncs = l.syncs.entry(id).or_default();
            if packet.is_async() {
                syncs.push((packet.index(), None));
            } else if packet.is_state_sync() {
                if let Some(last @ (_, None)) = syncs.last_mut() {
                    last.1 = Some(packet.index());
                }
            }
        }
        Event::Element { source, element: e } => {
            if matches!(e.kind, ElementKind::NoSync(_) | ElementKind::TraceOn(_) | ElementKind::PeContext(_)) {
                return;
            }
            let id = source.trace_id.unwrap_or(e.trace_id);
            let mut line = String::new();
            element::write_opencsd_line(&mut line, e);
            l.elements.entry(id).or_default().push((e.index, line));
        }
        _ => {}
    })
    .expect("run");
    l.owners.sort_by_key(|&(i, _)| i);
    l.stopped = summary.fatal.is_some();
    l
}

/// The trace ID whose packet holds byte `offset` (the packet starting last
/// at or before it).
pub fn owner(clean: &Listing, offset: u64) -> Option<u8> {
    let n = clean.owners.partition_point(|&(i, _)| i <= offset);
    n.checked_sub(1).map(|k| clean.owners[k].1)
}

/// Does the damaged listing (a flip at byte `offset`) equal the clean one
/// from each trace ID's first A-sync after `offset` on?
pub fn realigned(clean: &Listing, damaged: &Listing, offset: u64) -> bool {
    first_difference(clean, damaged, offset).is_none()
}

/// Where the listings differ past the sync point: the trace ID and the
/// first differing lines (clean, damaged).
pub fn first_difference(clean: &Listing, damaged: &Listing, offset: u64) -> Option<(u8, String, String)> {
    let empty = Vec::new();
    clean.syncs.iter().find_map(|(id, syncs)| {
        let from = syncs.iter().find(|&&(a, _)| a > offset)?.1?;
        let tail = |l: &Listing| -> Vec<String> {
            let v = l.elements.get(id).unwrap_or(&empty);
            v.iter().filter(|(i, _)| *i >= from).map(|(_, s)| s.clone()).collect()
        };
        let (a, b) = (tail(clean), tail(damaged));
        if a == b {
            return None;
        }
        let k = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let line = |v: &Vec<String>| v.get(k).cloned().unwrap_or_else(|| "(end)".into());
        Some((*id, line(&a), line(&b)))
    })
}

/// xorshift64*: deterministic flips without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// One flip's outcome.
pub struct Outcome {
    pub bit: u64,
    /// With `--recover`, when it does not realign: trace ID and first
    /// differing lines (clean, damaged).
    pub difference: Option<(u8, String, String)>,
    pub protocol: &'static str,
    pub exact_stopped: bool,
    pub exact: bool,
    pub recover: bool,
}

/// `flips` single-bit flips drawn with `seed` over the bytes before the
/// capture's last complete sync point (a flip after it has nothing to realign at), each
/// decoded exactly and in recovery mode.
pub fn measure(cap: &Capture, flips: usize, seed: u64) -> Vec<Outcome> {
    let clean = listing(&cap.plan, &cap.data, false);
    let last_sync = clean.syncs.values().filter_map(|v| v.iter().rev().find(|p| p.1.is_some())).map(|p| p.0).max().unwrap_or(0);
    let mut rng = Rng::new(seed);
    let mut data = cap.data.clone();
    let mut out = Vec::with_capacity(flips);
    for _ in 0..flips {
        if last_sync == 0 {
            break;
        }
        let bit = rng.below(last_sync * 8);
        let offset = bit / 8;
        data[offset as usize] ^= 1 << (bit % 8);
        let exact = listing(&cap.plan, &data, false);
        let recov = listing(&cap.plan, &data, true);
        data[offset as usize] ^= 1 << (bit % 8);
        let protocol = owner(&clean, offset).and_then(|id| clean.protocols.get(&id).copied()).unwrap_or("other");
        out.push(Outcome {
            bit,
            protocol,
            exact_stopped: exact.stopped,
            exact: realigned(&clean, &exact, offset),
            recover: realigned(&clean, &recov, offset),
            difference: first_difference(&clean, &recov, offset),
        });
    }
    out
}
