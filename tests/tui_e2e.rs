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
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let socket = format!("tracesight-e2e-{}-{nanos}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let mut t = Tmux { socket, socket_path: None };
        let cwd = cwd.to_str().expect("a UTF-8 temp path");
        let out = t.run(&["new-session", "-d", "-s", SESSION, "-x", "160", "-y", "48", "-c", cwd, command]);
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
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!("tracesight-e2e-{}", std::process::id()));
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
    let dir = Scratch::new();
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
    let numbers: Vec<u64> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {l}"));
            v["number"].as_u64().unwrap_or_else(|| panic!("{name}: no number in {l}"))
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
