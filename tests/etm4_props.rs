//! Property tests for the ETMv4/ETE packet parser: any input, split anywhere,
//! parses without panicking, accounts for every byte exactly once, and gives the
//! same packets whatever the split.

use proptest::prelude::*;
use tracesight::protocol::etm4::{display, Etm4Config, Etm4Parser, Packet};

fn config(ete: bool, idr0: u32, idr2: u32, configr: u32) -> Etm4Config {
    let regs = [
        ("TRCCONFIGR", configr as u64),
        ("TRCTRACEIDR", 0x10),
        ("TRCDEVARCH", 0x47735a13),
        ("TRCIDR0", idr0 as u64),
        ("TRCIDR1", if ete { 0x4100fff0 } else { 0x4100f443 }),
        ("TRCIDR2", idr2 as u64),
        ("TRCIDR8", 0x10),
    ];
    Etm4Config::from_registers(|n| regs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), ete, Some("Cortex-A53"))
        .unwrap()
}

/// Parse with the given split points; return (lines, bytes accounted).
fn run(cfg: &Etm4Config, data: &[u8], splits: &[usize]) -> (Vec<String>, usize) {
    let mut p = Etm4Parser::new(cfg);
    let mut lines = Vec::new();
    let mut bytes = 0usize;
    let mut sink = |pkt: &Packet, raw: &[u8]| {
        let mut s = String::new();
        display::write_opencsd_line(&mut s, 0x10, pkt, raw, cfg.is_ete());
        let mut j = String::new();
        display::write_json(&mut j, 0x10, pkt, raw);
        lines.push(s);
        bytes += raw.len();
    };
    let mut start = 0;
    let mut cuts: Vec<usize> = splits.iter().map(|&s| s % (data.len() + 1)).collect();
    cuts.sort_unstable();
    for c in cuts.into_iter().chain(std::iter::once(data.len())) {
        if c > start {
            p.push(start as u64, &data[start..c], &mut sink);
            start = c;
        }
    }
    p.finish(&mut sink);
    (lines, bytes)
}

fn fixture(name: &str) -> Option<Vec<u8>> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd").join(name);
    std::fs::read(p).ok()
}

fn configs() -> Vec<Etm4Config> {
    vec![
        config(true, 0x28018aa1 | (3 << 15), 0xc0001088, 0x1),
        config(true, 0x0801_8aa1 | (3 << 15), 0xc0001088, 0x1),
        // ETMv4.4 with conditional tracing and data trace enabled, so the
        // conditional and data-sync-marker encodings are live.
        config(false, 0x28000ee1, 0x00000488, 0x300d1),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_any_split(data in proptest::collection::vec(any::<u8>(), 0..2048),
                              splits in proptest::collection::vec(any::<usize>(), 0..16)) {
        for cfg in configs() {
            let (whole, n) = run(&cfg, &data, &[]);
            prop_assert_eq!(n, data.len());
            let (split, n2) = run(&cfg, &data, &splits);
            prop_assert_eq!(n2, data.len());
            prop_assert_eq!(&whole, &split);
        }
    }

    #[test]
    fn synced_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..2048),
                           splits in proptest::collection::vec(any::<usize>(), 0..16)) {
        // Start with A-sync + Trace Info so the random bytes are parsed as packets.
        let mut all = vec![0u8; 11];
        all.extend_from_slice(&[0x80, 0x01, 0x00]);
        all.extend_from_slice(&data);
        for cfg in configs() {
            let (whole, n) = run(&cfg, &all, &[]);
            prop_assert_eq!(n, all.len());
            let (split, _) = run(&cfg, &all, &splits);
            prop_assert_eq!(&whole, &split);
        }
    }

    #[test]
    fn mutated_fixture(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..64),
                       splits in proptest::collection::vec(any::<usize>(), 0..8)) {
        let Some(mut data) = fixture("001-ack_test/session1.bin") else { return Ok(()) };
        for (at, v) in flips {
            let i = at % data.len();
            data[i] = v;
        }
        let cfg = &configs()[0];
        let (whole, n) = run(cfg, &data, &[]);
        prop_assert_eq!(n, data.len());
        let (split, _) = run(cfg, &data, &splits);
        prop_assert_eq!(&whole, &split);
    }
}
