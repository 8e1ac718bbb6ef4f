//! The C++ demangler on arbitrary names (symbol names come from untrusted
//! ELF files).
//!
//! Byte 0 bit 0 puts `_Z` in front of the rest, so most inputs reach the
//! grammar; the rest is the name (invalid UTF-8 replaced). Besides never
//! panicking or hanging: the output stays under the cap, and the short
//! (nm -C) spelling succeeds whenever the verbose (c++filt) one does, as the
//! two differ only in the text of the standard substitutions.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracesight::symbols::demangle::{demangle_or_raw, demangle_with, CppStyle};
use tracesight::symbols::itanium::{self, Style, MAX_OUTPUT};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let name = if sel & 1 != 0 { format!("_Z{text}") } else { text.into_owned() };
    let verbose = itanium::demangle(&name, Style::Verbose);
    let short = itanium::demangle(&name, Style::Short);
    if let Some(v) = &verbose {
        assert!(v.len() <= MAX_OUTPUT);
        assert!(short.is_some(), "{name:?}: verbose {v:?} but no short form");
    }
    if let Some(s) = &short {
        assert!(s.len() <= MAX_OUTPUT);
    }
    // The wrapper (leading dots, `@version` suffixes, Rust names).
    let _ = demangle_with(&name, CppStyle::Short);
    let _ = demangle_or_raw(&name);
});
