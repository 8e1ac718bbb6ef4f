//! BOLT's pre-aggregated profile, the input of `perf2bolt --pa` (`llvm-bolt`
//! `DataAggregator::parseAggregatedLBREntry`):
//!
//! ```text
//! B <from> <to> <count> <mispredicts>   a taken branch
//! F <start> <end> <count>               a run from a branch target to the next taken branch
//! ```
//!
//! Locations are hexadecimal without `0x`: virtual addresses of the binary
//! (run-time addresses through the binary's mapping), which BOLT reads as
//! addresses in the file it optimizes. Trace does not say which branches
//! were mispredicted, so that count is 0. Branches and runs whose ends are
//! not both in one binary of interest are left out (BOLT profiles one
//! binary). Lines are sorted: branches, then runs.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::autofdo::{BinaryMap, BranchCounts};
use super::{add_saturating, ProfileError};

/// A BOLT profile: branch and fall-through counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoltProfile {
    /// (from, to) -> (count, mispredicts)
    pub branches: BTreeMap<(u64, u64), (u64, u64)>,
    pub fallthroughs: BTreeMap<(u64, u64), u64>,
    pub saturated: bool,
}

impl BoltProfile {
    /// Convert run-time counts through `map`, keeping what lies in binaries
    /// `keep` accepts (by recorded path).
    pub fn from_counts(counts: &BranchCounts, map: &BinaryMap, keep: &dyn Fn(&str) -> bool) -> BoltProfile {
        let mut p = BoltProfile { saturated: counts.saturated, ..Default::default() };
        let both = |a: u64, b: u64| -> Option<(u64, u64)> {
            let m = map.mapping_at(a)?;
            if !keep(&map.binaries[m.binary].path) {
                return None;
            }
            let n = map.mapping_at(b)?;
            if n.binary != m.binary {
                return None;
            }
            Some((map.vaddr_in(m, a), map.vaddr_in(n, b)))
        };
        for (&(f, t), &n) in &counts.taken {
            if let Some(k) = both(f, t) {
                let e = p.branches.entry(k).or_default();
                p.saturated |= add_saturating(&mut e.0, n);
            }
        }
        for (&(s, e), &n) in &counts.fallthroughs {
            if let Some(k) = both(s, e) {
                p.saturated |= add_saturating(p.fallthroughs.entry(k).or_default(), n);
            }
        }
        p
    }

    pub fn write(&self) -> String {
        let mut out = String::new();
        for ((f, t), (n, m)) in &self.branches {
            let _ = writeln!(out, "B {f:x} {t:x} {n} {m}");
        }
        for ((s, e), n) in &self.fallthroughs {
            let _ = writeln!(out, "F {s:x} {e:x} {n}");
        }
        out
    }

    /// Read `B` and `F` lines (other record types are rejected: they carry
    /// what this profile cannot add up).
    pub fn parse(path: &Path, text: &str) -> Result<BoltProfile, ProfileError> {
        let mut p = BoltProfile::default();
        for (i, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            let bad = |m: &str| ProfileError::Parse { path: path.to_path_buf(), line: i + 1, message: m.to_string() };
            let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad(&format!("'{s}' is not a hexadecimal address")));
            let num = |s: &str| s.parse::<u64>().map_err(|_| bad(&format!("'{s}' is not a count")));
            match (f[0], f.len()) {
                ("B", 5) => {
                    let e = p.branches.entry((hex(f[1])?, hex(f[2])?)).or_default();
                    let sat = add_saturating(&mut e.0, num(f[3])?) | add_saturating(&mut e.1, num(f[4])?);
                    p.saturated |= sat;
                }
                ("F", 4) => {
                    let e = p.fallthroughs.entry((hex(f[1])?, hex(f[2])?)).or_default();
                    p.saturated |= add_saturating(e, num(f[3])?);
                }
                _ => return Err(bad("expected 'B FROM TO COUNT MISPREDICTS' or 'F START END COUNT'")),
            }
        }
        Ok(p)
    }

    pub fn merge(&mut self, other: &BoltProfile) {
        self.saturated |= other.saturated;
        for (k, (n, m)) in &other.branches {
            let e = self.branches.entry(*k).or_default();
            let sat = add_saturating(&mut e.0, *n) | add_saturating(&mut e.1, *m);
            self.saturated |= sat;
        }
        for (k, n) in &other.fallthroughs {
            self.saturated |= add_saturating(self.fallthroughs.entry(*k).or_default(), *n);
        }
    }
}
