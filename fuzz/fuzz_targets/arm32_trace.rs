//! PTM and ETMv3 packet parsers and element decoders on arbitrary input, under
//! register values taken from the first bytes.
//!
//! Input layout: `[sel, cr0, cr1, cr2, cr3, ccer_hi, split, data...]`.
//! * `sel`: bit 0 PTM (else ETMv3), bit 1 run the element decoder, bit 2
//!   also map the data itself as the program image at 0x8000 (so the walk
//!   meets real, if random, A32/T32 words), bits 3-4 the core.
//! * `cr0..cr3`: ETMCR, little-endian.
//! * `ccer_hi`: ETMCCER bits 22-29 (timestamps, return stack, waypoints,
//!   virtualisation, timestamp encoding and size).
//! * `split`: where the data is cut, as a fraction of its length.
//!
//! The raw bytes of all packets must add up to the input (PTM: at least); each listing line
//! must be one line (after any error message) and each JSON object valid JSON.
//! ETMv3 decoded with runs of P-headers taken whole (as summaries take them)
//! must give what packet by packet gives, and leave the same states.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use tracesight::element::MemSpace;
use tracesight::image::memory::MemoryImage;
use tracesight::protocol::Decoder;
use tracesight::protocol::decoder::DecoderOutput;
use tracesight::protocol::etm3::parser::Etm3Sink;
use tracesight::protocol::etm3::{self, Etm3Config, Etm3Decoder, Etm3Packet, Etm3Parser};
use tracesight::protocol::ptm::{self, PtmConfig, PtmDecoder, PtmPacket, PtmParser};

const CORES: [&str; 4] = ["Cortex-A15", "Cortex-A9", "Cortex-R5", "Cortex-M3"];
const HEADER: usize = 7;

fn check_lines(line: &mut String, json: &str) {
    // A parser error message may precede the packet line, unterminated as
    // trc_pkt_lister prints it; the packet line itself ends the text.
    assert!(line.ends_with('\n') && line.matches('\n').count() == 1, "not one packet line: {line:?}");
    line.clear();
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(json) {
        panic!("invalid JSON {json:?}: {e}");
    }
}

/// What a decoder hands over, as debug text.
fn record(out: &mut Vec<String>, o: DecoderOutput<'_>) {
    match o {
        DecoderOutput::Element(e) => out.push(format!("{e:?}")),
        DecoderOutput::Message(m) => out.push(m.to_string()),
        _ => {}
    }
}

/// Takes P-header runs whole, as a summary's sink does.
struct Runs<'a> {
    d: &'a mut Etm3Decoder,
    out: &'a mut Vec<String>,
}

impl Etm3Sink for Runs<'_> {
    fn packet(&mut self, p: &Etm3Packet, _: &[u8]) -> bool {
        let out = &mut *self.out;
        self.d.packet(p, &mut |o| record(out, o));
        true
    }

    fn phdr_run(&mut self, index: u64, bytes: &[u8], last: &Etm3Packet, cycle_accurate: bool) -> usize {
        let out = &mut *self.out;
        self.d.phdr_run(index, bytes, last, cycle_accurate, &mut |o| record(out, o))
    }
}

/// ETMv3 decoded packet by packet and with runs: the same outputs and states.
fn etm3_runs_match(cfg: &Etm3Config, image: &Arc<MemoryImage>, data: &[u8], cut: usize) {
    let mut results = Vec::new();
    for runs in [false, true] {
        let mut parser = Etm3Parser::new(cfg);
        let mut d = Etm3Decoder::new(cfg, image.clone());
        let mut out = Vec::new();
        for (at, part) in [(0, &data[..cut]), (cut, &data[cut..])] {
            if runs {
                parser.push_until(at as u64, part, &mut Runs { d: &mut d, out: &mut out });
            } else {
                parser.push(at as u64, part, &mut |p: &Etm3Packet, _: &[u8]| d.packet(p, &mut |o| record(&mut out, o)));
            }
        }
        results.push((out, parser.save_state(), d.save_state()));
    }
    assert!(results[0] == results[1], "P-header runs decode differently");
}

fuzz_target!(|input: &[u8]| {
    if input.len() < HEADER {
        return;
    }
    let sel = input[0];
    let etmcr = u32::from_le_bytes([input[1], input[2], input[3], input[4]]);
    let ccer = (input[5] as u32) << 22;
    let data = &input[HEADER..];
    let cut = input[6] as usize * data.len() / 256;
    let core = CORES[((sel >> 3) & 3) as usize];
    let reg = |name: &str| -> Option<u64> {
        Some(match name {
            "ETMCR" => etmcr as u64,
            "ETMCCER" => ccer as u64,
            "ETMIDR" => if sel & 1 != 0 { 0x4114_f250 } else { 0x4100_f230 },
            "ETMTRACEIDR" => 0x10,
            _ => return None,
        })
    };
    let mut image = MemoryImage::new();
    if sel & 4 != 0 {
        image.add_bytes(0x8000, data.to_vec(), MemSpace::ANY);
    }
    let image = Arc::new(image);
    let decode = sel & 2 != 0;
    let mut raw_total = 0usize;
    let mut line = String::new();
    let mut json = String::new();
    // The two protocols differ only in their types and display module: one
    // body, instantiated for each.
    macro_rules! exercise {
        ($config:ident, $parser:ident, $decoder:ident, $packet:ident, $display:ident) => {{
            let cfg = $config::from_registers(reg, Some(core)).expect("every register is supplied");
            let mut parser = $parser::new(&cfg);
            let mut decoder = decode.then(|| $decoder::new(&cfg, image.clone()));
            let mut sink = |p: &$packet, raw: &[u8]| {
                raw_total += raw.len();
                $display::display::write_parser_error(&mut line, 0x10, p);
                $display::display::write_opencsd_line(&mut line, 0x10, p, raw);
                json.clear();
                $display::display::write_json(&mut json, 0x10, p, raw);
                check_lines(&mut line, &json);
                if let Some(d) = decoder.as_mut() {
                    if !d.is_fatal() {
                        d.packet(p, &mut |_| {});
                    }
                }
            };
            parser.push(0, &data[..cut], &mut sink);
            parser.push(cut as u64, &data[cut..], &mut sink);
            parser.finish(&mut sink);
            assert_eq!(parser.bytes_in(), data.len() as u64);
            if let Some(d) = decoder.as_mut() {
                d.finish(&mut |_| {});
            }
        }};
    }
    if sel & 1 != 0 {
        exercise!(PtmConfig, PtmParser, PtmDecoder, PtmPacket, ptm);
        // OpenCSD relists the zeros of a failed A-sync candidate that began in
        // an earlier block (and reads past the block); the parser reproduces
        // that, so with a split every byte is listed at least once.
        assert!(raw_total >= data.len(), "packets account for {raw_total} of {} input bytes", data.len());
    } else {
        exercise!(Etm3Config, Etm3Parser, Etm3Decoder, Etm3Packet, etm3);
        assert_eq!(raw_total, data.len(), "packets account for {raw_total} of {} input bytes", data.len());
        if decode {
            let cfg = Etm3Config::from_registers(reg, Some(core)).expect("every register is supplied");
            etm3_runs_match(&cfg, &image, data, cut);
        }
    }
});
