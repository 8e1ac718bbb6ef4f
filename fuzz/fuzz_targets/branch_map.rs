//! The image's stop maps (`MemoryImage::pass_plain`, `src/image/branchmap.rs`)
//! against classifying one instruction at a time, on arbitrary code.
//!
//! Input layout: `[sel, b0, b1, b2, split, max0, max1, starts: 8 x 2 bytes,
//! code...]`.
//! * `sel`: bits 0-1 the instruction set (A64, A32, T32, T32), bit 2 the A64
//!   opcode check, bit 3 WFI/WFE as branches, bit 4 DSB/DMB as waypoints,
//!   bit 5 an IT block open at the start, bit 6 a stop address (`until`)
//!   from the last start.
//! * `b0..b2`: the code's address (bits 0-23, any alignment).
//! * `split`: where the code is cut into two adjacent regions (a fraction).
//! * `max0, max1`: the most instructions a run may take (0: unbounded).
//! * `starts`: offsets into the code to walk from.
//!
//! For each start, when the map gives a run of `n` instructions to pass and
//! a next address, stepping from the start must meet `n` ordinary
//! instructions (readable, not waypoints, no error, none at `until`) that end
//! exactly at that address, where one more ordinary instruction follows.
//! Codes long enough to cross a page (the input repeats to 200 KiB when
//! `sel` bit 7 is set) exercise the pages' chains.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracesight::element::{InstrType, Isa, MemSpace};
use tracesight::image::instr::{self, DecodeOptions, ItState};
use tracesight::image::memory::MemoryImage;

/// One instruction at `addr` as the ETMv4 decoder reads it: `None` when not
/// readable, else whether the walk may pass it and its size.
fn step(im: &MemoryImage, isa: Isa, opts: &DecodeOptions, it: &mut ItState, addr: u64) -> Option<(bool, u64)> {
    let info = match isa {
        Isa::T32 => {
            let first = im.read_u16(addr, MemSpace::ANY)?;
            let second = if instr::t32_is_32bit(first) { im.read_u16(addr.checked_add(2)?, MemSpace::ANY)? } else { 0 };
            instr::decode(isa, first as u32, second, addr, opts, it)
        }
        _ => instr::decode(isa, im.read_u32(addr, MemSpace::ANY)?, 0, addr, opts, it),
    };
    Some(match info {
        Ok(i) => (i.itype == InstrType::Other, i.size as u64),
        Err(_) => (false, 4),
    })
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 24 {
        return;
    }
    let (head, rest) = input.split_at(23);
    let sel = head[0];
    let isa = [Isa::A64, Isa::A32, Isa::T32, Isa::T32][(sel & 3) as usize];
    let opts = DecodeOptions {
        aa64_opcode_check: sel & 4 != 0,
        wfi_wfe_branch: sel & 8 != 0,
        dsb_dmb_waypoints: sel & 16 != 0,
        track_it_block: true,
        ..Default::default()
    };
    let base = u32::from_le_bytes([head[1], head[2], head[3], 0]) as u64;
    let code: Vec<u8> = if sel & 128 != 0 { rest.iter().copied().cycle().take(200 << 10).collect() } else { rest.to_vec() };
    let split = code.len() * head[4] as usize / 256;
    let mut im = MemoryImage::new();
    im.add_bytes(base, code[..split].to_vec(), MemSpace::ANY);
    im.add_bytes(base + split as u64, code[split..].to_vec(), MemSpace::ANY);
    let max = match u16::from_le_bytes([head[5], head[6]]) {
        0 => u64::MAX,
        n => n as u64,
    };
    let starts: Vec<u64> = head[7..23].chunks_exact(2).map(|s| base + (u16::from_le_bytes([s[0], s[1]]) as u64 * 13) % code.len() as u64).collect();
    let until = (sel & 64 != 0).then(|| starts[7]);
    let mut it = ItState::default();
    if sel & 32 != 0 {
        // IT EQ: one instruction inside the block.
        let _ = instr::decode(Isa::T32, 0xbf08, 0, 0, &opts, &mut it);
    }
    for &start in &starts {
        let Some((n, next)) = im.pass_plain(isa, &opts, it, start, MemSpace::ANY, max, until) else { continue };
        assert!(n >= 1 && n < max, "a run of {n} (max {max})");
        assert!(isa != Isa::T32 || it.remaining() == 0, "a run inside an IT block");
        let (mut addr, mut walk_it) = (start, it);
        for k in 0..=n {
            assert!(Some(addr) != until, "instruction {k} from {start:#x} is at the stop address");
            let Some((plain, size)) = step(&im, isa, &opts, &mut walk_it, addr) else {
                panic!("instruction {k} from {start:#x} at {addr:#x} is not readable");
            };
            assert!(plain, "instruction {k} from {start:#x} at {addr:#x} stops the walk");
            if k == n {
                break;
            }
            addr += size;
        }
        assert_eq!(addr, next, "{n} instructions from {start:#x}");
    }
});
