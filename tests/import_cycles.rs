//! The files under src/ import each other in one direction only: the
//! `use crate::` (and `super::`) edges between files form no cycle. Layers
//! are meant to know only those below them; a cycle between two files is
//! the first sign of an arrow pointing up.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The module path of a source file: `src/index/mod.rs` is `index`,
/// `src/tui/app.rs` is `tui::app`, `src/lib.rs` is the crate root (empty).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The paths a file names through `crate::` or `super::` (in `use` lines
/// and in code), resolved to module paths; a name's tail that is an item
/// rather than a module is cut off later against the known modules.
fn referenced(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    // A file's unit tests (`#[cfg(test)] mod ...`, at its end by the
    // project's habit) may use any module: they are not part of the room.
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    for line in &lines[..end] {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::").or_else(|| rest.find("super::")) {
            let at = &rest[i..];
            // `crate::` inside a longer word (e.g. `tracesight::crate`) is not one.
            let before = rest[..i].chars().last();
            rest = &rest[i + 1..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let words: Vec<&str> = at
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|w| !w.is_empty())
                .collect();
            let mut path: Vec<String> = Vec::new();
            // `super` of `a::b` (file a/b.rs, or a/b/mod.rs) is `a`.
            let mut base: Vec<String> = module.to_vec();
            let mut iter = words.iter().peekable();
            match iter.peek() {
                Some(&&"crate") => {
                    iter.next();
                }
                Some(&&"super") => {
                    while iter.peek() == Some(&&"super") {
                        iter.next();
                        base.pop();
                    }
                    path = base;
                }
                _ => continue,
            }
            path.extend(iter.map(|w| w.to_string()));
            out.push(path);
        }
    }
    out
}

#[test]
fn no_import_cycle_between_source_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    // The binary's files (main.rs and cli/) are a crate of their own.
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .filter(|f| {
            let rel = f.strip_prefix(&src).unwrap();
            !rel.starts_with("cli") && rel != Path::new("main.rs")
        })
        .map(|f| (module_of(&src, f), f.clone()))
        .collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, f) in &modules {
        let text = std::fs::read_to_string(f).unwrap();
        for mut target in referenced(m, &text) {
            // The longest prefix that is a file of its own.
            while !target.is_empty() && !modules.contains_key(&target) {
                target.pop();
            }
            // The crate root and a module's own parent (its mod.rs, which
            // declares it) are not edges between rooms.
            if target.is_empty() || &target == m || m.starts_with(&target) {
                continue;
            }
            edges.entry(m.clone()).or_default().insert(target);
        }
    }
    assert!(edges.len() > 20, "the scan found the files' imports ({} files with edges)", edges.len());
    // Depth-first search for a cycle, reporting the first one found.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark: BTreeMap<&Vec<String>, Mark> = modules.keys().map(|k| (k, Mark::New)).collect();
    fn visit<'a>(
        m: &'a Vec<String>,
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        mark: &mut BTreeMap<&'a Vec<String>, Mark>,
        stack: &mut Vec<&'a Vec<String>>,
    ) -> Option<Vec<String>> {
        mark.insert(m, Mark::Open);
        stack.push(m);
        for t in edges.get(m).into_iter().flatten() {
            match mark.get(t).copied().unwrap_or(Mark::Done) {
                Mark::Open => {
                    let from = stack.iter().position(|s| *s == t).unwrap_or(0);
                    let mut cycle: Vec<String> = stack[from..].iter().map(|s| s.join("::")).collect();
                    cycle.push(t.join("::"));
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(t, edges, mark, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        mark.insert(m, Mark::Done);
        None
    }
    let keys: Vec<&Vec<String>> = modules.keys().collect();
    for m in keys {
        if mark[m] == Mark::New {
            let mut stack = Vec::new();
            if let Some(cycle) = visit(m, &edges, &mut mark, &mut stack) {
                panic!("import cycle between files: {}", cycle.join(" -> "));
            }
        }
    }
}
