//! DWARF debug information of one image, through addr2line and gimli over a
//! memory-mapped file: the line table (file, line, column, discriminator),
//! the chain of inlined functions at an address, split DWARF (`.dwo` files
//! and `.dwp` packages) and compressed debug sections.
//!
//! File names are built the way binutils builds them (the unit's directory
//! table and compilation directory joined as strings, no normalisation), so
//! the output can be compared with GNU addr2line.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use addr2line::{LookupContinuation, LookupResult, SplitDwarfLoad};
use gimli::{DwLang, Reader as _, RunTimeEndian, Section as _, SectionId, UnitOffset};
use memmap2::Mmap;
use object::{Object, ObjectSection};

/// The bytes behind a DWARF section: a memory-mapped file or a decompressed
/// copy of a compressed section.
pub(crate) enum Backing {
    Map(Mmap),
    Owned(Vec<u8>),
}

/// A cheaply cloned handle on section bytes, usable as a gimli reader buffer.
#[derive(Clone)]
pub(crate) struct Bytes(Arc<Backing>);

impl Bytes {
    pub(crate) fn map(m: Mmap) -> Bytes {
        Bytes(Arc::new(Backing::Map(m)))
    }
    fn owned(v: Vec<u8>) -> Bytes {
        Bytes(Arc::new(Backing::Owned(v)))
    }
}

impl Deref for Bytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &*self.0 {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes)", self.len())
    }
}

// SAFETY: the bytes live in a memory map or a vector owned by the `Arc` and
// never mutated, so their address does not change when the handle is moved
// or cloned.
unsafe impl stable_deref_trait::StableDeref for Bytes {}
unsafe impl stable_deref_trait::CloneStableDeref for Bytes {}

pub(crate) type DwarfReader = gimli::EndianReader<RunTimeEndian, Bytes>;

/// Map a file read-only.
pub(crate) fn map_file(path: &Path) -> std::io::Result<Bytes> {
    let f = std::fs::File::open(path)?;
    // SAFETY: the file is mapped read-only; as with every tool that maps its
    // input, a file truncated by another process while mapped is not supported.
    let m = unsafe { Mmap::map(&f)? };
    Ok(Bytes::map(m))
}

/// A section's bytes as a reader: a range of the mapped file, or the
/// decompressed contents.
fn section_reader(
    file: &object::File<'_>,
    bytes: &Bytes,
    name: Option<&str>,
    endian: RunTimeEndian,
    compressed: &mut bool,
) -> Result<DwarfReader, gimli::Error> {
    let empty = || DwarfReader::new(Bytes::owned(Vec::new()), endian);
    let Some(section) = name.and_then(|n| file.section_by_name(n)) else {
        return Ok(empty());
    };
    let is_compressed =
        section.compressed_file_range().map(|r| r.format != object::CompressionFormat::None).unwrap_or(false);
    if is_compressed {
        *compressed = true;
        return match section.uncompressed_data() {
            Ok(data) => Ok(DwarfReader::new(Bytes::owned(data.into_owned()), endian)),
            Err(_) => Ok(empty()),
        };
    }
    match section.file_range() {
        Some((off, size)) => {
            let (off, size) = (off as usize, size as usize);
            if off.checked_add(size).is_none_or(|end| end > bytes.len()) {
                return Ok(empty());
            }
            Ok(DwarfReader::new(bytes.clone(), endian).range(off..off + size))
        }
        None => Ok(empty()),
    }
}

fn endian_of(file: &object::File<'_>) -> RunTimeEndian {
    if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    }
}

/// Whether an object file has DWARF line or unit information.
pub(crate) fn has_dwarf(file: &object::File<'_>) -> bool {
    [".debug_info", ".debug_line"].iter().any(|n| file.section_by_name(n).is_some_and(|s| s.size() > 0))
}

/// Identifies a unit across the main file and `.dwo` files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum UnitKey {
    Offset(usize),
    Dwo(u64),
}

fn unit_key(unit: &gimli::Unit<DwarfReader>) -> UnitKey {
    match unit.dwo_id {
        Some(id) => UnitKey::Dwo(id.0),
        None => {
            // .debug_types offsets count from another section's start: keep
            // them apart from .debug_info's.
            let off = unit.header.offset().0;
            UnitKey::Offset(match unit.header.section() {
                gimli::SectionId::DebugTypes => off | (1 << 62),
                _ => off,
            })
        }
    }
}

/// Identifies a function DIE (subprogram or inlined subroutine).
pub(crate) type DieKey = (UnitKey, usize);

/// One row of the line table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    pub addr: u64,
    pub file: u32,
    pub line: u32,
    pub column: u32,
    pub discriminator: u32,
}

#[derive(Clone, Debug)]
struct Sequence {
    start: u64,
    end: u64,
    rows: Vec<Row>,
}

struct UnitFiles {
    dwarf5: bool,
    ids: Vec<u32>,
}

/// Entries per block of the sparse index over the line table addresses.
const BLOCK: usize = 32;

/// The line tables of all units, merged, as binutils keeps them: one row per
/// address (the last one given for it), sequences sorted by address, nested
/// sequences dropped and overlapping ones trimmed.
///
/// Stored flat for fast lookups: `addrs[i]` is where entry `i` starts, and it
/// lasts until `addrs[i + 1]`; an entry is a row, or a gap between
/// sequences. A sparse index of every `BLOCK`th address keeps the first
/// steps of the search in cache.
pub(crate) struct LineTable {
    addrs: Vec<u64>,
    /// (file, line) of each entry; `GAP` files mark gaps.
    rows: Vec<(u32, u32)>,
    /// (column, discriminator) of each entry, apart as they are rarely needed.
    extra: Vec<(u32, u32)>,
    sparse: Vec<u64>,
    files: Vec<Arc<str>>,
    file_ids: HashMap<Arc<str>, u32>,
    units: HashMap<UnitKey, UnitFiles>,
}

/// The file id of a gap entry.
const GAP: u32 = u32::MAX - 1;

pub(crate) const UNKNOWN_FILE: u32 = u32::MAX;

impl LineTable {
    fn build(dwarf: &gimli::Dwarf<DwarfReader>) -> LineTable {
        let mut t = LineTable {
            addrs: Vec::new(),
            rows: Vec::new(),
            extra: Vec::new(),
            sparse: Vec::new(),
            files: Vec::new(),
            file_ids: HashMap::new(),
            units: HashMap::new(),
        };
        let mut seqs: Vec<(Sequence, usize)> = Vec::new();
        let mut units = dwarf.units();
        while let Ok(Some(header)) = units.next() {
            let Ok(unit) = dwarf.unit(header) else { continue };
            let Some(program) = unit.line_program.clone() else { continue };
            let key = unit_key(&unit);
            let files = t.unit_files(dwarf, &unit, program.header());
            let dwarf5 = program.header().version() >= 5;
            let mut rows = program.rows();
            let mut current: Vec<Row> = Vec::new();
            while let Ok(Some((_, row))) = rows.next_row() {
                if row.end_sequence() {
                    if !current.is_empty() {
                        current.sort_by_key(|r| r.addr);
                        // One row per address: the last one given for it.
                        let mut kept: Vec<Row> = Vec::with_capacity(current.len());
                        for r in current.drain(..) {
                            match kept.last_mut() {
                                Some(last) if last.addr == r.addr => *last = r,
                                _ => kept.push(r),
                            }
                        }
                        let n = seqs.len();
                        seqs.push((Sequence { start: kept[0].addr, end: row.address(), rows: kept }, n));
                    }
                    continue;
                }
                let idx = row.file_index();
                let file = if dwarf5 {
                    files.get(idx as usize).copied()
                } else {
                    idx.checked_sub(1).and_then(|i| files.get(i as usize).copied())
                }
                .unwrap_or(UNKNOWN_FILE);
                let column = match row.column() {
                    gimli::ColumnType::LeftEdge => 0,
                    gimli::ColumnType::Column(c) => c.get() as u32,
                };
                current.push(Row {
                    addr: row.address(),
                    file,
                    line: row.line().map_or(0, |l| l.get() as u32),
                    column,
                    discriminator: row.discriminator() as u32,
                });
            }
            t.units.insert(key, UnitFiles { dwarf5, ids: files });
        }
        // binutils' order: by start, the longest first, then in input order;
        // then nested sequences are dropped and overlapping ones trimmed.
        seqs.sort_by(|a, b| a.0.start.cmp(&b.0.start).then(b.0.end.cmp(&a.0.end)).then(a.1.cmp(&b.1)));
        let mut last_end: Option<u64> = None;
        for (s, _) in seqs {
            if s.end <= s.start {
                continue;
            }
            let mut start = s.start;
            if let Some(le) = last_end {
                if start < le {
                    if s.end <= le {
                        continue;
                    }
                    start = le;
                }
            }
            // The row covering the (possibly trimmed) start, then the rest.
            let first = s.rows.partition_point(|r| r.addr <= start).saturating_sub(1);
            for (i, r) in s.rows[first..].iter().enumerate() {
                let addr = if i == 0 { start } else { r.addr };
                if addr >= s.end {
                    break;
                }
                t.push(Row { addr, ..*r });
            }
            t.push(Row { addr: s.end, file: GAP, line: 0, column: 0, discriminator: 0 });
            last_end = Some(s.end);
        }
        t.sparse = t.addrs.iter().step_by(BLOCK).copied().collect();
        t
    }

    /// Append an entry; an entry at the same address as the previous one
    /// (a sequence starting where the last ended) replaces it.
    fn push(&mut self, r: Row) {
        if self.addrs.last() != Some(&r.addr) {
            self.addrs.push(r.addr);
            self.rows.push((0, 0));
            self.extra.push((0, 0));
        }
        *self.rows.last_mut().unwrap() = (r.file, r.line);
        *self.extra.last_mut().unwrap() = (r.column, r.discriminator);
    }

    fn intern(&mut self, name: String) -> u32 {
        if let Some(&id) = self.file_ids.get(name.as_str()) {
            return id;
        }
        let a: Arc<str> = name.into();
        let id = self.files.len() as u32;
        self.files.push(a.clone());
        self.file_ids.insert(a, id);
        id
    }

    /// The file names of a unit's line program header, built like binutils'
    /// `concat_filename`.
    fn unit_files(
        &mut self,
        dwarf: &gimli::Dwarf<DwarfReader>,
        unit: &gimli::Unit<DwarfReader>,
        header: &gimli::LineProgramHeader<DwarfReader>,
    ) -> Vec<u32> {
        let s = |v: gimli::AttributeValue<DwarfReader>| -> Option<String> {
            dwarf.attr_string(unit, v).ok().map(|r| r.to_string_lossy().map(|c| c.into_owned()).unwrap_or_default())
        };
        let comp_dir = unit.comp_dir.as_ref().and_then(|r| r.to_string_lossy().ok().map(|c| c.into_owned()));
        let dwarf5 = header.version() >= 5;
        let dirs: Vec<Option<String>> = header.include_directories().iter().map(|d| s(d.clone())).collect();
        let mut out = Vec::with_capacity(header.file_names().len());
        for f in header.file_names() {
            let name = s(f.path_name()).unwrap_or_default();
            let full = if name.starts_with('/') {
                name
            } else {
                let d = f.directory_index();
                let subdir = if dwarf5 {
                    dirs.get(d as usize).cloned().flatten()
                } else {
                    d.checked_sub(1).and_then(|i| dirs.get(i as usize).cloned().flatten())
                };
                let mut dir_name = None;
                let mut subdir_name = subdir;
                if subdir_name.as_deref().is_none_or(|d| !d.starts_with('/')) {
                    dir_name = comp_dir.clone();
                }
                if dir_name.is_none() {
                    dir_name = subdir_name.take();
                }
                match (dir_name, subdir_name) {
                    (None, _) => name,
                    (Some(d), Some(sd)) => format!("{d}/{sd}/{name}"),
                    (Some(d), None) => format!("{d}/{name}"),
                }
            };
            out.push(self.intern(full));
        }
        out
    }

    /// The row for `addr`, if a sequence covers it.
    #[inline]
    pub(crate) fn lookup(&self, addr: u64) -> Option<Row> {
        let i = self.index(addr)?;
        let (file, line) = self.rows[i];
        let (column, discriminator) = self.extra[i];
        Some(Row { addr: self.addrs[i], file, line, column, discriminator })
    }

    /// File and line for `addr`, with the address range they cover.
    #[inline]
    pub(crate) fn lookup_span(&self, addr: u64) -> Option<((u32, u32), (u64, u64))> {
        let i = self.index(addr)?;
        // The last entry is always a gap, so `i + 1` exists.
        Some((self.rows[i], (self.addrs[i], self.addrs[i + 1])))
    }

    #[inline]
    fn index(&self, addr: u64) -> Option<usize> {
        let b = self.sparse.partition_point(|&a| a <= addr).checked_sub(1)?;
        let lo = b * BLOCK;
        let hi = (lo + BLOCK).min(self.addrs.len());
        let i = lo + self.addrs[lo..hi].partition_point(|&a| a <= addr) - 1;
        (self.rows[i].0 != GAP).then_some(i)
    }

    pub(crate) fn file(&self, id: u32) -> Option<&Arc<str>> {
        self.files.get(id as usize)
    }

    /// All file names of all units.
    pub(crate) fn files(&self) -> &[Arc<str>] {
        &self.files
    }

    /// The name of file `index` of a unit's line table (for DW_AT_call_file).
    fn unit_file(&self, unit: UnitKey, index: u64) -> Option<u32> {
        let u = self.units.get(&unit)?;
        if u.dwarf5 {
            u.ids.get(index as usize).copied()
        } else {
            u.ids.get(index.checked_sub(1)? as usize).copied()
        }
    }

    pub(crate) fn row_count(&self) -> usize {
        self.rows.iter().filter(|r| r.0 != GAP).count()
    }
}

/// A function frame from the DWARF: the function DIE, its raw name and
/// language, and where it was inlined (for all but the outermost frame).
#[derive(Clone, Debug)]
pub(crate) struct RawFrame {
    pub die: Option<DieKey>,
    pub name: Option<String>,
    pub lang: Option<DwLang>,
    /// The low address of the DIE's first range (binutils' `arange.low`),
    /// when asked for.
    pub first_low: Option<u64>,
    /// Where this function was inlined: file (line table id), line, column.
    pub call_file: Option<u32>,
    pub call_line: u32,
    pub call_column: u32,
}

/// A DWARF subprogram with code: raw name, language, address ranges.
pub(crate) type Subprogram = (String, Option<DwLang>, Vec<(u64, u64)>);

/// How the DWARF of an image was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DwarfSource {
    /// The file holding the DWARF sections (the image itself, or a separate
    /// debug file found through `.gnu_debuglink` or the build ID).
    pub file: PathBuf,
    /// Some debug sections were compressed.
    pub compressed: bool,
    /// The image uses split DWARF (skeleton units).
    pub split: bool,
    /// A `.dwp` package was found next to the image.
    pub package: Option<PathBuf>,
}

/// The DWARF of one image.
pub(crate) struct DebugInfo {
    ctx: addr2line::Context<DwarfReader>,
    dwarf: Arc<gimli::Dwarf<DwarfReader>>,
    dwp: Option<gimli::DwarfPackage<DwarfReader>>,
    lines: OnceCell<LineTable>,
    search_dirs: Vec<PathBuf>,
    pub(crate) source: DwarfSource,
    /// `.dwo` files that could not be found, reported once each.
    pub(crate) missing_dwo: RefCell<Vec<String>>,
    pub(crate) loaded_dwo: RefCell<usize>,
}

impl DebugInfo {
    /// Load the DWARF of `file` (already parsed from `bytes`, at `path`).
    pub(crate) fn load(path: &Path, bytes: &Bytes, file: &object::File<'_>, image_dir: &Path) -> Option<DebugInfo> {
        let endian = endian_of(file);
        let mut compressed = false;
        let dwarf =
            gimli::Dwarf::load(|id: SectionId| section_reader(file, bytes, Some(id.name()), endian, &mut compressed))
                .ok()?;
        let mut dwarf = dwarf;
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        let dwarf = Arc::new(dwarf);
        let ctx = addr2line::Context::from_arc_dwarf(dwarf.clone()).ok()?;
        let mut split = false;
        let mut units = dwarf.units();
        while let Ok(Some(h)) = units.next() {
            if matches!(h.type_(), gimli::UnitType::Skeleton(_)) {
                split = true;
                break;
            }
            if let Ok(u) = dwarf.unit(h) {
                if u.dwo_id.is_some() {
                    split = true;
                    break;
                }
            }
        }
        // A DWARF package next to the image: `prog.dwp` or `lib.so.dwp`.
        let mut package = None;
        let dwp = if split {
            let mut p = path.as_os_str().to_owned();
            p.push(".dwp");
            let candidates = [PathBuf::from(p), path.with_extension("dwp")];
            candidates.iter().find_map(|c| {
                let b = map_file(c).ok()?;
                let f = object::File::parse(&*b).ok()?;
                let e = endian_of(&f);
                let mut cz = false;
                let empty = DwarfReader::new(Bytes::owned(Vec::new()), e);
                let pkg =
                    gimli::DwarfPackage::load(|id: SectionId| section_reader(&f, &b, id.dwo_name(), e, &mut cz), empty)
                        .ok()?;
                package = Some(c.clone());
                Some(pkg)
            })
        } else {
            None
        };
        Some(DebugInfo {
            ctx,
            dwarf,
            dwp,
            lines: OnceCell::new(),
            search_dirs: vec![image_dir.to_path_buf()],
            source: DwarfSource { file: path.to_path_buf(), compressed, split, package },
            missing_dwo: RefCell::new(Vec::new()),
            loaded_dwo: RefCell::new(0),
        })
    }

    /// The merged line table, built on first use.
    pub(crate) fn lines(&self) -> &LineTable {
        self.lines.get_or_init(|| LineTable::build(&self.dwarf))
    }

    fn load_dwo(&self, load: SplitDwarfLoad<DwarfReader>) -> Option<Arc<gimli::Dwarf<DwarfReader>>> {
        if let Some(dwp) = &self.dwp {
            if let Ok(Some(cu)) = dwp.find_cu(load.dwo_id, &load.parent) {
                return Some(Arc::new(cu));
            }
        }
        let to_path =
            |r: &DwarfReader| -> Option<PathBuf> { r.to_string_lossy().ok().map(|s| PathBuf::from(s.into_owned())) };
        let name = load.path.as_ref().and_then(to_path)?;
        let comp_dir = load.comp_dir.as_ref().and_then(to_path);
        let mut candidates = Vec::new();
        match &comp_dir {
            Some(d) => candidates.push(d.join(&name)),
            None => candidates.push(name.clone()),
        }
        for dir in &self.search_dirs {
            candidates.push(dir.join(&name));
            if let Some(base) = name.file_name() {
                candidates.push(dir.join(base));
            }
        }
        for c in &candidates {
            let Ok(bytes) = map_file(c) else { continue };
            let Ok(file) = object::File::parse(&*bytes) else { continue };
            let endian = endian_of(&file);
            let mut cz = false;
            let Ok(mut dwo) =
                gimli::Dwarf::load(|id: SectionId| section_reader(&file, &bytes, id.dwo_name(), endian, &mut cz))
            else {
                continue;
            };
            let mut units = dwo.units();
            let Ok(Some(h)) = units.next() else { continue };
            let Ok(u) = dwo.unit(h) else { continue };
            if u.dwo_id != Some(load.dwo_id) {
                continue;
            }
            dwo.make_dwo(&load.parent);
            // A .dwo has no .debug_line_str, but addr2line resolves the
            // skeleton's line table (DWARF 5, DW_FORM_line_strp names)
            // against the split unit's sections: lend it the parent's.
            if dwo.debug_line_str.reader().is_empty() {
                dwo.debug_line_str = load.parent.debug_line_str.clone();
            }
            *self.loaded_dwo.borrow_mut() += 1;
            return Some(Arc::new(dwo));
        }
        let shown = comp_dir.map_or(name.clone(), |d| d.join(&name));
        self.missing_dwo.borrow_mut().push(shown.display().to_string());
        None
    }

    fn resolve<L>(&self, mut r: LookupResult<L>) -> L::Output
    where
        L: LookupContinuation<Buf = DwarfReader>,
    {
        loop {
            match r {
                LookupResult::Output(o) => return o,
                LookupResult::Load { load, continuation } => {
                    let dwo = self.load_dwo(load);
                    r = continuation.resume(dwo);
                }
            }
        }
    }

    /// The function frames at `probe` (a link-time address), innermost first.
    /// Empty when no DWARF function covers the address.
    pub(crate) fn frames(&self, probe: u64, want_first_low: bool) -> Vec<RawFrame> {
        let mut out = Vec::new();
        let Ok(mut it) = self.resolve(self.ctx.find_frames(probe)) else { return out };
        let mut offsets: Vec<Option<UnitOffset<usize>>> = Vec::new();
        while let Ok(Some(f)) = it.next() {
            let Some(func) = f.function else { continue };
            offsets.push(f.dw_die_offset);
            out.push(RawFrame {
                die: None,
                name: func.raw_name().ok().map(|n| n.into_owned()),
                lang: func.language,
                first_low: None,
                call_file: None,
                call_line: 0,
                call_column: 0,
            });
        }
        if out.is_empty() {
            return out;
        }
        let Some(unit) = self.resolve(self.ctx.find_dwarf_and_unit(probe)) else { return out };
        let key = unit_key(unit.unit);
        // For a split unit addr2line reports the skeleton's language, which
        // is absent; the split unit's root DIE has it.
        let lang = unit_language(&unit);
        for f in out.iter_mut() {
            if f.lang.is_none() {
                f.lang = lang;
            }
        }
        let lines = self.lines();
        let n = out.len();
        for (i, (frame, off)) in out.iter_mut().zip(&offsets).enumerate() {
            let Some(off) = *off else { continue };
            frame.die = Some((key, off.0));
            let Ok(entry) = unit.entry(off) else { continue };
            if i + 1 < n {
                if let Some(gimli::AttributeValue::FileIndex(f) | gimli::AttributeValue::Udata(f)) =
                    entry.attr_value(gimli::DW_AT_call_file)
                {
                    frame.call_file = lines.unit_file(key, f);
                }
                frame.call_line = attr_u32(&entry, gimli::DW_AT_call_line);
                frame.call_column = attr_u32(&entry, gimli::DW_AT_call_column);
            }
            if want_first_low {
                frame.first_low = first_range_low(&unit, &entry);
            }
        }
        out
    }

    /// Every subprogram with code: (raw name, language, ranges), for the
    /// function table.
    pub(crate) fn subprograms(&self) -> Vec<Subprogram> {
        self.dies_with_code(gimli::DW_TAG_subprogram)
    }

    /// Every inlined instance of a function (DW_TAG_inlined_subroutine,
    /// DWARF 5 §3.3.8.2): the inlined function's raw name, language and the
    /// instance's ranges, for finding where inlined code runs.
    pub(crate) fn inlined_subroutines(&self) -> Vec<Subprogram> {
        self.dies_with_code(gimli::DW_TAG_inlined_subroutine)
    }

    fn dies_with_code(&self, tag: gimli::DwTag) -> Vec<Subprogram> {
        let mut out = Vec::new();
        let mut units = self.dwarf.units();
        while let Ok(Some(h)) = units.next() {
            let Ok(unit) = self.dwarf.unit(h) else { continue };
            if unit.dwo_id.is_some() {
                // Skeleton unit: the functions are in the .dwo file.
                continue;
            }
            let lang = unit_language(&gimli::UnitRef::new(&self.dwarf, &unit));
            let uref = gimli::UnitRef::new(&self.dwarf, &unit);
            let mut e = unit.entries();
            while let Ok(Some(die)) = e.next_dfs() {
                if die.tag() != tag {
                    continue;
                }
                let mut ranges = Vec::new();
                if let Ok(mut r) = uref.die_ranges(die) {
                    while let Ok(Some(r)) = r.next() {
                        if r.end > r.begin && r.begin != 0 {
                            ranges.push((r.begin, r.end));
                        }
                    }
                }
                if ranges.is_empty() {
                    continue;
                }
                if let Some(name) = die_name(&uref, die, 0) {
                    out.push((name, lang, ranges));
                }
            }
        }
        out
    }
}

fn unit_language(unit: &gimli::UnitRef<'_, DwarfReader>) -> Option<DwLang> {
    let mut e = unit.entries();
    let root = e.next_dfs().ok()??;
    match root.attr_value(gimli::DW_AT_language) {
        Some(gimli::AttributeValue::Language(l)) => Some(l),
        _ => None,
    }
}

fn attr_u32(entry: &gimli::DebuggingInformationEntry<DwarfReader>, at: gimli::DwAt) -> u32 {
    entry.attr_value(at).and_then(|v| v.udata_value()).unwrap_or(0) as u32
}

/// The linkage name, else the name, following abstract origins and
/// specifications.
fn die_name(
    unit: &gimli::UnitRef<'_, DwarfReader>,
    die: &gimli::DebuggingInformationEntry<DwarfReader>,
    depth: u32,
) -> Option<String> {
    for at in [gimli::DW_AT_linkage_name, gimli::DW_AT_MIPS_linkage_name, gimli::DW_AT_name] {
        if let Some(v) = die.attr_value(at) {
            if let Ok(s) = unit.attr_string(v) {
                return s.to_string_lossy().ok().map(|c| c.into_owned());
            }
        }
    }
    if depth > 8 {
        return None;
    }
    for at in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
        if let Some(gimli::AttributeValue::UnitRef(off)) = die.attr_value(at) {
            if let Ok(d) = unit.entry(off) {
                if let Some(n) = die_name(unit, &d, depth + 1) {
                    return Some(n);
                }
            }
        }
    }
    None
}

/// binutils' `arange.low` of a function: the low end of its first range,
/// after merging later ranges that extend it.
fn first_range_low(
    unit: &gimli::UnitRef<'_, DwarfReader>,
    entry: &gimli::DebuggingInformationEntry<DwarfReader>,
) -> Option<u64> {
    let mut ranges = unit.die_ranges(entry).ok()?;
    let mut list: Vec<(u64, u64)> = Vec::new();
    while let Ok(Some(r)) = ranges.next() {
        if r.begin >= r.end {
            continue;
        }
        if list.is_empty() {
            list.push((r.begin, r.end));
            continue;
        }
        let mut merged = false;
        for a in list.iter_mut() {
            if r.begin == a.1 {
                a.1 = r.end;
                merged = true;
                break;
            }
            if r.end == a.0 {
                a.0 = r.begin;
                merged = true;
                break;
            }
        }
        if !merged {
            list.insert(1, (r.begin, r.end));
        }
    }
    list.first().map(|a| a.0)
}

/// binutils' `mangle_style(lang) == 0`: languages whose DW_AT_name is the
/// symbol name itself (C and friends), so it is used without consulting the
/// symbol table.
pub(crate) fn name_is_linkage(lang: Option<DwLang>) -> bool {
    const PLAIN: &[DwLang] = &[
        gimli::DW_LANG_C89,
        gimli::DW_LANG_C,
        gimli::DW_LANG_C99,
        gimli::DW_LANG_C11,
        gimli::DW_LANG_C17,
        gimli::DW_LANG_Cobol74,
        gimli::DW_LANG_Cobol85,
        gimli::DW_LANG_Fortran77,
        gimli::DW_LANG_Fortran90,
        gimli::DW_LANG_Fortran95,
        gimli::DW_LANG_Fortran03,
        gimli::DW_LANG_Fortran08,
        gimli::DW_LANG_Fortran18,
        gimli::DW_LANG_Pascal83,
        gimli::DW_LANG_PLI,
        gimli::DW_LANG_UPC,
        gimli::DW_LANG_Mips_Assembler,
    ];
    lang.is_some_and(|l| PLAIN.contains(&l))
}

/// Find a separate debug file for an image: `.gnu_debuglink` next to it, in
/// its `.debug` directory or under /usr/lib/debug, or by build ID under
/// /usr/lib/debug/.build-id.
pub(crate) fn separate_debug_file(path: &Path, file: &object::File<'_>) -> Option<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut candidates = Vec::new();
    if let Ok(Some(id)) = file.build_id() {
        if id.len() > 1 {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            candidates.push(PathBuf::from(format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..])));
        }
    }
    if let Ok(Some((name, _crc))) = file.gnu_debuglink() {
        let name = String::from_utf8_lossy(name).into_owned();
        candidates.push(dir.join(&name));
        candidates.push(dir.join(".debug").join(&name));
        let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        candidates.push(Path::new("/usr/lib/debug").join(abs.strip_prefix("/").unwrap_or(&abs)).join(&name));
    }
    candidates.into_iter().find(|c| c.as_path() != path && c.is_file())
}
