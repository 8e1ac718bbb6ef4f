//! Program images from ELF files: every loadable segment (PT_LOAD) with file
//! contents is mapped at its virtual address, or relative to a load address for
//! position-independent executables and shared objects.

use std::path::Path;

use object::read::elf::{ElfFile32, ElfFile64, FileHeader, ProgramHeader};
use object::{Endianness, FileKind};

use super::memory::MemoryImage;
use super::ImageError;
use crate::element::MemSpace;
use crate::input::TraceFile;

/// A loadable segment: where it goes and where its bytes are in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub vaddr: u64,
    pub file_offset: u64,
    pub file_size: u64,
    pub executable: bool,
}

/// The PT_LOAD segments of an ELF file, with file contents.
pub fn load_segments(bytes: &[u8]) -> Result<Vec<Segment>, ImageError> {
    fn collect<Elf: FileHeader<Endian = Endianness>>(
        header: &Elf,
        data: &[u8],
    ) -> Result<Vec<Segment>, ImageError> {
        let endian = header.endian()?;
        let phdrs = header.program_headers(endian, data)?;
        Ok(phdrs
            .iter()
            .filter(|p| p.p_type(endian) == object::elf::PT_LOAD && p.p_filesz(endian).into() > 0)
            .map(|p| Segment {
                vaddr: p.p_vaddr(endian).into(),
                file_offset: p.p_offset(endian).into(),
                file_size: p.p_filesz(endian).into(),
                executable: p.p_flags(endian).contains(object::elf::PF_X),
            })
            .collect())
    }
    match FileKind::parse(bytes)? {
        FileKind::Elf64 => collect(ElfFile64::<Endianness>::parse(bytes)?.elf_header(), bytes),
        FileKind::Elf32 => collect(ElfFile32::<Endianness>::parse(bytes)?.elf_header(), bytes),
        kind => Err(ImageError::NotElf { kind }),
    }
}

/// Parse `PATH[@ADDRESS]`; the address is hexadecimal, with or without `0x`.
pub fn parse_image_arg(arg: &str) -> Result<(std::path::PathBuf, Option<u64>), ImageError> {
    match arg.rsplit_once('@') {
        Some((path, addr)) if !path.is_empty() => {
            let a = addr.trim_start_matches("0x").trim_start_matches("0X");
            let v = u64::from_str_radix(a, 16).map_err(|_| ImageError::BadLoadAddress { address: addr.to_string() })?;
            Ok((path.into(), Some(v)))
        }
        _ => Ok((arg.into(), None)),
    }
}

impl MemoryImage {
    /// Map the loadable segments of the ELF file at `path`. With `load`, the
    /// lowest segment is placed at that address and the others keep their
    /// offsets from it (a PIE or shared object where it was loaded). Returns
    /// the number of segments mapped.
    pub fn add_elf(&mut self, path: &Path, load: Option<u64>) -> Result<usize, ImageError> {
        let file = TraceFile::open_for(path, "--image")?;
        let segs = load_segments(file.bytes()).map_err(|e| e.in_file(path))?;
        if segs.is_empty() {
            return Err(ImageError::NoSegments { path: path.to_path_buf() });
        }
        let low = segs.iter().map(|s| s.vaddr).min().unwrap_or(0);
        let bias = load.map_or(0, |l| l.wrapping_sub(low));
        // A snapshot may map this very file as a raw dump (Cortex-R layouts
        // name the program's ELF file at address 0): the segments are what
        // the core ran, so they replace it rather than clash with it.
        self.unmap_raw(path);
        let first = self.region_count();
        for s in &segs {
            self.add_file(path, s.vaddr.wrapping_add(bias), Some(s.file_size), s.file_offset, MemSpace::ANY)?;
        }
        self.mark_segments(first, path);
        Ok(segs.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 little-endian executable with one PT_LOAD segment of
    /// `code` at `vaddr`.
    fn tiny_elf(vaddr: u64, code: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56];
        b[0..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // 64-bit
        b[5] = 1; // little endian
        b[6] = 1; // version
        b[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        b[18..20].copy_from_slice(&0xb7u16.to_le_bytes()); // EM_AARCH64
        b[20..24].copy_from_slice(&1u32.to_le_bytes());
        b[24..32].copy_from_slice(&vaddr.to_le_bytes()); // entry
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // phoff
        b[52..54].copy_from_slice(&64u16.to_le_bytes()); // ehsize
        b[54..56].copy_from_slice(&56u16.to_le_bytes()); // phentsize
        b[56..58].copy_from_slice(&1u16.to_le_bytes()); // phnum
        let off = b.len() as u64;
        let ph = 64;
        b[ph..ph + 4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        b[ph + 4..ph + 8].copy_from_slice(&5u32.to_le_bytes()); // R+X
        b[ph + 8..ph + 16].copy_from_slice(&off.to_le_bytes());
        b[ph + 16..ph + 24].copy_from_slice(&vaddr.to_le_bytes());
        b[ph + 24..ph + 32].copy_from_slice(&vaddr.to_le_bytes());
        b[ph + 32..ph + 40].copy_from_slice(&(code.len() as u64).to_le_bytes());
        b[ph + 40..ph + 48].copy_from_slice(&(code.len() as u64).to_le_bytes());
        b.extend_from_slice(code);
        b
    }

    #[test]
    fn segments_map_at_their_address_or_a_load_address() {
        let code = [0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6]; // nop; ret
        let dir = std::env::temp_dir().join(format!("tracesight-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("tiny.elf");
        std::fs::write(&p, tiny_elf(0x40_0000, &code)).unwrap();
        let mut m = MemoryImage::new();
        assert_eq!(m.add_elf(&p, None).unwrap(), 1);
        assert_eq!(m.read_u32(0x40_0004, MemSpace::EL1N), Some(0xd65f03c0));
        let mut m = MemoryImage::new();
        m.add_elf(&p, Some(0xaaaa_0000)).unwrap();
        assert_eq!(m.read_u32(0xaaaa_0000, MemSpace::EL1N), Some(0xd503201f));
        assert!(m.read_u32(0x40_0000, MemSpace::EL1N).is_none());
        std::fs::write(dir.join("not.elf"), b"hello").unwrap();
        assert!(MemoryImage::new().add_elf(&dir.join("not.elf"), None).is_err());
        assert_eq!(parse_image_arg("a/b.so@0x7f00").unwrap(), ("a/b.so".into(), Some(0x7f00)));
        assert_eq!(parse_image_arg("vmlinux").unwrap(), ("vmlinux".into(), None));
        assert!(parse_image_arg("x@zz").is_err());
    }

    /// Issue 14: a snapshot that maps the program's ELF file as a raw dump at
    /// 0 (Cortex-R layout) and `--image` of the same file: the segments
    /// replace the raw bytes instead of failing with an overlap error; a
    /// different file over them still fails.
    #[test]
    fn segments_replace_a_raw_mapping_of_the_same_file() {
        let code = [0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6]; // nop; ret
        let dir = std::env::temp_dir().join(format!("tracesight-elf-raw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r5.elf");
        std::fs::write(&p, tiny_elf(0x40, &code)).unwrap();
        let mut m = MemoryImage::new();
        m.add_file(&p, 0, None, 0, MemSpace::ANY).unwrap();
        assert_eq!(m.read_u32(0, MemSpace::EL1N), Some(0x464c_457f), "raw: the ELF header at 0");
        // Another spelling of the same file.
        let other = dir.join(".").join("r5.elf");
        assert_eq!(m.add_elf(&other, None).unwrap(), 1);
        assert_eq!(m.read_u32(0x44, MemSpace::EL1N), Some(0xd65f03c0));
        assert!(m.read_u32(0, MemSpace::EL1N).is_none(), "the raw mapping is gone");
        // Loading it again is no conflict either.
        assert_eq!(m.add_elf(&p, None).unwrap(), 1);
        let q = dir.join("other.elf");
        std::fs::write(&q, tiny_elf(0x40, &[0u8; 8])).unwrap();
        let err = m.add_elf(&q, None).unwrap_err();
        assert!(err.to_string().contains("overlaps"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
