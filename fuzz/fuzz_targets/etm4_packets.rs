//! ETMv4 / ETE packet parser on arbitrary input, under a trace unit
//! configuration chosen by the first bytes.
//!
//! Input layout: `[c0, c1, c2, c3, c4, c5, split_a, split_b, data...]`.
//! * `c0`: bit 0 ETE (else ETMv4), bit 1 conditional trace implemented,
//!   bit 2 TRCIDR0.COMMOPT, bits 3-4 TRCIDR0.QSUPP, bit 5 cycle counting
//!   implemented, bit 6 64-bit addresses, bit 7 push in three pieces.
//! * `c1`: bits 0-3 TRCIDR2.CCSIZE, bits 4-5 VMID size (0/8/16/32 bits),
//!   bit 6 32-bit context ID, bit 7 data trace enabled (TRCCONFIGR.DA).
//! * `c2`, `c3`: TRCCONFIGR bits 0-7 and 8-15 (BB, CCI, CID, VMID, COND,
//!   TS, RS, QE, VMIDOPT).
//! * `c4`: bits 0-2 minor architecture version, bits 3-5 the core, bit 6
//!   timestamp markers + ITE, bit 7 64-bit (else 48-bit) timestamps.
//! * `c5`: TRCIDR8.MAXSPEC.
//! * `split_a` / `split_b`: where the data is cut, as fractions of its length.
//!
//! Every packet is printed both ways; the raw bytes of all packets must add
//! up to the input, and each JSON line must be valid JSON. A second parser
//! whose sink only counts (`PacketSink::COUNTS`, which takes runs of
//! packets as numbers) must count the same packets and bytes and be left
//! in the same state after every push.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracesight::protocol::etm4::{display, Etm4Config, Etm4Parser, Packet, PacketSink};

/// Packets and bytes, counted as `decode --summary --packets` counts them.
#[derive(Default)]
struct Counter {
    packets: usize,
    bytes: usize,
}

impl PacketSink for Counter {
    const COUNTS: bool = true;

    fn packet(&mut self, _: &Packet, raw: &[u8]) -> bool {
        self.packets += 1;
        self.bytes += raw.len();
        true
    }

    fn counted(&mut self, packets: usize, bytes: usize) {
        self.packets += packets;
        self.bytes += bytes;
    }
}

const CORES: [Option<&str>; 8] = [
    None,
    Some("Cortex-A53"),
    Some("Cortex-A710"),
    Some("Cortex-M55"),
    Some("Cortex-M3"),
    Some("Cortex-R52"),
    Some("Cortex-R5"),
    Some("ARMV8-M"),
];

const HEADER: usize = 8;

fn config(c: &[u8]) -> Etm4Config {
    let (c0, c1, c2, c3, c4, c5) = (
        c[0] as u32,
        c[1] as u32,
        c[2] as u32,
        c[3] as u32,
        c[4] as u32,
        c[5] as u32,
    );
    let ete = c0 & 1 != 0;
    let minor = c4 & 7;
    let mut idr0 = (1 << 5) | (1 << 9); // branch broadcast, return stack
    idr0 |= ((c0 >> 1) & 1) << 6; // TRCCOND
    idr0 |= ((c0 >> 5) & 1) << 7; // TRCCCI
    idr0 |= ((c0 >> 2) & 1) << 29; // COMMOPT
    idr0 |= ((c0 >> 3) & 3) << 15; // QSUPP
    idr0 |= (if c4 & 0x80 != 0 { 0x8 } else { 0x6 }) << 24; // TSSIZE
    if c4 & 0x40 != 0 {
        idr0 |= (1 << 23) | (1 << 22); // TSMARK, ITE
    }
    let vmid_size = [0, 1, 2, 4][((c1 >> 4) & 3) as usize];
    let idr2 = (if c0 & 0x40 != 0 { 0x8 } else { 0x4 })
        | (if c1 & 0x40 != 0 { 0x4 << 5 } else { 0 })
        | (vmid_size << 10)
        | ((c1 & 0xf) << 25);
    let configr = c2 | (c3 << 8) | ((c1 >> 7) << 16);
    let idr1 = if ete {
        0x4100_fff0
    } else {
        0x4100_f403 | (minor << 4)
    };
    let devarch = 0x4770_5a13 | (minor << 16);
    let core = CORES[((c4 >> 3) & 7) as usize];
    let reg = |name: &str| -> Option<u64> {
        let v = match name {
            "TRCIDR0" => idr0,
            "TRCIDR1" => idr1,
            "TRCIDR2" => idr2,
            "TRCIDR8" => c5,
            "TRCCONFIGR" => configr,
            "TRCTRACEIDR" => 0x10,
            "TRCDEVARCH" if ete => devarch,
            _ => return None,
        };
        Some(v as u64)
    };
    Etm4Config::from_registers(reg, ete, core).expect("every register is supplied")
}

fuzz_target!(|input: &[u8]| {
    if input.len() < HEADER {
        return;
    }
    let cfg = config(&input[..6]);
    let (a, b) = (input[6] as usize, input[7] as usize);
    let data = &input[HEADER..];
    let len = data.len();
    let c1 = a * len / 256;
    let mut cuts = vec![c1];
    if input[0] & 0x80 != 0 {
        cuts.push(c1 + b * (len - c1) / 256);
    }
    cuts.push(len);

    let ete = cfg.is_ete();
    let mut parser = Etm4Parser::new(&cfg);
    let mut counting = Etm4Parser::new(&cfg);
    let mut counter = Counter::default();
    let mut raw_total = 0usize;
    let mut packets = 0usize;
    let mut line = String::new();
    let mut sink = |pkt: &Packet, raw: &[u8]| {
        raw_total += raw.len();
        packets += 1;
        line.clear();
        display::write_opencsd_line(&mut line, 0x10, pkt, raw, ete);
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "not one line: {line:?}"
        );
        line.clear();
        display::write_json(&mut line, 0x10, pkt, raw);
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&line) {
            panic!("invalid JSON {line:?}: {e}");
        }
    };
    let mut start = 0;
    for &end in &cuts {
        parser.push(start as u64, &data[start..end], &mut sink);
        counting.push_until(start as u64, &data[start..end], &mut counter);
        assert!(
            parser.save_state() == counting.save_state(),
            "a counting sink left the parser elsewhere after {end} bytes"
        );
        start = end;
    }
    parser.finish(&mut sink);
    counting.finish(&mut |_: &Packet, raw: &[u8]| {
        counter.packets += 1;
        counter.bytes += raw.len();
    });
    assert_eq!((counter.packets, counter.bytes), (packets, raw_total));
    assert_eq!(
        raw_total, len,
        "packets account for {raw_total} of {len} input bytes"
    );
    assert_eq!(parser.bytes_in(), len as u64);
});
