//! The output of GNU `addr2line -a -f -i -C -e ELF ADDR...`, reproduced
//! exactly so the two can be diffed:
//!
//! ```text
//! 0x0000000000400998          address, 16 hex digits (8 for 32-bit ELF)
//! geo::clamp8(int)            innermost function
//! /src/shapes.cpp:56          its file:line (`N (discriminator D)` when set)
//! geo::mix(int, int)          the function it was inlined into
//! /src/shapes.cpp:63          the call site, and so on outwards
//! ```
//!
//! `??` stands for an unknown function or file, `?` for an unknown line, and
//! an address outside every section prints `??` and `??:0`.
//!
//! addr2line's answers depend on the addresses asked before (it caches the
//! last symbol found, and remembers symbol names it has given to DWARF
//! functions that have no linkage name), so one [`symbolize_text`] call keeps
//! the same state as one addr2line run over the same addresses.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use super::demangle::{demangle_with, mangling, CppStyle};
use super::dwarf::{name_is_linkage, DieKey};
use super::elfsyms::FindFunctionCache;
use super::{Frame, Symbolizer};

/// Per-image state of one addr2line run.
#[derive(Default)]
struct ImageState {
    cache: FindFunctionCache,
    /// Names a DWARF function took from the symbol table.
    renamed: HashMap<DieKey, String>,
    /// DWARF functions whose symbol-table name has been looked up.
    settled: HashSet<DieKey>,
}

/// Print each address as `addr2line -a -f -i -C` does.
pub fn symbolize_text(sym: &Symbolizer, addrs: &[u64]) -> String {
    let mut states: Vec<ImageState> = sym.images().iter().map(|_| ImageState::default()).collect();
    let mut out = String::with_capacity(addrs.len() * 64);
    for &addr in addrs {
        translate(sym, &mut states, addr, &mut out);
    }
    out
}

/// Print frames from [`Symbolizer::symbolize`] in the same layout (without
/// addr2line's order-dependent naming).
pub fn write_frames_text(out: &mut String, address: u64, width64: bool, frames: &[Frame], fallback: Option<&str>) {
    write_address(out, address, width64);
    if frames.is_empty() {
        match fallback {
            Some(f) => {
                let _ = writeln!(out, "{f}\n??:?");
            }
            None => out.push_str("??\n??:0\n"),
        }
        return;
    }
    for f in frames {
        let name = f.function.as_deref().filter(|n| !n.is_empty()).unwrap_or("??");
        out.push_str(name);
        out.push('\n');
        write_file_line(out, f.file.as_deref(), f.line, f.discriminator);
    }
}

fn write_address(out: &mut String, addr: u64, width64: bool) {
    if width64 {
        let _ = writeln!(out, "0x{addr:016x}");
    } else {
        let _ = writeln!(out, "0x{:08x}", addr as u32);
    }
}

fn write_file_line(out: &mut String, file: Option<&str>, line: u32, discriminator: u32) {
    out.push_str(file.unwrap_or("??"));
    out.push(':');
    if line == 0 {
        out.push_str("?\n");
    } else if discriminator != 0 {
        let _ = writeln!(out, "{line} (discriminator {discriminator})");
    } else {
        let _ = writeln!(out, "{line}");
    }
}

fn push_name(out: &mut String, name: Option<&str>) {
    match name.filter(|n| !n.is_empty()) {
        None => out.push_str("??"),
        // addr2line -C demangles without DMGL_VERBOSE: `std::string`.
        Some(n) => match demangle_with(n, CppStyle::Short) {
            Some(d) => out.push_str(&d),
            None => out.push_str(n),
        },
    }
    out.push('\n');
}

fn translate(sym: &Symbolizer, states: &mut [ImageState], addr: u64, out: &mut String) {
    let images = sym.images();
    let width64 = images.first().is_none_or(|im| im.is_64());
    let Some((idx, im)) = sym.image_at(addr) else {
        write_address(out, addr, width64);
        out.push_str("??\n??:0\n");
        return;
    };
    write_address(out, addr, im.is_64());
    let st = &mut states[idx];
    let elf = im.elf();
    let probe = addr.wrapping_sub(im.bias());
    let Some(section) = elf.section_at(probe).map(|s| s.index) else {
        out.push_str("??\n??:0\n");
        return;
    };

    let mut found = false;
    let mut function: Option<String> = None;
    let mut file: Option<String> = None;
    let mut line = 0u32;
    let mut discriminator = 0u32;
    let mut frames = Vec::new();

    if let Some(d) = im.debug() {
        let lines = d.lines();
        if let Some(r) = lines.lookup(probe) {
            found = true;
            file = lines.file(r.file).map(|f| f.to_string());
            line = r.line;
            discriminator = r.discriminator;
        }
        frames = d.frames(probe, true);
        if let Some(inner) = frames.first() {
            found = true;
            let key = inner.die;
            let current = key.and_then(|k| st.renamed.get(&k).cloned()).or_else(|| inner.name.clone());
            let linkage = key.is_some_and(|k| st.settled.contains(&k))
                || name_is_linkage(inner.lang)
                || inner.name.as_deref().is_some_and(|n| mangling(n).is_some());
            if linkage {
                function = current;
            } else {
                let hit = elf.find_function_cached(&mut st.cache, probe, section);
                match hit {
                    None => function = current,
                    Some((s, sym_file)) => {
                        let s = &elf.symbols[s];
                        function = Some(s.raw_name.to_string());
                        if file.is_none() {
                            file = sym_file.map(|f| elf.file_name(f).to_string());
                        }
                        if let (Some(k), Some(low)) = (key, inner.first_low) {
                            if s.address == low {
                                st.renamed.insert(k, s.raw_name.to_string());
                            }
                        }
                    }
                }
                if let Some(k) = key {
                    st.settled.insert(k);
                }
            }
        }
    }
    if function.is_none() && frames.is_empty() {
        if let Some((s, sym_file)) = elf.find_function_cached(&mut st.cache, probe, section) {
            found = true;
            function = Some(elf.symbols[s].raw_name.to_string());
            if file.is_none() {
                file = sym_file.map(|f| elf.file_name(f).to_string());
            }
        }
    }

    if !found {
        out.push_str("??\n??:0\n");
        return;
    }
    push_name(out, function.as_deref());
    write_file_line(out, file.as_deref(), line, discriminator);
    // The inlined-by frames: the caller's name and the call site.
    let lines = im.debug().map(|d| d.lines());
    for k in 1..frames.len() {
        let callee = &frames[k - 1];
        let caller = &frames[k];
        let name = caller.die.and_then(|key| st.renamed.get(&key).cloned()).or_else(|| caller.name.clone());
        push_name(out, name.as_deref());
        let call_file = callee.call_file.and_then(|f| lines.and_then(|l| l.file(f))).map(|f| f.to_string());
        write_file_line(out, call_file.as_deref(), callee.call_line, discriminator);
    }
}
