//! The index file: fixed-width little-endian records, memory-mapped.
//!
//! ```text
//! header     HEADER_WORDS x u64:
//!            magic "TSIGHTIX", version, fingerprint, trace size,
//!            trace mtime (ns), trace ends hash, checkpoint count,
//!            id summary count, totals (packets, elements, instructions),
//!            stop text length, state area length, trace hash, reserved,
//!            records hash
//! checkpoints  count x CHECKPOINT_WORDS x u64   (see Checkpoint)
//! id summaries count x ID_WORDS x u64           (see IdSummary)
//! stop text    UTF-8, padded to 8 bytes
//! state area   the saved decode states, each hashed in its checkpoint
//! ```
//!
//! The records hash covers every header word before it and everything up to
//! the state area, so a torn or edited file is rejected at open without
//! reading the (large) state area; each state is checked against its own hash
//! when a seek uses it. Since the file may also have been edited with its
//! hashes recomputed, every count and length is checked against the file's
//! size before use and the totals against the records.
//!
//! The trace itself is covered too: each checkpoint holds a hash of the trace
//! bytes of its segment, checked when a seek decodes that segment, and the
//! trace hash (a hash of those, in order) stands for the whole file. A trace
//! changed in place with its size and modification time kept is so caught
//! where it matters without reading all of it on every open.

use std::fs;
use std::io::Write;
use std::path::Path;

use memmap2::Mmap;

use super::{IndexError, Maxima, SegmentStats, TraceIdentity};
use crate::session::Counts;

pub const MAGIC: u64 = u64::from_le_bytes(*b"TSIGHTIX");
/// Bumped whenever the layout or the saved decode state changes.
pub const VERSION: u64 = 5;
/// "No value" in optional fields.
pub const NONE: u64 = u64::MAX;

const HEADER_WORDS: usize = 16;
const CHECKPOINT_WORDS: usize = 19;
const ID_WORDS: usize = 9;
/// One summary per trace ID, and one for an unformatted buffer.
const MAX_IDS: u64 = 129;
/// The stop text is one error message.
const MAX_STOP: u64 = 64 * 1024;

pub use super::spill::Fnv;

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
    /// [`segment_hash`] of the trace bytes from this checkpoint to the next.
    pub(super) segment_hash: u64,
}

/// The hash a checkpoint keeps of the trace bytes of its segment: XXH3
/// (64-bit) seeded with the length. It reads every byte of the trace once per
/// build and once per full check: with FNV-1a before (a multiply per byte,
/// each waiting for the one before) a 1 GiB build took a tenth longer.
pub fn segment_hash(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot_with_seed(bytes.len() as u64, bytes)
}

/// The hash of the whole trace, from its segments' hashes in order.
fn trace_hash(checkpoints: &[Checkpoint]) -> u64 {
    let mut h = Fnv::new();
    for c in checkpoints {
        h.write(&c.segment_hash.to_le_bytes());
    }
    h.finish()
}

/// Where checkpoint `i`'s segment of a trace of `size` bytes ends.
fn segment_end(checkpoints: &[Checkpoint], i: usize, size: u64) -> u64 {
    checkpoints.get(i + 1).map_or(size, |c| c.offset)
}

/// Gives back the pages of `data[a..b]` (see [`crate::input::TraceFile::release`]).
pub type Release<'r> = &'r (dyn Fn(usize, usize) + Sync);

/// Hash the segments of `data` into the checkpoints (on all cores: this
/// reads the whole trace). Each segment's pages are given back with
/// `release` once hashed, so that a build's resident memory does not grow to
/// the size of the trace.
pub(super) fn hash_segments(checkpoints: &mut [Checkpoint], data: &[u8], release: Option<Release<'_>>) {
    use rayon::prelude::*;
    let ends: Vec<u64> = (0..checkpoints.len()).map(|i| segment_end(checkpoints, i, data.len() as u64)).collect();
    checkpoints.par_iter_mut().zip(ends).for_each(|(c, end)| {
        let (a, b) = (c.offset.min(end) as usize, (end as usize).min(data.len()));
        c.segment_hash = segment_hash(&data[a.min(b)..b]);
        if let Some(release) = release {
            release(a.min(b), b);
        }
    });
}

impl Checkpoint {
    /// A checkpoint at `offset` whose saved state is `state` (its length and
    /// hash; see [`super::spill::Spill::put`]).
    pub(super) fn new(offset: u64, counts: &Counts, max: &Maxima, state: super::spill::StateRef) -> Checkpoint {
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
            state_len: state.len,
            state_hash: state.hash,
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
            self.segment_hash,
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
            segment_hash: w[18],
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
    /// One saved state per checkpoint (on disk while the index is built).
    pub states: super::spill::States,
    pub ids: Vec<IdSummary>,
    pub totals: Counts,
    /// Why the decode stopped before the end, if it did.
    pub stop: Option<String>,
    /// What the decoders reported, per source, when the build was asked to
    /// gather it ([`super::tally_fragments`]); never written to the file.
    pub tally: Option<crate::session::tally::Tally>,
}

fn push_words(out: &mut Vec<u8>, words: &[u64]) {
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// The file's header and records (the segment states follow them).
fn encode(data: &IndexData, ident: &TraceIdentity, fingerprint: u64) -> (Vec<u8>, Vec<u8>) {
    let stop = data.stop.clone().unwrap_or_default();
    let mut body = Vec::with_capacity(
        data.checkpoints.len() * CHECKPOINT_WORDS * 8 + data.ids.len() * ID_WORDS * 8 + stop.len() + 8,
    );
    let mut state_off = 0u64;
    for (c, st) in data.checkpoints.iter().zip(data.states.refs()) {
        let mut c = *c;
        c.state_offset = state_off;
        state_off += st.len;
        push_words(&mut body, &c.words());
    }
    for s in &data.ids {
        push_words(&mut body, &s.words());
    }
    body.extend_from_slice(stop.as_bytes());
    while body.len() % 8 != 0 {
        body.push(0);
    }
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
            trace_hash(&data.checkpoints),
            0,
        ],
    );
    let mut h = Fnv::new();
    h.write(&head);
    h.write(&body);
    push_words(&mut head, &[h.finish()]);
    (head, body)
}

/// Write `data` to `path` (under a temporary name, then renamed).
pub fn write(path: &Path, data: &IndexData, ident: &TraceIdentity, fingerprint: u64) -> Result<(), IndexError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let (head, body) = encode(data, ident, fingerprint);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(fs::File::create(&tmp)?);
        f.write_all(&head)?;
        f.write_all(&body)?;
        data.states.write_to(&mut f)?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    Ok(res?)
}

/// An index file, memory-mapped and validated.
pub struct IndexFile {
    map: Mmap,
    trace_hash: u64,
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
    pub fn open(path: &Path, ident: &TraceIdentity, fingerprint: u64) -> Result<IndexFile, IndexError> {
        let f = fs::File::open(path)?;
        // SAFETY: the file is only read; a concurrent writer replaces it by
        // rename and never modifies it in place.
        let map = unsafe { Mmap::map(&f) }?;
        IndexFile::from_map(map, ident, fingerprint)
    }

    /// The index of `data` without a file: the bytes it would have written,
    /// in anonymous memory (when no directory can take the file).
    pub fn in_memory(data: &IndexData, ident: &TraceIdentity, fingerprint: u64) -> Result<IndexFile, IndexError> {
        let (head, body) = encode(data, ident, fingerprint);
        let states = usize::try_from(data.states.total_len()).map_err(|_| IndexError::StatesTooLarge)?;
        let len = head.len() + body.len() + states;
        let mut map = memmap2::MmapMut::map_anon(len)?;
        map[..head.len()].copy_from_slice(&head);
        map[head.len()..head.len() + body.len()].copy_from_slice(&body);
        let mut rest: &mut [u8] = &mut map[head.len() + body.len()..];
        data.states.write_to(&mut rest).map_err(IndexError::StatesCopy)?;
        let map = map.make_read_only()?;
        IndexFile::from_map(map, ident, fingerprint)
    }

    /// Validate a mapped index, whatever holds it.
    fn from_map(map: Mmap, ident: &TraceIdentity, fingerprint: u64) -> Result<IndexFile, IndexError> {
        if map.len() < HEADER_WORDS * 8 {
            return Err(IndexError::TooShort { len: map.len() });
        }
        let h = |i: usize| word(&map, i);
        if h(0) != MAGIC {
            return Err(IndexError::BadMagic);
        }
        if h(1) != VERSION {
            return Err(IndexError::Version { found: h(1) });
        }
        if h(2) != fingerprint {
            return Err(IndexError::OtherOptions);
        }
        if (h(3), h(4), h(5)) != (ident.size, ident.mtime_ns, ident.ends_hash) {
            return Err(IndexError::FileChanged);
        }
        // Every count and length is checked against the file's size, in
        // 64-bit arithmetic, before anything is sliced with it.
        let (count, ids, stop_len, states_len) = (h(6), h(7), h(11), h(12));
        if count == 0 || ids > MAX_IDS || stop_len > MAX_STOP {
            return Err(IndexError::HeaderCounts { checkpoints: count, ids, stop_len });
        }
        let file_len = map.len() as u64;
        let states_at = count
            .checked_mul(CHECKPOINT_WORDS as u64 * 8)
            .and_then(|a| a.checked_add(ids * ID_WORDS as u64 * 8))
            .and_then(|a| a.checked_add(stop_len.div_ceil(8) * 8))
            .and_then(|a| a.checked_add(HEADER_WORDS as u64 * 8))
            .filter(|&a| a <= file_len)
            .ok_or(IndexError::CannotHold { file_len, checkpoints: count })?;
        if states_at.checked_add(states_len) != Some(file_len) {
            return Err(IndexError::Length { file_len, expected: states_at.saturating_add(states_len) });
        }
        let states_at = states_at as usize;
        let mut hash = Fnv::new();
        hash.write(&map[..(HEADER_WORDS - 1) * 8]);
        hash.write(&map[HEADER_WORDS * 8..states_at]);
        if hash.finish() != h(HEADER_WORDS - 1) {
            return Err(IndexError::Checksum);
        }
        let file = IndexFile {
            totals: Counts { packets: h(8), elements: h(9), instructions: h(10) },
            trace_hash: h(13),
            map,
            count: count as usize,
            ids: ids as usize,
            stop_len: stop_len as usize,
            states_at,
        };
        file.check_records(ident, states_len)?;
        Ok(file)
    }

    /// The records must agree with each other and with the header, whatever
    /// the checksum says (it can be recomputed by whoever edits the file).
    fn check_records(&self, ident: &TraceIdentity, states_len: u64) -> Result<(), IndexError> {
        let cps: Vec<Checkpoint> = (0..self.count).map(|i| self.checkpoint(i)).collect();
        // A capture cut into fragments (perf.data AUX data) starts at its
        // first fragment, not at byte 0; what it counts still starts at 0.
        if cps[0].elements_before != 0 || cps[0].instructions_before != 0 || cps[0].packets_before != 0 {
            return Err(IndexError::FirstCheckpoint);
        }
        for (i, c) in cps.iter().enumerate() {
            let p = i.checked_sub(1).map(|k| cps[k]);
            if p.is_some_and(|p| {
                p.offset >= c.offset
                    || p.elements_before > c.elements_before
                    || p.instructions_before > c.instructions_before
                    || p.packets_before > c.packets_before
            }) || c.state_offset.checked_add(c.state_len).is_none_or(|e| e > states_len)
                || c.offset > ident.size
            {
                return Err(IndexError::Inconsistent { checkpoint: i });
            }
        }
        if trace_hash(&cps) != self.trace_hash {
            return Err(IndexError::TraceHash);
        }
        let t = self.totals;
        let last = cps[cps.len() - 1];
        let by_id: u64 = self.id_summaries().iter().fold(0u64, |a, s| a.saturating_add(s.elements));
        if t.elements < last.elements_before
            || t.instructions < last.instructions_before
            || t.packets < last.packets_before
            || by_id != t.elements
        {
            return Err(IndexError::Totals { elements: t.elements, by_id });
        }
        if std::str::from_utf8(self.stop_bytes()).is_err() {
            return Err(IndexError::StopText);
        }
        Ok(())
    }

    /// Check the trace bytes of checkpoint `i`'s segment against its hash.
    pub fn check_segment(&self, i: usize, data: &[u8]) -> Result<(), IndexError> {
        let c = self.checkpoint(i);
        let end = if i + 1 < self.count { self.checkpoint(i + 1).offset } else { data.len() as u64 };
        let (a, b) = (c.offset as usize, (end as usize).min(data.len()));
        if a > b || segment_hash(&data[a..b]) != c.segment_hash {
            return Err(IndexError::SegmentChanged { start: a, end, checkpoint: i });
        }
        Ok(())
    }

    /// Check the whole trace against the index (every segment, on all
    /// cores); the error names the first changed segment.
    pub fn check_trace(&self, data: &[u8]) -> Result<(), IndexError> {
        use rayon::prelude::*;
        let bad = (0..self.count).into_par_iter().find_first(|&i| self.check_segment(i, data).is_err());
        match bad {
            Some(i) => self.check_segment(i, data),
            None => Ok(()),
        }
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
        let s = std::str::from_utf8(self.stop_bytes()).unwrap_or("(unreadable)");
        (!s.is_empty()).then_some(s)
    }

    fn stop_bytes(&self) -> &[u8] {
        let at = (HEADER_WORDS + self.count * CHECKPOINT_WORDS + self.ids * ID_WORDS) * 8;
        &self.map[at..at + self.stop_len]
    }

    /// The saved state of checkpoint `i`, checked against its hash.
    pub fn state(&self, i: usize) -> Result<&[u8], IndexError> {
        let c = self.checkpoint(i);
        let at = self.states_at + c.state_offset as usize;
        let st = &self.map[at..at + c.state_len as usize];
        let mut h = Fnv::new();
        h.write(st);
        if h.finish() != c.state_hash {
            return Err(IndexError::StateChecksum);
        }
        Ok(st)
    }

    /// Size of the file in bytes.
    pub fn file_len(&self) -> u64 {
        self.map.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::segment_hash;

    /// A segment check must see any one changed bit, in every size class of
    /// the hash (XXH3 takes 0–16, 17–128, 129–240 and longer inputs by
    /// different paths), and tell runs of zeros of different lengths apart.
    #[test]
    fn segment_hash_sees_every_bit_and_the_length() {
        for len in [1usize, 3, 8, 16, 17, 100, 128, 129, 240, 241, 1500, 5000] {
            let base: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            let h = segment_hash(&base);
            let mut seen = std::collections::HashSet::new();
            for bit in (0..len * 8).step_by(if len > 240 { 7 } else { 1 }) {
                let mut b = base.clone();
                b[bit / 8] ^= 1 << (bit % 8);
                let hb = segment_hash(&b);
                assert_ne!(hb, h, "len {len}, bit {bit}");
                assert!(seen.insert(hb), "len {len}, bit {bit}: two flips hash alike");
            }
        }
        let zeros: Vec<u64> = (0..600).map(|n| segment_hash(&vec![0u8; n])).collect();
        let distinct: std::collections::HashSet<_> = zeros.iter().collect();
        assert_eq!(distinct.len(), zeros.len());
    }
}
