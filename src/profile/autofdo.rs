//! AutoFDO text profiles, as `simpleperf inject` writes them and
//! `create_llvm_prof --profiler text` reads them
//! (`../shared/fixtures/perf/README.md`; simpleperf's `cmd_inject.cpp` and
//! `ETMDecoder.cpp`, AOSP `system/extras/simpleperf`):
//!
//! ```text
//! <number of ranges>
//! <start>-<end>:<count>        end = address of the range's last instruction
//! 0                            address counts (none from ETM)
//! <number of branches>
//! <from>-><to>:<count>         taken branches; to = 0 for an indirect branch
//! // build_id: 0x<40 hex digits, zero-padded>
//! // <path as recorded>
//! (empty line)
//! ```
//!
//! One block per binary, binaries sorted by path; with more than one the
//! file starts with `// Please split this file. AutoFDO only accepts profile
//! for one binary.` Addresses are hexadecimal without `0x`, lists sorted.
//!
//! Every instruction range counts once (its last instruction executed or
//! not); a taken branch (direct or indirect, calls and returns included)
//! counts its branch. Addresses are what AutoFDO calls file offsets: the
//! address in the ELF file (run-time address minus the mapping's start plus
//! its file offset, turned into a virtual address through the segment
//! holding that offset) minus the virtual address of the first loadable
//! segment, since `create_llvm_prof` computes `vaddr = offset + first
//! PT_LOAD vaddr`. Ranges and branches outside every binary of interest are
//! left out.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::path::Path;

use super::{add_saturating, ProfileError};
use crate::element::{Element, ElementKind, InstrSubtype, InstrType, Isa};
use crate::image::elf::Segment;

/// The first line of a file with several binaries.
pub const SPLIT_NOTE: &str = "// Please split this file. AutoFDO only accepts profile for one binary.";

/// One binary: the path it was recorded under, its build ID and segments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binary {
    pub path: String,
    /// GNU build ID (as read; padded to 20 bytes when written).
    pub build_id: Option<Vec<u8>>,
    /// PT_LOAD segments in file order.
    pub segments: Vec<Segment>,
}

impl Binary {
    /// Read segments and build ID from an ELF file's bytes.
    pub fn from_elf(path: &str, bytes: &[u8]) -> Result<Binary, crate::image::ImageError> {
        use object::Object;
        let segments = crate::image::elf::load_segments(bytes)?;
        let file = object::File::parse(bytes)?;
        let build_id = file.build_id().ok().flatten().map(|b| b.to_vec());
        Ok(Binary { path: path.to_string(), build_id, segments })
    }

    /// Virtual address of the first loadable segment.
    pub fn first_load_vaddr(&self) -> u64 {
        self.segments.first().map_or(0, |s| s.vaddr)
    }

    /// The virtual address of a file offset (through the segment holding it).
    pub fn offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| off >= s.file_offset && off - s.file_offset < s.file_size)
            .map(|s| off - s.file_offset + s.vaddr)
    }

    /// The build ID as simpleperf prints it: `0x` and 40 hex digits.
    pub fn build_id_text(&self) -> String {
        let mut id = self.build_id.clone().unwrap_or_default();
        id.resize(id.len().max(20), 0);
        let mut s = String::from("0x");
        for b in id {
            let _ = write!(s, "{b:02x}");
        }
        s
    }
}

/// Where a binary is mapped at run time (as perf's mmap records say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    pub binary: usize,
}

/// Binaries and their mappings.
#[derive(Clone, Debug, Default)]
pub struct BinaryMap {
    pub binaries: Vec<Binary>,
    /// Sorted by start.
    mappings: Vec<Mapping>,
}

impl BinaryMap {
    pub fn add_binary(&mut self, b: Binary) -> usize {
        self.binaries.push(b);
        self.binaries.len() - 1
    }

    pub fn add_mapping(&mut self, m: Mapping) {
        if m.end > m.start && m.binary < self.binaries.len() {
            let i = self.mappings.partition_point(|x| x.start <= m.start);
            self.mappings.insert(i, m);
        }
    }

    /// Map every segment of binary `b` with its lowest segment placed at
    /// `bias` plus its own address (a program image at a load bias).
    pub fn map_at_bias(&mut self, b: usize, bias: u64) {
        let segs = self.binaries.get(b).map(|x| x.segments.clone()).unwrap_or_default();
        for s in segs {
            let start = s.vaddr.wrapping_add(bias);
            self.add_mapping(Mapping { start, end: start.saturating_add(s.file_size), pgoff: s.file_offset, binary: b });
        }
    }

    pub fn mapping_at(&self, addr: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.start <= addr);
        let m = self.mappings.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }

    /// The binary's virtual address of `addr` through mapping `m` (0 when
    /// outside it, as simpleperf does).
    pub fn vaddr_in(&self, m: &Mapping, addr: u64) -> u64 {
        if addr < m.start || addr >= m.end {
            return 0;
        }
        let off = addr - m.start + m.pgoff;
        self.binaries[m.binary].offset_to_vaddr(off).unwrap_or(0)
    }
}

/// Gives the target of the direct branch at an address.
pub type TargetReader = Box<dyn Fn(u64, Isa) -> Option<u64>>;

/// Range and branch counts of run-time addresses, from elements; also what
/// BOLT needs (branch targets of indirect branches, fall-through runs).
#[derive(Default)]
pub struct BranchCounts {
    /// (first instruction, last instruction) -> times executed.
    pub ranges: HashMap<(u64, u64), u64>,
    /// (branch, target or 0 for indirect) -> times taken.
    pub branches: HashMap<(u64, u64), u64>,
    /// BOLT: (branch, target) -> times taken, targets as traced.
    pub taken: HashMap<(u64, u64), u64>,
    /// BOLT: (first, last instruction) of runs between taken branches.
    pub fallthroughs: HashMap<(u64, u64), u64>,
    /// Target of the direct branch at an address, for a branch whose
    /// target the trace does not show (it ends or breaks right after).
    pub target_of: Option<TargetReader>,
    pending: HashMap<u32, Pending>,
    pub saturated: bool,
}

#[derive(Default, Clone, Copy)]
struct Pending {
    /// A taken direct branch waiting for its target: (address, ISA).
    direct: Option<(u64, Isa)>,
    /// A taken branch waiting for its target (BOLT).
    taken: Option<u64>,
    /// Start of the run since the last taken branch (BOLT).
    run_start: Option<u64>,
}

impl BranchCounts {
    pub fn feed(&mut self, stream: u32, e: &Element) {
        let mut p = self.pending.remove(&stream).unwrap_or_default();
        use ElementKind as K;
        match e.kind {
            K::InstrRange { start, end, last_type, last_size, executed, last_subtype, .. } => {
                if let Some((from, _)) = p.direct.take() {
                    self.saturated |= add_saturating(self.branches.entry((from, start)).or_default(), 1);
                }
                if let Some(from) = p.taken.take() {
                    self.saturated |= add_saturating(self.taken.entry((from, start)).or_default(), 1);
                }
                let last = end.wrapping_sub(last_size as u64);
                self.saturated |= add_saturating(self.ranges.entry((start, last)).or_default(), 1);
                let run = *p.run_start.get_or_insert(start);
                let branch = matches!(last_type, InstrType::Branch | InstrType::IndirectBranch);
                if branch && executed {
                    if last_type == InstrType::IndirectBranch {
                        self.saturated |= add_saturating(self.branches.entry((last, 0)).or_default(), 1);
                    } else {
                        p.direct = Some((last, e.isa));
                    }
                    // An exception return is no branch BOLT can place.
                    if last_subtype != InstrSubtype::ExceptionReturn {
                        p.taken = Some(last);
                    }
                    self.saturated |= add_saturating(self.fallthroughs.entry((run, last)).or_default(), 1);
                    p.run_start = None;
                }
            }
            K::Exception { ret_addr, .. } => {
                self.resolve(&mut p, ret_addr);
                p.taken = None;
                p.run_start = None;
            }
            K::NoSync(_)
            | K::TraceOn(_)
            | K::EndOfTrace(_)
            | K::AddrNotAccessible { .. }
            | K::AddrUnknown
            | K::RangeNoPath { .. }
            | K::ExceptionReturn => {
                self.resolve(&mut p, None);
                p = Pending::default();
            }
            _ => {}
        }
        self.pending.insert(stream, p);
    }

    /// A direct branch whose target the trace did not show: the target
    /// from the image, else `fallback`, else it is not counted.
    fn resolve(&mut self, p: &mut Pending, fallback: Option<u64>) {
        if let Some((from, isa)) = p.direct.take() {
            let to = self.target_of.as_ref().and_then(|f| f(from, isa)).or(fallback);
            if let Some(to) = to {
                self.saturated |= add_saturating(self.branches.entry((from, to)).or_default(), 1);
            }
        }
    }

    /// End of input: resolve what waits.
    pub fn finish(&mut self) {
        let mut streams: Vec<u32> = self.pending.keys().copied().collect();
        streams.sort();
        for s in streams {
            if let Some(mut p) = self.pending.remove(&s) {
                self.resolve(&mut p, None);
            }
        }
    }

    /// Add another run's counts (the other run must be finished).
    pub fn merge(&mut self, other: &BranchCounts) {
        for (dst, src) in [
            (&mut self.ranges, &other.ranges),
            (&mut self.branches, &other.branches),
            (&mut self.taken, &other.taken),
            (&mut self.fallthroughs, &other.fallthroughs),
        ] {
            for (k, v) in src {
                self.saturated |= add_saturating(dst.entry(*k).or_default(), *v);
            }
        }
        self.saturated |= other.saturated;
    }
}

/// The AutoFDO profile of one binary, in AutoFDO offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutofdoBinary {
    pub path: String,
    /// `0x` and 40 hex digits.
    pub build_id: String,
    pub ranges: BTreeMap<(u64, u64), u64>,
    pub addresses: BTreeMap<u64, u64>,
    pub branches: BTreeMap<(u64, u64), u64>,
}

/// A whole AutoFDO file: binaries by (path, build ID).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutofdoProfile {
    pub binaries: BTreeMap<(String, String), AutofdoBinary>,
    pub saturated: bool,
}

impl AutofdoProfile {
    /// Convert run-time counts through `map`; only binaries whose recorded
    /// path `keep` accepts.
    pub fn from_counts(counts: &BranchCounts, map: &BinaryMap, keep: &dyn Fn(&str) -> bool) -> AutofdoProfile {
        let mut p = AutofdoProfile::default();
        let slot = |p: &mut AutofdoProfile, b: usize| -> (String, String) {
            let bin = &map.binaries[b];
            let key = (bin.path.clone(), bin.build_id_text());
            p.binaries.entry(key.clone()).or_insert_with(|| AutofdoBinary {
                path: bin.path.clone(),
                build_id: key.1.clone(),
                ..Default::default()
            });
            key
        };
        let offset = |b: usize, v: u64| -> u64 {
            if v == 0 {
                0
            } else {
                v.wrapping_sub(map.binaries[b].first_load_vaddr())
            }
        };
        for (&(start, last), &n) in &counts.ranges {
            let Some(m) = map.mapping_at(start) else { continue };
            if !keep(&map.binaries[m.binary].path) {
                continue;
            }
            let k = (offset(m.binary, map.vaddr_in(m, start)), offset(m.binary, map.vaddr_in(m, last)));
            let key = slot(&mut p, m.binary);
            let e = p.binaries.get_mut(&key).map(|b| b.ranges.entry(k).or_default());
            if let Some(e) = e {
                p.saturated |= add_saturating(e, n);
            }
        }
        for (&(from, to), &n) in &counts.branches {
            let Some(m) = map.mapping_at(from) else { continue };
            if !keep(&map.binaries[m.binary].path) {
                continue;
            }
            let to_v = if to == 0 { 0 } else { map.vaddr_in(m, to) };
            let k = (offset(m.binary, map.vaddr_in(m, from)), offset(m.binary, to_v));
            let key = slot(&mut p, m.binary);
            if let Some(e) = p.binaries.get_mut(&key).map(|b| b.branches.entry(k).or_default()) {
                p.saturated |= add_saturating(e, n);
            }
        }
        p.saturated |= counts.saturated;
        p
    }

    /// The text simpleperf writes.
    pub fn write(&self) -> String {
        let mut out = String::new();
        let mut bins: Vec<&AutofdoBinary> = self.binaries.values().collect();
        bins.sort_by(|a, b| a.path.cmp(&b.path).then_with(|| a.build_id.cmp(&b.build_id)));
        if bins.len() > 1 {
            out.push_str(SPLIT_NOTE);
            out.push('\n');
        }
        for b in bins {
            let _ = writeln!(out, "{}", b.ranges.len());
            for ((s, e), n) in &b.ranges {
                let _ = writeln!(out, "{s:x}-{e:x}:{n}");
            }
            let _ = writeln!(out, "{}", b.addresses.len());
            for (a, n) in &b.addresses {
                let _ = writeln!(out, "{a:x}:{n}");
            }
            let _ = writeln!(out, "{}", b.branches.len());
            for ((f, t), n) in &b.branches {
                let _ = writeln!(out, "{f:x}->{t:x}:{n}");
            }
            let _ = writeln!(out, "// build_id: {}", b.build_id);
            let _ = writeln!(out, "// {}", b.path);
            out.push('\n');
        }
        out
    }

    /// Read a file [`AutofdoProfile::write`] (or simpleperf) wrote. `\r` is
    /// ignored.
    pub fn parse(path: &Path, text: &str) -> Result<AutofdoProfile, ProfileError> {
        let lines: Vec<&str> = text.lines().map(|l| l.trim_end_matches('\r')).collect();
        let mut at = 0usize;
        let err = |line: usize, m: String| ProfileError::Parse { path: path.to_path_buf(), line: line + 1, message: m };
        let mut p = AutofdoProfile::default();
        if lines.first() == Some(&SPLIT_NOTE) {
            at = 1;
        }
        let count = |at: &mut usize, what: &str| -> Result<usize, ProfileError> {
            let l = lines.get(*at).ok_or_else(|| err(*at, format!("expected the number of {what}, found the end")))?;
            let n: usize = l.trim().parse().map_err(|_| err(*at, format!("expected the number of {what}, found '{l}'")))?;
            // Each entry takes a line after this one: a count beyond what
            // is left is wrong.
            if n > lines.len() - *at - 1 {
                return Err(err(*at, format!("{n} {what} announced, but the file has fewer lines")));
            }
            *at += 1;
            Ok(n)
        };
        let hex = |s: &str| u64::from_str_radix(s.trim(), 16).ok();
        while at < lines.len() {
            if lines[at].trim().is_empty() {
                at += 1;
                continue;
            }
            let mut b = AutofdoBinary::default();
            for _ in 0..count(&mut at, "ranges")? {
                let l = lines[at];
                let parsed = l.split_once(':').and_then(|(r, n)| {
                    let (s, e) = r.split_once('-')?;
                    Some(((hex(s)?, hex(e)?), n.trim().parse::<u64>().ok()?))
                });
                let (k, n) = parsed.ok_or_else(|| err(at, format!("expected START-END:COUNT, found '{l}'")))?;
                p.saturated |= add_saturating(b.ranges.entry(k).or_default(), n);
                at += 1;
            }
            for _ in 0..count(&mut at, "address counts")? {
                let l = lines[at];
                let parsed = l.split_once(':').and_then(|(a, n)| Some((hex(a)?, n.trim().parse::<u64>().ok()?)));
                let (a, n) = parsed.ok_or_else(|| err(at, format!("expected ADDRESS:COUNT, found '{l}'")))?;
                p.saturated |= add_saturating(b.addresses.entry(a).or_default(), n);
                at += 1;
            }
            for _ in 0..count(&mut at, "branches")? {
                let l = lines[at];
                let parsed = l.split_once(':').and_then(|(r, n)| {
                    let (f, t) = r.split_once("->")?;
                    Some(((hex(f)?, hex(t)?), n.trim().parse::<u64>().ok()?))
                });
                let (k, n) = parsed.ok_or_else(|| err(at, format!("expected FROM->TO:COUNT, found '{l}'")))?;
                p.saturated |= add_saturating(b.branches.entry(k).or_default(), n);
                at += 1;
            }
            let id = lines.get(at).and_then(|l| l.strip_prefix("// build_id: "));
            b.build_id = id.ok_or_else(|| err(at, "expected '// build_id: 0x...'".into()))?.trim().to_string();
            at += 1;
            let path_line = lines.get(at).and_then(|l| l.strip_prefix("// "));
            b.path = path_line.ok_or_else(|| err(at, "expected '// PATH'".into()))?.to_string();
            at += 1;
            p.add_binary(b);
        }
        Ok(p)
    }

    /// Add a binary's counts (binaries with the same path and build ID are
    /// summed).
    pub fn add_binary(&mut self, b: AutofdoBinary) {
        let key = (b.path.clone(), b.build_id.clone());
        match self.binaries.get_mut(&key) {
            None => {
                self.binaries.insert(key, b);
            }
            Some(mine) => {
                let mut sat = false;
                for (k, v) in b.ranges {
                    sat |= add_saturating(mine.ranges.entry(k).or_default(), v);
                }
                for (k, v) in b.addresses {
                    sat |= add_saturating(mine.addresses.entry(k).or_default(), v);
                }
                for (k, v) in b.branches {
                    sat |= add_saturating(mine.branches.entry(k).or_default(), v);
                }
                self.saturated |= sat;
            }
        }
    }

    /// Add another profile.
    pub fn merge(&mut self, other: AutofdoProfile) {
        self.saturated |= other.saturated;
        for (_, b) in other.binaries {
            self.add_binary(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the profile_files fuzz target: a count that names exactly
    /// the lines left, its own included, read past the end.
    #[test]
    fn counts_beyond_the_last_line_are_errors() {
        for text in ["1", "0\n1", "0\n0\n2\n0-0:1", "2\n0-4:1\n"] {
            match AutofdoProfile::parse(Path::new("p"), text) {
                Err(ProfileError::Parse { message, .. }) => assert!(message.contains("fewer lines"), "{text:?}: {message}"),
                other => panic!("{text:?}: {:?}", other.map(|_| ())),
            }
        }
    }
}
