//! The program image (`MemoryImage`): regions added from bytes and from a
//! file (start, length, offset and memory space from the input, including
//! ranges that reach the top of the address space), then reads.
//!
//! Input: a sequence of 12-byte operations `[op, space, a0..a7, n0, n1]`
//! where `a` is a little-endian address and `n` a length; `op % 4`: 0 adds
//! `n % 64` bytes taken from the input, 1 maps the input (as a file) at `a`
//! with offset `n0` and length `n1` (0: the whole file), 2 reads `n % 256`
//! bytes, 3 reads a 32- and a 16-bit word.
//!
//! Checks: a read never returns more than asked, and agrees with the word
//! reads: a 32-bit read succeeds exactly when 4 bytes can be read there, with
//! the same value.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use tracesight::element::MemSpace;
use tracesight::image::memory::MemoryImage;

const SPACES: [MemSpace; 6] = [MemSpace::ANY, MemSpace::EL1N, MemSpace::EL1S, MemSpace::EL2, MemSpace::N, MemSpace::S];

fuzz_target!(|input: &[u8]| {
    let path = std::env::temp_dir().join(format!("tracesight-fuzz-image-{}.bin", std::process::id()));
    if let Ok(mut f) = std::fs::File::create(&path) {
        let _ = f.write_all(input);
    }
    let mut im = MemoryImage::new();
    for (k, op) in input.chunks_exact(12).take(64).enumerate() {
        let space = SPACES[op[1] as usize % SPACES.len()];
        let addr = u64::from_le_bytes(op[2..10].try_into().unwrap());
        let n = u16::from_le_bytes([op[10], op[11]]) as usize;
        match op[0] % 4 {
            0 => {
                let from = (k * 12) % input.len().max(1);
                let bytes: Vec<u8> = input.iter().cycle().skip(from).take(n % 64).copied().collect();
                im.add_bytes(addr, bytes, space);
            }
            1 => {
                let len = (op[11] != 0).then_some(op[11] as u64);
                let _ = im.add_file(&path, addr, len, op[10] as u64, space);
            }
            2 => {
                let mut buf = vec![0u8; n % 256];
                let got = im.read(addr, space, &mut buf);
                assert!(got <= buf.len());
            }
            _ => {
                let mut buf = [0u8; 4];
                let got = im.read(addr, space, &mut buf);
                match im.read_u32(addr, space) {
                    Some(v) => assert!(got == 4 && v == u32::from_le_bytes(buf), "read_u32 disagrees with read"),
                    None => assert!(got < 4, "read found 4 bytes where read_u32 found none"),
                }
                let _ = im.read_u16(addr, space);
            }
        }
    }
    let _ = im.regions();
    let _ = std::fs::remove_file(&path);
});
