//! The ELF symbol table of one image: sections, function symbols (with sizes,
//! local symbols included), the STT_FILE symbols that name their source file,
//! and the Arm mapping symbols (`$x`, `$a`, `$t`, `$d`) that give the
//! instruction set in force at an address.
//!
//! Addresses here are link-time addresses (before any load bias).

use object::elf;
use object::read::elf::{ElfFile, FileHeader, SectionHeader, Sym};
use object::{Endianness, FileKind};

use super::demangle::demangle;
use std::cell::OnceCell;

/// The instruction set state given by an Arm mapping symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IsaState {
    /// `$x`: A64 instructions.
    A64,
    /// `$a`: A32 (Arm) instructions.
    A32,
    /// `$t`: T32 (Thumb) instructions.
    T32,
    /// `$d`: literal data in a code section.
    Data,
}

/// The ELF symbol type, as far as symbol lookup cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    Function,
    /// STT_NOTYPE: assembler labels, usually code.
    NoType,
    /// STT_GNU_IFUNC: an indirect function resolver.
    IndirectFunction,
    Object,
    Section,
    File,
    Tls,
    Other,
}

/// One allocated section of the image.
#[derive(Clone, Debug)]
pub struct Section {
    pub name: String,
    /// ELF section header index.
    pub index: usize,
    pub address: u64,
    pub size: u64,
    pub executable: bool,
}

impl Section {
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.address && addr - self.address < self.size
    }
}

/// One symbol of the symbol table.
#[derive(Debug)]
pub struct Symbol {
    /// The name as stored in the file (mangled).
    pub raw_name: Box<str>,
    demangled: OnceCell<Option<Box<str>>>,
    /// Link-time address, with the Thumb bit cleared.
    pub address: u64,
    pub size: u64,
    pub kind: SymbolKind,
    pub local: bool,
    pub hidden: bool,
    /// True for an Arm32 function symbol whose address had the Thumb bit set.
    pub thumb: bool,
    /// ELF section header index (0 for undefined, absolute and common symbols).
    pub section: usize,
    /// Position in the symbol table.
    pub order: u32,
    /// The source file named by the STT_FILE symbol before it, as addr2line
    /// reports it (global symbols only get one when it is unambiguous).
    pub file: Option<u32>,
}

impl Symbol {
    /// The demangled name (C++ or Rust), or the raw name when it is not mangled.
    pub fn name(&self) -> &str {
        self.demangled
            .get_or_init(|| demangle(&self.raw_name).map(String::into_boxed_str))
            .as_deref()
            .unwrap_or(&self.raw_name)
    }

    /// Whether the symbol covers `addr` (zero-sized symbols cover one byte).
    pub fn covers(&self, addr: u64) -> bool {
        addr >= self.address && addr - self.address < self.size.max(1)
    }
}

/// Which symbol table was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolSource {
    /// `.symtab`, the full static symbol table.
    Static,
    /// `.dynsym` only (the static table was stripped).
    Dynamic,
    /// No symbols at all.
    None,
}

/// Sections and symbols of one ELF file.
#[derive(Debug)]
pub struct ElfSymbols {
    pub is_64: bool,
    pub machine: u16,
    pub kind: u16,
    pub sections: Vec<Section>,
    /// All symbols in symbol table order (index 0 excluded).
    pub symbols: Vec<Symbol>,
    pub source: SymbolSource,
    /// Names of STT_FILE symbols.
    pub files: Vec<Box<str>>,
    /// Candidate function symbols (indices into `symbols`), sorted by
    /// address then by table order.
    by_address: Vec<u32>,
    /// Their addresses and sections, for a compact binary search.
    starts: Vec<u64>,
    start_sections: Vec<u32>,
    /// Allocated sections as (start, end, position in `sections`), sorted by
    /// start.
    section_ranges: Vec<(u64, u64, u32)>,
    /// Whether two sections overlap (then lookups take the first in header
    /// order, as addr2line does).
    sections_overlap: bool,
    /// Mapping symbols, sorted by address: (address, section, state).
    mapping: Vec<(u64, usize, IsaState)>,
}

/// The result of the symbol lookup for one address.
#[derive(Clone, Copy, Debug)]
pub struct SymbolMatch<'a> {
    pub symbol: &'a Symbol,
    pub index: usize,
    /// `addr - symbol.address`.
    pub offset: u64,
    /// Whether the address lies within the symbol's size; false for an
    /// address past the end of the nearest preceding symbol (padding, or code
    /// without a symbol of its own).
    pub inside: bool,
}

fn mapping_state(name: &str, machine: elf::Machine) -> Option<IsaState> {
    let b = name.as_bytes();
    if b.len() < 2 || b[0] != b'$' || !(b.len() == 2 || b[2] == b'.') {
        return None;
    }
    match (b[1], machine) {
        (b'x', elf::EM_AARCH64) => Some(IsaState::A64),
        (b'd', elf::EM_AARCH64 | elf::EM_ARM) => Some(IsaState::Data),
        (b'a', elf::EM_ARM) => Some(IsaState::A32),
        (b't', elf::EM_ARM) => Some(IsaState::T32),
        _ => None,
    }
}

/// Arm special symbol names that are never functions (`$x`, `$d.1`, ...).
fn is_special_name(name: &str, machine: elf::Machine) -> bool {
    if !matches!(machine, elf::EM_AARCH64 | elf::EM_ARM) {
        return false;
    }
    let b = name.as_bytes();
    b.len() >= 2 && b[0] == b'$' && b"axdtp".contains(&b[1]) && (b.len() == 2 || b[2] == b'.')
}

impl ElfSymbols {
    /// Read sections and symbols from an ELF file's bytes.
    pub fn parse(data: &[u8]) -> Result<ElfSymbols, super::SymbolError> {
        match FileKind::parse(data)? {
            FileKind::Elf64 => Ok(Self::collect(&ElfFile::<elf::FileHeader64<Endianness>>::parse(data)?, true)),
            FileKind::Elf32 => Ok(Self::collect(&ElfFile::<elf::FileHeader32<Endianness>>::parse(data)?, false)),
            kind => Err(super::SymbolError::NotElf { kind }),
        }
    }

    fn collect<Elf: FileHeader<Endian = Endianness>>(f: &ElfFile<'_, Elf>, is_64: bool) -> ElfSymbols {
        let endian = f.endian();
        let header = f.elf_header();
        let machine = header.e_machine(endian);
        let kind = header.e_type(endian);
        let table = f.elf_section_table();
        let mut sections = Vec::new();
        for (i, sh) in table.iter().enumerate() {
            let flags = sh.sh_flags(endian);
            if !flags.contains(elf::SHF_ALLOC) {
                continue;
            }
            // Thread-local .tbss takes no address space of its own (it
            // overlaps whatever follows it).
            if flags.contains(elf::SHF_TLS) && sh.sh_type(endian) == elf::SHT_NOBITS {
                continue;
            }
            let name =
                table.section_name(endian, sh).map(|n| String::from_utf8_lossy(n).into_owned()).unwrap_or_default();
            sections.push(Section {
                name,
                index: i,
                address: sh.sh_addr(endian).into(),
                size: sh.sh_size(endian).into(),
                executable: flags.contains(elf::SHF_EXECINSTR),
            });
        }

        let (symtab, source) = if !f.elf_symbol_table().is_empty() {
            (f.elf_symbol_table(), SymbolSource::Static)
        } else if !f.elf_dynamic_symbol_table().is_empty() {
            (f.elf_dynamic_symbol_table(), SymbolSource::Dynamic)
        } else {
            (f.elf_symbol_table(), SymbolSource::None)
        };
        let strings = symtab.strings();
        let arm = machine == elf::EM_ARM;
        let mut symbols = Vec::with_capacity(symtab.len());
        let mut files: Vec<Box<str>> = Vec::new();
        let mut mapping = Vec::new();
        // addr2line's rule for the file of a symbol: the last STT_FILE symbol
        // before it; for a global symbol only while no file symbol has
        // followed another symbol (otherwise the choice is ambiguous).
        #[derive(PartialEq)]
        enum State {
            Nothing,
            Symbol,
            FileAfterSymbol,
        }
        let mut state = State::Nothing;
        let mut current_file: Option<u32> = None;
        for (i, s) in symtab.iter().enumerate().skip(1) {
            let name = s.name(endian, strings).map(String::from_utf8_lossy).unwrap_or_default();
            let st_type = s.st_type();
            let kind = match st_type {
                elf::STT_FUNC => SymbolKind::Function,
                elf::STT_NOTYPE => SymbolKind::NoType,
                elf::STT_GNU_IFUNC => SymbolKind::IndirectFunction,
                elf::STT_OBJECT | elf::STT_COMMON => SymbolKind::Object,
                elf::STT_SECTION => SymbolKind::Section,
                elf::STT_FILE => SymbolKind::File,
                elf::STT_TLS => SymbolKind::Tls,
                _ => SymbolKind::Other,
            };
            let local = s.st_bind() == elf::STB_LOCAL;
            let shndx = s.st_shndx(endian);
            let section = if shndx == elf::SHN_UNDEF || shndx.0 >= elf::SHN_LORESERVE {
                if shndx == elf::SHN_XINDEX {
                    symtab.shndx(endian, object::SymbolIndex(i)).unwrap_or(0) as usize
                } else {
                    0
                }
            } else {
                usize::from(shndx.0)
            };
            let mut address: u64 = s.st_value(endian).into();
            let mut thumb = false;
            if arm && kind == SymbolKind::Function && address & 1 != 0 {
                address &= !1;
                thumb = true;
            }
            let mut file = None;
            if kind == SymbolKind::File {
                files.push(name.as_ref().into());
                current_file = Some(files.len() as u32 - 1);
                if state == State::Symbol {
                    state = State::FileAfterSymbol;
                }
            } else {
                if state == State::Nothing {
                    state = State::Symbol;
                }
                if local || state != State::FileAfterSymbol {
                    file = current_file;
                }
            }
            if local && section != 0 {
                if let Some(isa) = mapping_state(&name, machine) {
                    mapping.push((address, section, isa));
                }
            }
            symbols.push(Symbol {
                raw_name: name.as_ref().into(),
                demangled: OnceCell::new(),
                address,
                size: s.st_size(endian).into(),
                kind,
                local,
                hidden: s.st_visibility() == elf::STV_HIDDEN,
                thumb,
                section,
                order: i as u32,
                file,
            });
        }
        let mut by_address: Vec<u32> =
            symbols.iter().enumerate().filter(|(_, s)| Self::candidate(s, machine)).map(|(i, _)| i as u32).collect();
        by_address.sort_by_key(|&i| (symbols[i as usize].address, i));
        mapping.sort_by_key(|m| m.0);
        let starts = by_address.iter().map(|&i| symbols[i as usize].address).collect();
        let start_sections = by_address.iter().map(|&i| symbols[i as usize].section as u32).collect();
        let mut section_ranges: Vec<(u64, u64, u32)> = sections
            .iter()
            .enumerate()
            .filter(|(_, s)| s.size > 0)
            .map(|(i, s)| (s.address, s.address.saturating_add(s.size), i as u32))
            .collect();
        section_ranges.sort_unstable();
        let sections_overlap = section_ranges.windows(2).any(|w| w[1].0 < w[0].1);
        ElfSymbols {
            is_64,
            machine: machine.0,
            kind: kind.0,
            sections,
            symbols,
            source,
            files,
            by_address,
            starts,
            start_sections,
            section_ranges,
            sections_overlap,
            mapping,
        }
    }

    /// addr2line's test for a symbol that may name the function at an
    /// address: code-like type, in a section, not a mapping symbol, not an
    /// annotation label (local, hidden, no type, no size).
    fn candidate(s: &Symbol, machine: elf::Machine) -> bool {
        if s.section == 0 {
            return false;
        }
        match s.kind {
            SymbolKind::Function => {}
            SymbolKind::NoType => {
                if s.size == 0 && s.local && s.hidden {
                    return false;
                }
            }
            SymbolKind::IndirectFunction => {
                // binutils ignores IFUNC symbols for AArch64 and Arm, but they
                // are functions everywhere else.
                if matches!(machine, elf::EM_AARCH64 | elf::EM_ARM) {
                    return false;
                }
            }
            _ => return false,
        }
        !(s.local && is_special_name(&s.raw_name, machine))
    }

    /// The allocated section containing `addr` (the first one, in section
    /// header order, like addr2line).
    #[inline]
    pub fn section_at(&self, addr: u64) -> Option<&Section> {
        if self.sections_overlap {
            return self.sections.iter().find(|s| s.contains(addr));
        }
        let i = self.section_ranges.partition_point(|r| r.0 <= addr).checked_sub(1)?;
        let r = self.section_ranges[i];
        (addr < r.1).then(|| &self.sections[r.2 as usize])
    }

    /// The range and header index of the section containing `addr`.
    #[inline]
    pub(crate) fn section_range_at(&self, addr: u64) -> Option<(u64, u64, usize)> {
        self.section_at(addr).map(|s| (s.address, s.address + s.size, s.index))
    }

    /// The extent of the allocated sections: lowest address and end.
    pub fn extent(&self) -> Option<(u64, u64)> {
        let lo = self.sections.iter().filter(|s| s.size > 0).map(|s| s.address).min()?;
        let hi = self.sections.iter().filter(|s| s.size > 0).map(|s| s.address.saturating_add(s.size)).max()?;
        Some((lo, hi))
    }

    pub fn is_function_candidate(&self, index: usize) -> bool {
        Self::candidate(&self.symbols[index], elf::Machine(self.machine))
    }

    /// Indices of the candidate function symbols, sorted by address.
    pub fn functions_by_address(&self) -> impl Iterator<Item = usize> + '_ {
        self.by_address.iter().map(|&i| i as usize)
    }

    /// The function symbol for `addr`: among the candidate symbols of the
    /// section containing `addr`, the one that starts closest before it; when
    /// several start there, the one that covers `addr`, preferring STT_FUNC
    /// to STT_NOTYPE, then the smallest. This is binutils' rule without its
    /// cache, so it does not depend on earlier lookups.
    pub fn function_at(&self, addr: u64) -> Option<SymbolMatch<'_>> {
        let (_, _, sec) = self.section_range_at(addr)?;
        self.function_in_section(addr, sec)
    }

    pub(crate) fn function_in_section(&self, addr: u64, section: usize) -> Option<SymbolMatch<'_>> {
        self.function_span(addr, section).map(|(m, _)| m)
    }

    /// Like [`Self::function_in_section`], with the address range around
    /// `addr` over which the answer stays the same.
    #[inline]
    pub(crate) fn function_span(&self, addr: u64, section: usize) -> Option<(SymbolMatch<'_>, (u64, u64))> {
        let syms = &self.symbols;
        let sec = section as u32;
        // Index of the first symbol starting after addr.
        let end = self.starts.partition_point(|&a| a <= addr);
        let next_start = self.starts.get(end).copied().unwrap_or(u64::MAX);
        // The closest start at or before addr among this section's symbols.
        let mut j = end;
        loop {
            if j == 0 {
                return None;
            }
            j -= 1;
            if self.start_sections[j] == sec {
                break;
            }
        }
        let start = self.starts[j];
        let mut k = j;
        while k > 0 && self.starts[k - 1] == start {
            k -= 1;
        }
        // Within a start address, `by_address` is in table order: apply the
        // tie-breaks in that order, as binutils does.
        let mut best: Option<usize> = None;
        let (mut from, mut until) = (start, next_start);
        for idx in k..=j {
            if self.start_sections[idx] != sec {
                continue;
            }
            let c = self.by_address[idx] as usize;
            let e = syms[c].address.saturating_add(syms[c].size.max(1));
            if e <= addr {
                from = from.max(e);
            } else {
                until = until.min(e);
            }
            best = Some(match best {
                None => c,
                Some(b) if better_fit(&syms[b], &syms[c], addr) => c,
                Some(b) => b,
            });
        }
        let index = best?;
        let symbol = &syms[index];
        let m = SymbolMatch { symbol, index, offset: addr - symbol.address, inside: symbol.covers(addr) };
        Some((m, (from, until)))
    }

    /// The instruction set at `addr` from the mapping symbols, if any.
    pub fn isa_at(&self, addr: u64) -> Option<IsaState> {
        let sec = self.section_at(addr)?;
        let end = self.mapping.partition_point(|m| m.0 <= addr);
        self.mapping[..end].iter().rev().find(|m| m.1 == sec.index).map(|m| m.2)
    }

    /// Whether any mapping symbols are present.
    pub fn has_mapping_symbols(&self) -> bool {
        !self.mapping.is_empty()
    }

    pub fn file_name(&self, file: u32) -> &str {
        &self.files[file as usize]
    }
}

/// binutils' `better_fit`: whether `new` is a better match for `addr` than
/// the current best `cur`, both starting at or before `addr`.
fn better_fit(cur: &Symbol, new: &Symbol, addr: u64) -> bool {
    if new.address > addr || new.address < cur.address {
        return false;
    }
    if new.address > cur.address {
        return true;
    }
    let cur_size = cur.size.max(1);
    let new_size = new.size.max(1);
    if cur.address + cur_size <= addr {
        return new_size > cur_size;
    }
    if new.address + new_size <= addr {
        return false;
    }
    match (cur.kind, new.kind) {
        (SymbolKind::NoType, SymbolKind::Function) => true,
        (SymbolKind::Function, SymbolKind::NoType) => false,
        _ => new_size < cur_size,
    }
}

/// The state of addr2line's one-entry symbol cache (`elf_find_function`):
/// an address inside the last symbol found reuses it without a new search.
/// Only `symbolize_text` uses this, to reproduce addr2line's output exactly.
#[derive(Default, Clone, Debug)]
pub(crate) struct FindFunctionCache {
    section: usize,
    func: Option<usize>,
}

impl ElfSymbols {
    /// binutils' `elf_find_function` with its cache: returns the symbol index
    /// and the file name it reports.
    pub(crate) fn find_function_cached(
        &self,
        cache: &mut FindFunctionCache,
        addr: u64,
        section: usize,
    ) -> Option<(usize, Option<u32>)> {
        if let Some(f) = cache.func {
            let s = &self.symbols[f];
            if cache.section == section && s.covers(addr) {
                return Some((f, s.file));
            }
        }
        // The closest preceding symbol wins whatever the order of the scan,
        // so the sorted search gives the same answer as binutils' full scan.
        cache.section = section;
        cache.func = self.function_in_section(addr, section).map(|m| m.index);
        cache.func.map(|b| (b, self.symbols[b].file))
    }
}
