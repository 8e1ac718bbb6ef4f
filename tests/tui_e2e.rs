//! The viewer in a real terminal: the built `tracesight` runs on the demo
//! capture inside a detached tmux session, keys go in with `send-keys` and
//! the screen comes back with `capture-pane`. Skipped (with a note) when tmux
//! is not installed.
//!
//! Every expectation is polled until a deadline: the workers decode in the
//! background, so a screen is only ever "eventually" right, and a loaded
//! machine may take a while.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const DEADLINE: Duration = Duration::from_secs(20);
const SESSION: &str = "e2e";

/// A tmux server of our own: its own socket, so parallel runs never share a
/// server, and killed on drop, so a failed assertion leaves nothing behind.
struct Tmux {
    socket: String,
    /// The socket file, which tmux leaves behind after kill-server.
    socket_path: Option<PathBuf>,
}

impl Tmux {
    fn start(cwd: &Path, command: &str) -> Tmux {
        Tmux::start_sized(cwd, command, (160, 48))
    }

    /// A session of `(columns, rows)`.
    fn start_sized(cwd: &Path, command: &str, size: (u16, u16)) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let socket = format!("tracesight-e2e-{}-{nanos}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let mut t = Tmux { socket, socket_path: None };
        let cwd = cwd.to_str().expect("a UTF-8 temp path");
        let (w, h) = (size.0.to_string(), size.1.to_string());
        let out = t.run(&["new-session", "-d", "-s", SESSION, "-x", &w, "-y", &h, "-c", cwd, command]);
        assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        let out = t.run(&["display-message", "-p", "#{socket_path}"]);
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        t.socket_path = (!path.is_empty()).then(|| PathBuf::from(path));
        t
    }

    fn run(&self, args: &[&str]) -> Output {
        // -f /dev/null: the user's tmux.conf must not change keys or sizes.
        Command::new("tmux").args(["-L", &self.socket, "-f", "/dev/null"]).args(args).output().expect("running tmux")
    }

    /// Key names as tmux knows them (`Enter`, `Escape`, `Tab`, `j`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", SESSION];
        args.extend_from_slice(keys);
        let out = self.run(&args);
        assert!(out.status.success(), "tmux send-keys {keys:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Text typed as is, never read as key names.
    fn text(&self, text: &str) {
        let out = self.run(&["send-keys", "-t", SESSION, "-l", text]);
        assert!(out.status.success(), "tmux send-keys -l {text}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", SESSION]).stdout).into_owned()
    }

    /// Poll the screen until `ok` holds; on timeout fail showing the last
    /// screen, which is what one needs to see why.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if start.elapsed() > DEADLINE {
                panic!("timed out after {DEADLINE:?} waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_text(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?}"), |s| s.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
        if let Some(p) = &self.socket_path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A scratch working directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    /// `tag` keeps the directories of tests running at once apart.
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("tracesight-e2e-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating the scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn have_tmux() -> bool {
    Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success())
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The element number in `main: element N` on the status line.
fn found_element(screen: &str) -> Option<u64> {
    let rest = &screen[screen.find("main: element ")? + "main: element ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A line of the search overlay for `main` itself: its entry count (or `…`
/// while counting), then the name.
fn is_main_hit(line: &str) -> bool {
    line.match_indices("  main ").any(|(i, _)| line[..i].trim_end().ends_with(|c: char| c.is_ascii_digit() || c == '…'))
}

#[test]
fn viewer_in_tmux() {
    if !have_tmux() {
        eprintln!("note: tmux is not installed; skipping the terminal test");
        return;
    }
    let dir = Scratch::new("demo");
    // tmux runs this through a shell that outlives the viewer, so the exit
    // status and the restored screen can be read after `q`; no PATH argument
    // opens the demo.
    let cmd = format!("{}; echo EXITED $?; sleep 30", sh_quote(env!("CARGO_BIN_EXE_tracesight")));
    let tmux = Tmux::start(&dir.0, &cmd);

    // First screen: the list from the start of the trace, and the timeline
    // once the index is there.
    tmux.wait_for("the element list and the indexed timeline", |s| {
        s.contains("NO_SYNC") && s.contains("TRACE_ON") && s.contains(" timeline · ") && s.contains(" elements · committed view · 0 of ")
    });

    // Help: a line of the key table, gone again after Esc.
    let (key, desc) = tracesight::tui::draw::KEYS.iter().find(|(k, _)| *k == "v").expect("v in KEYS");
    let key_cell = format!(" {key} ");
    tmux.keys(&["?"]);
    tmux.wait_for("the help overlay", |s| {
        s.contains("keys (Esc closes)") && s.lines().any(|l| l.contains(&key_cell) && l.contains(desc))
    });
    tmux.keys(&["Escape"]);
    tmux.wait_for("the help overlay to close", |s| !s.contains("keys (Esc closes)"));

    // Function search. Enter before the symbols arrive would find nothing, so
    // wait for the list of hits to show a count column next to `main`.
    tmux.keys(&["/"]);
    tmux.text("main");
    tmux.wait_for("a hit for main", |s| s.contains("/ main▏") && s.lines().any(is_main_hit));
    tmux.keys(&["Enter"]);
    let s = tmux.wait_for("`main: element N` on the status line", |s| found_element(s).is_some());
    let n = found_element(&s).unwrap();
    let row = format!(" {n} ");
    tmux.wait_for(&format!("the row of element {n} in main"), |s| {
        s.lines().any(|l| l.find(&row).is_some_and(|i| l[i..].contains("main")))
    });

    tmux.keys(&["g"]);
    tmux.text("1000");
    tmux.keys(&["Enter"]);
    tmux.wait_text("· 1,000 of ");

    // Element 1001 carries four speculation records, drawn as lines of their
    // own once its page for this view arrives; before that a `j` steps over
    // them, so wait for them to make the moves below exact.
    tmux.keys(&["s"]);
    tmux.wait_for("the speculation records", |s| s.contains(" speculation view · 1,000 of ") && s.contains("↳ speculative"));

    // Select five elements and export them as JSON lines: four `j` go
    // through the records (still element 1001), four more reach 1004.
    tmux.keys(&["v"]);
    tmux.wait_text("sel 1000–1000");
    tmux.keys(&["j", "j", "j", "j"]);
    tmux.wait_text("sel 1000–1001");
    tmux.keys(&["j", "j", "j", "j"]);
    tmux.wait_text("sel 1000–1004");
    tmux.keys(&["w"]);
    tmux.wait_text(" export ");
    tmux.keys(&["Tab"]);
    tmux.wait_text("[jsonl]");
    tmux.keys(&["Enter"]);
    let s = tmux.wait_text("exported 5 elements to tracesight-");
    let name: String = s[s.find("tracesight-").unwrap()..].chars().take_while(|c| !c.is_whitespace()).collect();
    let text = std::fs::read_to_string(dir.0.join(&name)).unwrap_or_else(|e| panic!("reading {name}: {e}"));
    // From the speculation view the export keeps its records (no number).
    let numbers: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {l}"));
            (v["type"] != "speculation").then(|| v["number"].as_u64().unwrap_or_else(|| panic!("{name}: no number in {l}")))
        })
        .collect();
    assert_eq!(numbers.len(), 5, "{name}:\n{text}");
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{name}: numbers not consecutive: {numbers:?}");
    assert_eq!(numbers[0], 1000, "{name}: {numbers:?}");

    // Quit: the shell prints the exit status on the normal screen, which it
    // only shows when the viewer left the alternate screen.
    tmux.keys(&["q"]);
    let s = tmux.wait_for("the viewer to exit", |s| s.contains("EXITED"));
    assert!(s.contains("EXITED 0"), "the viewer failed:\n{s}");
    assert!(!s.contains(" timeline · "), "the viewer's screen is still showing:\n{s}");
}

/// The shell command that runs the viewer with `args` (each quoted), its
/// index cache kept in `dir`, then reports the exit status and waits, so
/// the restored screen can be read after `q`.
fn viewer_command(dir: &Path, args: &[&str]) -> String {
    let cache = dir.join("cache");
    let mut cmd = format!("XDG_CACHE_HOME={} {}", sh_quote(cache.to_str().unwrap()), sh_quote(env!("CARGO_BIN_EXE_tracesight")));
    for a in args {
        cmd.push(' ');
        cmd.push_str(&sh_quote(a));
    }
    cmd + "; echo EXITED $?; sleep 30"
}

/// Quit with `q` and check the viewer exited with 0 and left the screen.
fn quit_cleanly(tmux: &Tmux) {
    tmux.keys(&["q"]);
    let s = tmux.wait_for("the viewer to exit", |s| s.contains("EXITED"));
    assert!(s.contains("EXITED 0"), "the viewer failed:\n{s}");
    assert!(!s.contains(" timeline · "), "the viewer's screen is still showing:\n{s}");
}

/// No error on the status line, no panic message anywhere.
fn no_error(s: &str) {
    assert!(!s.contains("error:") && !s.contains("panicked"), "an error on screen:\n{s}");
}

fn simpleperf_fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/perf/simpleperf");
    p.join("perf_etm.data").is_file().then_some(p)
}

/// simpleperf's capture opened as a new user would: the perf.data with its
/// binary found through `--symdir`, at 80x24 and on a wide terminal. Its one
/// CPU (7) is the timeline's lane and the list's CPU column; the binary is
/// stripped, so its code is named by the binary and the address in it.
#[test]
fn viewer_on_simpleperf_perf_data_in_tmux() {
    if !have_tmux() {
        eprintln!("note: tmux is not installed; skipping the terminal test");
        return;
    }
    let Some(fixtures) = simpleperf_fixtures() else {
        eprintln!("note: ../shared/fixtures/perf not found; skipped");
        return;
    };
    for size in [(80, 24), (160, 48)] {
        let dir = Scratch::new(&format!("simpleperf-{}x{}", size.0, size.1));
        // The viewer writes the index beside the trace: a copy of it, then.
        std::fs::copy(fixtures.join("perf_etm.data"), dir.0.join("perf_etm.data")).unwrap();
        let cmd = viewer_command(&dir.0, &["perf_etm.data", "--symdir", fixtures.to_str().unwrap()]);
        let tmux = Tmux::start_sized(&dir.0, &cmd, size);
        let at = format!("{}x{}", size.0, size.1);

        // Indexed: the timeline spans the 220 elements with one lane, CPU 7.
        let s = tmux.wait_for(&format!("the indexed timeline with a lane for CPU 7 ({at})"), |s| {
            s.contains(" timeline · element 0–220 ") && s.lines().any(|l| l.starts_with("│cpu7 "))
        });
        assert!(s.contains(" elements · committed view · 0 of 220 "), "{at}:\n{s}");
        let header = s.lines().find(|l| l.contains(" elem ")).unwrap_or_else(|| panic!("no list header ({at}):\n{s}"));
        assert!(header.contains(" cpu ") && header.contains(" function "), "{at}: header {header:?}");
        assert!(s.contains("perf_etm.data · CPU 7"), "{at}: the status line names the capture and its CPU:\n{s}");
        no_error(&s);

        // Element 14 is a range in etm_test_loop: its row shows CPU 7,
        // trace ID 0x1e and the binary's name.
        tmux.keys(&["g"]);
        tmux.text("14");
        tmux.keys(&["Enter"]);
        let s = tmux.wait_for(&format!("element 14 in etm_test_loop ({at})"), |s| {
            s.contains(" 14 of 220 ") && s.lines().any(|l| l.contains("  14   7 1e EL0N  etm_test_loop"))
        });
        no_error(&s);
        // The disassembly of the range comes from the found binary.
        tmux.keys(&["d"]);
        let s = tmux.wait_for(&format!("the disassembly of element 14 ({at})"), |s| s.contains("0x582b2b108c  "));
        no_error(&s);
        quit_cleanly(&tmux);
    }
    // Without --symdir the binary is not found: its gaps say which one.
    let dir = Scratch::new("simpleperf-nosymdir");
    std::fs::copy(fixtures.join("perf_etm.data"), dir.0.join("perf_etm.data")).unwrap();
    let tmux = Tmux::start(&dir.0, &viewer_command(&dir.0, &["perf_etm.data"]));
    tmux.wait_text(" timeline · element 0–15 ");
    tmux.keys(&["g"]);
    tmux.text("12");
    tmux.keys(&["Enter"]);
    let s = tmux.wait_for("the gap naming the binary not found", |s| {
        s.lines().any(|l| l.contains("  12   7 1e EL0N") && l.contains("[no image for /data/local/tmp/etm_test_loop"))
    });
    no_error(&s);
    quit_cleanly(&tmux);
}

/// Build tests/data/synth/threads.c and synthesize its trace as a perf.data
/// in `dir/out`; None (with a note) without qemu-aarch64 or the cross
/// compiler.
fn synth_threads_perf(dir: &Path) -> Option<PathBuf> {
    let works = |c: &str| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success());
    if !works("qemu-aarch64") || !works("aarch64-linux-gnu-gcc") {
        eprintln!("note: qemu-aarch64 or aarch64-linux-gnu-gcc not found; skipped");
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/synth/threads.c");
    let prog = dir.join("threads");
    let st = Command::new("aarch64-linux-gnu-gcc").args(["-O1", "-g", "-static", "-pthread", "-o"]).arg(&prog).arg(&src).status().unwrap();
    assert!(st.success(), "building threads.c");
    let out = dir.join("out");
    let r = Command::new(env!("CARGO_BIN_EXE_tracesight"))
        .args(["synth", "--format", "perf", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&prog)
        .output()
        .unwrap();
    assert!(r.status.success(), "synth --format perf: {}", String::from_utf8_lossy(&r.stderr));
    Some(out)
}

/// A synthesized perf.data of a program with three threads on three CPUs:
/// a timeline lane per CPU, each CPU's rows, function names from the
/// program found through `--symdir`, at 80x24 and wide.
#[test]
fn viewer_on_synthesized_perf_data_has_a_lane_per_cpu() {
    if !have_tmux() {
        eprintln!("note: tmux is not installed; skipping the terminal test");
        return;
    }
    let dir = Scratch::new("synth-perf");
    let Some(out) = synth_threads_perf(&dir.0) else { return };
    let data = tracesight::input::perf::PerfData::open(&out.join("perf.data")).unwrap();
    let mut cpus: Vec<i32> = data.fragments().iter().map(|f| f.cpu).collect();
    // Elements are numbered in file order: the last is the last fragment's.
    let last_cpu = *cpus.last().expect("fragments");
    cpus.sort_unstable();
    cpus.dedup();
    assert!(cpus.len() > 1, "threads runs on several CPUs: {cpus:?}");
    let lanes: Vec<String> = cpus.iter().map(|c| format!("│cpu{c} ")).collect();
    for size in [(80, 24), (160, 48)] {
        let at = format!("{}x{}", size.0, size.1);
        let cmd = viewer_command(&dir.0, &["out/perf.data", "--symdir", out.to_str().unwrap()]);
        let tmux = Tmux::start_sized(&dir.0, &cmd, size);
        let s = tmux.wait_for(&format!("a timeline lane per CPU ({at})"), |s| {
            s.contains(" timeline · timestamp ") && lanes.iter().all(|l| s.lines().any(|x| x.starts_with(l.as_str())))
        });
        let lane_rows = s.lines().filter(|l| l.starts_with("│cpu")).count();
        assert_eq!(lane_rows, cpus.len(), "{at}: one lane per CPU:\n{s}");
        let label = format!("perf.data · CPUs {}", cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","));
        assert!(s.contains(&label), "{at}: status line {label:?}:\n{s}");
        // The program's entry, by name, on CPU 0 (the main thread's).
        let s = tmux.wait_for(&format!("_start on CPU 0 ({at})"), |s| s.lines().any(|l| l.contains("   0 10 EL0N  _start ")));
        no_error(&s);
        // The function search knows the program's functions; the first
        // entry of the second thread's function is on another CPU.
        tmux.keys(&["/"]);
        tmux.text("main");
        tmux.wait_for(&format!("a hit for main ({at})"), |s| s.lines().any(is_main_hit));
        tmux.keys(&["Escape"]);
        // An Escape read in one piece with End's escape sequence leaves the
        // rest of that sequence read as typed characters (crossterm's input
        // parser), and End is lost on a loaded machine: let the search close.
        tmux.wait_for(&format!("the function search to close ({at})"), |s| !s.contains(" functions · entries"));
        tmux.keys(&["End"]);
        let s = tmux.wait_for(&format!("the last element, on CPU {last_cpu} ({at})"), |s| {
            s.lines().any(|l| l.contains(&format!("{last_cpu:>3} {:02x} ", 0x10 + last_cpu)))
                && s.contains(" elements · committed view · ")
        });
        no_error(&s);
        quit_cleanly(&tmux);
    }
}

/// Every signal that ends the viewer gives the terminal back first: the
/// alternate screen left, echo and canonical input on again, and the
/// process dies of the signal (the shell reports 128 + its number).
#[test]
fn fatal_signals_restore_the_terminal() {
    if !have_tmux() {
        eprintln!("note: tmux is not installed; skipping the terminal test");
        return;
    }
    for (name, number) in [("TERM", 15), ("HUP", 1), ("INT", 2), ("QUIT", 3)] {
        let dir = Scratch::new(&format!("signal-{name}"));
        let pidfile = dir.0.join("viewer.pid");
        let cache = dir.0.join("cache");
        // The viewer's PID goes to a file (exec keeps it), and after it ends
        // the shell shows its status and the terminal's modes.
        let cmd = format!(
            "XDG_CACHE_HOME={} sh -c 'echo $$ > {}; exec \"$0\"' {}; echo EXITED $?; stty -a | tr ' ' '\\n' | grep -x -e echo -e -echo -e icanon -e -icanon | tr '\\n' ' '; echo MODES; sleep 30",
            sh_quote(cache.to_str().unwrap()),
            sh_quote(pidfile.to_str().unwrap()),
            sh_quote(env!("CARGO_BIN_EXE_tracesight")),
        );
        let tmux = Tmux::start_sized(&dir.0, &cmd, (80, 24));
        tmux.wait_for(&format!("the viewer's list (SIG{name})"), |s| s.contains(" elements · committed view · "));
        let alt = |t: &Tmux| String::from_utf8_lossy(&t.run(&["display-message", "-p", "#{alternate_on}"]).stdout).trim().to_string();
        assert_eq!(alt(&tmux), "1", "the viewer runs in the alternate screen");
        let pid = std::fs::read_to_string(&pidfile).expect("the viewer's pid file").trim().to_string();
        let st = Command::new("kill").arg(format!("-{name}")).arg(&pid).status().expect("running kill");
        assert!(st.success(), "kill -{name} {pid}");
        let s = tmux.wait_for(&format!("the shell after SIG{name}"), |s| s.contains("MODES"));
        assert!(s.contains(&format!("EXITED {}", 128 + number)), "SIG{name}: the viewer should die of the signal:\n{s}");
        let modes = s.lines().find(|l| l.contains("MODES")).unwrap();
        assert!(modes.contains("echo ") && !modes.contains("-echo"), "SIG{name}: echo is off again: {modes:?}");
        assert!(modes.contains("icanon ") && !modes.contains("-icanon"), "SIG{name}: raw mode stayed on: {modes:?}");
        assert_eq!(alt(&tmux), "0", "SIG{name}: the alternate screen is still on:\n{s}");
        assert!(!s.contains(" elements · committed view · "), "SIG{name}: the viewer's screen is still showing:\n{s}");
    }
}

/// The function level in a real terminal: `-` folds the call under the
/// cursor into one row, `F` opens the statistics pane.
#[test]
fn viewer_folds_a_call_and_shows_function_statistics_in_tmux() {
    if !have_tmux() {
        eprintln!("note: tmux is not installed; skipping the terminal test");
        return;
    }
    let dir = Scratch::new("fold");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/snapshot");
    let tmux = Tmux::start(&dir.0, &viewer_command(&dir.0, &[demo.to_str().unwrap()]));
    // Call depth is known once the background pass is done.
    tmux.wait_for("the call stacks", |s| s.contains(" elements · committed view · 0 of ") && s.contains(" timeline · ") && !s.contains("flat: call depth"));
    // Element 1000010 is inside a call of hash_djb that enters at 1000009.
    tmux.keys(&["g"]);
    tmux.text("1000010");
    tmux.keys(&["Enter"]);
    tmux.wait_text("· 1,000,010 of ");
    tmux.wait_for("the call stack in the source pane", |s| s.contains("› main"));
    tmux.text("-");
    let s = tmux.wait_text("⊞ hash_djb · 16 instr");
    assert!(!s.contains(" 1000010 "), "the folded call's rows still show:\n{s}");
    tmux.text("+");
    tmux.wait_for("the call unfolded", |s| !s.contains("⊞ hash_djb") && s.contains(" 1000010 "));
    tmux.keys(&["F"]);
    let s = tmux.wait_for("the statistics pane", |s| s.contains("function statistics · whole capture") && s.contains("hash_djb"));
    no_error(&s);
    tmux.keys(&["Escape"]);
    tmux.wait_for("the pane to close", |s| !s.contains("function statistics"));
    quit_cleanly(&tmux);
}

/// A capture of six cores filtered to one (`f cpu:1`, which the snapshot's
/// `[core_trace_sources]` gives trace ID 0x11): the list shows that trace
/// ID's rows only, the title counts them, its timeline lane is marked; an
/// empty filter shows every core again.
#[test]
fn filtering_one_core_of_a_multi_core_capture() {
    if !have_tmux() {
        eprintln!("note: tmux is not installed; skipping the terminal test");
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd/juno_r1_1");
    if !src.is_dir() {
        eprintln!("note: ../shared/fixtures/opencsd/juno_r1_1 not found; skipped");
        return;
    }
    let dir = Scratch::new("filter-juno");
    let snap = dir.0.join("juno_r1_1");
    std::fs::create_dir_all(&snap).unwrap();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        if e.path().is_file() && !e.file_name().to_string_lossy().ends_with(".tsidx") {
            std::fs::copy(e.path(), snap.join(e.file_name())).unwrap();
        }
    }
    let tmux = Tmux::start(&dir.0, &viewer_command(&dir.0, &["juno_r1_1"]));
    tmux.wait_text(" elements · committed view · 0 of 15,403 ");
    tmux.wait_for("the lanes", |s| s.lines().any(|l| l.starts_with("│15  ")));
    tmux.keys(&["f"]);
    tmux.wait_text("view: ");
    tmux.text("cpu:1");
    tmux.keys(&["Enter"]);
    // The ID column of the list's rows: after its header, up to its bottom
    // border ("…" while a row is still being decoded).
    let ids_of = |s: &str| -> Vec<String> {
        s.lines()
            .skip_while(|l| !l.contains(" elem id "))
            .skip(1)
            .take_while(|l| !l.starts_with('└'))
            .filter_map(|r| {
                let t: Vec<&str> = r.trim_start_matches('│').split_whitespace().collect();
                let t = if t.first() == Some(&"cmt") { &t[1..] } else { &t[..] };
                t.first().filter(|n| n.parse::<u64>().is_ok()).and(t.get(1).map(|id| id.to_string()))
            })
            .collect()
    };
    // The title comes before the rows are decoded: wait for those too.
    let s = tmux.wait_for("the filtered rows", |s| s.contains(" · cpu:1 · row 0 of 107 ") && !ids_of(s).iter().any(|id| id == "…"));
    let ids = ids_of(&s);
    assert!(ids.len() > 20, "rows shown:\n{s}");
    assert!(ids.iter().all(|id| *id == "11"), "a row of another core ({ids:?}):\n{s}");
    assert!(s.lines().any(|l| l.starts_with("│11 • ")), "the lane of 0x11 is marked:\n{s}");
    no_error(&s);
    // Moving stays in the view.
    tmux.keys(&["End"]);
    // The rows below the title come as their pages are decoded.
    tmux.wait_for("the end of the filtered list", |s| s.contains(" · cpu:1 · row 106 of 107 ") && s.contains("— end of trace —"));
    tmux.keys(&["f", "C-u", "Enter"]);
    tmux.wait_text("every element shown");
    tmux.keys(&["Home"]);
    tmux.wait_text(" elements · committed view · 0 of 15,403 ");
    quit_cleanly(&tmux);
}
