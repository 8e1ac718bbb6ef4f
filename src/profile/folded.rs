//! Folded stacks, the input of flamegraph.pl, inferno and speedscope: one
//! line per call path, frames from the outermost joined by `;`, a space and
//! the weight (`main;parse;expr 1234`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::callgraph::CallTree;
use super::{add_saturating, CodeMap, ProfileError};

/// What a line's weight counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Weight {
    #[default]
    Instructions,
    Cycles,
}

/// Folded stacks of a call tree: each path with a non-zero self weight,
/// sorted by path.
pub fn from_tree(tree: &CallTree, code: &dyn CodeMap, weight: Weight) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for (i, n) in tree.nodes.iter().enumerate().skip(1) {
        let w = match weight {
            Weight::Instructions => n.self_instructions,
            Weight::Cycles => n.self_cycles,
        };
        if w == 0 {
            continue;
        }
        // A ';' inside a name would split the frame: flamegraph.pl has no
        // escape for it.
        let path: Vec<String> = tree.path_names(code, i as u32).into_iter().map(|s| s.replace(';', ":")).collect();
        let e = out.entry(path.join(";")).or_default();
        add_saturating(e, w);
    }
    out
}

pub fn write(stacks: &BTreeMap<String, u64>) -> String {
    let mut out = String::new();
    for (k, v) in stacks {
        let _ = writeln!(out, "{k} {v}");
    }
    out
}

/// Read folded stacks (the weight is the last space-separated field).
/// Lines of the same stack are summed; the flag says a sum saturated.
pub fn parse(path: &Path, text: &str) -> Result<(BTreeMap<String, u64>, bool), ProfileError> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    let mut sat = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let bad = |m: &str| ProfileError::Parse { path: path.to_path_buf(), line: i + 1, message: m.to_string() };
        let (stack, w) = line.rsplit_once(' ').ok_or_else(|| bad("expected 'STACK WEIGHT'"))?;
        let w: u64 = w.parse().map_err(|_| bad("the weight is not a whole number"))?;
        sat |= add_saturating(out.entry(stack.to_string()).or_default(), w);
    }
    Ok((out, sat))
}
