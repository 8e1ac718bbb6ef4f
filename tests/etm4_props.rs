//! Property tests for the ETMv4/ETE packet parser: any input, split anywhere,
//! parses without panicking, accounts for every byte exactly once, and gives the
//! same packets whatever the split.

use proptest::prelude::*;
use tracesight::protocol::etm4::{display, Etm4Config, Etm4Parser, Packet, PacketSink};

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

/// A sink that only counts ([`PacketSink::COUNTS`]): runs of packets come
/// as numbers.
#[derive(Default)]
struct Counter {
    packets: u64,
    bytes: u64,
    /// Packets that came in runs, and the longest run.
    in_runs: u64,
    longest: usize,
}

impl PacketSink for Counter {
    const COUNTS: bool = true;

    fn packet(&mut self, _: &Packet, raw: &[u8]) -> bool {
        self.packets += 1;
        self.bytes += raw.len() as u64;
        true
    }

    fn counted(&mut self, packets: usize, bytes: usize) {
        self.packets += packets as u64;
        self.bytes += bytes as u64;
        self.in_runs += packets as u64;
        self.longest = self.longest.max(packets);
    }
}

/// Packets, bytes and the parser's saved state after each push, for a
/// sink that takes every packet and for one that only counts; each push
/// is either one block or (with `spans`) several joined. Also the
/// counting sink's packets that came in runs, and its longest run.
#[allow(clippy::type_complexity)]
fn count_both(cfg: &Etm4Config, data: &[u8], cuts: &[usize], spans: bool) -> ((u64, u64, Vec<Vec<u8>>), (u64, u64, Vec<Vec<u8>>), (u64, usize)) {
    let mut cuts: Vec<usize> = cuts.iter().map(|&s| s % (data.len() + 1)).collect();
    cuts.push(data.len());
    cuts.sort_unstable();
    // With spans, every other cut only starts a new stretch of one push.
    let pushes: Vec<(usize, usize, Vec<(usize, u64)>)> = if spans {
        let mut v = Vec::new();
        let mut start = 0;
        for pair in cuts.chunks(2) {
            let end = *pair.last().unwrap_or(&start);
            let mut st = vec![(0, start as u64)];
            if pair.len() == 2 && pair[0] > start && pair[0] < end {
                // The stretch's index is not its offset: packets get the
                // indices of the blocks they came from.
                st.push((pair[0] - start, pair[0] as u64 + 1000));
            }
            v.push((start, end, st));
            start = end;
        }
        v
    } else {
        let mut start = 0;
        cuts.iter()
            .map(|&c| {
                let p = (start, c, vec![(0, start as u64)]);
                start = c;
                p
            })
            .collect()
    };
    let mut one = (Etm4Parser::new(cfg), 0u64, 0u64, Vec::new());
    let mut counter = (Etm4Parser::new(cfg), Counter::default(), Vec::new());
    for (s, e, st) in &pushes {
        let mut each = |_: &Packet, raw: &[u8]| {
            one.1 += 1;
            one.2 += raw.len() as u64;
            true
        };
        one.0.push_spans_until(st, &data[*s..*e], &mut each);
        one.3.push(one.0.save_state());
        counter.0.push_spans_until(st, &data[*s..*e], &mut counter.1);
        counter.2.push(counter.0.save_state());
    }
    let runs = (counter.1.in_runs, counter.1.longest);
    ((one.1, one.2, one.3), (counter.1.packets, counter.1.bytes, counter.2), runs)
}

#[test]
fn counting_sink_takes_runs_of_the_fixture() {
    let Some(data) = fixture("001-ack_test/session1.bin") else { return };
    let cfg = &configs()[0];
    for spans in [false, true] {
        let (one, counted, (in_runs, longest)) = count_both(cfg, &data, &[5000, 7001, 9000, 12345], spans);
        assert_eq!(one, counted);
        // Nine packets in ten are atoms and addresses; short exceptions,
        // contexts and one-byte packets go on in the runs too, and only
        // what the one-by-one loop must take (sync, trace info, long
        // address-and-context packets...) and the cuts end them.
        assert!(in_runs * 100 >= one.0 * 99, "{in_runs} of {} packets in runs", one.0);
        assert!(longest >= 1000, "longest run {longest}");
    }
}

/// Under speculation a commit or cancel packet comes every few atoms:
/// they go on in the runs too.
#[test]
fn counting_sink_takes_speculation_packets_in_runs() {
    let Some(data) = fixture("ete_spec_1/session1.bin") else { return };
    let cfg = config(true, 0x2801cea1, 0xd0001088, 0x0);
    let (one, counted, (in_runs, _)) = count_both(&cfg, &data, &[], false);
    assert_eq!(one, counted);
    // 26 of its 76 packets resolve speculation; but for the sync packets
    // at its start, every packet is in a run (43 of 76 when each of them
    // ended one).
    assert!(in_runs * 100 >= one.0 * 90, "{in_runs} of {} packets in runs", one.0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    /// A sink that only counts gets the counts and leaves the parser in
    /// the state one that takes every packet does, wherever pushes and
    /// stretches are cut, on bytes where atom headers come in rows.
    #[test]
    fn counting_sink_counts_as_one_by_one(data in proptest::collection::vec((any::<u8>(), 0u8..4), 0..2048),
                                          cuts in proptest::collection::vec(any::<usize>(), 0..12),
                                          spans in any::<bool>()) {
        let mut all = vec![0u8; 11];
        all.extend_from_slice(&[0x80, 0x01, 0x00]);
        // One byte in two is an atom header.
        all.extend(data.iter().map(|&(b, k)| if k < 2 { b | 0xc0 } else { b }));
        for cfg in configs() {
            let (one, counted, _) = count_both(&cfg, &all, &cuts, spans);
            prop_assert_eq!(one, counted);
        }
    }
}

const ASYNC: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];

/// Packets the one-by-one fast path takes whole since A-syncs, Trace Infos,
/// timestamps, contexts with IDs, Q packets, the three-byte exceptions
/// (ETE's transaction failures and PE resets among them) and the commit,
/// cancel and mispredict packets left the byte-wise machine: well formed
/// and malformed ones (runaway continuation bits, sections cut short), with
/// random bytes between them.
fn sync_point_packets() -> impl Strategy<Value = Vec<u8>> {
    let cont = |n| proptest::collection::vec(0x80u8..=0xff, 0..n);
    let packet = prop_oneof![
        Just(ASYNC.to_vec()),
        // A-sync cut short or with a stray byte: a bad sequence.
        (1usize..12, any::<u8>()).prop_map(|(n, b)| {
            let mut v = vec![0u8; n];
            v.push(b);
            v
        }),
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..12)).prop_map(|(plctl, body)| {
            let mut v = vec![0x01, plctl];
            v.extend(body);
            v
        }),
        (0x02u8..=0x03, cont(10), any::<u8>(), cont(5), any::<u8>()).prop_map(|(h, ts, ts_end, cc, cc_end)| {
            let mut v = vec![h];
            v.extend(ts);
            v.push(ts_end & 0x7f);
            v.extend(cc);
            v.push(cc_end & 0x7f);
            v
        }),
        (0x80u8..=0x81, any::<u8>(), proptest::collection::vec(any::<u8>(), 0..9)).prop_map(|(h, info, ids)| {
            let mut v = vec![h, info];
            v.extend(ids);
            v
        }),
        // Q packets of every type (reserved ones too), with an address
        // part of any length and a count with runaway continuation bits.
        (0xa0u8..=0xaf, proptest::collection::vec(any::<u8>(), 0..5), cont(8), any::<u8>()).prop_map(
            |(h, addr, count, end)| {
                let mut v = vec![h];
                v.extend(addr);
                v.extend(count);
                v.push(end & 0x7f);
                v
            }
        ),
        // Exceptions of every second and third byte: two bytes or three
        // (bit 7 of the second, or ETE's types 0 and 0x18), and a few
        // bytes fewer, for a packet cut short by the end of the data.
        (any::<u8>(), any::<u8>(), 1usize..=3).prop_map(|(b1, b2, n)| [0x06, b1, b2][..n].to_vec()),
        // Commits, cancels and mispredicts, the count field of the first
        // two running on for up to seven bytes.
        (0x2du8..=0x3f, cont(8), any::<u8>()).prop_map(|(h, count, end)| {
            let mut v = vec![h];
            v.extend(count);
            v.push(end & 0x7f);
            v
        }),
        proptest::collection::vec(any::<u8>(), 0..6),
    ];
    proptest::collection::vec(packet, 0..48).prop_map(|ps| {
        let mut all = ASYNC.to_vec();
        all.extend_from_slice(&[0x01, 0x00]);
        all.extend(ps.into_iter().flatten());
        all
    })
}

/// The packet lines and the saved state after parsing `data` in pushes
/// cut at `cuts`.
fn lines_and_state(cfg: &Etm4Config, data: &[u8], cuts: &[usize]) -> (Vec<String>, Vec<u8>) {
    let mut p = Etm4Parser::new(cfg);
    let mut lines = Vec::new();
    let mut sink = |pkt: &Packet, raw: &[u8]| {
        let mut s = String::new();
        display::write_opencsd_line(&mut s, 0x10, pkt, raw, cfg.is_ete());
        display::write_json(&mut s, 0x10, pkt, raw);
        lines.push(s);
    };
    let mut start = 0;
    for &c in cuts.iter().chain(std::iter::once(&data.len())) {
        if c > start && c <= data.len() {
            p.push(start as u64, &data[start..c], &mut sink);
            start = c;
        }
    }
    let state = p.save_state();
    p.finish(&mut sink);
    (lines, state)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Whole, the fast path takes these packets; pushed a byte at a time
    /// (but for the last byte),
    /// the byte-wise machine does: the packets and the state after them
    /// are the same.
    #[test]
    fn sync_point_packets_whole_as_byte_by_byte(data in sync_point_packets()) {
        let every: Vec<usize> = (1..data.len()).collect();
        // The last byte pushed alone in both, so both states were saved
        // after a push at the same index.
        let last = [data.len() - 1];
        for cfg in configs() {
            let (whole, whole_state) = lines_and_state(&cfg, &data, &last);
            let (bytewise, bytewise_state) = lines_and_state(&cfg, &data, &every);
            prop_assert_eq!(&whole, &bytewise);
            prop_assert!(whole_state == bytewise_state, "saved states differ");
        }
    }
}
