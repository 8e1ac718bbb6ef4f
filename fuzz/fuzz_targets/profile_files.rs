//! The profile readers of `profile merge` (AutoFDO text, BOLT pre-aggregated,
//! folded stacks) on arbitrary text: each either fails with a located error
//! or reads a profile that, written out and read again, is the same.
//!
//! Input layout: `[sel, text...]`; `sel % 3` picks the reader.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use tracesight::profile::autofdo::AutofdoProfile;
use tracesight::profile::bolt::BoltProfile;
use tracesight::profile::folded;

fuzz_target!(|input: &[u8]| {
    let Some((&sel, rest)) = input.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let p = Path::new("fuzz");
    match sel % 3 {
        0 => {
            if let Ok(a) = AutofdoProfile::parse(p, text) {
                let again = AutofdoProfile::parse(p, &a.write()).expect("written AutoFDO text reads back");
                assert_eq!(again.binaries, a.binaries);
            }
        }
        1 => {
            if let Ok(b) = BoltProfile::parse(p, text) {
                let again = BoltProfile::parse(p, &b.write()).expect("written BOLT text reads back");
                assert_eq!((again.branches, again.fallthroughs), (b.branches, b.fallthroughs));
            }
        }
        _ => {
            if let Ok((m, _)) = folded::parse(p, text) {
                let (again, _) = folded::parse(p, &folded::write(&m)).expect("written stacks read back");
                assert_eq!(again, m);
            }
        }
    }
});
