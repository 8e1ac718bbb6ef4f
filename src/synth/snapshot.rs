//! Writing a synthesized trace as an OpenCSD snapshot directory:
//! `snapshot.ini`, `trace.ini`, one core and one ETE device file per trace
//! unit (the ETE registers matching what the stream uses), the memory images
//! of the executed code as `[dumpN]` entries, the trace buffer, the program's
//! ELF file, and optionally the expected results for tests.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::encoder::{Fate, P0Kind, StreamResult};
use super::program::CodeImage;
use super::SynthError;

/// Name of the file that marks a directory as written by the synthesizer.
pub const MARKER: &str = "synth.txt";
/// The trace buffer file.
pub const TRACE_FILE: &str = "trace.bin";

/// Prepare `dir`: create it, or clear it if an earlier synthesis wrote it.
/// Refuses to touch a non-empty directory the synthesizer did not write.
pub fn prepare_dir(dir: &Path) -> Result<(), SynthError> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir).map_err(SynthError::io(dir))?.next().is_none();
        if !empty {
            if !dir.join(MARKER).is_file() {
                return Err(SynthError::NotOurs { dir: dir.to_path_buf() });
            }
            std::fs::remove_dir_all(dir).map_err(SynthError::io(dir))?;
        }
    }
    std::fs::create_dir_all(dir.join("mem")).map_err(SynthError::io(dir))
}

/// Everything the metadata files describe.
pub struct SnapshotInfo<'a> {
    pub streams: &'a [StreamResult],
    pub image: &'a CodeImage,
    /// Trace buffer in formatter frames (else one raw source).
    pub formatted: bool,
    /// ELF files to copy into the snapshot (the program first).
    pub elfs: &'a [PathBuf],
    /// Free text for `synth.txt` (command, settings, totals).
    pub notes: String,
}

fn write_file(path: &Path, text: &str) -> Result<(), SynthError> {
    std::fs::write(path, text).map_err(SynthError::io(path))
}

/// Write the metadata, memory dumps and ELF copies (the trace buffer is
/// written separately, while it is encoded).
pub fn write_snapshot(dir: &Path, info: &SnapshotInfo) -> Result<(), SynthError> {
    // Memory dumps, shared by all cores.
    let mut dumps = String::new();
    for (i, seg) in info.image.segments.iter().enumerate() {
        let file = format!("mem/{}.bin", seg.name);
        std::fs::write(dir.join(&file), &seg.bytes).map_err(SynthError::io(&dir.join(&file)))?;
        let _ = write!(
            dumps,
            "\n[dump{}]\nfile={}\naddress=0x{:x}\nlength=0x{:x}\n",
            i + 1,
            file,
            seg.addr,
            seg.bytes.len()
        );
    }
    let mut device_list = String::new();
    let mut sources = String::new();
    let mut cores = String::new();
    for (n, s) in info.streams.iter().enumerate() {
        let cpu = format!("cpu_{n}");
        let ete = format!("ETE_{n}");
        let _ = writeln!(device_list, "device{}={cpu}.ini", 2 * n);
        let _ = writeln!(device_list, "device{}={ete}.ini", 2 * n + 1);
        let core = format!(
            "[device]\nname={cpu}\nclass=core\ntype={}\n\n[regs]\nPC(size:64)=0x{:x}\nSP(size:64)=0\n{dumps}",
            super::encoder::CORE_TYPE,
            s.start_pc
        );
        write_file(&dir.join(format!("{cpu}.ini")), &core)?;
        let r = &s.registers;
        let dev = format!(
            "[device]\nname={ete}\nclass=trace_source\ntype=ETE\n\n[regs]\nTRCCONFIGR=0x{:x}\nTRCTRACEIDR=0x{:x}\nTRCDEVARCH=0x{:x}\nTRCIDR0=0x{:x}\nTRCIDR1=0x{:x}\nTRCIDR2=0x{:x}\nTRCIDR8=0x{:x}\n",
            r.trcconfigr,
            r.trctraceidr,
            r.trcdevarch.unwrap_or(0),
            r.trcidr0,
            r.trcidr1,
            r.trcidr2,
            r.trcidr8
        );
        write_file(&dir.join(format!("{ete}.ini")), &dev)?;
        let _ = writeln!(sources, "{ete}=ETB_0");
        let _ = writeln!(cores, "{cpu}={ete}");
    }
    let snapshot = format!(
        "[snapshot]\nversion=1.0\ndescription=synthesized by tracesight synth\n\n[device_list]\n{device_list}\n[trace]\nmetadata=trace.ini\n"
    );
    write_file(&dir.join("snapshot.ini"), &snapshot)?;
    let format = if info.formatted { "coresight" } else { "source_data" };
    let trace = format!(
        "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=ETB_0\nfile={TRACE_FILE}\nformat={format}\n\n[source_buffers]\n{sources}\n[core_trace_sources]\n{cores}"
    );
    write_file(&dir.join("trace.ini"), &trace)?;
    write_elfs_and_notes(dir, info.elfs, &info.notes)
}

/// Copy the ELF files into `dir` and write the marker file with `notes`.
pub fn write_elfs_and_notes(dir: &Path, elfs: &[PathBuf], notes: &str) -> Result<(), SynthError> {
    for elf in elfs {
        if let Some(name) = elf.file_name() {
            let to = dir.join(name);
            std::fs::copy(elf, &to).map_err(|error| SynthError::Copy { from: elf.clone(), to: to.clone(), error })?;
        }
    }
    write_file(&dir.join(MARKER), notes)
}

/// Instruction runs as text: one `START COUNT` line (hex, decimal) per run.
pub fn runs_text(runs: &[(u64, u64)]) -> String {
    let mut s = String::with_capacity(runs.len() * 16);
    for (a, n) in runs {
        let _ = writeln!(s, "{a:x} {n}");
    }
    s
}

/// Parse [`runs_text`].
pub fn parse_runs(text: &str) -> Result<Vec<(u64, u64)>, SynthError> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut it = l.split_whitespace();
            let a = it.next().and_then(|a| u64::from_str_radix(a, 16).ok());
            let n = it.next().and_then(|n| n.parse::<u64>().ok());
            match (a, n) {
                (Some(a), Some(n)) => Ok((a, n)),
                _ => Err(SynthError::BadRunLine { line: l.to_string() }),
            }
        })
        .collect()
}

/// The speculative elements of a stream that were not committed, as text:
/// a `p0 TOTAL` line, then `SEQ KIND FATE` per element (KIND: E, N or X).
pub fn spec_text(s: &StreamResult) -> String {
    let mut t = format!("p0 {}\n", s.stats.p0_elements);
    for f in &s.spec {
        let kind = match f.kind {
            P0Kind::Atom(true) => "E",
            P0Kind::Atom(false) => "N",
            P0Kind::Exception => "X",
        };
        let fate = match f.fate {
            Fate::Committed => "committed",
            Fate::Canceled => "canceled",
            Fate::Corrected => "corrected",
            Fate::Discarded => "discarded",
        };
        let _ = writeln!(t, "{} {kind} {fate}", f.seq);
    }
    t
}

/// Write the expected results of a synthesis into `dir/expected/`: per trace
/// ID the executed instruction runs (from qemu) and the speculation fates.
pub fn write_expected(dir: &Path, streams: &[StreamResult], runs: &[Vec<(u64, u64)>]) -> Result<(), SynthError> {
    let e = dir.join("expected");
    std::fs::create_dir_all(&e).map_err(SynthError::io(&e))?;
    for (s, r) in streams.iter().zip(runs) {
        write_file(&e.join(format!("trace_{:02x}.runs", s.trace_id)), &runs_text(r))?;
        write_file(&e.join(format!("trace_{:02x}.spec", s.trace_id)), &spec_text(s))?;
    }
    Ok(())
}

/// A trace buffer file being written.
pub struct TraceOut {
    file: std::io::BufWriter<std::fs::File>,
    frames: Option<super::frames::FrameWriter<Vec<u8>>>,
    pub bytes: u64,
}

impl TraceOut {
    pub fn create(dir: &Path, formatted: bool) -> Result<TraceOut, SynthError> {
        TraceOut::create_file(&dir.join(TRACE_FILE), formatted)
    }

    /// A trace file at `p` (the perf.data writer spools each CPU's AUX data so).
    pub fn create_file(p: &Path, formatted: bool) -> Result<TraceOut, SynthError> {
        let f = std::fs::File::create(p).map_err(SynthError::io(p))?;
        Ok(TraceOut {
            file: std::io::BufWriter::with_capacity(1 << 20, f),
            frames: formatted.then(|| super::frames::FrameWriter::new(Vec::with_capacity(1 << 16))),
            bytes: 0,
        })
    }

    pub fn finish(mut self) -> Result<u64, SynthError> {
        if let Some(fw) = self.frames.take() {
            let rest = fw.finish().map_err(SynthError::Trace)?;
            self.file.write_all(&rest).map_err(SynthError::Trace)?;
            self.bytes += rest.len() as u64;
        }
        self.file.flush().map_err(SynthError::Trace)?;
        Ok(self.bytes)
    }
}

impl super::encoder::StreamSink for TraceOut {
    fn write(&mut self, id: u8, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.frames {
            None => {
                self.bytes += bytes.len() as u64;
                self.file.write_all(bytes)
            }
            Some(fw) => {
                fw.push(id, bytes)?;
                // Move completed frames to the file.
                let mut out = std::mem::take(fw.output_mut());
                self.bytes += out.len() as u64;
                self.file.write_all(&out)?;
                out.clear();
                *fw.output_mut() = out;
                Ok(())
            }
        }
    }
}
