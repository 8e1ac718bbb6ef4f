//! The traced program's code in memory: the executable segments of the ELF
//! files that ran (the program, and for a dynamically linked one its
//! interpreter and libraries, each at the address the loader chose), plus any
//! code that belongs to no file (known only from the instructions qemu
//! translated).
//!
//! Load addresses of position-independent objects are found by matching the
//! instruction words qemu executed against each file's executable segments,
//! so nothing about the loader's choices has to be parsed from its output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use object::elf::{FileHeader64, PT_LOAD, PF_X, ET_DYN, DT_NEEDED};
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::Endianness;

use super::qemu::Execution;
use super::SynthError;

/// An executable segment where it was loaded.
#[derive(Clone, Debug)]
pub struct CodeSegment {
    /// Load address.
    pub addr: u64,
    pub bytes: Vec<u8>,
    /// Name used for the dump file (`<image>_<n>`).
    pub name: String,
}

impl CodeSegment {
    #[inline]
    pub fn contains(&self, a: u64) -> bool {
        a.wrapping_sub(self.addr) < self.bytes.len() as u64
    }
}

/// An ELF file that was part of the execution.
#[derive(Clone, Debug)]
pub struct LoadedElf {
    pub path: PathBuf,
    /// Load bias (0 for a fixed-address executable).
    pub bias: u64,
    pub entry: u64,
}

/// All code the execution ran, addressable by virtual address.
#[derive(Clone, Debug, Default)]
pub struct CodeImage {
    /// Sorted by address, non-overlapping.
    pub segments: Vec<CodeSegment>,
    pub elfs: Vec<LoadedElf>,
}

impl CodeImage {
    #[inline]
    pub fn read_u32(&self, a: u64) -> Option<u32> {
        let i = self.segments.partition_point(|s| s.addr <= a);
        let s = self.segments.get(i.checked_sub(1)?)?;
        let off = a.wrapping_sub(s.addr) as usize;
        let b = s.bytes.get(off..off + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn contains(&self, a: u64) -> bool {
        self.read_u32(a).is_some()
    }

    fn insert(&mut self, seg: CodeSegment) -> Result<(), SynthError> {
        let end = seg.addr + seg.bytes.len() as u64;
        if let Some(o) = self.segments.iter().find(|s| s.addr < end && seg.addr < s.addr + s.bytes.len() as u64) {
            return Err(SynthError::Overlap {
                name: seg.name,
                start: seg.addr,
                end,
                other: o.name.clone(),
                other_start: o.addr,
                other_end: o.addr + o.bytes.len() as u64,
            });
        }
        let i = self.segments.partition_point(|s| s.addr < seg.addr);
        self.segments.insert(i, seg);
        Ok(())
    }

    /// Add extra code (a synthetic exception vector) at `addr`.
    pub fn add_code(&mut self, addr: u64, words: &[u32], name: &str) -> Result<(), SynthError> {
        let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.insert(CodeSegment { addr, bytes, name: name.to_string() })
    }
}

/// An ELF file's facts the locator needs.
struct ElfInfo {
    dynamic: bool,
    entry: u64,
    /// Executable PT_LOAD segments: (vaddr, bytes).
    exec: Vec<(u64, Vec<u8>)>,
    interp: Option<String>,
    needed: Vec<String>,
}

fn read_elf(path: &Path) -> Result<ElfInfo, SynthError> {
    let data = std::fs::read(path).map_err(SynthError::io(path))?;
    let d = data.as_slice();
    let err = |source: object::read::Error| SynthError::Object { path: path.to_path_buf(), source };
    let hdr = FileHeader64::<Endianness>::parse(d).map_err(err)?;
    let endian = hdr.endian().map_err(err)?;
    if hdr.e_machine(endian) != object::elf::EM_AARCH64 {
        return Err(SynthError::NotAarch64 { path: path.to_path_buf() });
    }
    let mut exec = Vec::new();
    let mut interp = None;
    for ph in hdr.program_headers(endian, d).map_err(err)? {
        if let Some(i) = ph.interpreter(endian, d).map_err(err)? {
            interp = Some(String::from_utf8_lossy(i).into_owned());
        }
        if ph.p_type(endian) == PT_LOAD && ph.p_flags(endian).contains(PF_X) {
            let off = ph.p_offset(endian) as usize;
            let len = ph.p_filesz(endian) as usize;
            let bytes = d.get(off..off + len).ok_or_else(|| SynthError::SegmentPastEnd { path: path.to_path_buf() })?;
            exec.push((ph.p_vaddr(endian), bytes.to_vec()));
        }
    }
    let mut needed = Vec::new();
    let sections = hdr.sections(endian, d).map_err(err)?;
    if let Some((dyns, link)) = sections.dynamic(endian, d).map_err(err)? {
        let strings = sections.strings(endian, d, link).map_err(err)?;
        for dy in dyns {
            if dy.d_tag(endian) == DT_NEEDED {
                if let Ok(s) = strings.get(dy.d_val(endian) as u32) {
                    needed.push(String::from_utf8_lossy(s).into_owned());
                }
            }
        }
    }
    Ok(ElfInfo {
        dynamic: hdr.e_type(endian) == ET_DYN,
        entry: hdr.e_entry(endian),
        exec,
        interp,
        needed,
    })
}

/// Find a library the dynamic loader would load, under `sysroot`.
fn find_library(sysroot: &Path, name: &str) -> Option<PathBuf> {
    let dirs = ["lib", "usr/lib", "lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "lib64", "usr/lib64"];
    dirs.iter().map(|d| sysroot.join(d).join(name)).find(|p| p.is_file())
}

/// The ELF files of a run: the program, and if it is dynamically linked its
/// interpreter and (transitively) needed libraries from `sysroot`.
pub fn candidate_elfs(program: &Path, sysroot: Option<&Path>) -> Result<Vec<PathBuf>, SynthError> {
    let main = read_elf(program)?;
    let mut out = vec![program.to_path_buf()];
    let Some(root) = sysroot else { return Ok(out) };
    if let Some(interp) = &main.interp {
        let p = root.join(interp.trim_start_matches('/'));
        if p.is_file() {
            out.push(p);
        }
    }
    let mut todo: Vec<String> = main.needed.clone();
    let mut seen: Vec<String> = Vec::new();
    while let Some(n) = todo.pop() {
        if seen.contains(&n) {
            continue;
        }
        seen.push(n.clone());
        if let Some(p) = find_library(root, &n) {
            if let Ok(info) = read_elf(&p) {
                todo.extend(info.needed.iter().cloned());
            }
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// Build the code image of an execution: place every candidate ELF file whose
/// code ran, then cover any executed instruction left over with pages built
/// from qemu's translation log.
pub fn locate(exec: &Execution, elfs: &[PathBuf]) -> Result<CodeImage, SynthError> {
    let mut image = CodeImage::default();
    // Distinct executed blocks, by start address.
    let mut blocks: Vec<u32> = (0..exec.tbs.len() as u32).collect();
    blocks.sort_by_key(|&t| exec.tbs[t as usize].pc);
    blocks.dedup_by_key(|t| exec.tbs[*t as usize].pc);

    for (k, path) in elfs.iter().enumerate() {
        let info = read_elf(path)?;
        let base_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| format!("elf{k}"));
        let bias = if !info.dynamic {
            Some(0)
        } else {
            find_bias(exec, &blocks, &info, &image)
        };
        let Some(bias) = bias else { continue };
        // A fixed-address file must match what ran where it ran.
        if !info.dynamic && k == 0 {
            check_matches(exec, &info, path)?;
        }
        for (i, (vaddr, bytes)) in info.exec.iter().enumerate() {
            let name = format!("{}_{}", sanitize(&base_name), i);
            image.insert(CodeSegment { addr: vaddr.wrapping_add(bias), bytes: bytes.clone(), name })?;
        }
        image.elfs.push(LoadedElf { path: path.clone(), bias, entry: info.entry.wrapping_add(bias) });
    }

    // Instructions no file covers: pages of what qemu translated.
    let mut pages: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for tb in &exec.tbs {
        for i in 0..tb.len {
            let a = tb.pc + 4 * i as u64;
            let op = exec.opcodes[(tb.first + i) as usize];
            match image.read_u32(a) {
                Some(w) if w == op => {}
                Some(w) => {
                    return Err(SynthError::SelfModifying { addr: a, ran: op, held: w })
                }
                None => {
                    let page = pages.entry(a & !0xfff).or_insert_with(|| vec![0; 4096]);
                    let o = (a & 0xfff) as usize;
                    page[o..o + 4].copy_from_slice(&op.to_le_bytes());
                }
            }
        }
    }
    // Merge adjacent pages into regions.
    let mut cur: Option<CodeSegment> = None;
    let mut n = 0;
    for (addr, bytes) in pages {
        match &mut cur {
            Some(c) if c.addr + c.bytes.len() as u64 == addr => c.bytes.extend_from_slice(&bytes),
            _ => {
                if let Some(c) = cur.take() {
                    image.insert(c)?;
                }
                cur = Some(CodeSegment { addr, bytes, name: format!("anon_{n}") });
                n += 1;
            }
        }
    }
    if let Some(c) = cur {
        image.insert(c)?;
    }
    Ok(image)
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// Every executed block inside a fixed-address file's code must match it.
fn check_matches(exec: &Execution, info: &ElfInfo, path: &Path) -> Result<(), SynthError> {
    for tb in &exec.tbs {
        for (vaddr, bytes) in &info.exec {
            let off = tb.pc.wrapping_sub(*vaddr);
            if off < bytes.len() as u64 {
                for i in 0..tb.len as usize {
                    let o = off as usize + 4 * i;
                    let Some(b) = bytes.get(o..o + 4) else { break };
                    let w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    if w != exec.opcodes[tb.first as usize + i] {
                        return Err(SynthError::CodeDiffers { path: path.to_path_buf(), addr: tb.pc + 4 * i as u64 });
                    }
                }
            }
        }
    }
    Ok(())
}

/// The load bias of a position-independent file: a page-aligned offset at
/// which blocks that ran match the file's code.
fn find_bias(exec: &Execution, blocks: &[u32], info: &ElfInfo, image: &CodeImage) -> Option<u64> {
    let matches_at = |tb: &super::qemu::Tb, bias: u64| -> bool {
        info.exec.iter().any(|(vaddr, bytes)| {
            let off = tb.pc.wrapping_sub(bias).wrapping_sub(*vaddr);
            (0..tb.len as usize).all(|i| {
                let o = off as usize + 4 * i;
                off < bytes.len() as u64
                    && bytes.get(o..o + 4).is_some_and(|b| {
                        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) == exec.opcodes[tb.first as usize + i]
                    })
            })
        })
    };
    // Try blocks not yet placed, longest first (the most distinctive).
    let mut cands: Vec<&super::qemu::Tb> =
        blocks.iter().map(|&t| &exec.tbs[t as usize]).filter(|tb| !image.contains(tb.pc)).collect();
    cands.sort_by_key(|tb| std::cmp::Reverse(tb.len));
    for tb in cands.iter().take(64) {
        if tb.len < 3 {
            break;
        }
        let mut found: Vec<u64> = Vec::new();
        for (vaddr, bytes) in &info.exec {
            // Same offset within a 4 KiB page.
            let mut off = (tb.pc.wrapping_sub(*vaddr)) & 0xfff;
            while off + 4 * tb.len as u64 <= bytes.len() as u64 {
                let bias = tb.pc.wrapping_sub(vaddr + off);
                if bias & 0xfff == 0 && matches_at(tb, bias) && !found.contains(&bias) {
                    found.push(bias);
                }
                off += 0x1000;
            }
        }
        if found.len() == 1 {
            let bias = found[0];
            // Confirm with the other blocks that fall in the file.
            let ok = cands.iter().filter(|t| {
                info.exec.iter().any(|(v, b)| t.pc.wrapping_sub(bias).wrapping_sub(*v) < b.len() as u64)
            });
            let (mut good, mut bad) = (0, 0);
            for t in ok {
                if matches_at(t, bias) {
                    good += 1;
                } else {
                    bad += 1;
                }
            }
            if bad == 0 && good > 0 {
                return Some(bias);
            }
        }
    }
    None
}
