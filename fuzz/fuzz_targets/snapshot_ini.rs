//! The snapshot ini reader and its number parsing on arbitrary bytes.
//!
//! Besides never panicking: line numbers must be within the file, and a
//! value `parse_c_unsigned` accepts must be what `c_strtoul_prefix` reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracesight::input::ini::{c_strtoul_prefix, parse_c_unsigned, Ini};

fuzz_target!(|data: &[u8]| {
    let ini = Ini::parse(data);
    let lines = data.iter().filter(|&&b| b == b'\n').count() + 1;
    let entries = ini
        .preamble
        .iter()
        .chain(ini.sections.iter().flat_map(|s| s.entries.iter()));
    for e in entries {
        assert!(
            e.line >= 1 && e.line <= lines,
            "entry line {} of {lines}",
            e.line
        );
        assert!(!e.key.contains('\n') && !e.value.contains('\n'));
        for text in [e.key.as_str(), e.value.as_str()] {
            let prefix = c_strtoul_prefix(text);
            if let Some(v) = parse_c_unsigned(text) {
                assert_eq!(
                    v, prefix,
                    "{text:?}: whole-string and prefix parses disagree"
                );
            }
        }
    }
    for s in &ini.sections {
        assert!(s.line >= 1 && s.line <= lines);
        // Lookups by a key the section has must find it.
        if let Some(first) = s.entries.first() {
            assert!(s.get(&first.key).is_some());
            assert!(s.get_all(&first.key).count() >= 1);
        }
        assert!(ini.section(&s.name).is_some());
        let _ = ini.entries_in(&s.name).count();
    }
    for w in &ini.warnings {
        assert!(w.line >= 1 && w.line <= lines);
    }
});
