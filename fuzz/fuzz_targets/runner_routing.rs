//! Multi-ID routing through `session::Runner` (frame demultiplexing, one
//! parser and decoder chain per trace ID) over up to four sources of any
//! protocol, formatted or raw.
//!
//! Input layout: `[shape, (kind, cfg) x n, cut, code x 16, trace...]`.
//! * `shape`: bits 0-1 sources - 1 (IDs 0x10, 0x11, ...), bit 2 raw
//!   (unformatted: only the first source), bit 3 packets only.
//! * `kind`, `cfg`: per source, 0 ETE/ETMv4, 1 PTM, 2 ETMv3 and its
//!   configuration byte (see `common::source`).
//! * `cut`: where the trace is cut (as a fraction of 256) into two feeds, the
//!   state saved and the run resumed from it.
//! * 16 bytes of program image at 0x1000.
//!
//! Checks: a run in recovery mode never stops on a decoder error; when the
//! exact run does not stop, recovery mode lists exactly what it lists; a state
//! saved between two feeds loads again and the run goes on from it.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use tracesight::element;
use tracesight::protocol::etm4::decoder::DecoderOptions;
use tracesight::session::{run, BufferPlan, Event, RunOptions, Runner};

fn listing(plan: &BufferPlan, data: &[u8], opts: &RunOptions) -> (String, Option<String>) {
    let mut out = String::new();
    let s = run(plan, data, opts, |ev| match ev {
        Event::Packet { source, stream_id, packet, raw } => packet.write_opencsd(&mut out, source, stream_id, raw, false),
        Event::Element { element: e, .. } => element::write_opencsd_line(&mut out, e),
        Event::Message { text, .. } => out.push_str(text),
        _ => {}
    })
    .expect("run");
    (out, s.fatal.or(s.fatal_at_end))
}

fuzz_target!(|input: &[u8]| {
    let Some(&shape) = input.first() else { return };
    let n = (shape & 3) as usize + 1;
    let head = 1 + 2 * n + 1 + 16;
    if input.len() < head {
        return;
    }
    let sources = (0..n).map(|i| common::source(input[1 + 2 * i], input[2 + 2 * i], 0x10 + i as u8)).collect();
    let cut = input[1 + 2 * n] as usize;
    let plan = common::plan(sources, shape & 4 == 0, common::image(&input[head - 16..head]));
    let data = &input[head..];
    let exact = RunOptions { elements: shape & 8 == 0, ..RunOptions::default() };
    let recover = RunOptions { decoder: DecoderOptions { recover: true, ..DecoderOptions::default() }, ..exact.clone() };
    let (e_text, e_fatal) = listing(&plan, data, &exact);
    let (r_text, r_fatal) = listing(&plan, data, &recover);
    // A stop on the flushed end counts as a stop for both runs.
    assert_eq!(r_fatal, None, "recovery mode stopped");
    if e_fatal.is_none() {
        assert!(e_text == r_text, "recovery mode changed a run that does not stop");
    }
    // Two feeds, with a save and resume between them.
    let at = (data.len() * cut / 256) & !15;
    let mut r = Runner::new(&plan, &recover);
    if !r.feed(&data[..at], &mut |_| {}) {
        return;
    }
    if let Some(state) = r.save_state() {
        let mut resumed = Runner::resume(&plan, &recover, &state).expect("a saved state loads");
        resumed.feed(&data[at..], &mut |_| {});
        resumed.finish(&mut |_| {});
    }
});
