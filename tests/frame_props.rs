//! Property tests: the deformatter never panics, and the data it delivers
//! does not depend on how the input is split into pushes.

use proptest::prelude::*;
use tracesight::frame::{Deformatter, Flow, FrameError, FrameMode, FrameSink, RawFrame};

#[derive(Default, Debug, PartialEq, Eq)]
struct Log {
    blocks: Vec<(u8, u64, Vec<u8>)>,
    raw_events: usize,
    /// Stop after this many blocks (to exercise `Flow::Stop`).
    stop_after: Option<usize>,
    /// Stop at an empty block, as a decoding sink does.
    stop_on_empty: bool,
}

impl FrameSink for Log {
    fn data(&mut self, id: u8, index: u64, bytes: &[u8]) -> Flow {
        self.blocks.push((id, index, bytes.to_vec()));
        if self.stop_on_empty && bytes.is_empty() {
            return Flow::Stop;
        }
        match self.stop_after {
            Some(n) if self.blocks.len() >= n => Flow::Stop,
            _ => Flow::Continue,
        }
    }

    fn raw(&mut self, _event: RawFrame<'_>) {
        self.raw_events += 1;
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Finished,
    Stopped,
    Failed(std::mem::Discriminant<FrameError>, Option<FrameError>),
}

/// Push `data` cut at `cuts`, the deformatter gathering the blocks of
/// `gather` (none when empty).
fn run(
    mode: FrameMode,
    start: u64,
    data: &[u8],
    cuts: &[usize],
    raw: bool,
    stop_after: Option<usize>,
    gather: &[u8],
) -> (Log, Outcome) {
    let log = Log {
        stop_after,
        ..Log::default()
    };
    run_into(log, mode, start, data, cuts, raw, gather)
}

fn run_into(mut log: Log, mode: FrameMode, start: u64, data: &[u8], cuts: &[usize], raw: bool, gather: &[u8]) -> (Log, Outcome) {
    let mut d = Deformatter::new(mode);
    d.set_raw_monitor(raw);
    d.set_gather(gather);
    let mut bounds: Vec<usize> = cuts.iter().map(|&c| c % (data.len() + 1)).collect();
    bounds.push(0);
    bounds.push(data.len());
    bounds.sort_unstable();
    let fail = |e: FrameError| {
        // Error indices of TPIU modes report the start of the current
        // OpenCSD extraction, which depends on push boundaries.
        let exact = matches!(mode, FrameMode::MemAligned | FrameMode::Dstream);
        Outcome::Failed(std::mem::discriminant(&e), exact.then_some(e))
    };
    for w in bounds.windows(2) {
        match d.push(start.wrapping_add(w[0] as u64), &data[w[0]..w[1]], &mut log) {
            Ok(Flow::Continue) => {}
            Ok(Flow::Stop) => return (log, Outcome::Stopped),
            Err(e) => return (log, fail(e)),
        }
    }
    match d.finish(&mut log) {
        Ok(()) => (log, Outcome::Finished),
        Err(e) => (log, fail(e)),
    }
}

fn mode() -> impl Strategy<Value = FrameMode> {
    prop_oneof![
        Just(FrameMode::MemAligned),
        Just(FrameMode::Dstream),
        any::<(bool, bool)>().prop_map(|(fsync, hsync)| FrameMode::Tpiu { fsync, hsync }),
    ]
}

/// Bytes rich in sync patterns and ID bytes.
fn trace_bytes() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        4 => any::<u8>().prop_map(|b| vec![b]),
        1 => Just(vec![0xff, 0xff, 0xff, 0x7f]),
        1 => Just(vec![0xff, 0x7f]),
        1 => (0u8..0x80).prop_map(|id| vec![(id << 1) | 1]),
        1 => Just(vec![0x00; 16]),
    ];
    prop::collection::vec(token, 0..160).prop_map(|t| t.concat())
}

fn start_index() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), any::<u64>(), (0u64..4096)]
}

/// Frames of a few trace IDs taking turns every few bytes (as several
/// cores' trace does), with now and then an empty block or data before any
/// ID: enough blocks of one ID to fill a run, and more IDs than runs. Now
/// and then one ID's data goes on for up to 150 frames without an ID byte,
/// which the deformatter takes as a row of frames.
fn interleaved_frames() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        60 => any::<u8>().prop_map(|b| vec![b & 0xfe]),
        20 => (1u8..12).prop_map(|id| vec![(id << 1) | 1]),
        10 => any::<u8>().prop_map(|b| vec![b]),
        1 => prop::collection::vec(any::<u8>().prop_map(|b| b & 0xfe), 16..2400),
    ];
    prop::collection::vec(token, 0..6000).prop_map(|t| t.concat())
}

/// Whole frames of IDs 1 to 11 taking turns, some of them with an empty
/// block (a delayed ID change in byte 12 followed by an ID in byte 14).
fn frames_with_empty_blocks() -> impl Strategy<Value = Vec<u8>> {
    let pair = prop_oneof![
        3 => any::<u8>().prop_map(|b| b & 0xfe),
        1 => (1u8..12).prop_map(|id| (id << 1) | 1),
    ];
    let frame = prop_oneof![
        8 => (prop::collection::vec(pair, 8), prop::collection::vec(any::<u8>(), 7), any::<u8>()).prop_map(|(even, odd, aux)| {
            let mut f = vec![0u8; 16];
            for k in 0..7 {
                f[2 * k] = even[k];
                f[2 * k + 1] = odd[k];
            }
            f[14] = even[7];
            f[15] = aux;
            f
        }),
        1 => (1u8..12, 1u8..12, any::<u8>()).prop_map(|(a, b, d)| {
            let mut f = vec![d & 0xfe; 16];
            f[12] = (a << 1) | 1;
            f[14] = (b << 1) | 1;
            f[15] = 1 << 6;
            f
        }),
    ];
    prop::collection::vec(frame, 0..400).prop_map(|f| f.concat())
}

/// Each trace ID's blocks, in the order they came.
fn per_id(blocks: &[(u8, u64, Vec<u8>)]) -> std::collections::BTreeMap<u8, Vec<(u64, Vec<u8>)>> {
    let mut m = std::collections::BTreeMap::<u8, Vec<(u64, Vec<u8>)>>::new();
    for (id, index, bytes) in blocks {
        m.entry(*id).or_default().push((*index, bytes.clone()));
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Gathered, each ID's blocks are the same and in the same order, and
    /// the blocks of the IDs not gathered keep their order among
    /// themselves; after a stop each ID has had a part of its blocks from
    /// the start.
    #[test]
    fn gathering_keeps_each_ids_blocks(
        start in start_index(),
        data in interleaved_frames(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
        gather in prop::collection::vec(0u8..14, 0..12),
        stop_after in prop::option::of(1usize..400),
    ) {
        let (plain, plain_out) = run(FrameMode::MemAligned, start, &data, &[], false, None, &[]);
        let (got, got_out) = run(FrameMode::MemAligned, start, &data, &cuts, false, stop_after, &gather);
        let (want, got_ids) = (per_id(&plain.blocks), per_id(&got.blocks));
        let others = |l: &Log| -> Vec<(u8, u64, Vec<u8>)> {
            l.blocks.iter().filter(|b| !gather.contains(&b.0)).cloned().collect()
        };
        if got_out == Outcome::Stopped {
            for (id, blocks) in &got_ids {
                let all = &want[id];
                prop_assert!(blocks.len() <= all.len() && all[..blocks.len()] == blocks[..], "ID {:#x}", id);
            }
        } else {
            prop_assert_eq!(&plain_out, &got_out);
            prop_assert_eq!(&want, &got_ids);
            prop_assert_eq!(others(&plain), others(&got));
        }
    }

    /// A sink that stops at an empty block stops there gathered too, each
    /// ID having had all its blocks before it and none after.
    #[test]
    fn gathering_stops_at_an_empty_block_as_in_order(
        start in start_index(),
        data in frames_with_empty_blocks(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
        gather in prop::collection::vec(0u8..14, 0..12),
    ) {
        let sink = || Log { stop_on_empty: true, ..Log::default() };
        let (plain, plain_out) = run_into(sink(), FrameMode::MemAligned, start, &data, &[], false, &[]);
        let (got, got_out) = run_into(sink(), FrameMode::MemAligned, start, &data, &cuts, false, &gather);
        prop_assert_eq!(&plain_out, &got_out);
        prop_assert_eq!(per_id(&plain.blocks), per_id(&got.blocks));
    }

    #[test]
    fn any_split_gives_same_blocks(
        mode in mode(),
        start in start_index(),
        data in trace_bytes(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        stop_after in prop::option::of(1usize..20),
    ) {
        let (whole, whole_out) = run(mode, start, &data, &[], false, stop_after, &[]);
        let (split, split_out) = run(mode, start, &data, &cuts, true, stop_after, &[]);
        prop_assert_eq!(&whole.blocks, &split.blocks);
        prop_assert_eq!(whole_out, split_out);
        for (id, _, bytes) in &whole.blocks {
            prop_assert!(*id < 0x80);
            prop_assert!(bytes.len() <= 15);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        mode in mode(),
        start in start_index(),
        data in prop::collection::vec(any::<u8>(), 0..700),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let (whole, _) = run(mode, start, &data, &[], true, None, &[]);
        let (split, _) = run(mode, start, &data, &cuts, false, None, &[]);
        prop_assert_eq!(whole.blocks, split.blocks);
    }
}

#[test]
fn pushes_after_error_or_stop_are_refused_until_reset() {
    let mut d = Deformatter::new(FrameMode::Tpiu {
        fsync: true,
        hsync: false,
    });
    let mut log = Log::default();
    let mut bad = vec![0xff, 0xff, 0xff, 0x7f, 0x03, 0x00, 0x00, 0x00];
    bad.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
    assert!(d.push(0, &bad, &mut log).is_err());
    assert!(d.push(12, &[0; 4], &mut log).is_err());
    d.reset();
    assert_eq!(d.push(100, &[0; 4], &mut log), Ok(Flow::Continue));

    let mut d = Deformatter::new(FrameMode::MemAligned);
    let mut log = Log {
        stop_after: Some(1),
        ..Log::default()
    };
    let mut frame = [0u8; 16];
    frame[0] = 0x21;
    assert_eq!(d.push(0, &frame, &mut log), Ok(Flow::Stop));
    assert_eq!(d.stream_position(), 16);
    assert_eq!(d.push(16, &frame, &mut log), Ok(Flow::Stop));
    assert_eq!(d.finish(&mut log), Ok(()));
    assert_eq!(log.blocks.len(), 1);
}
