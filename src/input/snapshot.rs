//! The snapshot directory model: `snapshot.ini`, the device files it lists
//! and the trace metadata file (`trace.ini`).
//!
//! Interpretation follows OpenCSD's snapshot reader (the library behind
//! trc_pkt_lister), with its hard parse failures turned into
//! [`SetupWarning`]s:
//!
//! * `[device_list]` values are device files, in order (keys are ignored);
//!   a listed file that cannot be read is a warning, not an error.
//! * `[bufferN]` sections count only if named in the `buffers=` list (split
//!   at commas, not trimmed) *before* the section; buffers are kept in
//!   section order, which is what decides the default buffer.
//! * `[source_buffers]` maps SOURCE=BUFFER and `[core_trace_sources]`
//!   CORE=SOURCE; for a repeated source the last line wins.  Sources of a
//!   buffer are listed sorted by name (OpenCSD keeps them in a `std::map`).
//! * A buffer whose `format` is anything but `source_data` (even missing) is
//!   treated as CoreSight-formatted.

use std::fmt;
use std::path::{Path, PathBuf};

use super::ini::{c_strtoul_prefix, parse_c_unsigned, trim, Entry, Ini, Section};
use super::{read_small_file, InputError};

/// Registers read from one device file: real trace units and cores have a
/// few hundred at most.
pub const MAX_REGISTERS: usize = 4096;
/// Setup warnings kept for one snapshot.
const MAX_WARNINGS: usize = 1000;

/// A problem found while reading the snapshot that does not stop decoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupWarning {
    pub path: PathBuf,
    /// 1-based line, 0 if not tied to a line.
    pub line: usize,
    pub msg: String,
}

impl fmt::Display for SetupWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.path.display(), self.line, self.msg)
        } else {
            write!(f, "{}: {}", self.path.display(), self.msg)
        }
    }
}

/// One `[regs]` entry of a device file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Register {
    /// The key as written, e.g. `TRCIDR0(id:0x78)` or `X0(size:64)`.
    pub key: String,
    /// Upper-cased text before any `(`, e.g. `TRCIDR0`.
    pub name: String,
    /// The value text (surrounding quotes removed).
    pub raw_value: String,
    /// The value if the whole text is a number (hex `0x..`, octal `0..`,
    /// decimal), `None` otherwise (a warning is recorded on the snapshot).
    pub value: Option<u64>,
    pub line: usize,
}

impl Register {
    /// The value OpenCSD uses: C `strtoul(text, NULL, 0)`, i.e. the longest
    /// numeric prefix, 0 if none.
    pub fn c_value(&self) -> u64 {
        c_strtoul_prefix(&self.raw_value)
    }
}

/// A `[dump*]` section of a core device: a memory image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpRegion {
    /// Section name, e.g. `dump1`.
    pub section: String,
    /// File name as written (quotes removed), relative to the snapshot.
    pub file: String,
    pub address: u64,
    /// Bytes to map; `None` = the whole file from `offset`.
    pub length: Option<u64>,
    /// Offset into the file.
    pub offset: Option<u64>,
    /// Memory space name as written (`EL1N`, `EL2`, `S`, `N`, `ANY`, ...).
    pub space: Option<String>,
    pub line: usize,
}

/// One device file (`[device]`, `[regs]`, `[dump*]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// The file name as listed in `[device_list]`.
    pub file: String,
    pub path: PathBuf,
    pub name: String,
    /// `core`, `trace_source`, ...
    pub class: String,
    /// Device type: a core name (`Cortex-A57`) or a trace source type
    /// (`ETE`, `ETM4`, `ETM4.1`, `ETM3.5`, `PTM1.1`, `PFT1.1`, `STM`, `ITM`).
    pub type_name: String,
    pub regs: Vec<Register>,
    pub dumps: Vec<DumpRegion>,
}

impl Device {
    pub fn device_type(&self) -> &str {
        &self.type_name
    }

    /// Type without any `.minor` suffix (`ETM4.1` -> `ETM4`), the name
    /// OpenCSD picks the protocol by.
    pub fn type_base(&self) -> &str {
        match self.type_name.find('.') {
            Some(dot) => &self.type_name[..dot],
            None => &self.type_name,
        }
    }

    pub fn is_core(&self) -> bool {
        self.class == "core"
    }

    pub fn is_trace_source(&self) -> bool {
        self.class == "trace_source"
    }

    /// The register OpenCSD would pick for `name` (compared without case,
    /// ignoring any `(..)` suffix): of several matches, the one whose key
    /// sorts first ignoring case.
    pub fn register(&self, name: &str) -> Option<&Register> {
        self.regs
            .iter()
            .filter(|r| r.name.eq_ignore_ascii_case(name))
            .min_by(|a, b| cmp_ignore_case(&a.key, &b.key))
    }

    /// Value of register `name` as OpenCSD reads it ([`Register::c_value`]).
    pub fn reg(&self, name: &str) -> Option<u64> {
        self.register(name).map(Register::c_value)
    }
}

/// `format=` of a trace buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BufferFormat {
    /// `coresight`: 16-byte formatter frames, memory aligned.
    CoreSight,
    /// `source_data`: a single source's raw byte stream.
    SourceData,
    /// `dstream_coresight`: DSTREAM capture of TPIU frames.
    DstreamCoreSight,
    /// Anything else, including a missing key (empty string).
    Unknown(String),
}

impl BufferFormat {
    pub fn parse(s: &str) -> BufferFormat {
        match s {
            "coresight" => BufferFormat::CoreSight,
            "source_data" => BufferFormat::SourceData,
            "dstream_coresight" => BufferFormat::DstreamCoreSight,
            other => BufferFormat::Unknown(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            BufferFormat::CoreSight => "coresight",
            BufferFormat::SourceData => "source_data",
            BufferFormat::DstreamCoreSight => "dstream_coresight",
            BufferFormat::Unknown(s) => s,
        }
    }

    /// Whether OpenCSD runs the buffer through the frame deformatter: every
    /// format except `source_data`.
    pub fn is_formatted(&self) -> bool {
        *self != BufferFormat::SourceData
    }
}

/// A `[bufferN]` section of the trace metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceBuffer {
    /// Section name, e.g. `buffer1`.
    pub section: String,
    /// `name=`, e.g. `ETB_0`.
    pub name: String,
    /// `file=` as written.
    pub file: String,
    pub format: BufferFormat,
    /// The file inside the snapshot directory.
    pub path: PathBuf,
    pub line: usize,
}

/// A snapshot directory.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub dir: PathBuf,
    pub version: Option<String>,
    pub description: Option<String>,
    /// Device files listed in `[device_list]`, in order.
    pub device_files: Vec<String>,
    /// Devices that could be read, in `[device_list]` order.
    pub devices: Vec<Device>,
    /// `[trace] metadata=` (normally `trace.ini`).
    pub trace_metadata: String,
    /// `buffers=` list, as split (may contain empty names).
    pub buffer_list: Vec<String>,
    buffers: Vec<TraceBuffer>,
    /// `[source_buffers]` as (source, buffer), in file order.
    pub source_buffers: Vec<(String, String)>,
    /// `[core_trace_sources]` as (core, source), in file order.
    pub core_sources: Vec<(String, String)>,
    pub warnings: Vec<SetupWarning>,
}

impl Snapshot {
    /// Read `dir/snapshot.ini`, every device file and the trace metadata.
    /// A missing `snapshot.ini` or trace metadata file is an error; unreadable
    /// device files and malformed entries become [`Snapshot::warnings`].
    pub fn open(dir: &Path) -> Result<Snapshot, InputError> {
        let ss_path = dir.join("snapshot.ini");
        let ss_ini = Ini::parse(&read_small_file(
            ss_path.clone(),
            &format!("snapshot directory {}", dir.display()),
        )?);
        let mut snap = Snapshot {
            dir: dir.to_path_buf(),
            version: None,
            description: None,
            device_files: Vec::new(),
            devices: Vec::new(),
            trace_metadata: String::new(),
            buffer_list: Vec::new(),
            buffers: Vec::new(),
            source_buffers: Vec::new(),
            core_sources: Vec::new(),
            warnings: Vec::new(),
        };
        snap.ini_warnings(&ss_path, &ss_ini);
        snap.read_snapshot_ini(&ss_path, &ss_ini);

        for file in snap.device_files.clone() {
            let path = dir.join(&file);
            match read_small_file(path.clone(), "snapshot.ini [device_list]") {
                Ok(bytes) => {
                    let device = snap.read_device(&file, &path, &Ini::parse(&bytes));
                    snap.devices.push(device);
                }
                Err(e) => snap.warn(&path, 0, format!("failed to open device file: {e}")),
            }
        }

        if snap.trace_metadata.is_empty() {
            return Err(InputError::MissingKey {
                path: ss_path,
                section: "trace".into(),
                key: "metadata".into(),
            });
        }
        let trace_path = dir.join(&snap.trace_metadata);
        let trace_ini = Ini::parse(&read_small_file(
            trace_path.clone(),
            &format!("{} [trace] metadata", ss_path.display()),
        )?);
        snap.ini_warnings(&trace_path, &trace_ini);
        snap.read_trace_ini(&trace_path, &trace_ini);
        Ok(snap)
    }

    fn warn(&mut self, path: &Path, line: usize, msg: String) {
        // A hostile file could produce one warning per line: keep the first
        // ones, which say what is wrong, and bound the memory.
        if self.warnings.len() > MAX_WARNINGS {
            return;
        }
        let msg = if self.warnings.len() == MAX_WARNINGS { format!("{msg} (further warnings omitted)") } else { msg };
        self.warnings.push(SetupWarning {
            path: path.to_path_buf(),
            line,
            msg,
        });
    }

    fn ini_warnings(&mut self, path: &Path, ini: &Ini) {
        for w in &ini.warnings {
            self.warn(path, w.line, w.msg.clone());
        }
    }

    fn read_snapshot_ini(&mut self, path: &Path, ini: &Ini) {
        for section in &ini.sections {
            match section.name.as_str() {
                "snapshot" => {
                    for e in &section.entries {
                        match e.key.as_str() {
                            "version" => {
                                if self.version.is_some() {
                                    self.warn(path, e.line, "duplicate version key".into());
                                    continue;
                                }
                                if e.value != "1.0" && e.value != "1" {
                                    self.warn(
                                        path,
                                        e.line,
                                        format!("illegal snapshot file version: {}", e.value),
                                    );
                                }
                                self.version = Some(e.value.clone());
                            }
                            "description" => {
                                if self.description.is_some() {
                                    self.warn(path, e.line, "duplicate description key".into());
                                } else {
                                    self.description = Some(e.value.clone());
                                }
                            }
                            _ => {}
                        }
                    }
                }
                "device_list" => {
                    self.device_files
                        .extend(section.entries.iter().map(|e| e.value.clone()));
                }
                "trace" => {
                    for e in section.get_all("metadata") {
                        if self.trace_metadata.is_empty() {
                            self.trace_metadata = e.value.clone();
                        } else {
                            self.warn(path, e.line, "duplicate metadata key".into());
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn read_device(&mut self, file: &str, path: &Path, ini: &Ini) -> Device {
        self.ini_warnings(path, ini);
        let mut dev = Device {
            file: file.to_string(),
            path: path.to_path_buf(),
            name: String::new(),
            class: String::new(),
            type_name: String::new(),
            regs: Vec::new(),
            dumps: Vec::new(),
        };
        // Register names already seen (case-insensitive), for duplicates in
        // constant time: a device file may hold any number of lines.
        let mut seen = std::collections::HashSet::new();
        for section in &ini.sections {
            match section.name.as_str() {
                "device" => {
                    for (key, slot) in [
                        ("name", &mut dev.name),
                        ("class", &mut dev.class),
                        ("type", &mut dev.type_name),
                    ] {
                        let mut found = section.get_all(key);
                        if let Some(first) = found.next() {
                            *slot = first.value.clone();
                        }
                        for dup in found {
                            self.warn(path, dup.line, format!("duplicate {key} key in [device]"));
                        }
                    }
                }
                "regs" => {
                    for e in &section.entries {
                        if dev.regs.len() >= MAX_REGISTERS {
                            self.warn(path, e.line, format!("more than {MAX_REGISTERS} registers; the rest are ignored"));
                            break;
                        }
                        if !seen.insert(e.key.to_ascii_lowercase()) {
                            self.warn(path, e.line, format!("duplicate register {}", e.key));
                            continue;
                        }
                        self.add_register(&mut dev, e);
                    }
                }
                name if name.starts_with("dump") => {
                    if let Some(d) = self.read_dump(path, section) {
                        dev.dumps.push(d);
                    }
                }
                _ => {}
            }
        }
        dev
    }

    fn add_register(&mut self, dev: &mut Device, e: &Entry) {
        let path = dev.path.clone();
        let path = path.as_path();
        let raw_value = e.value.trim_matches(['"', '\'']).to_string();
        let value = parse_c_unsigned(&raw_value);
        if value.is_none() {
            self.warn(
                path,
                e.line,
                format!("register {}: '{}' is not a number", e.key, raw_value),
            );
        }
        let base = match e.key.find('(') {
            Some(p) => &e.key[..p],
            None => &e.key,
        };
        dev.regs.push(Register {
            key: e.key.clone(),
            name: base.to_ascii_uppercase(),
            raw_value,
            value,
            line: e.line,
        });
    }

    fn read_dump(&mut self, path: &Path, section: &Section) -> Option<DumpRegion> {
        let mut file = None;
        let mut address = None;
        let mut length = None;
        let mut offset = None;
        let mut space = None;
        for e in &section.entries {
            let number = |this: &mut Snapshot| {
                let v = parse_c_unsigned(&e.value);
                if v.is_none() {
                    this.warn(
                        path,
                        e.line,
                        format!("could not parse '{}' as unsigned integer", e.value),
                    );
                }
                v
            };
            let (slot_is_set, name) = match e.key.as_str() {
                "file" => (file.is_some(), "file"),
                "address" => (address.is_some(), "address"),
                "length" => (length.is_some(), "length"),
                "offset" => (offset.is_some(), "offset"),
                "space" => (space.is_some(), "space"),
                other => {
                    self.warn(
                        path,
                        e.line,
                        format!("unknown dump section key '{other}' in [{}]", section.name),
                    );
                    continue;
                }
            };
            if slot_is_set {
                self.warn(
                    path,
                    e.line,
                    format!("duplicate {name} key in [{}]", section.name),
                );
                continue;
            }
            match name {
                "file" => file = Some(e.value.trim_matches(['"', '\'']).to_string()),
                "space" => space = Some(e.value.trim_matches(['"', '\'']).to_string()),
                "address" => address = number(self),
                "length" => length = number(self),
                _ => offset = number(self),
            }
        }
        let (Some(file), Some(address)) = (file, address) else {
            self.warn(
                path,
                section.line,
                format!(
                    "[{}] needs both file= and address=; memory image ignored",
                    section.name
                ),
            );
            return None;
        };
        Some(DumpRegion {
            section: section.name.clone(),
            file,
            address,
            length,
            offset,
            space,
            line: section.line,
        })
    }

    fn read_trace_ini(&mut self, path: &Path, ini: &Ini) {
        for section in &ini.sections {
            match section.name.as_str() {
                "trace_buffers" => {
                    for e in section.get_all("buffers") {
                        if !self.buffer_list.is_empty() {
                            self.warn(path, e.line, "duplicate buffers key".into());
                            continue;
                        }
                        self.buffer_list = e.value.split(',').map(str::to_string).collect();
                        for name in &self.buffer_list.clone() {
                            if trim(name) != name {
                                self.warn(
                                    path,
                                    e.line,
                                    format!(
                                        "buffer name '{name}' has surrounding spaces; \
                                         OpenCSD will not match it to a section"
                                    ),
                                );
                            }
                        }
                    }
                }
                "source_buffers" => {
                    for e in &section.entries {
                        self.source_buffers.push((e.key.clone(), e.value.clone()));
                    }
                }
                "core_trace_sources" => {
                    for e in &section.entries {
                        self.core_sources.push((e.key.clone(), e.value.clone()));
                    }
                }
                name if self.buffer_list.iter().any(|b| b == name) => {
                    self.read_buffer(path, section);
                }
                _ => {}
            }
        }
    }

    fn read_buffer(&mut self, path: &Path, section: &Section) {
        let first = |key: &str, this: &mut Snapshot| -> Option<String> {
            let mut all = section.get_all(key);
            let value = all.next().map(|e| e.value.clone());
            for dup in all {
                this.warn(
                    path,
                    dup.line,
                    format!("duplicate {key} key in [{}]", section.name),
                );
            }
            value
        };
        let name = first("name", self);
        let file = first("file", self);
        let format = first("format", self).unwrap_or_default();
        let (Some(name), Some(file)) = (name, file) else {
            self.warn(
                path,
                section.line,
                format!(
                    "trace buffer section [{}] needs name= and file=; ignored",
                    section.name
                ),
            );
            return;
        };
        self.buffers.push(TraceBuffer {
            section: section.name.clone(),
            path: self.dir.join(&file),
            name,
            file,
            format: BufferFormat::parse(&format),
            line: section.line,
        });
    }

    /// Every file the snapshot reads: `snapshot.ini`, the trace metadata,
    /// device files, memory dumps and trace buffers. An output must never
    /// be one of them.
    pub fn input_files(&self) -> Vec<PathBuf> {
        let mut v = vec![self.dir.join("snapshot.ini"), self.dir.join(&self.trace_metadata)];
        v.extend(self.devices.iter().map(|d| d.path.clone()));
        v.extend(self.devices.iter().flat_map(|d| d.dumps.iter().map(|r| self.dir.join(&r.file))));
        v.extend(self.buffers.iter().map(|b| b.path.clone()));
        v
    }

    /// Trace buffers in `[bufferN]` section order.
    pub fn buffers(&self) -> &[TraceBuffer] {
        &self.buffers
    }

    /// Buffer names in section order (what trc_pkt_lister lists as valid).
    pub fn buffer_names(&self) -> Vec<&str> {
        self.buffers.iter().map(|b| b.name.as_str()).collect()
    }

    /// The buffer trc_pkt_lister uses by default: the first `[bufferN]`
    /// section in the file (not the first name of `buffers=`).
    pub fn default_buffer(&self) -> Option<&TraceBuffer> {
        self.buffers.first()
    }

    /// The (first) buffer called `name`.
    pub fn buffer(&self, name: &str) -> Result<&TraceBuffer, InputError> {
        self.buffers
            .iter()
            .find(|b| b.name == name)
            .ok_or_else(|| InputError::UnknownBuffer {
                name: name.to_string(),
                known: self.buffers.iter().map(|b| b.name.clone()).collect(),
            })
    }

    /// The buffer a source writes to (last `[source_buffers]` line wins).
    pub fn buffer_of_source(&self, source: &str) -> Option<&str> {
        self.source_buffers
            .iter()
            .rev()
            .find(|(s, _)| s == source)
            .map(|(_, b)| b.as_str())
    }

    /// Names of the sources writing to `buffer`, sorted (byte order), each
    /// once - including sources that have no device file.
    pub fn source_names_for_buffer(&self, buffer: &str) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .source_buffers
            .iter()
            .map(|(s, _)| s.as_str())
            .filter(|s| self.buffer_of_source(s) == Some(buffer))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Devices of the sources writing to `buffer`, in source name order;
    /// sources without a device are left out.
    pub fn sources_for_buffer(&self, buffer: &str) -> Vec<&Device> {
        self.source_names_for_buffer(buffer)
            .into_iter()
            .filter_map(|s| self.device(s))
            .collect()
    }

    /// Core name associated with a trace source (last line wins).
    pub fn core_name_for_source(&self, source: &str) -> Option<&str> {
        self.core_sources
            .iter()
            .rev()
            .find(|(_, s)| s == source)
            .map(|(c, _)| c.as_str())
    }

    /// The CPU number of the core a trace source traces, when
    /// `[core_trace_sources]` names one. Cores are numbered by the number
    /// their names end in (`cpu_3` is CPU 3) when every core's name ends in
    /// a different one; otherwise (`Cortex-A7_0` beside `Cortex-A15_0`) by
    /// the order they are first listed in.
    pub fn cpu_for_source(&self, source: &str) -> Option<u32> {
        let core = self.core_name_for_source(source)?;
        let mut cores: Vec<&str> = Vec::new();
        for (c, _) in &self.core_sources {
            if !cores.contains(&c.as_str()) {
                cores.push(c);
            }
        }
        let suffix = |name: &str| -> Option<u32> {
            let digits = name.len() - name.trim_end_matches(|ch: char| ch.is_ascii_digit()).len();
            name[name.len() - digits..].parse().ok()
        };
        let numbers: Option<Vec<u32>> = cores.iter().map(|c| suffix(c)).collect();
        let distinct = numbers.as_ref().is_some_and(|n| {
            let mut sorted = n.clone();
            sorted.sort_unstable();
            sorted.windows(2).all(|w| w[0] != w[1])
        });
        let at = cores.iter().position(|c| *c == core)?;
        match numbers {
            Some(n) if distinct => Some(n[at]),
            _ => u32::try_from(at).ok(),
        }
    }

    /// Core device associated with a trace source.
    pub fn core_for_source(&self, source: &str) -> Option<&Device> {
        self.core_name_for_source(source)
            .and_then(|c| self.device(c))
    }

    /// Device called `name` (the last one read, if several share it).
    pub fn device(&self, name: &str) -> Option<&Device> {
        self.devices.iter().rev().find(|d| d.name == name)
    }
}

fn cmp_ignore_case(a: &str, b: &str) -> std::cmp::Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}
