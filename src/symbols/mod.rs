//! Symbols and source: every address becomes a function, a file and a line.
//!
//! A [`Symbolizer`] holds one or more ELF images (executables, position-
//! independent executables and shared objects placed at their load address,
//! kernels and modules side by side). For each image it reads:
//!
//! - the ELF symbol table ([`elfsyms`]): functions with their sizes, local
//!   symbols, the Arm mapping symbols that give the instruction set, the
//!   Thumb bit masked off; names demangled ([`demangle`]);
//! - the DWARF ([`dwarf`], through addr2line and gimli over a memory map):
//!   file, line, column and the chain of inlined functions, with split DWARF
//!   and compressed sections.
//!
//! An image without DWARF degrades to its symbols, one without symbols to
//! bare addresses; [`Detail`] says which, for an image and for each address.
//! Nothing about debug information is ever an error.
//!
//! Hot paths (a decoded trace) use [`Symbolizer::locate`] or a [`Cursor`]
//! (function, offset, file and line from sorted tables, with a small cache);
//! [`Symbolizer::symbolize`] gives the whole inline chain; [`symbolize_text`]
//! prints what `addr2line -a -f -i -C` prints.

pub mod demangle;
pub mod dwarf;
pub mod elfsyms;
pub mod functions;
pub mod itanium;
pub mod source;
mod text;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use demangle::{demangle as demangle_name, Mangling};
pub use dwarf::DwarfSource;
pub use elfsyms::{IsaState, Section, Symbol, SymbolKind, SymbolSource};
pub use functions::{FunctionEntry, FunctionTable, FuzzyMatch, FuzzyMatcher, SearchHit, SkimMatcher};
pub use source::{parse_substitution, SourceLookup, SourceResolver};
pub use text::{symbolize_text, write_frames_text};

use dwarf::{DebugInfo, RawFrame};
use elfsyms::ElfSymbols;

/// How much is known about an image, or about one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Detail {
    /// No image covers the address.
    Unmapped,
    /// Bare addresses: no symbol (a stripped image, or code no symbol covers).
    Address,
    /// The ELF symbol table: function and offset, no source.
    Symbols,
    /// DWARF: source file, line and the inline chain.
    Source,
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Detail::Unmapped => "not in any image",
            Detail::Address => "addresses only",
            Detail::Symbols => "symbols only",
            Detail::Source => "source lines",
        })
    }
}

/// Why an image could not be used for symbols, or an argument of the
/// symbol layer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    /// The file could not be opened or mapped.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// The `object` crate could not read the file.
    #[error("{0}")]
    Object(#[from] object::Error),
    /// The bytes are some other kind of object file.
    #[error("not an ELF file ({kind:?})")]
    NotElf { kind: object::FileKind },
    /// An error in `path` that does not name the file itself.
    #[error("{}: {source}", path.display())]
    InFile { path: PathBuf, source: Box<SymbolError> },
    /// An `ELF[@ADDRESS]` argument that does not parse.
    #[error("{arg}: {source}")]
    ImageArg { arg: String, source: crate::image::ImageError },
    /// An address argument that is not hexadecimal.
    #[error("'{arg}' is not a hexadecimal address")]
    BadAddress { arg: String },
    /// A `--substitute-path` argument without `=`.
    #[error("'{arg}' is not OLD=NEW")]
    BadSubstitution { arg: String },
    /// A source file was not found (every path tried is in the lookup).
    #[error("{0}")]
    SourceNotFound(source::SourceLookup),
    /// A line past the end of a source file.
    #[error("{}: no line {line} ({count} lines)", path.display())]
    NoLine { path: PathBuf, line: u32, count: usize },
}

impl SymbolError {
    /// This error as one of `path` (for errors that do not name it).
    pub fn in_file(self, path: &Path) -> SymbolError {
        SymbolError::InFile { path: path.to_path_buf(), source: Box::new(self) }
    }
}

/// One ELF image and where it is loaded.
pub struct Image {
    path: PathBuf,
    load: Option<u64>,
    bias: u64,
    elf: ElfSymbols,
    debug: Option<DebugInfo>,
    /// Link-time extent of the allocated sections.
    extent: (u64, u64),
    notes: Vec<String>,
}

impl fmt::Debug for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Image")
            .field("path", &self.path)
            .field("load", &self.load)
            .field("bias", &self.bias)
            .field("detail", &self.detail())
            .finish()
    }
}

impl Image {
    /// Open the ELF file at `path`. With `load`, the lowest loadable segment
    /// is placed at that address (as `decode --image PATH@ADDRESS` does).
    pub fn open(path: &Path, load: Option<u64>) -> Result<Image, SymbolError> {
        let bytes = dwarf::map_file(path).map_err(|source| SymbolError::Io { path: path.to_path_buf(), source })?;
        let elf = ElfSymbols::parse(&bytes).map_err(|e| e.in_file(path))?;
        let file = object::File::parse(&*bytes).map_err(|e| SymbolError::from(e).in_file(path))?;
        let segs = crate::image::elf::load_segments(&bytes).unwrap_or_default();
        let extent = elf.extent().unwrap_or((0, 0));
        let low = segs.iter().map(|s| s.vaddr).min().unwrap_or(extent.0);
        let bias = load.map_or(0, |l| l.wrapping_sub(low));
        let mut notes = Vec::new();
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        let debug = if dwarf::has_dwarf(&file) {
            DebugInfo::load(path, &bytes, &file, &dir)
        } else if let Some(dbg) = dwarf::separate_debug_file(path, &file) {
            let loaded = dwarf::map_file(&dbg).ok().and_then(|b| {
                let f = object::File::parse(&*b).ok()?;
                DebugInfo::load(&dbg, &b, &f, &dir)
            });
            if loaded.is_none() {
                notes.push(format!("separate debug file {} could not be read", dbg.display()));
            }
            loaded
        } else {
            None
        };
        match (&debug, elf.source) {
            (None, SymbolSource::None) => notes.push("stripped: no debug information and no symbols".into()),
            (None, _) => notes.push("no debug information: functions from the symbol table, no source lines".into()),
            (Some(_), SymbolSource::None) => notes.push("no symbol table".into()),
            _ => {}
        }
        if elf.source == SymbolSource::Dynamic {
            notes.push("symbol table stripped: dynamic symbols only".into());
        }
        Ok(Image { path: path.to_path_buf(), load, bias, elf, debug, extent, notes })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The load address given for the image, if any.
    pub fn load_address(&self) -> Option<u64> {
        self.load
    }

    /// What is added to link-time addresses to get run-time addresses.
    pub fn bias(&self) -> u64 {
        self.bias
    }

    /// Run-time address range covered by the image's allocated sections.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.extent.0.wrapping_add(self.bias)..self.extent.1.wrapping_add(self.bias)
    }

    /// Whether the ELF is 64-bit.
    pub fn is_64(&self) -> bool {
        self.elf.is_64
    }

    /// ELF machine (`EM_AARCH64`, `EM_ARM`, ...).
    pub fn machine(&self) -> u16 {
        self.elf.machine
    }

    /// How much the image can tell.
    pub fn detail(&self) -> Detail {
        if self.debug.is_some() {
            Detail::Source
        } else if self.elf.source != SymbolSource::None && self.elf.functions_by_address().next().is_some() {
            Detail::Symbols
        } else {
            Detail::Address
        }
    }

    /// Where the DWARF came from, when there is some.
    pub fn dwarf(&self) -> Option<&DwarfSource> {
        self.debug.as_ref().map(|d| &d.source)
    }

    /// Which symbol table was read.
    pub fn symbol_source(&self) -> SymbolSource {
        self.elf.source
    }

    /// All symbols, in symbol table order.
    pub fn symbols(&self) -> &[Symbol] {
        &self.elf.symbols
    }

    /// Allocated sections.
    pub fn sections(&self) -> &[Section] {
        &self.elf.sections
    }

    /// Remarks about the image: what is missing and how lookups degrade,
    /// split DWARF files that were not found.
    pub fn notes(&self) -> Vec<String> {
        let mut n = self.notes.clone();
        if let Some(d) = &self.debug {
            let missing = d.missing_dwo.borrow();
            for m in missing.iter() {
                n.push(format!("split DWARF file {m} not found: functions in it are named from the symbol table"));
            }
        }
        n
    }

    /// A one-line summary, e.g. `prog: source lines (DWARF, compressed)`.
    pub fn summary(&self) -> String {
        let mut s = format!("{}: {}", self.path.display(), self.detail());
        if let Some(d) = self.dwarf() {
            let mut parts = vec!["DWARF".to_string()];
            if d.file != self.path {
                parts.push(format!("from {}", d.file.display()));
            }
            if d.split {
                parts.push("split".into());
            }
            if let Some(p) = &d.package {
                parts.push(format!("package {}", p.display()));
            }
            if d.compressed {
                parts.push("compressed".into());
            }
            s.push_str(&format!(" ({})", parts.join(", ")));
        }
        let nsyms = self.elf.functions_by_address().count();
        s.push_str(&format!(
            ", {} function symbols{}",
            nsyms,
            match self.elf.source {
                SymbolSource::Dynamic => " (dynamic)",
                _ => "",
            }
        ));
        if let Some(l) = self.load {
            s.push_str(&format!(", loaded at {l:#x}"));
        }
        s
    }

    /// Whether a run-time address falls in one of the image's sections.
    pub fn contains(&self, addr: u64) -> bool {
        self.elf.section_at(addr.wrapping_sub(self.bias)).is_some()
    }

    #[inline]
    fn probe(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.bias)
    }

    /// The number of rows in the merged line table (builds it).
    pub fn line_rows(&self) -> usize {
        self.debug.as_ref().map_or(0, |d| d.lines().row_count())
    }

    /// All source file names named by the line tables.
    pub fn source_files(&self) -> Vec<Arc<str>> {
        self.debug.as_ref().map_or_else(Vec::new, |d| d.lines().files().to_vec())
    }

    pub(crate) fn elf(&self) -> &ElfSymbols {
        &self.elf
    }

    pub(crate) fn debug(&self) -> Option<&DebugInfo> {
        self.debug.as_ref()
    }
}

/// A function symbol found for an address.
#[derive(Clone, Copy, Debug)]
pub struct FunctionHit<'a> {
    /// Index of the image in the symbolizer.
    pub image: usize,
    pub symbol: &'a Symbol,
    /// Run-time start address of the symbol.
    pub start: u64,
    /// Address minus start.
    pub offset: u64,
    /// Whether the address is within the symbol's size.
    pub inside: bool,
}

impl FunctionHit<'_> {
    /// The demangled function name.
    pub fn name(&self) -> &str {
        self.symbol.name()
    }
}

impl fmt::Display for FunctionHit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.offset == 0 {
            write!(f, "{}", self.name())
        } else {
            write!(f, "{}+{:#x}", self.name(), self.offset)
        }
    }
}

/// The hot-path answer for an address: function, offset, file and line of
/// the innermost location (no inline chain).
#[derive(Clone, Copy, Debug, Default)]
pub struct Location<'a> {
    pub image: Option<usize>,
    pub function: Option<&'a Symbol>,
    pub offset: u64,
    pub file: Option<&'a str>,
    /// 0 when unknown.
    pub line: u32,
}

impl Location<'_> {
    pub fn detail(&self) -> Detail {
        if self.image.is_none() {
            Detail::Unmapped
        } else if self.file.is_some() {
            Detail::Source
        } else if self.function.is_some() {
            Detail::Symbols
        } else {
            Detail::Address
        }
    }
}

/// One frame of the inline chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Demangled function name, if known.
    pub function: Option<String>,
    /// The name as stored (mangled linkage name, or plain DWARF name).
    pub raw_function: Option<String>,
    pub file: Option<Arc<str>>,
    /// 0 when unknown.
    pub line: u32,
    /// 0 when unknown.
    pub column: u32,
    /// Line-table discriminator of the innermost frame (0 = none).
    pub discriminator: u32,
    /// True for every frame but the outermost: this function was inlined
    /// into the next frame.
    pub inlined: bool,
}

/// Everything known about one address.
#[derive(Clone, Debug)]
pub struct Symbolized {
    pub address: u64,
    /// Index of the image covering the address.
    pub image: Option<usize>,
    pub detail: Detail,
    /// The symbol table function and the offset into it.
    pub symbol: Option<SymbolInfo>,
    /// Innermost first; the first frame carries the line-table location.
    /// Empty without DWARF for the address.
    pub frames: Vec<Frame>,
    /// The instruction set from the mapping symbols.
    pub isa: Option<IsaState>,
}

/// A symbol table function, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolInfo {
    pub name: String,
    pub raw_name: String,
    /// Run-time start address.
    pub start: u64,
    pub size: u64,
    pub offset: u64,
    pub inside: bool,
}

/// The images of a program and lookups across them.
#[derive(Debug, Default)]
pub struct Symbolizer {
    images: Vec<Image>,
    /// What each image was opened as (canonical path, load address), so
    /// that the same file at the same place is one image, whatever the path
    /// spelling (otherwise its functions would be listed twice).
    keys: Vec<(PathBuf, Option<u64>)>,
}

impl Symbolizer {
    pub fn new() -> Symbolizer {
        Symbolizer { images: Vec::new(), keys: Vec::new() }
    }

    /// Open several images, each with an optional load address.
    pub fn from_images<P: AsRef<Path>>(
        images: impl IntoIterator<Item = (P, Option<u64>)>,
    ) -> Result<Symbolizer, SymbolError> {
        let mut s = Symbolizer::new();
        for (p, l) in images {
            s.add_image(p.as_ref(), l)?;
        }
        Ok(s)
    }

    /// Add an image; returns its index.
    /// The same file at the same load address again gives the index it
    /// already has.
    pub fn add_image(&mut self, path: &Path, load: Option<u64>) -> Result<usize, SymbolError> {
        let key = (std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()), load);
        if let Some(i) = self.keys.iter().position(|k| *k == key) {
            return Ok(i);
        }
        self.images.push(Image::open(path, load)?);
        self.keys.push(key);
        Ok(self.images.len() - 1)
    }

    /// Open images given as `PATH[@LOAD_ADDRESS]` (the `--image` arguments).
    pub fn from_image_args<S: AsRef<str>>(args: &[S]) -> Result<Symbolizer, SymbolError> {
        let mut s = Symbolizer::new();
        for a in args {
            s.add_image_arg(a.as_ref())?;
        }
        Ok(s)
    }

    /// Add an image given as `PATH[@LOAD_ADDRESS]` (hexadecimal).
    pub fn add_image_arg(&mut self, arg: &str) -> Result<usize, SymbolError> {
        let (p, l) = crate::image::elf::parse_image_arg(arg)
            .map_err(|source| SymbolError::ImageArg { arg: arg.to_string(), source })?;
        self.add_image(&p, l)
    }

    pub fn images(&self) -> &[Image] {
        &self.images
    }

    /// A name for `addr` when no symbol covers it (an image with neither
    /// symbols nor debug information, as recorded binaries often are, or code
    /// of a stripped library past the end of the exported function before
    /// it): the file name and the link-time address, which is what
    /// `objdump -d` of that file shows. None where a symbol names it or no
    /// image maps it.
    pub fn stripped_label(&self, loc: &Location<'_>, addr: u64) -> Option<String> {
        let im = self.images.get(loc.image?)?;
        if loc.function.is_some() {
            return None;
        }
        let name = im.path.file_name().map_or_else(|| im.path.to_string_lossy(), |n| n.to_string_lossy());
        Some(format!("{name}+{:#x}", addr.wrapping_sub(im.bias)))
    }

    /// The image covering `addr` (by its sections), with its index.
    #[inline]
    pub fn image_at(&self, addr: u64) -> Option<(usize, &Image)> {
        self.image_section_at(addr).map(|(i, im, _)| (i, im))
    }

    /// The image and its section (run-time range, header index) at `addr`.
    #[inline]
    fn image_section_at(&self, addr: u64) -> Option<(usize, &Image, (u64, u64, usize))> {
        for (i, im) in self.images.iter().enumerate() {
            let p = im.probe(addr);
            if p >= im.extent.0 && p < im.extent.1 {
                if let Some((lo, hi, sec)) = im.elf.section_range_at(p) {
                    return Some((i, im, (lo.wrapping_add(im.bias), hi.wrapping_add(im.bias), sec)));
                }
            }
        }
        None
    }

    /// The function symbol containing (or nearest before) `addr`.
    pub fn function(&self, addr: u64) -> Option<FunctionHit<'_>> {
        let (i, im, (_, _, sec)) = self.image_section_at(addr)?;
        let m = im.elf.function_in_section(im.probe(addr), sec)?;
        Some(FunctionHit {
            image: i,
            symbol: m.symbol,
            start: m.symbol.address.wrapping_add(im.bias),
            offset: m.offset,
            inside: m.inside,
        })
    }

    /// The instruction set at `addr` according to the mapping symbols.
    pub fn isa_at(&self, addr: u64) -> Option<IsaState> {
        let (_, im) = self.image_at(addr)?;
        im.elf.isa_at(im.probe(addr))
    }

    /// Function, offset, file and line for `addr`: the hot path.
    #[inline]
    pub fn locate(&self, addr: u64) -> Location<'_> {
        let s = self.locate_slot(addr);
        self.expand(&s)
    }

    /// The uncached lookup, as indices, with the address range over which
    /// the answer stays the same.
    #[inline]
    fn locate_slot(&self, addr: u64) -> Slot {
        let mut s = Slot {
            addr,
            image: NONE,
            symbol: NONE,
            file: NONE,
            line: 0,
            offset: 0,
            lo: addr,
            hi: addr.wrapping_add(1),
        };
        let Some((i, im, (sec_lo, sec_hi, sec))) = self.image_section_at(addr) else { return s };
        s.image = i as u32;
        let p = im.probe(addr);
        let (mut lo, mut hi) = (sec_lo, sec_hi);
        match im.elf.function_span(p, sec) {
            Some((m, (from, until))) => {
                // A symbol with a size names only what it covers: code past
                // its end (a static function of a stripped library) is not
                // part of it. Over the span the answer is the same.
                if m.inside || m.symbol.size == 0 {
                    s.symbol = m.index as u32;
                    s.offset = m.offset;
                }
                lo = lo.max(from.wrapping_add(im.bias));
                hi = hi.min(until.wrapping_add(im.bias));
            }
            None => {
                // Before the first symbol of the section: only this address.
                lo = addr;
                hi = addr.wrapping_add(1);
            }
        }
        if let Some(d) = &im.debug {
            match d.lines().lookup_span(p) {
                Some(((file, line), (from, until))) => {
                    s.file = file;
                    s.line = line;
                    lo = lo.max(from.wrapping_add(im.bias));
                    hi = hi.min(until.wrapping_add(im.bias));
                }
                None => {
                    lo = addr;
                    hi = addr.wrapping_add(1);
                }
            }
        }
        s.lo = lo;
        s.hi = hi;
        s
    }

    #[inline]
    fn expand(&self, s: &Slot) -> Location<'_> {
        if s.image == NONE {
            return Location::default();
        }
        let im = &self.images[s.image as usize];
        Location {
            image: Some(s.image as usize),
            function: (s.symbol != NONE).then(|| &im.elf.symbols[s.symbol as usize]),
            // A cache hit moves the offset along; without a symbol there is none.
            offset: if s.symbol == NONE { 0 } else { s.offset },
            file: if s.file == NONE {
                None
            } else {
                im.debug.as_ref().and_then(|d| d.lines().file(s.file)).map(|f| &**f)
            },
            line: s.line,
        }
    }

    /// A cursor with a cache, for many lookups in a row.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor::new(self)
    }

    /// Everything known about `addr`: symbol, inline chain, file, line.
    pub fn symbolize(&self, addr: u64) -> Symbolized {
        let mut out = Symbolized {
            address: addr,
            image: None,
            detail: Detail::Unmapped,
            symbol: None,
            frames: Vec::new(),
            isa: None,
        };
        let Some((i, im)) = self.image_at(addr) else { return out };
        out.image = Some(i);
        out.detail = Detail::Address;
        let p = im.probe(addr);
        out.isa = im.elf.isa_at(p);
        let sym = im.elf.function_at(p);
        if let Some(m) = sym {
            out.detail = Detail::Symbols;
            out.symbol = Some(SymbolInfo {
                name: m.symbol.name().to_string(),
                raw_name: m.symbol.raw_name.to_string(),
                start: m.symbol.address.wrapping_add(im.bias),
                size: m.symbol.size,
                offset: m.offset,
                inside: m.inside,
            });
        }
        let Some(d) = &im.debug else { return out };
        let lines = d.lines();
        let row = lines.lookup(p);
        let raw = d.frames(p, true);
        let file_of = |id: Option<u32>| id.and_then(|f| lines.file(f).cloned());
        if raw.is_empty() {
            if let Some(r) = row {
                out.frames.push(Frame {
                    function: sym.map(|m| m.symbol.name().to_string()),
                    raw_function: sym.map(|m| m.symbol.raw_name.to_string()),
                    file: file_of(Some(r.file)),
                    line: r.line,
                    column: r.column,
                    discriminator: r.discriminator,
                    inlined: false,
                });
            }
        } else {
            let n = raw.len();
            for (k, f) in raw.iter().enumerate() {
                let (function, raw_function) = frame_name(im, f, k + 1 == n);
                let (file, line, column, disc) = if k == 0 {
                    match row {
                        Some(r) => (file_of(Some(r.file)), r.line, r.column, r.discriminator),
                        None => (None, 0, 0, 0),
                    }
                } else {
                    let c = &raw[k - 1];
                    (file_of(c.call_file), c.call_line, c.call_column, 0)
                };
                out.frames.push(Frame {
                    function,
                    raw_function,
                    file,
                    line,
                    column,
                    discriminator: disc,
                    inlined: k + 1 < n,
                });
            }
        }
        if out.frames.iter().any(|f| f.file.is_some()) {
            out.detail = Detail::Source;
        }
        out
    }

    /// The table of every function, for search and entry counts.
    pub fn function_table(&self) -> FunctionTable {
        FunctionTable::from_symbolizer(self)
    }

    /// Every inlined instance of a function in the images' DWARF: the
    /// function's (demangled) name and where the instance's code starts
    /// (its first range, at run-time addresses).
    pub fn inline_instances(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for im in &self.images {
            let Some(d) = im.debug() else { continue };
            let bias = im.bias();
            for (raw, _lang, ranges) in d.inlined_subroutines() {
                if let Some(&(lo, _)) = ranges.first() {
                    out.push((demangle::demangle_or_raw(&raw).into_owned(), lo.wrapping_add(bias)));
                }
            }
        }
        out
    }
}

/// Parse an address argument as addr2line does: hexadecimal, with or
/// without `0x`.
pub fn parse_address(arg: &str) -> Result<u64, SymbolError> {
    let t = arg.trim();
    let h = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    u64::from_str_radix(h, 16).map_err(|_| SymbolError::BadAddress { arg: arg.to_string() })
}

/// The name for a DWARF frame: the demangled linkage name; for the outermost
/// frame without one (C++ `main`, static functions), the symbol that starts
/// where the function starts, so clones read `f(int) [clone .isra.0]`.
fn frame_name(im: &Image, f: &RawFrame, outermost: bool) -> (Option<String>, Option<String>) {
    let Some(raw) = &f.name else { return (None, None) };
    let linkage = dwarf::name_is_linkage(f.lang) || demangle::mangling(raw).is_some();
    if !linkage && outermost {
        if let Some(low) = f.first_low {
            if let Some(m) = im.elf.function_at(low) {
                if m.symbol.address == low {
                    return (Some(m.symbol.name().to_string()), Some(m.symbol.raw_name.to_string()));
                }
            }
        }
    }
    (Some(demangle::demangle_or_raw(raw).into_owned()), Some(raw.clone()))
}

/// Cached hot-path lookups in front of [`Symbolizer::locate`]: the range of
/// the last answer (code runs through a basic block, inside one function and
/// one line-table row) and a direct-mapped cache of recent addresses (a
/// decoded trace visits the same code over and over).
pub struct Cursor<'a> {
    sym: &'a Symbolizer,
    last: Slot,
    slots: Box<[Slot]>,
    hits: u64,
    misses: u64,
}

#[derive(Clone, Copy)]
struct Slot {
    addr: u64,
    image: u32,
    symbol: u32,
    file: u32,
    line: u32,
    /// Offset of `addr` in the symbol.
    offset: u64,
    /// Run-time range around `addr` with the same image, symbol and row.
    lo: u64,
    hi: u64,
}

const CACHE_SLOTS: usize = 4096;
const NONE: u32 = u32::MAX;
const EMPTY: Slot = Slot { addr: u64::MAX, image: NONE, symbol: NONE, file: NONE, line: 0, offset: 0, lo: 1, hi: 0 };

impl<'a> Cursor<'a> {
    fn new(sym: &'a Symbolizer) -> Cursor<'a> {
        Cursor { sym, last: EMPTY, slots: vec![EMPTY; CACHE_SLOTS].into_boxed_slice(), hits: 0, misses: 0 }
    }

    #[inline]
    fn slot_index(addr: u64) -> usize {
        (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_SLOTS.trailing_zeros())) as usize
    }

    /// Like [`Symbolizer::locate`], cached.
    #[inline]
    pub fn locate(&mut self, addr: u64) -> Location<'a> {
        let last = &mut self.last;
        if addr >= last.lo && addr < last.hi {
            self.hits += 1;
            last.offset = last.offset.wrapping_add(addr.wrapping_sub(last.addr));
            last.addr = addr;
            let s = *last;
            return self.sym.expand(&s);
        }
        let i = Self::slot_index(addr);
        let s = self.slots[i];
        if s.addr == addr {
            self.hits += 1;
            self.last = s;
            return self.sym.expand(&s);
        }
        self.misses += 1;
        let s = self.sym.locate_slot(addr);
        self.slots[i] = s;
        self.last = s;
        self.sym.expand(&s)
    }

    /// (cache hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}
