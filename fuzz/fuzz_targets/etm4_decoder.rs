//! The ETE / ETMv4 element decoder: packets parsed from the input decoded
//! into elements over a small program image, with the speculation view, and
//! in exact or recovery mode.
//!
//! Input layout: `[cfg, flags, code_len, code..., trace...]`.
//! * `cfg`: the trace unit (see `common::etm4`: ETE or ETMv4, cycle counts,
//!   return stack, timestamps, COMMOPT, MAXSPEC).
//! * `flags`: bit 0 speculation view, bit 1 recovery mode, bit 2
//!   `-src_addr_n`, bit 3 `-aa64_opcode_chk`, bit 4 the long way (no atoms
//!   committed as they arrive), bit 5 only the speculation records of
//!   losses, bit 6 elements of committed atoms in batches (an index build),
//!   bit 7 with bit 6 those batches merged across packets (the decoder
//!   keeps one open until asked after the trace, as the session asks after
//!   each block).
//! * `code_len` bytes (at most 64) of program image at 0x1000; the rest is
//!   the trace.
//!
//! Checks besides "no panic, no hang": every element and speculation record
//! names a packet already seen; in recovery mode the decoder never stays
//! stopped.
#![no_main]

#[path = "common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use tracesight::protocol::etm4::decoder::{DecoderOptions, DecoderOutput, Etm4Decoder};
use tracesight::protocol::etm4::{Etm4Parser, Packet};
use tracesight::protocol::Decoder;

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let (c, flags) = (input[0], input[1]);
    let code_len = (input[2] as usize).min(64).min(input.len() - 3);
    let code = &input[3..3 + code_len];
    let trace = &input[3 + code_len..];
    let cfg = common::etm4(c, 0x10);
    let opts = DecoderOptions {
        speculation: flags & 1 != 0,
        recover: flags & 2 != 0,
        src_addr_n: flags & 4 != 0,
        aa64_opcode_check: flags & 8 != 0,
        long_way: flags & 16 != 0,
        spec_losses_only: flags & 32 != 0,
        // Small, so that a walk over the image stays cheap.
        instr_range_limit: 4096,
    };
    let mut decoder = Etm4Decoder::new(&cfg, common::image(code), opts);
    decoder.core_mut().batched = flags & 64 != 0;
    decoder.core_mut().merge_batches = flags & 192 == 192;
    let mut parser = Etm4Parser::new(&cfg);
    let mut last_index = 0u64;
    let check = |o: DecoderOutput<'_>, last: u64| match o {
        DecoderOutput::Element(e) => assert!(e.index <= last, "element at {} after packet {last}", e.index),
        DecoderOutput::Spec(r) => assert!(r.created <= last && r.resolved.map_or(true, |i| i <= last)),
        DecoderOutput::Batch(b) => assert!(b.index <= last && b.elements() > 0, "batch {b:?} after packet {last}"),
        _ => {}
    };
    let mut stopped = false;
    parser.push(0, trace, &mut |pk: &Packet, _raw: &[u8]| {
        if stopped {
            return;
        }
        last_index = pk.index;
        decoder.packet(pk, &mut |o| check(o, pk.index));
        if decoder.is_fatal() {
            if opts.recover {
                decoder.recover(&mut |o| check(o, pk.index));
                assert!(!decoder.is_fatal(), "recovery left the decoder stopped");
            } else {
                stopped = true;
            }
        }
    });
    decoder.flush_batch(&mut |o| check(o, last_index));
    if !stopped {
        let last = last_index;
        parser.finish(&mut |pk: &Packet, _raw: &[u8]| decoder.packet(pk, &mut |o| check(o, pk.index.max(last))));
        if !decoder.is_fatal() {
            decoder.finish(&mut |o| check(o, u64::MAX));
        }
    }
});
