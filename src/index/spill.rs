//! Where an index build keeps the decoder states it saves: in an unlinked
//! temporary file rather than in memory, so that the build's resident memory
//! does not grow with the number of checkpoints or the size of each state
//! (a trace that keeps speculation open saves up to the whole speculation
//! window at every checkpoint). The states are copied into the index file
//! when it is written.
//!
//! Without a writable temporary directory (or when a write fails) the states
//! are kept in memory instead: slower to bound, never wrong.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};


/// One saved state in a [`Spill`]: where it is, how long it is and its hash
/// (the hash the index keeps to check the state when it is loaded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateRef {
    pos: u64,
    pub len: u64,
    pub hash: u64,
    /// Kept in the memory store (the file store failed or is absent).
    in_memory: bool,
}

impl StateRef {
    /// No state (a restart point with fresh decoders).
    pub fn empty() -> StateRef {
        StateRef { pos: 0, len: 0, hash: state_hash(&[]), in_memory: false }
    }
}

/// Saved states of one build, shared by all its threads: space is reserved
/// with an atomic add, so writers never wait for each other.
pub struct Spill {
    file: Option<File>,
    end: AtomicU64,
    memory: Mutex<Vec<u8>>,
}

/// How a state is hashed into its checkpoint.
pub fn state_hash(state: &[u8]) -> u64 {
    let mut h = Fnv::new();
    h.write(state);
    h.finish()
}

static SPILLS: AtomicU64 = AtomicU64::new(0);

impl Spill {
    /// A spill in a new temporary file of the system's temporary directory,
    /// unlinked at once (it disappears with the process, however that ends);
    /// in memory when no such file can be made.
    #[allow(clippy::new_without_default)] // each call makes a file: not a default
    pub fn new() -> Spill {
        Spill { file: temp_file().ok(), end: AtomicU64::new(0), memory: Mutex::new(Vec::new()) }
    }

    /// A spill that keeps everything in memory (small builds, tests).
    pub fn in_memory() -> Spill {
        Spill { file: None, end: AtomicU64::new(0), memory: Mutex::new(Vec::new()) }
    }

    /// Whether states go to a file.
    pub fn on_disk(&self) -> bool {
        self.file.is_some()
    }

    /// Keep `state`; the returned reference reads it back.
    pub fn put(&self, state: &[u8]) -> StateRef {
        let len = state.len() as u64;
        let hash = state_hash(state);
        if len == 0 {
            return StateRef::empty();
        }
        if let Some(f) = &self.file {
            let pos = self.end.fetch_add(len, Ordering::Relaxed);
            if f.write_all_at(state, pos).is_ok() {
                return StateRef { pos, len, hash, in_memory: false };
            }
        }
        let mut m = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        let pos = m.len() as u64;
        m.extend_from_slice(state);
        StateRef { pos, len, hash, in_memory: true }
    }

    /// Keep the counter positions of a state (see [`crate::session::marks::to_bytes`]).
    pub fn put_marks(&self, marks: &[crate::session::marks::Mark]) -> StateRef {
        self.put(&crate::session::marks::to_bytes(marks))
    }

    /// The counter positions [`Spill::put_marks`] kept; `None` when they
    /// cannot be read back.
    pub fn get_marks(&self, r: StateRef) -> Option<Vec<crate::session::marks::Mark>> {
        crate::session::marks::from_bytes(&self.get(r).ok()?)
    }

    /// The state `r` refers to.
    pub fn get(&self, r: StateRef) -> io::Result<Vec<u8>> {
        let len = usize::try_from(r.len).map_err(|_| io::Error::other("saved state too large"))?;
        if len == 0 {
            return Ok(Vec::new());
        }
        if r.in_memory {
            let m = self.memory.lock().unwrap_or_else(|e| e.into_inner());
            let end = r.pos.checked_add(r.len).filter(|&e| e <= m.len() as u64);
            return match end {
                Some(e) => Ok(m[r.pos as usize..e as usize].to_vec()),
                None => Err(io::Error::other("saved state outside the spill")),
            };
        }
        let f = self.file.as_ref().ok_or_else(|| io::Error::other("no spill file"))?;
        let mut buf = vec![0; len];
        f.read_exact_at(&mut buf, r.pos)?;
        Ok(buf)
    }

    /// Copy the state `r` refers to into `out`, in pieces of bounded size.
    fn copy_to(&self, r: StateRef, out: &mut dyn Write) -> io::Result<()> {
        if r.in_memory || self.file.is_none() {
            return out.write_all(&self.get(r)?);
        }
        let f = self.file.as_ref().expect("checked above");
        let mut buf = vec![0; (r.len as usize).min(1 << 20)];
        let (mut pos, end) = (r.pos, r.pos + r.len);
        while pos < end {
            let n = ((end - pos) as usize).min(buf.len());
            f.read_exact_at(&mut buf[..n], pos)?;
            out.write_all(&buf[..n])?;
            pos += n as u64;
        }
        Ok(())
    }
}

fn temp_file() -> io::Result<File> {
    let dir = std::env::temp_dir();
    let n = SPILLS.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!(".tracesight-states-{}-{n}", std::process::id()));
    let f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
    // The file lives on through its descriptor; nothing is left behind.
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// The saved states of an index, in checkpoint order.
#[derive(Clone)]
pub struct States {
    spill: Arc<Spill>,
    refs: Vec<StateRef>,
}

impl States {
    pub fn new(spill: Arc<Spill>) -> States {
        States { spill, refs: Vec::new() }
    }

    /// States held in memory, one per checkpoint (tests, small indexes).
    pub fn from_vecs(states: &[Vec<u8>]) -> States {
        let spill = Arc::new(Spill::in_memory());
        let refs = states.iter().map(|s| spill.put(s)).collect();
        States { spill, refs }
    }

    pub fn push(&mut self, r: StateRef) {
        self.refs.push(r);
    }

    pub fn push_bytes(&mut self, state: &[u8]) {
        let r = self.spill.put(state);
        self.refs.push(r);
    }

    pub fn len(&self) -> usize {
        self.refs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    pub fn refs(&self) -> &[StateRef] {
        &self.refs
    }

    pub fn spill(&self) -> &Arc<Spill> {
        &self.spill
    }

    /// State `i` (read back from the spill).
    pub fn get(&self, i: usize) -> io::Result<Vec<u8>> {
        let r = *self.refs.get(i).ok_or_else(|| io::Error::other(format!("no saved state {i}")))?;
        self.spill.get(r)
    }

    /// Total bytes of all states.
    pub fn total_len(&self) -> u64 {
        self.refs.iter().map(|r| r.len).sum()
    }

    /// Write every state, in order, to `out`.
    pub fn write_to(&self, out: &mut dyn Write) -> io::Result<()> {
        for r in &self.refs {
            self.spill.copy_to(*r, out)?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for States {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "States({} states, {} bytes)", self.refs.len(), self.total_len())
    }
}

/// Same states, byte for byte (read back to compare).
impl PartialEq for States {
    fn eq(&self, other: &States) -> bool {
        self.refs.len() == other.refs.len()
            && (0..self.refs.len()).all(|i| {
                let (a, b) = (self.refs[i], other.refs[i]);
                a.len == b.len && a.hash == b.hash && matches!((self.get(i), other.get(i)), (Ok(x), Ok(y)) if x == y)
            })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_back_from_file_and_memory() {
        for spill in [Spill::new(), Spill::in_memory()] {
            let a = spill.put(b"first state");
            let e = spill.put(b"");
            let b = spill.put(&[7u8; 3000]);
            assert_eq!(spill.get(a).unwrap(), b"first state");
            assert_eq!(spill.get(e).unwrap(), b"");
            assert_eq!(spill.get(b).unwrap(), vec![7u8; 3000]);
            assert_eq!(a.hash, state_hash(b"first state"));
            let mut st = States::new(Arc::new(spill));
            st.push_bytes(b"x");
            st.push_bytes(b"yz");
            let mut out = Vec::new();
            st.write_to(&mut out).unwrap();
            assert_eq!(out, b"xyz");
            assert_eq!(st, States::from_vecs(&[b"x".to_vec(), b"yz".to_vec()]));
            assert_ne!(st, States::from_vecs(&[b"x".to_vec(), b"yy".to_vec()]));
        }
    }

    #[test]
    fn a_spill_file_leaves_nothing_in_the_temporary_directory() {
        let spill = Spill::new();
        assert!(spill.on_disk(), "the temporary directory should be writable in tests");
        let mine = format!(".tracesight-states-{}-", std::process::id());
        let left = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
            .count();
        assert_eq!(left, 0);
    }
}
