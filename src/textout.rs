//! Number formatting for the text listings without `core::fmt`: listings print
//! tens of millions of numbers, and the formatting machinery dominated the cost.

const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

/// Append bytes known to be ASCII (digits and letters built here).
#[inline]
fn push_ascii(out: &mut String, bytes: &[u8]) {
    debug_assert!(bytes.is_ascii());
    // SAFETY: every caller passes ASCII bytes it produced from the digit
    // tables above, so the string stays valid UTF-8.
    unsafe { out.as_mut_vec().extend_from_slice(bytes) }
}
const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// Decimal.
#[inline]
pub fn dec(out: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    push_ascii(out, &buf[i..]);
}

/// Hexadecimal without prefix, at least `width` digits (zero padded).
#[inline]
fn hex_with(out: &mut String, v: u64, width: usize, digits: &[u8; 16]) {
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    let mut x = v;
    loop {
        i -= 1;
        buf[i] = digits[(x & 0xf) as usize];
        x >>= 4;
        if x == 0 {
            break;
        }
    }
    let len = buf.len() - i;
    for _ in len..width.min(16) {
        out.push('0');
    }
    push_ascii(out, &buf[i..]);
}

/// Lower-case hexadecimal, at least `width` digits.
#[inline]
pub fn hex(out: &mut String, v: u64, width: usize) {
    hex_with(out, v, width, HEX_LOWER);
}

/// Upper-case hexadecimal, at least `width` digits.
#[inline]
pub fn hex_upper(out: &mut String, v: u64, width: usize) {
    hex_with(out, v, width, HEX_UPPER);
}

/// `0x` and two lower-case hex digits, as trc_pkt_lister prints packet bytes.
#[inline]
pub fn byte(out: &mut String, b: u8) {
    push_ascii(out, &[b'0', b'x', HEX_LOWER[(b >> 4) as usize], HEX_LOWER[(b & 0xf) as usize], b' ']);
}

/// The start of a trc_pkt_lister packet line, up to the packet's description:
/// `Idx:<offset>; ID:<hex id>; [<raw bytes>];<TAB>`. Shared by every protocol's
/// listing so they cannot drift apart.
pub fn packet_prefix(out: &mut String, index: u64, stream_id: u8, raw: &[u8]) {
    out.push_str("Idx:");
    dec(out, index);
    out.push_str("; ID:");
    hex(out, stream_id as u64, 0);
    out.push_str("; [");
    for &b in raw {
        byte(out, b);
    }
    out.push_str("];\t");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_core_fmt_prints_them() {
        for v in [0u64, 1, 9, 10, 255, 4096, 0xdead_beef, u64::MAX] {
            let mut s = String::new();
            dec(&mut s, v);
            assert_eq!(s, v.to_string());
            for w in [0, 1, 8, 12, 16] {
                let mut s = String::new();
                hex(&mut s, v, w);
                assert_eq!(s, format!("{v:0w$x}"));
                let mut s = String::new();
                hex_upper(&mut s, v, w);
                assert_eq!(s, format!("{v:0w$X}"));
            }
        }
        let mut s = String::new();
        byte(&mut s, 0x9d);
        assert_eq!(s, "0x9d ");
    }
}

