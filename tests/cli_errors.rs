//! The `tracesight` command on bad input: missing or broken snapshot files,
//! unparsable registers, random and truncated trace buffers, output files and
//! option errors. Each test works on a scratch copy of an OpenCSD fixture
//! under ../shared/fixtures/opencsd and is skipped (with a note) when the
//! fixtures are absent.
//!
//! Exit codes: 0 success, 1 error reported by tracesight, 2 usage error
//! (clap), 101 a Rust panic - which no input may cause.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

const RAW_ETE: &str = "001-ack_test";
const FORMATTED: &str = "juno_r1_1";

fn fixture(name: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/opencsd")
        .join(name);
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("note: {} not found; skipping", dir.display());
        None
    }
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn empty(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tracesight-cli-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// A writable copy of the fixture's top-level files (the snapshot proper;
    /// sub-directories hold only goldens and dumps).
    fn copy_of(name: &str) -> Option<Scratch> {
        let src = fixture(name)?;
        let s = Scratch::empty(name);
        for entry in fs::read_dir(&src).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                let dest = s.0.join(entry.file_name());
                fs::copy(entry.path(), &dest).unwrap();
                let mut perm = fs::metadata(&dest).unwrap().permissions();
                #[allow(clippy::permissions_set_readonly_false)]
                perm.set_readonly(false);
                fs::set_permissions(&dest, perm).unwrap();
            }
        }
        Some(s)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    fn read(&self, file: &str) -> Vec<u8> {
        fs::read(self.path(file)).unwrap()
    }

    fn write(&self, file: &str, bytes: &[u8]) {
        fs::write(self.path(file), bytes).unwrap();
    }

    /// Replace `from` by `to` in a text file, which must contain it.
    fn edit(&self, file: &str, from: &str, to: &str) {
        let text = String::from_utf8(self.read(file)).unwrap();
        assert!(text.contains(from), "{file} has no '{from}'");
        self.write(file, text.replacen(from, to, 1).as_bytes());
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn tracesight<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(args)
        .output()
        .expect("run tracesight");
    let run = Run {
        code: status.code().expect("tracesight killed by a signal"),
        stdout: String::from_utf8(stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    };
    assert_ne!(run.code, 101, "tracesight panicked:\n{}", run.stderr);
    assert!(
        !run.stderr.contains("panicked"),
        "tracesight panicked:\n{}",
        run.stderr
    );
    run
}

/// `decode`, which must succeed.
fn decode_ok(dir: &Path, extra: &[&str]) -> Run {
    let run = decode(dir, extra);
    assert_eq!(
        run.code,
        0,
        "{} {extra:?}: stderr: {}",
        dir.display(),
        run.stderr
    );
    run
}

fn decode(dir: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<&OsStr> = vec!["decode".as_ref(), "--packets".as_ref(), dir.as_os_str()];
    args.extend(extra.iter().map(OsStr::new));
    tracesight(args)
}

/// Packet lines (`Idx:...`) of an opencsd-format listing.
fn packet_lines(listing: &str) -> Vec<&str> {
    listing.lines().filter(|l| l.starts_with("Idx:")).collect()
}

/// The `Idx:` value of a packet line.
fn line_index(line: &str) -> u64 {
    line.strip_prefix("Idx:")
        .and_then(|r| r.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad packet line: {line:?}"))
}

/// Check that every line of an opencsd-format listing has one of the forms
/// the lister prints.
fn assert_listing_parses(listing: &str) {
    for line in listing.lines() {
        if line.starts_with("Idx:") {
            line_index(line);
            let (_, rest) = line
                .split_once("; ID:")
                .unwrap_or_else(|| panic!("no ID: {line:?}"));
            let (id, rest) = rest
                .split_once("; [")
                .unwrap_or_else(|| panic!("no bytes: {line:?}"));
            u8::from_str_radix(id, 16).unwrap_or_else(|_| panic!("bad ID: {line:?}"));
            let (bytes, desc) = rest
                .split_once("];\t")
                .unwrap_or_else(|| panic!("no description: {line:?}"));
            for b in bytes.split_whitespace() {
                let hex = b
                    .strip_prefix("0x")
                    .unwrap_or_else(|| panic!("bad byte {b:?}: {line:?}"));
                u8::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("bad byte {b:?}: {line:?}"));
            }
            assert!(
                desc.starts_with("I_") && desc.contains(" : "),
                "bad description: {line:?}"
            );
        } else if let Some(rest) = line.strip_prefix("ID:") {
            let (id, what) = rest
                .split_once('\t')
                .unwrap_or_else(|| panic!("bad ID line: {line:?}"));
            u8::from_str_radix(id, 16).unwrap_or_else(|_| panic!("bad ID: {line:?}"));
            assert!(
                what == "END OF TRACE DATA" || what == "RESET operation on trace decode path",
                "bad ID line: {line:?}"
            );
        } else {
            assert!(
                line.is_empty()
                    || line.starts_with("Trace Packet Lister : ")
                    || line.starts_with("Using ")
                    || line.starts_with("####### "),
                "unexpected line: {line:?}"
            );
        }
    }
}

/// Parse a JSON-lines listing; every object has the common packet fields.
fn json_packets(listing: &str) -> Vec<serde_json::Value> {
    listing
        .lines()
        .map(|line| {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            for key in ["index", "id", "type", "bytes"] {
                assert!(v.get(key).is_some(), "no \"{key}\": {line:?}");
            }
            assert!(v["index"].is_u64() && v["id"].is_u64(), "{line:?}");
            assert!(
                v["type"].as_str().is_some_and(|t| t.starts_with("I_")),
                "{line:?}"
            );
            let bytes = v["bytes"].as_str().expect("bytes is a string");
            assert!(
                bytes.len().is_multiple_of(2) && bytes.bytes().all(|c| c.is_ascii_hexdigit()),
                "{line:?}"
            );
            v
        })
        .collect()
}

/// Marsaglia's xorshift64: reproducible filler bytes.
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

// (a)
#[test]
fn missing_snapshot_path() {
    let scratch = Scratch::empty("missing");
    let gone = scratch.path("no-such-snapshot");
    for run in [
        decode(&gone, &[]),
        tracesight(["info".as_ref(), gone.as_os_str()]),
    ] {
        assert_eq!(run.code, 1, "stderr: {}", run.stderr);
        assert!(
            run.stderr.contains(&*gone.to_string_lossy()),
            "stderr does not name the path: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "stdout: {}", run.stdout);
    }
}

// (b)
#[test]
fn trace_ini_names_missing_buffer_file() {
    let Some(s) = Scratch::copy_of(RAW_ETE) else {
        return;
    };
    s.edit("trace.ini", "file=session1.bin", "file=not-there.bin");
    let run = decode(&s.0, &[]);
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(
        run.stderr.contains("not-there.bin"),
        "stderr does not name the file: {}",
        run.stderr
    );
    assert!(packet_lines(&run.stdout).is_empty());

    // `info` describes the snapshot anyway and flags the buffer.
    let info = tracesight(["info".as_ref(), s.0.as_os_str()]);
    assert_eq!(info.code, 0, "stderr: {}", info.stderr);
    assert!(
        info.stdout.contains("(not-there.bin)") && info.stdout.contains("missing"),
        "{}",
        info.stdout
    );
}

// (c)
#[test]
fn snapshot_ini_missing() {
    let Some(s) = Scratch::copy_of(RAW_ETE) else {
        return;
    };
    fs::remove_file(s.path("snapshot.ini")).unwrap();
    for run in [
        decode(&s.0, &[]),
        tracesight(["info".as_ref(), s.0.as_os_str()]),
    ] {
        assert_eq!(run.code, 1, "stderr: {}", run.stderr);
        assert!(
            run.stderr.contains("snapshot.ini"),
            "stderr does not name snapshot.ini: {}",
            run.stderr
        );
    }
}

// (d) An unparsable register value is read as C strtoul reads it (here 0),
// with a warning naming the file, line and register; decoding goes on.
#[test]
fn unparsable_register_value_warns_and_decodes() {
    let cases = [
        (RAW_ETE, "ETE_0_s1.ini", "TRCIDR0=0x8000aa1", "TRCIDR0=zz"),
        (
            FORMATTED,
            "device_8.ini",
            "TRCIDR0(0x078)=0x28000EA1",
            "TRCIDR0(0x078)=zz",
        ),
    ];
    for (name, file, from, to) in cases {
        let Some(s) = Scratch::copy_of(name) else {
            return;
        };
        s.edit(file, from, to);
        let run = decode(&s.0, &[]);
        assert_eq!(run.code, 0, "{name}: stderr: {}", run.stderr);
        let warning = run
            .stderr
            .lines()
            .find(|l| l.contains("warning") && l.contains(file) && l.contains("TRCIDR0"))
            .unwrap_or_else(|| {
                panic!(
                    "{name}: no warning naming {file} and TRCIDR0: {}",
                    run.stderr
                )
            });
        assert!(warning.contains("zz"), "{warning}");
        assert_listing_parses(&run.stdout);
        assert!(
            !packet_lines(&run.stdout).is_empty(),
            "{name}: nothing decoded"
        );
        assert!(run.stdout.contains("END OF TRACE DATA"));
    }
}

// (e)
#[test]
fn random_trace_buffers_do_not_panic() {
    for (name, file) in [(RAW_ETE, "session1.bin"), (FORMATTED, "cstrace.bin")] {
        let Some(s) = Scratch::copy_of(name) else {
            return;
        };
        let len = s.read(file).len();
        for seed in [1u64, 0x5eed, 0xdead_beef_cafe] {
            s.write(file, &random_bytes(seed, len));
            let run = decode(&s.0, &[]);
            assert!(
                run.code == 0 || run.code == 1,
                "{name} seed {seed}: exit {}: {}",
                run.code,
                run.stderr
            );
            assert_listing_parses(&run.stdout);
            assert!(
                run.stdout.contains("Trace buffer done"),
                "{name} seed {seed}: listing not finished"
            );

            let json = decode(&s.0, &["--format", "jsonl"]);
            assert!(
                json.code == 0 || json.code == 1,
                "{name} seed {seed}: exit {}: {}",
                json.code,
                json.stderr
            );
            let packets = json_packets(&json.stdout);
            assert_eq!(
                packets.len(),
                packet_lines(&run.stdout).len(),
                "{name} seed {seed}: jsonl vs opencsd count"
            );
        }
    }
}

// (f) Formatted data must be whole frames: trc_pkt_lister drops the last
// partial 1024-byte read, decodes the rest and reports a fatal error.
#[test]
fn truncated_formatted_buffer_reports_file_and_offset() {
    let Some(s) = Scratch::copy_of(FORMATTED) else {
        return;
    };
    let full = decode_ok(&s.0, &[]);

    let cut = 40_001; // odd, not a multiple of 16
    let accepted = cut - cut % 1024;
    let data = s.read("cstrace.bin");
    s.write("cstrace.bin", &data[..cut]);
    let run = decode(&s.0, &[]);
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    let err = run
        .stderr
        .lines()
        .find(|l| l.contains("cstrace.bin") && l.contains(&format!("index {accepted}")))
        .unwrap_or_else(|| {
            panic!(
                "no error naming cstrace.bin and offset {accepted}: {}",
                run.stderr
            )
        });
    assert!(err.contains("incomplete frame"), "{err}");
    assert_listing_parses(&run.stdout);
    assert!(run
        .stdout
        .contains("Trace Packet Lister : Data Path fatal error"));
    assert!(
        run.stdout.contains(&format!("processed {accepted} bytes")),
        "{}",
        run.stdout
    );

    // The packets decoded before the cut are kept, as in the full listing.
    let got = packet_lines(&run.stdout);
    let want = packet_lines(&full.stdout);
    assert!(got.len() > 1000, "only {} packets kept", got.len());
    let complete: Vec<_> = got
        .iter()
        .filter(|l| !l.contains("I_INCOMPLETE_EOT"))
        .collect();
    for line in &complete {
        assert!(
            line_index(line) < accepted as u64,
            "packet past the cut: {line}"
        );
    }
    let mut want_iter = want.iter();
    for line in &complete {
        assert!(
            want_iter.any(|w| w == *line),
            "not in the full listing (or out of order): {line}"
        );
    }
}

#[test]
fn truncated_raw_buffer_ends_with_incomplete_packet() {
    let Some(s) = Scratch::copy_of(RAW_ETE) else {
        return;
    };
    let full = decode_ok(&s.0, &[]);
    // Cut inside the last packet of three or more bytes.
    let last = *packet_lines(&full.stdout)
        .iter()
        .rev()
        .find(|l| {
            l.split_once('[')
                .unwrap()
                .1
                .split_once(']')
                .unwrap()
                .0
                .split_whitespace()
                .count()
                >= 3
        })
        .unwrap();
    let start = line_index(last);
    let cut = start as usize + 2;
    let data = s.read("session1.bin");
    s.write("session1.bin", &data[..cut]);

    let run = decode_ok(&s.0, &[]);
    assert_listing_parses(&run.stdout);
    let lines = packet_lines(&run.stdout);
    let end = lines.last().expect("packets");
    assert!(end.contains("I_INCOMPLETE_EOT"), "last packet: {end}");
    assert_eq!(line_index(end), start, "last packet: {end}");
    assert_eq!(
        end.split_once('[')
            .unwrap()
            .1
            .split_once(']')
            .unwrap()
            .0
            .split_whitespace()
            .count(),
        2,
        "{end}"
    );
    assert!(run.stdout.contains(&format!("processed {cut} bytes")));
    // Everything before the cut packet is as in the full listing.
    assert_eq!(
        lines[..lines.len() - 1],
        packet_lines(&full.stdout)[..lines.len() - 1]
    );
}

// (g)
#[test]
fn output_file_is_complete_and_leaves_no_temp_file() {
    let Some(fix) = fixture(RAW_ETE) else { return };
    let out_dir = Scratch::empty("out");
    let out = out_dir.path("listing.txt");
    let to_stdout = decode_ok(&fix, &[]);
    let run = decode_ok(&fix, &["-o", out.to_str().unwrap()]);
    assert!(run.stdout.is_empty(), "stdout: {}", run.stdout);
    assert_eq!(fs::read_to_string(&out).unwrap(), to_stdout.stdout);
    let names: Vec<_> = fs::read_dir(&out_dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        ["listing.txt"],
        "leftover files in the output directory"
    );

    // Writing over an existing file replaces it.
    fs::write(&out, "old contents\n").unwrap();
    decode_ok(&fix, &["--format", "jsonl", "-o", out.to_str().unwrap()]);
    let text = fs::read_to_string(&out).unwrap();
    assert_eq!(
        json_packets(&text).len(),
        packet_lines(&to_stdout.stdout).len()
    );
    assert_eq!(fs::read_dir(&out_dir.0).unwrap().count(), 1);
}

#[test]
fn output_file_of_failed_run_keeps_decoded_packets() {
    let Some(s) = Scratch::copy_of(FORMATTED) else {
        return;
    };
    let data = s.read("cstrace.bin");
    s.write("cstrace.bin", &data[..40_001]);
    let out_dir = Scratch::empty("out-failed");
    let out = out_dir.path("listing.txt");
    let to_stdout = decode(&s.0, &[]);
    let run = decode(&s.0, &["-o", out.to_str().unwrap()]);
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert_eq!(fs::read_to_string(&out).unwrap(), to_stdout.stdout);
    assert_eq!(
        fs::read_dir(&out_dir.0).unwrap().count(),
        1,
        "leftover files in the output directory"
    );
}

#[test]
fn output_file_of_run_that_cannot_start_leaves_no_temp_file() {
    let Some(s) = Scratch::copy_of(RAW_ETE) else {
        return;
    };
    fs::remove_file(s.path("session1.bin")).unwrap();
    let out_dir = Scratch::empty("out-nostart");
    let out = out_dir.path("listing.txt");
    let run = decode(&s.0, &["-o", out.to_str().unwrap()]);
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    let names: Vec<_> = fs::read_dir(&out_dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        names.is_empty(),
        "leftover files in the output directory: {names:?}"
    );
}

#[test]
fn output_file_in_missing_directory_is_an_error() {
    let Some(fix) = fixture(RAW_ETE) else { return };
    let out_dir = Scratch::empty("out-missing");
    let out = out_dir.path("no-such-dir/listing.txt");
    let run = decode(&fix, &["-o", out.to_str().unwrap()]);
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("no-such-dir"), "stderr: {}", run.stderr);
}

// (h)
#[test]
fn jsonl_matches_opencsd_listing() {
    let Some(fix) = fixture(RAW_ETE) else { return };
    let text = decode_ok(&fix, &[]);
    let json = decode_ok(&fix, &["--format", "jsonl"]);
    let packets = json_packets(&json.stdout);
    let lines = packet_lines(&text.stdout);
    assert_eq!(packets.len(), lines.len());
    for (p, line) in packets.iter().zip(&lines) {
        assert_eq!(p["index"].as_u64(), Some(line_index(line)), "{p} vs {line}");
        let ty = p["type"].as_str().unwrap();
        assert!(line.contains(&format!("];\t{ty} : ")), "{p} vs {line}");
        let raw: String = line
            .split_once('[')
            .unwrap()
            .1
            .split_once(']')
            .unwrap()
            .0
            .split_whitespace()
            .map(|b| &b[2..])
            .collect();
        assert_eq!(p["bytes"].as_str(), Some(raw.as_str()), "{p} vs {line}");
    }
}

// (i)
#[test]
fn reserved_or_malformed_trace_id_is_a_usage_error() {
    let Some(fix) = fixture(RAW_ETE) else { return };
    for (id, msg) in [
        ("0x7f", "0x7f"),
        ("0x70", "reserved"),
        ("zz", "zz"),
        ("0x100", "0x100"),
    ] {
        let run = decode(&fix, &["--id", id]);
        assert_eq!(run.code, 2, "--id {id}: stderr: {}", run.stderr);
        assert!(
            run.stderr.contains(msg),
            "--id {id}: stderr: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty());
    }
}

// (j)
#[test]
fn info_lists_buffers_and_trace_ids() {
    let Some(fix) = fixture(FORMATTED) else {
        return;
    };
    let run = tracesight(["info".as_ref(), fix.as_os_str()]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let o = &run.stdout;
    assert!(
        o.contains("buffer ETB_0 (cstrace.bin): coresight, 65536 bytes"),
        "{o}"
    );
    assert!(
        o.contains("buffer ETB_1 (cstraceitm.bin): coresight"),
        "{o}"
    );
    for (n, id) in (0x10..=0x15).enumerate() {
        assert!(
            o.contains(&format!("source ETM_{n} (ETM4), trace ID 0x{id:02x}")),
            "ETM_{n}: {o}"
        );
    }
    assert!(o.contains("source STM_12 (STM), trace ID 0x20"), "{o}");
    // ETM sources belong to ETB_0, the STM to ETB_1.
    let etb1 = o.find("buffer ETB_1").unwrap();
    assert!(
        o.find("ETM_5").unwrap() < etb1 && o.find("STM_12").unwrap() > etb1,
        "{o}"
    );
}
