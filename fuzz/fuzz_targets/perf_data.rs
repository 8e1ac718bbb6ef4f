//! The perf.data reader on arbitrary bytes.
//!
//! Besides never panicking (or allocating by a count read from the input):
//! every fragment lies inside the input, and every warning names an offset
//! and prints.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracesight::input::perf::PerfData;

fuzz_target!(|data: &[u8]| {
    let len = data.len();
    let Ok(d) = PerfData::from_bytes(data.to_vec(), "fuzz.data") else { return };
    for f in d.fragments() {
        assert!(f.data.start <= f.data.end && f.data.end <= len, "{f:?} outside {len} bytes");
        assert_eq!(d.fragment_data(f).len(), f.data.len());
    }
    for c in d.cpus() {
        // The lookup gives the effective trace ID in the ID register's low bits.
        if let Some(v) = c.register("TRCTRACEIDR").or_else(|| c.register("ETMTRACEIDR")) {
            assert_eq!(v & 0x7f, u64::from(c.trace_id) & 0x7f);
        }
    }
    for w in d.warnings() {
        assert!(w.to_string().starts_with("offset 0x"));
    }
    for m in d.mmaps() {
        let _ = d.build_id_for(m).map(|b| b.hex());
    }
});
