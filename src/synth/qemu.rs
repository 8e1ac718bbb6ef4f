//! The execution source: a program run under `qemu-aarch64` with
//! `-d in_asm,exec,nochain`, read back from qemu's log.
//!
//! With `nochain` qemu logs every translation block (TB) it executes
//! (`Trace <cpu>: <host TB> [<cs_base>/<pc>/<flags>/<cflags>] <symbol>`), and
//! `in_asm` logs the guest instructions of each block when it is translated
//! (`0x<address>:  <opcode>  <disassembly>`), just before the block first
//! runs. A block's instructions are straight-line code, so the executed
//! instruction sequence is the concatenation of the executed blocks; the
//! branch outcomes follow from where the next block of the same CPU starts.
//! Blocks are identified by qemu's host TB address, so retranslations (a
//! block at the same address translated again with other flags) stay apart.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::SynthError;

/// A translation block: `len` instructions from `pc`, whose opcodes are
/// `Execution::opcodes[first..first + len]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tb {
    pub pc: u64,
    pub first: u32,
    pub len: u32,
}

/// Executed blocks, in log order, for every CPU (thread) of the run.
#[derive(Clone, Debug, Default)]
pub struct Execution {
    pub tbs: Vec<Tb>,
    pub opcodes: Vec<u32>,
    /// Executed blocks in global log order: `thread << THREAD_SHIFT | tb`.
    pub events: Vec<u32>,
    /// qemu CPU index of each thread, in order of first appearance.
    pub cpus: Vec<u32>,
}

/// Bits of an event holding the block index.
pub const THREAD_SHIFT: u32 = 26;
pub const TB_MASK: u32 = (1 << THREAD_SHIFT) - 1;

impl Execution {
    pub fn threads(&self) -> usize {
        self.cpus.len()
    }

    /// Blocks executed by `thread`, in order.
    pub fn thread_blocks(&self, thread: usize) -> impl Iterator<Item = &Tb> + '_ {
        self.events
            .iter()
            .filter(move |&&e| (e >> THREAD_SHIFT) as usize == thread)
            .map(move |&e| &self.tbs[(e & TB_MASK) as usize])
    }

    /// The executed instruction sequence of `thread` as runs of consecutive
    /// instructions: (first address, count).
    pub fn instruction_runs(&self, thread: usize) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for tb in self.thread_blocks(thread) {
            push_run(&mut runs, tb.pc, tb.len as u64);
        }
        runs
    }

    /// Executed instructions in total.
    pub fn instruction_count(&self) -> u64 {
        self.events.iter().map(|&e| self.tbs[(e & TB_MASK) as usize].len as u64).sum()
    }
}

/// Append a run, merging it with the previous one when contiguous.
pub fn push_run(runs: &mut Vec<(u64, u64)>, start: u64, n: u64) {
    if n == 0 {
        return;
    }
    if let Some(last) = runs.last_mut() {
        if last.0 + 4 * last.1 == start {
            last.1 += n;
            return;
        }
    }
    runs.push((start, n));
}

/// How to run the program.
#[derive(Clone, Debug)]
pub struct QemuRun {
    /// The qemu-aarch64 binary.
    pub qemu: PathBuf,
    /// Sysroot for dynamically linked programs (`-L`).
    pub sysroot: Option<PathBuf>,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Keep qemu's log at this path (else it is streamed through a FIFO or a
    /// temporary file and removed).
    pub keep_log: Option<PathBuf>,
}

/// Result of a run.
pub struct RunResult {
    pub exec: Execution,
    /// The program's exit status as qemu reported it.
    pub status: std::process::ExitStatus,
    /// The program's standard output.
    pub stdout: Vec<u8>,
}

/// Is `qemu` runnable?
pub fn qemu_available(qemu: &Path) -> bool {
    Command::new(qemu).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Run the program under qemu and parse its execution log.
pub fn run(cfg: &QemuRun) -> Result<RunResult, SynthError> {
    let tmp = std::env::temp_dir().join(format!("tracesight-synth-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&tmp).map_err(SynthError::io(&tmp))?;
    let result = run_in(cfg, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn run_in(cfg: &QemuRun, tmp: &Path) -> Result<RunResult, SynthError> {
    // A FIFO lets the log be parsed while qemu writes it (logs of long runs are
    // many times larger than the trace); a kept log is a plain file.
    let (log, fifo) = match &cfg.keep_log {
        Some(p) => (p.clone(), false),
        None => {
            let p = tmp.join("qemu.log");
            let ok = cfg!(target_os = "linux") && Command::new("mkfifo").arg(&p).status().is_ok_and(|s| s.success());
            if !ok {
                let _ = std::fs::remove_file(&p);
            }
            (p, ok)
        }
    };
    // With a FIFO, this read-write handle keeps a writer on it until qemu is
    // done (Linux opens a FIFO read-write without waiting): the reader's open
    // never waits for qemu, and closing the handle after qemu exits gives the
    // reader its end of file even if qemu never opened the log.
    let guard = if fifo {
        Some(std::fs::OpenOptions::new().read(true).write(true).open(&log).map_err(SynthError::io(&log))?)
    } else {
        None
    };
    let reader = guard.as_ref().map(|_| {
        let path = log.clone();
        std::thread::spawn(move || -> Result<Execution, SynthError> {
            let f = std::fs::File::open(&path).map_err(SynthError::io(&path))?;
            let mut r = BufReader::with_capacity(1 << 20, f);
            let parsed = parse_log(&mut r);
            if parsed.is_err() {
                // Keep draining: qemu must not block on a full FIFO.
                let _ = std::io::copy(&mut r, &mut std::io::sink());
            }
            parsed
        })
    });
    let mut cmd = Command::new(&cfg.qemu);
    if let Some(root) = &cfg.sysroot {
        cmd.arg("-L").arg(root);
    }
    cmd.arg("-d").arg("in_asm,exec,nochain").arg("-D").arg(&log).arg(&cfg.program).args(&cfg.args);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let spawned = cmd.spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            drop(guard);
            if let Some(r) = reader {
                let _ = r.join();
            }
            return Err(SynthError::RunQemu { qemu: cfg.qemu.clone(), error: e });
        }
    };
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = child.wait().map_err(SynthError::Wait);
    drop(guard);
    let parsed = match reader {
        Some(r) => (status?, r.join().map_err(|_| SynthError::LogReader)?),
        None => {
            let status = status?;
            let f = std::fs::File::open(&log).map_err(SynthError::io(&log))?;
            (status, parse_log(BufReader::with_capacity(1 << 20, f)))
        }
    };
    let (status, exec) = parsed;
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    let exec = exec?;
    if exec.events.is_empty() {
        return Err(SynthError::NoCode { status, stderr: String::from_utf8_lossy(&stderr).trim().to_string() });
    }
    Ok(RunResult { exec, status, stdout })
}

/// Parse a log file written by `-d in_asm,exec,nochain`.
pub fn parse_log_file(path: &Path) -> Result<Execution, SynthError> {
    let f = std::fs::File::open(path).map_err(SynthError::io(path))?;
    parse_log(BufReader::with_capacity(1 << 20, f))
}

fn hex(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"0x").unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | d as u64;
    }
    Some(v)
}

/// Parse qemu's log.
pub fn parse_log<R: BufRead>(mut r: R) -> Result<Execution, SynthError> {
    let mut ex = Execution::default();
    // Instructions of the block being read from an in_asm listing.
    let mut cur: Vec<(u64, u32)> = Vec::new();
    let mut in_block = false;
    // Translations waiting for their first execution, by guest address.
    let mut pending: HashMap<u64, Vec<u32>> = HashMap::new();
    // Host TB address -> block.
    let mut host: HashMap<u64, u32> = HashMap::new();
    let mut cpu_thread: HashMap<u32, u32> = HashMap::new();
    let mut line = Vec::with_capacity(256);
    let mut lineno = 0u64;
    let finish_block = |cur: &mut Vec<(u64, u32)>, ex: &mut Execution, pending: &mut HashMap<u64, Vec<u32>>| {
        if cur.is_empty() {
            return;
        }
        let pc = cur[0].0;
        let first = ex.opcodes.len() as u32;
        let mut n = 0u32;
        for (i, &(a, op)) in cur.iter().enumerate() {
            if a != pc + 4 * i as u64 {
                break;
            }
            ex.opcodes.push(op);
            n += 1;
        }
        let id = ex.tbs.len() as u32;
        ex.tbs.push(Tb { pc, first, len: n });
        pending.entry(pc).or_default().push(id);
        cur.clear();
    };
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line).map_err(SynthError::ReadLog)?;
        if n == 0 {
            break;
        }
        lineno += 1;
        let l = line.strip_suffix(b"\n").unwrap_or(&line);
        if l.starts_with(b"Trace ") {
            finish_block(&mut cur, &mut ex, &mut pending);
            in_block = false;
            // Trace <cpu>: <host> [<cs_base>/<pc>/<flags>/<cflags>] <sym>
            let rest = &l[6..];
            let colon = rest.iter().position(|&c| c == b':').ok_or_else(|| bad(lineno, l))?;
            let cpu = std::str::from_utf8(&rest[..colon]).ok().and_then(|s| s.trim().parse::<u32>().ok()).ok_or_else(|| bad(lineno, l))?;
            let rest = &rest[colon + 1..];
            let lb = rest.iter().position(|&c| c == b'[').ok_or_else(|| bad(lineno, l))?;
            let hostp = hex(trim(&rest[..lb])).ok_or_else(|| bad(lineno, l))?;
            let inner = &rest[lb + 1..];
            let mut parts = inner.split(|&c| c == b'/');
            let _cs = parts.next();
            let pc = parts.next().and_then(hex).ok_or_else(|| bad(lineno, l))?;
            let tb = match pending.get_mut(&pc).and_then(|v| if v.is_empty() { None } else { Some(v.remove(0)) }) {
                Some(id) => {
                    host.insert(hostp, id);
                    id
                }
                None => match host.get(&hostp) {
                    Some(&id) if ex.tbs[id as usize].pc == pc => id,
                    _ => {
                        return Err(SynthError::BlockWithoutCode { line: lineno, pc })
                    }
                },
            };
            let nthreads = cpu_thread.len() as u32;
            let thread = *cpu_thread.entry(cpu).or_insert_with(|| {
                ex.cpus.push(cpu);
                nthreads
            });
            if tb > TB_MASK || thread >= 64 {
                return Err(SynthError::TooLarge);
            }
            ex.events.push((thread << THREAD_SHIFT) | tb);
            continue;
        }
        if l.starts_with(b"IN:") {
            finish_block(&mut cur, &mut ex, &mut pending);
            in_block = true;
            continue;
        }
        if in_block {
            if l.is_empty() {
                finish_block(&mut cur, &mut ex, &mut pending);
                in_block = false;
                continue;
            }
            // 0x<addr>:  <opcode>  <text>
            if l.starts_with(b"0x") {
                if let Some(colon) = l.iter().position(|&c| c == b':') {
                    let addr = hex(&l[..colon]);
                    let rest = trim(&l[colon + 1..]);
                    let end = rest.iter().position(|c| c.is_ascii_whitespace()).unwrap_or(rest.len());
                    let op = hex(&rest[..end]);
                    if let (Some(a), Some(op), 8) = (addr, op, end) {
                        cur.push((a, op as u32));
                        continue;
                    }
                }
                return Err(SynthError::BadInstruction { line: lineno, text: String::from_utf8_lossy(l).into_owned() });
            }
        }
    }
    finish_block(&mut cur, &mut ex, &mut pending);
    Ok(ex)
}

fn trim(s: &[u8]) -> &[u8] {
    let a = s.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(s.len());
    let b = s.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(a, |i| i + 1);
    &s[a..b]
}

fn bad(lineno: u64, l: &[u8]) -> SynthError {
    SynthError::BadLogLine { line: lineno, text: String::from_utf8_lossy(l).into_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_blocks_and_executions() {
        let log = "\
----------------
IN: _start
0x00400580:  d503201f  nop
0x00400584:  940000a2  bl       #0x40080c

Trace 0: 0x7f0000000100 [0000000001009331/0000000000400580/00000001/00000200] _start
----------------
IN: f
0x0040080c:  d65f03c0  ret

Trace 0: 0x7f0000000200 [0000000001009331/000000000040080c/00000001/00000200] f
Trace 0: 0x7f0000000100 [0000000001009331/0000000000400580/00000001/00000200] _start
";
        let ex = parse_log(log.as_bytes()).unwrap();
        assert_eq!(ex.tbs.len(), 2);
        assert_eq!(ex.tbs[0], Tb { pc: 0x400580, first: 0, len: 2 });
        assert_eq!(ex.opcodes[2], 0xd65f03c0);
        assert_eq!(ex.events, vec![0, 1, 0]);
        assert_eq!(ex.instruction_runs(0), vec![(0x400580, 2), (0x40080c, 1), (0x400580, 2)]);
    }
}
