//! The index file: fixed-width little-endian records, memory-mapped.
//!
//! ```text
//! header     HEADER_WORDS x u64:
//!            magic "TSIGHTIX", version, fingerprint, trace size,
//!            trace mtime (ns), trace ends hash, checkpoint count,
//!            id summary count, totals (packets, elements, instructions),
//!            stop text length, state area length, records hash
//! checkpoints  count x CHECKPOINT_WORDS x u64   (see Checkpoint)
//! id summaries count x ID_WORDS x u64           (see IdSummary)
//! stop text    UTF-8, padded to 8 bytes
//! state area   the saved decode states, each hashed in its checkpoint
//! ```
//!
//! Everything before the state area is hashed into the header, so a torn or
//! edited file is rejected at open without reading the (large) state area;
//! each state is checked against its own hash when a seek uses it.

use std::fs;
use std::io::Write;
use std::path::Path;

use memmap2::Mmap;

use super::{Maxima, SegmentStats, TraceIdentity};
use crate::session::Counts;

pub const MAGIC: u64 = u64::from_le_bytes(*b"TSIGHTIX");
/// Bumped whenever the layout or the saved decode state changes.
pub const VERSION: u64 = 1;
/// "No value" in optional fields.
pub const NONE: u64 = u64::MAX;

const HEADER_WORDS: usize = 14;
const CHECKPOINT_WORDS: usize = 18;
const ID_WORDS: usize = 9;

/// FNV-1a, 64-bit: small, dependency-free, good enough to tell files apart.
pub struct Fnv(u64);

impl Fnv {
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Fnv::new()
    }
}

/// A restart point and the segment that follows it (up to the next one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Byte offset in the buffer where decoding resumes.
    pub offset: u64,
    pub elements_before: u64,
    pub instructions_before: u64,
    pub packets_before: u64,
    /// Largest timestamp / cycle count / element offset of any element
    /// before the checkpoint ([`NONE`] when none).
    pub max_ts_before: u64,
    pub max_cc_before: u64,
    pub max_index_before: u64,
    /// Segment summary ([`NONE`] where nothing was seen).
    pub first_ts: u64,
    pub last_ts: u64,
    pub first_cc: u64,
    pub last_cc: u64,
    pub instructions: u64,
    pub exceptions: u64,
    /// No-sync, trace-on (after a gap or an overflow) elements.
    pub gaps: u64,
    /// Speculative elements that were not committed.
    pub spec_not_committed: u64,
    pub(super) state_offset: u64,
    pub(super) state_len: u64,
    pub(super) state_hash: u64,
}

impl Checkpoint {
    pub(super) fn new(offset: u64, counts: &Counts, max: &Maxima, state: &[u8]) -> Checkpoint {
        let mut h = Fnv::new();
        h.write(state);
        Checkpoint {
            offset,
            elements_before: counts.elements,
            instructions_before: counts.instructions,
            packets_before: counts.packets,
            max_ts_before: max.ts.unwrap_or(NONE),
            max_cc_before: max.cc.unwrap_or(NONE),
            max_index_before: max.index.unwrap_or(NONE),
            first_ts: NONE,
            last_ts: NONE,
            first_cc: NONE,
            last_cc: NONE,
            state_len: state.len() as u64,
            state_hash: h.finish(),
            ..Checkpoint::default()
        }
    }

    pub(super) fn set_segment(&mut self, s: &SegmentStats) {
        self.first_ts = s.first_ts.unwrap_or(NONE);
        self.last_ts = s.last_ts.unwrap_or(NONE);
        self.first_cc = s.first_cc.unwrap_or(NONE);
        self.last_cc = s.last_cc.unwrap_or(NONE);
        self.instructions = s.instructions;
        self.exceptions = s.exceptions;
        self.gaps = s.gaps;
        self.spec_not_committed = s.spec_canceled;
    }

    fn words(&self) -> [u64; CHECKPOINT_WORDS] {
        [
            self.offset,
            self.elements_before,
            self.instructions_before,
            self.packets_before,
            self.max_ts_before,
            self.max_cc_before,
            self.max_index_before,
            self.first_ts,
            self.last_ts,
            self.first_cc,
            self.last_cc,
            self.instructions,
            self.exceptions,
            self.gaps,
            self.spec_not_committed,
            self.state_offset,
            self.state_len,
            self.state_hash,
        ]
    }

    fn from_words(w: &[u64]) -> Checkpoint {
        Checkpoint {
            offset: w[0],
            elements_before: w[1],
            instructions_before: w[2],
            packets_before: w[3],
            max_ts_before: w[4],
            max_cc_before: w[5],
            max_index_before: w[6],
            first_ts: w[7],
            last_ts: w[8],
            first_cc: w[9],
            last_cc: w[10],
            instructions: w[11],
            exceptions: w[12],
            gaps: w[13],
            spec_not_committed: w[14],
            state_offset: w[15],
            state_len: w[16],
            state_hash: w[17],
        }
    }
}

/// Totals of one trace ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdSummary {
    pub trace_id: u64,
    pub elements: u64,
    pub instructions: u64,
    pub first_ts: u64,
    pub last_ts: u64,
    pub first_cc: u64,
    pub last_cc: u64,
    pub(super) reserved: [u64; 2],
}

impl Default for IdSummary {
    fn default() -> Self {
        IdSummary {
            trace_id: 0,
            elements: 0,
            instructions: 0,
            first_ts: NONE,
            last_ts: NONE,
            first_cc: NONE,
            last_cc: NONE,
            reserved: [0; 2],
        }
    }
}

impl IdSummary {
    fn words(&self) -> [u64; ID_WORDS] {
        [
            self.trace_id,
            self.elements,
            self.instructions,
            self.first_ts,
            self.last_ts,
            self.first_cc,
            self.last_cc,
            self.reserved[0],
            self.reserved[1],
        ]
    }

    fn from_words(w: &[u64]) -> IdSummary {
        IdSummary {
            trace_id: w[0],
            elements: w[1],
            instructions: w[2],
            first_ts: w[3],
            last_ts: w[4],
            first_cc: w[5],
            last_cc: w[6],
            reserved: [w[7], w[8]],
        }
    }
}

/// An index held in memory, as the build produces it.
pub struct IndexData {
    pub checkpoints: Vec<Checkpoint>,
    pub states: Vec<Vec<u8>>,
    pub ids: Vec<IdSummary>,
    pub totals: Counts,
    /// Why the decode stopped before the end, if it did.
    pub stop: Option<String>,
}

fn push_words(out: &mut Vec<u8>, words: &[u64]) {
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// Write `data` to `path` (under a temporary name, then renamed).
pub fn write(path: &Path, data: &IndexData, ident: &TraceIdentity, fingerprint: u64) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let stop = data.stop.clone().unwrap_or_default();
    let mut body = Vec::with_capacity(
        data.checkpoints.len() * CHECKPOINT_WORDS * 8 + data.ids.len() * ID_WORDS * 8 + stop.len() + 8,
    );
    let mut state_off = 0u64;
    for (c, st) in data.checkpoints.iter().zip(&data.states) {
        let mut c = *c;
        c.state_offset = state_off;
        state_off += st.len() as u64;
        push_words(&mut body, &c.words());
    }
    for s in &data.ids {
        push_words(&mut body, &s.words());
    }
    body.extend_from_slice(stop.as_bytes());
    while body.len() % 8 != 0 {
        body.push(0);
    }
    let mut h = Fnv::new();
    h.write(&body);
    let mut head = Vec::with_capacity(HEADER_WORDS * 8);
    push_words(
        &mut head,
        &[
            MAGIC,
            VERSION,
            fingerprint,
            ident.size,
            ident.mtime_ns,
            ident.ends_hash,
            data.checkpoints.len() as u64,
            data.ids.len() as u64,
            data.totals.packets,
            data.totals.elements,
            data.totals.instructions,
            stop.len() as u64,
            state_off,
            h.finish(),
        ],
    );
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(fs::File::create(&tmp)?);
        f.write_all(&head)?;
        f.write_all(&body)?;
        for st in &data.states {
            f.write_all(st)?;
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res.map_err(|e| e.to_string())
}

/// An index file, memory-mapped and validated.
pub struct IndexFile {
    map: Mmap,
    count: usize,
    ids: usize,
    totals: Counts,
    stop_len: usize,
    states_at: usize,
}

fn word(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap())
}

impl IndexFile {
    /// Open and validate; the error says why the file cannot be used.
    pub fn open(path: &Path, ident: &TraceIdentity, fingerprint: u64) -> Result<IndexFile, String> {
        let f = fs::File::open(path).map_err(|e| e.to_string())?;
        // SAFETY: the file is only read; a concurrent writer replaces it by
        // rename and never modifies it in place.
        let map = unsafe { Mmap::map(&f) }.map_err(|e| e.to_string())?;
        if map.len() < HEADER_WORDS * 8 {
            return Err(format!("{} bytes is too short for an index header", map.len()));
        }
        let h = |i: usize| word(&map, i);
        if h(0) != MAGIC {
            return Err("not a tracesight index (bad magic)".into());
        }
        if h(1) != VERSION {
            return Err(format!("index version {} (this tracesight writes {VERSION})", h(1)));
        }
        if h(2) != fingerprint {
            return Err("built with other decode options or program images".into());
        }
        if (h(3), h(4), h(5)) != (ident.size, ident.mtime_ns, ident.ends_hash) {
            return Err("the trace file changed since the index was built".into());
        }
        let count = h(6) as usize;
        let ids = h(7) as usize;
        let stop_len = h(11) as usize;
        let states_len = h(12);
        let body_len = count
            .checked_mul(CHECKPOINT_WORDS * 8)
            .and_then(|a| a.checked_add(ids.checked_mul(ID_WORDS * 8)?))
            .and_then(|a| a.checked_add(stop_len.div_ceil(8) * 8))
            .ok_or("impossible record counts")?;
        let states_at = HEADER_WORDS * 8 + body_len;
        if count == 0 || (map.len() as u64) != states_at as u64 + states_len {
            return Err(format!(
                "{} bytes, expected {} (truncated or extended)",
                map.len(),
                states_at as u64 + states_len
            ));
        }
        let mut hash = Fnv::new();
        hash.write(&map[HEADER_WORDS * 8..states_at]);
        if hash.finish() != h(13) {
            return Err("records do not match their checksum (corrupt)".into());
        }
        let file = IndexFile {
            totals: Counts { packets: h(8), elements: h(9), instructions: h(10) },
            map,
            count,
            ids,
            stop_len,
            states_at,
        };
        // Records must be ordered and their states inside the file.
        let mut prev = None;
        for i in 0..count {
            let c = file.checkpoint(i);
            if prev.is_some_and(|p: Checkpoint| p.offset >= c.offset || p.elements_before > c.elements_before)
                || c.state_offset.checked_add(c.state_len).is_none_or(|e| e > states_len)
                || c.offset > ident.size
            {
                return Err(format!("checkpoint {i} is inconsistent"));
            }
            prev = Some(c);
        }
        Ok(file)
    }

    /// Number of checkpoints (at least 1).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn checkpoint(&self, i: usize) -> Checkpoint {
        let at = HEADER_WORDS + i * CHECKPOINT_WORDS;
        let w: Vec<u64> = (at..at + CHECKPOINT_WORDS).map(|k| word(&self.map, k)).collect();
        Checkpoint::from_words(&w)
    }

    pub fn id_summaries(&self) -> Vec<IdSummary> {
        let at = HEADER_WORDS + self.count * CHECKPOINT_WORDS;
        (0..self.ids)
            .map(|i| {
                let s = at + i * ID_WORDS;
                let w: Vec<u64> = (s..s + ID_WORDS).map(|k| word(&self.map, k)).collect();
                IdSummary::from_words(&w)
            })
            .collect()
    }

    /// Totals of the whole decode.
    pub fn totals(&self) -> Counts {
        self.totals
    }

    /// Why the indexed decode stopped before the end, if it did.
    pub fn stop(&self) -> Option<&str> {
        let at = (HEADER_WORDS + self.count * CHECKPOINT_WORDS + self.ids * ID_WORDS) * 8;
        let s = std::str::from_utf8(&self.map[at..at + self.stop_len]).unwrap_or("(unreadable)");
        (!s.is_empty()).then_some(s)
    }

    /// The saved state of checkpoint `i`, checked against its hash.
    pub fn state(&self, i: usize) -> Result<&[u8], String> {
        let c = self.checkpoint(i);
        let at = self.states_at + c.state_offset as usize;
        let st = &self.map[at..at + c.state_len as usize];
        let mut h = Fnv::new();
        h.write(st);
        if h.finish() != c.state_hash {
            return Err("state does not match its checksum".into());
        }
        Ok(st)
    }

    /// Size of the file in bytes.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }
}
