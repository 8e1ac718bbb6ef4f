//! Frame demultiplexer on arbitrary input.
//!
//! Input layout: `[mode, split_a, split_b, data...]`.
//! * `mode` bits 0-2 pick the [`FrameMode`], bit 3 turns the raw monitor on,
//!   bit 4 pushes the data in three pieces instead of two, bit 5 makes the
//!   sink answer `Flow::Stop` after `split_b % 16` blocks, bit 6 has the
//!   deformatter gather the blocks of half the trace IDs (picked by
//!   `split_b`) into runs across the others' (no stop then).
//! * `split_a` / `split_b` place the cuts, as fractions of the data length.
//!
//! Besides never panicking, the demultiplexer must deliver the same blocks
//! (and end in the same kind of error) however the data is split, and every block
//! must carry a 7-bit ID and fit inside the stream it came from. Gathered,
//! each ID's blocks are the same, in the same order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracesight::frame::{Deformatter, Flow, FrameError, FrameMode, FrameSink, RawFrame};

const MODES: [FrameMode; 6] = [
    FrameMode::MemAligned,
    FrameMode::Tpiu {
        fsync: false,
        hsync: false,
    },
    FrameMode::Tpiu {
        fsync: true,
        hsync: false,
    },
    FrameMode::Tpiu {
        fsync: false,
        hsync: true,
    },
    FrameMode::Tpiu {
        fsync: true,
        hsync: true,
    },
    FrameMode::Dstream,
];

/// Records every block; optionally stops after a number of them.
struct Recorder {
    blocks: Vec<(u8, u64, Vec<u8>)>,
    stop_after: Option<usize>,
    raw_events: usize,
}

impl FrameSink for Recorder {
    fn data(&mut self, id: u8, index: u64, bytes: &[u8]) -> Flow {
        assert!(id <= 0x7f, "trace ID {id:#x} is wider than 7 bits");
        self.blocks.push((id, index, bytes.to_vec()));
        match self.stop_after {
            Some(n) if self.blocks.len() >= n => Flow::Stop,
            _ => Flow::Continue,
        }
    }

    fn raw(&mut self, event: RawFrame<'_>) {
        // Touch the payload so a bad slice would show up.
        let n = match event {
            RawFrame::Packed { bytes, .. } => bytes.len(),
            RawFrame::IdData { bytes, .. } => bytes.len(),
            RawFrame::DstreamFooter { bytes } => bytes.len(),
        };
        self.raw_events += n.min(1);
    }
}

struct Outcome {
    blocks: Vec<(u8, u64, Vec<u8>)>,
    error: Option<FrameError>,
    position: u64,
}

fn run(
    mode: FrameMode,
    raw: bool,
    stop_after: Option<usize>,
    data: &[u8],
    cuts: &[usize],
    gather: &[u8],
) -> Outcome {
    let mut demux = Deformatter::new(mode);
    demux.set_raw_monitor(raw);
    demux.set_gather(gather);
    let mut sink = Recorder {
        blocks: Vec::new(),
        stop_after,
        raw_events: 0,
    };
    let mut error = None;
    let mut stopped = false;
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&data.len())) {
        match demux.push(start as u64, &data[start..end], &mut sink) {
            Ok(Flow::Continue) => {}
            Ok(Flow::Stop) => {
                stopped = true;
                break;
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
        start = end;
    }
    if error.is_none() && !stopped {
        error = demux.finish(&mut sink).err();
    }
    Outcome {
        blocks: sink.blocks,
        error,
        position: demux.stream_position(),
    }
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let (sel, a, b) = (input[0], input[1] as usize, input[2] as usize);
    let data = &input[3..];
    let mode = MODES[(sel & 7) as usize % MODES.len()];
    let raw = sel & 0x08 != 0;
    let stop_after = (sel & 0x20 != 0).then_some(b % 16);

    let len = data.len();
    let c1 = a * len / 256;
    let mut cuts = vec![c1];
    if sel & 0x10 != 0 {
        cuts.push(c1 + b * (len - c1) / 256);
    }

    let split = run(mode, raw, stop_after, data, &cuts, &[]);
    let whole = run(mode, false, stop_after, data, &[], &[]);
    if sel & 0x40 != 0 && stop_after.is_none() {
        let ids: Vec<u8> = (0..0x80u8).filter(|id| (id ^ b as u8) & 1 == 0).collect();
        let gathered = run(mode, raw, None, data, &cuts, &ids);
        let per_id = |o: &Outcome, id: u8| -> Vec<(u64, Vec<u8>)> {
            o.blocks.iter().filter(|x| x.0 == id).map(|x| (x.1, x.2.clone())).collect()
        };
        for id in 0..0x80u8 {
            assert_eq!(per_id(&gathered, id), per_id(&whole, id), "gathered, ID {id:#x} got other blocks");
        }
        assert_eq!(gathered.blocks.len(), whole.blocks.len(), "gathered, blocks of no ID delivered");
        assert_eq!(gathered.error, split.error, "gathered, another error");
    }

    assert_eq!(
        split.blocks, whole.blocks,
        "blocks depend on how the input is split"
    );
    match (&split.error, &whole.error) {
        // A sync error reports where the failing extraction call started
        // (as OpenCSD does), and a push starts a new call: the index may only
        // move forward, up to the start of the push that failed.
        (Some(FrameError::BadFsync { index: s }), Some(FrameError::BadFsync { index: w }))
        | (Some(FrameError::BadHsync { index: s }), Some(FrameError::BadHsync { index: w })) => {
            assert!(
                s >= w,
                "split run reports the sync error at {s}, before {w}"
            );
        }
        (s, w) => assert_eq!(s, w, "errors depend on how the input is split"),
    }

    // Frames carry at most 15 data bytes per 16 input bytes.
    let delivered: usize = split.blocks.iter().map(|(_, _, d)| d.len()).sum();
    assert!(
        delivered <= len,
        "{delivered} bytes delivered from {len} bytes of input"
    );
    for (_, index, bytes) in &split.blocks {
        assert!(
            index + bytes.len() as u64 <= len as u64,
            "block at {index} runs past the end of the data"
        );
    }
    assert!(
        split.position <= len as u64,
        "stream position {} past the data",
        split.position
    );
});
