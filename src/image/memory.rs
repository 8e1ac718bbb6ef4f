//! The program image a decoder walks: memory regions from snapshot dump entries
//! (and later ELF segments), each mapped read-only from its file.
//!
//! Reads are the decoder's hot path, so the last region hit is remembered and
//! tried first; consecutive instructions almost always fall in it. Other
//! reads search the regions sorted by address (snapshots of test suites map
//! a hundred small dumps, and perf.data one region per mapped library).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::branchmap::{MapCounts, MapKey, MapStats, PlainRun, StopMap};
use super::instr::{DecodeOptions, ItState};
use super::ImageError;
use crate::element::{Isa, MemSpace};
use crate::input::{Device, TraceFile};

/// Bytes behind a region: a mapped file or owned memory.
enum Backing {
    File(TraceFile),
    Bytes(Vec<u8>),
}

impl Backing {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::File(f) => f.bytes(),
            Backing::Bytes(b) => b,
        }
    }
}

/// One mapped range `[start, start + len)`.
#[derive(Clone)]
struct Region {
    start: u64,
    len: u64,
    space: MemSpace,
    file: Arc<Backing>,
    /// Offset of `start` in the file.
    offset: usize,
    path: PathBuf,
    /// A loadable segment mapped by [`MemoryImage::add_elf`] (not the file
    /// mapped as raw bytes).
    elf_segment: bool,
    /// Where walks stop in this region, per instruction set, options and
    /// alignment (built as walks reach it; shared by clones of the image,
    /// which map the same bytes).
    stops: Arc<Mutex<Vec<Arc<StopMap>>>>,
}

impl Region {
    #[inline]
    fn contains(&self, addr: u64) -> bool {
        addr.wrapping_sub(self.start) < self.len
    }
}

/// A description of one region, for listings such as trc_pkt_lister's
/// "Mapped Memory Accessors".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    pub start: u64,
    /// Inclusive end address.
    pub last: u64,
    pub space: MemSpace,
    pub path: PathBuf,
}

/// A set of memory regions keyed by address and memory space.
#[derive(Clone, Default)]
pub struct MemoryImage {
    regions: Vec<Region>,
    last_hit: LastHit,
    /// The regions by address: built at the first search after a change.
    lookup: OnceLock<Lookup>,
    /// What the regions' stop maps cost (shared by clones).
    map_stats: Arc<MapStats>,
    /// Walks step every instruction (to check the maps against).
    no_stop_maps: bool,
}

/// Most stop maps kept per region: keys differ by instruction set, options
/// and alignment, of which a capture uses a handful; past this many, walks
/// step one instruction at a time.
const MAX_MAPS_PER_REGION: usize = 16;

/// Parse a snapshot `space=` value (OpenCSD's names; case does not matter).
pub fn parse_mem_space(s: &str) -> Option<MemSpace> {
    Some(match s.trim().to_ascii_uppercase().as_str() {
        "" | "ANY" | "ALL" => MemSpace::ANY,
        "S" | "SECURE" => MemSpace::S,
        "N" | "NS" | "NON-SECURE" | "NONSECURE" => MemSpace::N,
        "R" | "REALM" => MemSpace::R,
        "EL1S" => MemSpace::EL1S,
        "EL1N" => MemSpace::EL1N,
        "EL2" | "EL2N" => MemSpace::EL2,
        "EL3" => MemSpace::EL3,
        "EL2S" => MemSpace::EL2S,
        "EL1R" => MemSpace::EL1R,
        "EL2R" => MemSpace::EL2R,
        "ROOT" => MemSpace::ROOT,
        _ => return None,
    })
}

/// The region the last lookup found, tried first by the next one. Atomic
/// (relaxed: it is only a hint, any value is safe) rather than a `Cell` so
/// that an image is `Sync` and the `Arc` its decoders share can cross
/// threads.
#[derive(Default)]
struct LastHit(AtomicUsize);

impl LastHit {
    #[inline]
    fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    fn set(&self, i: usize) {
        self.0.store(i, Ordering::Relaxed);
    }
}

/// The regions sorted by start address, for the reads the last hit does
/// not serve: a binary search, then a step back over the regions that may
/// still reach the address (one, unless regions of disjoint memory spaces
/// overlap).
#[derive(Clone, Default)]
struct Lookup {
    /// Region numbers, by start address (then by number).
    order: Vec<usize>,
    /// The start address of each, in that order.
    starts: Vec<u64>,
    /// `reach[j]`: the highest last address of the regions `order[..=j]`.
    reach: Vec<u64>,
}

impl Lookup {
    fn new(regions: &[Region]) -> Lookup {
        let mut order: Vec<usize> = (0..regions.len()).collect();
        order.sort_by_key(|&i| (regions[i].start, i));
        let starts = order.iter().map(|&i| regions[i].start).collect();
        let mut high = 0u64;
        let reach = order
            .iter()
            .map(|&i| {
                let r = &regions[i];
                high = high.max(r.start.saturating_add(r.len.saturating_sub(1)));
                high
            })
            .collect();
        Lookup { order, starts, reach }
    }

    /// The first region added that holds `addr` in a space overlapping
    /// `space`, as a scan in the order they were added finds it.
    fn find(&self, regions: &[Region], addr: u64, space: MemSpace) -> Option<usize> {
        let mut best: Option<usize> = None;
        let end = self.starts.partition_point(|&s| s <= addr);
        for j in (0..end).rev() {
            if self.reach[j] < addr {
                break;
            }
            let i = self.order[j];
            let r = regions.get(i)?;
            if r.contains(addr) && r.space.overlaps(space) && best.is_none_or(|b| i < b) {
                best = Some(i);
            }
        }
        best
    }
}

impl Clone for LastHit {
    fn clone(&self) -> LastHit {
        LastHit(AtomicUsize::new(self.get()))
    }
}

impl std::fmt::Debug for MemoryImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.regions()).finish()
    }
}

impl MemoryImage {
    pub fn new() -> MemoryImage {
        MemoryImage::default()
    }

    /// Map `len` bytes (all of the file from `offset` when `None`) of `path` at
    /// `start`. Fails with a message naming the file when the file cannot be
    /// mapped, the range is empty, or it overlaps a region of the same memory
    /// space (OpenCSD refuses overlapping accessors too), or it would reach
    /// past the top of the 64-bit address space. A file shorter than the
    /// stated length is mapped for what it has, with the returned note saying
    /// so.
    pub fn add_file(
        &mut self,
        path: &Path,
        start: u64,
        len: Option<u64>,
        offset: u64,
        space: MemSpace,
    ) -> Result<Option<String>, ImageError> {
        let file = TraceFile::open_for(path, "a memory image")?;
        let flen = file.len() as u64;
        if offset >= flen {
            return Err(ImageError::OffsetPastEnd { path: path.to_path_buf(), offset, file_len: flen });
        }
        let mut note = None;
        if let Some(l) = len.filter(|&l| l > flen - offset) {
            note = Some(format!(
                "{}: {} bytes from offset 0x{offset:x}, fewer than the stated length {l}; mapped the {} bytes there are",
                path.display(),
                flen - offset,
                flen - offset
            ));
        }
        let len = len.unwrap_or(flen - offset).min(flen - offset);
        if len == 0 {
            return Err(ImageError::EmptyRange { path: path.to_path_buf() });
        }
        let Some(last) = start.checked_add(len - 1) else {
            return Err(ImageError::PastTop { path: path.to_path_buf(), start, len });
        };
        // Several cores of one snapshot often name the same dump: map it once.
        if self.regions.iter().any(|r| {
            r.start == start && r.len == len && r.offset == offset as usize && r.space == space && r.path == path
        }) {
            return Ok(note);
        }
        if let Some(r) = self
            .regions
            .iter()
            .find(|r| r.space.overlaps(space) && r.start <= last && start <= r.start + (r.len - 1))
        {
            // The same code from two sources (a snapshot's dump of a segment and
            // the ELF it came from) is no conflict: keep the first mapping.
            let new = file.bytes().get(offset as usize..(offset + len) as usize);
            let old = r.file.bytes().get(r.offset + (start.wrapping_sub(r.start)) as usize..).and_then(|b| b.get(..len as usize));
            if r.start <= start && last <= r.start + (r.len - 1) && new.is_some() && new == old {
                return Ok(note);
            }
            return Err(ImageError::Overlap {
                path: path.to_path_buf(),
                start,
                last,
                other: r.path.clone(),
                other_start: r.start,
                other_last: r.start + (r.len - 1),
            });
        }
        self.regions.push(Region {
            start,
            len,
            space,
            file: Arc::new(Backing::File(file)),
            offset: offset as usize,
            path: path.to_path_buf(),
            elf_segment: false,
            stops: Arc::default(),
        });
        self.lookup = OnceLock::new();
        Ok(note)
    }

    /// Drop the regions that map `path` (the same file, by device and inode)
    /// as raw bytes: its loadable segments are about to replace them.
    /// Returns where they were mapped.
    pub(crate) fn unmap_raw(&mut self, path: &Path) -> Vec<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        let Some(target) = id(path) else { return Vec::new() };
        let mut gone = Vec::new();
        self.regions.retain(|r| {
            let same = !r.elf_segment && matches!(*r.file, Backing::File(_)) && id(&r.path) == Some(target);
            if same {
                gone.push((r.start, r.start + (r.len - 1)));
            }
            !same
        });
        self.last_hit.set(0);
        self.lookup = OnceLock::new();
        gone
    }

    /// How many regions are mapped.
    pub fn region_count(&self) -> usize {
        self.regions.len()
    }

    /// Mark the regions of `path` added from `first` on as ELF segments.
    pub(crate) fn mark_segments(&mut self, first: usize, path: &Path) {
        for r in self.regions.iter_mut().skip(first).filter(|r| r.path == path) {
            r.elf_segment = true;
        }
    }

    /// Map `bytes` at `start` (code built in memory: tests, synthesized images).
    pub fn add_bytes(&mut self, start: u64, bytes: Vec<u8>, space: MemSpace) {
        let len = bytes.len() as u64;
        if len > 0 {
            self.regions.push(Region {
                start,
                len,
                space,
                file: Arc::new(Backing::Bytes(bytes)),
                offset: 0,
                path: PathBuf::from("<memory>"),
                elf_segment: false,
                stops: Arc::default(),
            });
            self.lookup = OnceLock::new();
        }
    }

    /// Map every `[dumpN]` entry of a core device. Returns one message per entry
    /// that could not be mapped; the others are mapped.
    pub fn add_device_dumps(&mut self, dir: &Path, core: &Device) -> Vec<String> {
        let mut errors = Vec::new();
        for d in &core.dumps {
            let space = match d.space.as_deref().map(parse_mem_space) {
                None => MemSpace::ANY,
                Some(Some(s)) => s,
                Some(None) => {
                    errors.push(format!(
                        "{}: [{}] space={} is not a memory space name; mapped as Any",
                        core.path.display(),
                        d.section,
                        d.space.as_deref().unwrap_or("")
                    ));
                    MemSpace::ANY
                }
            };
            let path = dir.join(&d.file);
            match self.add_file(&path, d.address, d.length, d.offset.unwrap_or(0), space) {
                Ok(None) => {}
                Ok(Some(note)) => errors.push(note),
                Err(e) => errors.push(e.to_string()),
            }
        }
        errors
    }

    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// The mapped regions, in the order they were added.
    pub fn regions(&self) -> Vec<RegionInfo> {
        self.regions
            .iter()
            .map(|r| RegionInfo { start: r.start, last: r.start + (r.len - 1), space: r.space, path: r.path.clone() })
            .collect()
    }

    #[inline]
    fn find(&self, addr: u64, space: MemSpace) -> Option<&Region> {
        let hint = self.last_hit.get();
        if let Some(r) = self.regions.get(hint) {
            if r.contains(addr) && r.space.overlaps(space) {
                return Some(r);
            }
        }
        let i = self.lookup.get_or_init(|| Lookup::new(&self.regions)).find(&self.regions, addr, space)?;
        self.last_hit.set(i);
        Some(&self.regions[i])
    }

    /// Up to `buf.len()` bytes at `addr`, from the one region holding `addr`.
    /// Returns how many bytes were read (fewer at the end of a region, 0 when
    /// nothing is mapped there).
    #[inline]
    pub fn read(&self, addr: u64, space: MemSpace, buf: &mut [u8]) -> usize {
        let Some(r) = self.find(addr, space) else { return 0 };
        let avail = (r.len - (addr - r.start)).min(buf.len() as u64) as usize;
        let from = r.offset + (addr - r.start) as usize;
        buf[..avail].copy_from_slice(&r.file.bytes()[from..from + avail]);
        avail
    }

    /// The addresses around `addr` that no region of `space` maps, as the
    /// first and last of them, when `addr` is one: a read anywhere between
    /// finds nothing. None when a region of `space` holds `addr` (or one
    /// wraps past the top of the address space, which this does not
    /// follow).
    pub fn unmapped_around(&self, addr: u64, space: MemSpace) -> Option<(u64, u64)> {
        let (mut lo, mut last) = (0u64, u64::MAX);
        for r in self.regions.iter().filter(|r| r.len > 0 && r.space.overlaps(space)) {
            if r.contains(addr) {
                return None;
            }
            let end = r.start.checked_add(r.len - 1)?;
            if end < addr {
                lo = lo.max(end + 1);
            } else {
                last = last.min(r.start - 1);
            }
        }
        Some((lo, last))
    }

    /// The little-endian 32-bit word at `addr`, when all four bytes are mapped
    /// in one region.
    #[inline]
    pub fn read_u32(&self, addr: u64, space: MemSpace) -> Option<u32> {
        let r = self.find(addr, space)?;
        let off = addr - r.start;
        if r.len - off < 4 {
            return None;
        }
        let from = r.offset + off as usize;
        let b = &r.file.bytes()[from..from + 4];
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The run of ordinary instructions (at which a walk with `key` would not
    /// stop) from `addr` on, at most `max` of them, within the one region
    /// holding `addr`, ending before the instruction at `until` if the walk
    /// meets it. `None` when there is none, or the map cannot say (see
    /// [`super::branchmap`]): the walk then steps.
    pub fn plain_run(&self, addr: u64, space: MemSpace, key: MapKey, max: u64, until: Option<u64>) -> Option<PlainRun> {
        let r = self.find(addr, space)?;
        let map = {
            // A poisoned lock only means another walk panicked while adding a
            // map; the list itself is always whole.
            let mut maps = r.stops.lock().unwrap_or_else(|e| e.into_inner());
            match maps.iter().find(|m| m.key() == key) {
                Some(m) => Arc::clone(m),
                None if maps.len() < MAX_MAPS_PER_REGION => {
                    let m = Arc::new(StopMap::new(key, r.start, r.len, Arc::clone(&self.map_stats)));
                    maps.push(Arc::clone(&m));
                    m
                }
                None => return None,
            }
        };
        let bytes = &r.file.bytes()[r.offset..r.offset + r.len as usize];
        map.plain_run(bytes, r.start, addr, max, until)
    }

    /// For a walk in `isa` (with IT state `it`) at `addr` that may take `max`
    /// more instructions and must stop at `until`: how many instructions it
    /// may pass without classifying them, and the address of the next one it
    /// must step; the last instruction of a run is left to step, so that the
    /// walk knows the instruction it ends on if the code ends after it.
    /// `None` when stepping is as quick (a run of one) or the map cannot
    /// help (inside an IT block, whose instructions the walk must count).
    // The walk's whole position (set, options, IT state, address, space) and
    // its two bounds: each decoder keeps them in its own fields.
    #[allow(clippy::too_many_arguments)]
    pub fn pass_plain(
        &self,
        isa: Isa,
        opts: &DecodeOptions,
        it: ItState,
        addr: u64,
        space: MemSpace,
        max: u64,
        until: Option<u64>,
    ) -> Option<(u64, u64)> {
        if self.no_stop_maps || (isa == Isa::T32 && it.remaining() != 0) {
            return None;
        }
        let key = MapKey::new(isa, opts, addr)?;
        let run = self.plain_run(addr, space, key, max, until).filter(|r| r.count > 1)?;
        self.map_stats.note_run(run.count);
        Some((run.count - 1, run.last))
    }

    /// Let walks use the stop maps (the default) or make them step every
    /// instruction, which must give the same ranges (tests compare the two).
    pub fn set_stop_maps(&mut self, on: bool) {
        self.no_stop_maps = !on;
    }

    /// What the stop maps of this image (and its clones) have cost so far.
    pub fn map_counts(&self) -> MapCounts {
        self.map_stats.counts()
    }

    /// The little-endian 16-bit halfword at `addr`.
    #[inline]
    pub fn read_u16(&self, addr: u64, space: MemSpace) -> Option<u16> {
        let mut b = [0u8; 2];
        (self.read(addr, space, &mut b) == 2).then(|| u16::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tracesight-mem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// The sorted lookup finds what a scan in the order the regions were
    /// added finds, however they overlap (regions of memory given as bytes
    /// are not checked for overlaps), at their edges, past the top of the
    /// address space and where nothing is mapped.
    #[test]
    fn lookup_finds_the_first_region_added_as_a_scan_does() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let region = (0u64..0x400, 1u64..0x80, any::<u8>(), any::<bool>());
        let mut runner = TestRunner::new(Config { cases: 500, ..Config::default() });
        runner
            .run(&(prop::collection::vec(region, 0..40), prop::collection::vec((0u64..0x500, any::<u8>()), 1..60)), |(regions, reads)| {
                let mut m = MemoryImage::new();
                for &(start, len, space, top) in &regions {
                    // Some regions end at the top of the address space.
                    let start = if top { u64::MAX - start } else { start };
                    let len = if top { len.min(u64::MAX - start + 1) } else { len };
                    m.add_bytes(start, vec![0; len as usize], MemSpace(space));
                }
                let lookup = Lookup::new(&m.regions);
                for &(addr, space) in &reads {
                    for addr in [addr, u64::MAX - addr] {
                        let space = MemSpace(space);
                        let scan = m.regions.iter().position(|r| r.contains(addr) && r.space.overlaps(space));
                        prop_assert_eq!(lookup.find(&m.regions, addr, space), scan, "{:#x} in {:?}", addr, space);
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn reads_within_and_across_region_ends() {
        let p = tmp_file("a.bin", &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66]);
        let mut m = MemoryImage::new();
        m.add_file(&p, 0x1000, None, 0, MemSpace::ANY).unwrap();
        assert_eq!(m.read_u32(0x1000, MemSpace::EL1N), Some(0x4433_2211));
        assert_eq!(m.read_u32(0x1002, MemSpace::EL1N), Some(0x6655_4433));
        // Only two bytes left in the region: not a whole word.
        assert_eq!(m.read_u32(0x1004, MemSpace::EL1N), None);
        assert_eq!(m.read_u16(0x1004, MemSpace::EL1N), Some(0x6655));
        assert_eq!(m.read_u32(0xfff, MemSpace::EL1N), None);
    }

    #[test]
    fn unmapped_around_is_the_gap_between_regions_of_the_space() {
        let mut m = MemoryImage::new();
        m.add_bytes(0x1000, vec![0; 0x1000], MemSpace::ANY);
        m.add_bytes(0x8000, vec![0; 0x1000], MemSpace::EL1N);
        m.add_bytes(0x5000, vec![0; 0x10], MemSpace::S);
        let n = MemSpace::EL1N;
        assert_eq!(m.unmapped_around(0x5000, n), Some((0x2000, 0x7fff)));
        assert_eq!(m.unmapped_around(0x2000, n), Some((0x2000, 0x7fff)));
        assert_eq!(m.unmapped_around(0x7fff, n), Some((0x2000, 0x7fff)));
        assert_eq!(m.unmapped_around(0xfff, n), Some((0, 0xfff)));
        assert_eq!(m.unmapped_around(0x9000, n), Some((0x9000, u64::MAX)));
        // Another space does not see the EL1N region, and sees its own.
        assert_eq!(m.unmapped_around(0x9000, MemSpace::EL2), Some((0x2000, u64::MAX)));
        assert_eq!(m.unmapped_around(0x5000, MemSpace::EL3), None);
        assert_eq!(m.unmapped_around(0x4fff, MemSpace::EL3), Some((0x2000, 0x4fff)));
        for a in [0x1000, 0x1ffc, 0x8000, 0x8fff] {
            assert_eq!(m.unmapped_around(a, n), None, "{a:#x}");
        }
        // Every address of a gap reads nothing, for the space asked.
        for a in [0x2000, 0x4000, 0x7ffc, 0x7fff, 0x9000, u64::MAX - 3] {
            assert_eq!(m.read_u32(a, n), None, "{a:#x}");
        }
        assert_eq!(MemoryImage::new().unmapped_around(42, n), Some((0, u64::MAX)));
    }

    #[test]
    fn offsets_lengths_spaces_and_overlaps() {
        let p = tmp_file("b.bin", &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let mut m = MemoryImage::new();
        m.add_file(&p, 0x2000, Some(4), 2, MemSpace::S).unwrap();
        assert_eq!(m.read_u32(0x2000, MemSpace::EL3), Some(0x0504_0302));
        // Secure-only region is invisible to a non-secure read.
        assert_eq!(m.read_u32(0x2000, MemSpace::EL1N), None);
        // The same addresses may be mapped again for another space...
        m.add_file(&p, 0x2000, Some(4), 6, MemSpace::N).unwrap();
        assert_eq!(m.read_u32(0x2000, MemSpace::EL1N), Some(0x0908_0706));
        // ...but not twice for the same one.
        assert!(m.add_file(&p, 0x2002, Some(4), 0, MemSpace::EL1N).is_err());
        assert!(m.add_file(&p, 0x3000, None, 10, MemSpace::ANY).is_err());
        // Bytes identical to what is already mapped there (an ELF segment and
        // the snapshot's dump of it) are accepted and not mapped twice.
        let q = tmp_file("c.bin", &[9, 8, 9, 6, 9]);
        let before = m.regions().len();
        m.add_file(&q, 0x2002, Some(2), 1, MemSpace::EL1N).unwrap();
        assert_eq!(m.regions().len(), before);
        // Different bytes at the same place are still refused.
        assert!(m.add_file(&q, 0x2001, Some(2), 1, MemSpace::EL1N).is_err());
        assert_eq!(parse_mem_space("el2"), Some(MemSpace::EL2));
        assert_eq!(parse_mem_space("bogus"), None);
    }
}
