//! Recovery mode (`decode --recover`, issue 15 "keep going after damage"):
//! identical to the exact decode on undamaged captures; past a fatal
//! decoder error it reports the gap and realigns at the next sync point.

#[path = "support/realign.rs"]
mod realign;
// The trace units and buffer plan the fuzz targets build from bytes.
#[path = "../fuzz/fuzz_targets/common/mod.rs"]
mod units;

use std::path::{Path, PathBuf};

use realign::Capture;
use tracesight::element::{self, ElementKind, UnsyncReason};
use tracesight::protocol::etm4::decoder::DecoderOptions;
use tracesight::session::{run, Event, RunOptions, RunSummary};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

fn load(name: &str) -> Option<Capture> {
    let Some(root) = fixtures() else {
        eprintln!("fixtures not found; skipped");
        return None;
    };
    Some(Capture::load(&root.join(name), None).unwrap_or_else(|e| panic!("{name}: {e}")))
}

/// Everything a run reports, as text, and its summary.
fn everything(cap: &Capture, data: &[u8], recover: bool) -> (String, RunSummary) {
    let opts = RunOptions { elements: true, decoder: DecoderOptions { recover, ..Default::default() }, ..Default::default() };
    let mut out = String::new();
    let summary = run(&cap.plan, data, &opts, |ev| match ev {
        Event::Packet { source, stream_id, packet, raw } => packet.write_opencsd(&mut out, source, stream_id, raw, false),
        Event::Element { element: e, .. } => element::write_opencsd_line(&mut out, e),
        Event::Message { text, .. } => {
            out.push_str(text);
            out.push('\n');
        }
        Event::Skipped { trace_id, reason } => out.push_str(&format!("skipped 0x{trace_id:x}: {reason}\n")),
        Event::EndOfTrace { stream_id, .. } => out.push_str(&format!("end 0x{stream_id:x}\n")),
        Event::Spec { .. } | Event::TransactionFailed { .. } => {}
        Event::Batch { batch, .. } => panic!("a batch in a run that did not ask for them: {batch:?}"),
    })
    .unwrap();
    (out, summary)
}

#[test]
fn recover_equals_exact_on_undamaged_captures() {
    // ETMv4 formatted and raw, ETE with bad packets it resynchronises from
    // (not fatal), ETMv3 and PTM together, PTM raw with a return stack.
    for name in ["juno_r1_1", "juno-ret-stck", "infrastructure", "001-ack_test", "TC2", "Snowball", "tc2-ptm-rstk-t32"] {
        let Some(cap) = load(name) else { return };
        let (exact, se) = everything(&cap, &cap.data, false);
        let (recov, sr) = everything(&cap, &cap.data, true);
        assert!(!exact.is_empty(), "{name}");
        assert!(exact == recov, "{name}: --recover changed the listing of an undamaged capture");
        assert_eq!((se.packets, se.elements, se.fatal), (sr.packets, sr.elements, sr.fatal), "{name}");
    }
}

/// A flip at `byte` (bit `bit`) of `name` that stops the exact decode:
/// recovery mode goes on, reports the gap and realigns.
fn recovered_flip(name: &str, byte: usize, bit: u8, tag: &str) {
    let Some(cap) = load(name) else { return };
    let mut data = cap.data.clone();
    data[byte] ^= 1 << bit;
    let (exact, se) = everything(&cap, &data, false);
    let (recov, sr) = everything(&cap, &data, true);
    assert!(se.fatal.is_some(), "{name}: the exact decode should stop at this flip");
    assert!(sr.fatal.is_none(), "{name}: recovery mode stopped: {:?}", sr.fatal);
    assert!(sr.elements > se.elements && recov.len() > exact.len());
    // The message says where and what was dropped, the element why.
    let msg = recov.lines().find(|l| l.contains("recovery: fatal error at TrcIdx=")).expect("recovery message");
    assert!(msg.starts_with(tag), "{msg}");
    assert!(recov.contains("OCSD_GEN_TRC_ELEM_NO_SYNC( [fatal-error-resync])"));
    // Every trace ID reaches its end of trace.
    assert_eq!(recov.matches("OCSD_GEN_TRC_ELEM_EO_TRACE").count(), realign::listing(&cap.plan, &cap.data, false).elements.len());
    let clean = realign::listing(&cap.plan, &cap.data, false);
    let damaged = realign::listing(&cap.plan, &data, true);
    assert_eq!(realign::first_difference(&clean, &damaged, byte as u64), None, "{name}");
    assert!(!realign::realigned(&clean, &realign::listing(&cap.plan, &data, false), byte as u64));
    // The gap element is the model's NO_SYNC with its own reason.
    let mut seen = false;
    let opts = RunOptions { elements: true, decoder: DecoderOptions { recover: true, ..Default::default() }, ..Default::default() };
    run(&cap.plan, &data, &opts, |ev| {
        if let Event::Element { element: e, .. } = ev {
            seen |= e.kind == ElementKind::NoSync(UnsyncReason::FatalError);
        }
    })
    .unwrap();
    assert!(seen);
}

/// ETMv3 data of TC2 (found by `examples/bitflip_realign.rs -v`, seed 1).
#[test]
fn etm3_flip_that_stops_the_data_path_is_recovered() {
    recovered_flip("TC2", 96239 / 8, (96239 % 8) as u8, "DCD_ETMV3_");
}

/// PTM with a return stack (bit 25850 of `tc2-ptm-rstk-t32`, seed 1).
#[test]
fn ptm_flip_that_stops_the_data_path_is_recovered() {
    recovered_flip("tc2-ptm-rstk-t32", 25850 / 8, (25850 % 8) as u8, "DCD_PTM_");
}

/// A bounded sample of flips over ETMv3+PTM (TC2), PTM (Snowball) and
/// ETMv4 (juno_r1_1): every one realigns in recovery mode, including those
/// that stop the exact decode.
#[test]
fn bitflip_sample_realigns_with_recover() {
    let mut stops = 0;
    for (name, flips) in [("TC2", 60), ("Snowball", 30), ("juno_r1_1", 20)] {
        let Some(cap) = load(name) else { return };
        for o in realign::measure(&cap, flips, 1) {
            assert!(o.recover, "{name}: bit {} does not realign with --recover: {:?}", o.bit, o.difference);
            stops += o.exact_stopped as usize;
        }
    }
    assert!(stops > 0, "the sample should hold flips that stop the exact decode");
}

/// A raw ETMv3 buffer whose last packet is a data packet (which the
/// decoder refuses as fatal) only reached when the end of trace flushes the
/// parser. The exact run's listing then ends without an end-of-trace, as
/// trc_pkt_lister's does, and its summary must still say the decode stopped;
/// recovery mode goes past it. Found by the `runner_routing` fuzz target
/// (crash-cd804af6), which took the exact run for one that did not stop.
#[test]
fn a_stop_on_the_flushed_last_packet_is_reported() {
    use std::sync::Arc;
    use tracesight::element::MemSpace;
    use tracesight::image::memory::MemoryImage;

    // Cycle accurate, timestamps, branch output, 32-bit context IDs and
    // data trace (ETMCR bits 2-3), as TC2's ETM_0 otherwise; raw trace.
    let mut image = MemoryImage::new();
    image.add_bytes(0x1000, vec![0xff; 16], MemSpace::ANY);
    let plan = units::plan(vec![units::source(2, 0x1f, 0x10)], false, Arc::new(image));
    // Async, A-sync, a branch, a periodic I-sync, a P-header, then the
    // first byte of a data packet (0x2e) as the buffer's last byte.
    let mut data = vec![0xff, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x0d];
    data.extend_from_slice(&[0x08, 0x00, 0x28, 0x00, 0x40, 0x00, 0x00, 0x28, 0x00, 0x40, 0x80, 0x2e]);
    let cap = Capture { name: "raw ETMv3".into(), plan, data: Vec::new() };
    let (exact, se) = everything(&cap, &data, false);
    let (recov, sr) = everything(&cap, &data, true);
    assert!(exact.contains("Data Tracing decode not supported"), "{exact}");
    assert!(!exact.contains("OCSD_GEN_TRC_ELEM_EO_TRACE"), "{exact}");
    assert_eq!(se.fatal, None, "the data path answered every block");
    let stop = se.fatal_at_end.expect("the exact decode stopped on its last packet and must say so");
    assert!(stop.contains("trace ID 0x10"), "{stop}");
    assert_eq!((sr.fatal, sr.fatal_at_end), (None, None), "recovery mode goes past the error");
    assert!(recov.contains("recovery: fatal error at TrcIdx=21"), "{recov}");
    assert!(recov.contains("OCSD_GEN_TRC_ELEM_EO_TRACE"), "{recov}");
    // Up to the error the two listings are the same.
    let cut = exact.find("DCD_ETMV3_").unwrap();
    assert_eq!(exact[..cut], recov[..cut]);
}
