//! Index files are untrusted (issue 15, findings 1, 3 and 4): a header edited
//! with its checksum recomputed, wrong totals, or a trace changed in place
//! with its size and modification time kept must never make a command panic
//! or print wrong elements; the index is rejected (or found wrong during a
//! seek) and rebuilt, and the command says why.

use std::path::{Path, PathBuf};
use std::process::Command;

use tracesight::index::format::Fnv;

const HEADER_WORDS: usize = 16;
const CHECKPOINT_WORDS: usize = 19;
const ID_WORDS: usize = 9;

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/opencsd");
    p.is_dir().then_some(p)
}

/// A copy of a fixture snapshot whose trace is `copies` copies of the
/// original (formatted ETB data repeats cleanly), in a scratch directory.
fn scratch(name: &str, tag: &str, copies: usize) -> Option<PathBuf> {
    let src = fixtures()?.join(name);
    let dst = std::env::temp_dir().join(format!("tracesight-idxrob-{tag}-{}", std::process::id())).join(name);
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        // An index someone built beside the fixture is not copied: these
        // tests find and damage the index their own run builds.
        let index = e.path().extension().is_some_and(|x| x == "tsidx");
        if e.file_type().unwrap().is_file() && !index {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
    let trace = dst.join("cstrace.bin");
    let one = std::fs::read(&trace).unwrap();
    std::fs::write(&trace, one.repeat(copies)).unwrap();
    Some(dst)
}

fn tracesight(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tracesight")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn index_file(snap: &Path) -> PathBuf {
    std::fs::read_dir(snap)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| p.extension().is_some_and(|x| x == "tsidx"))
        .expect("an index file beside the trace")
}

fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
}

fn set_word(b: &mut [u8], i: usize, v: u64) {
    b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
}

/// Recompute the records checksum the way the writer does, as someone
/// editing the file would (over the header words before it and the records).
fn rehash(b: &mut [u8]) {
    let (count, ids, stop) = (word(b, 6) as usize, word(b, 7) as usize, word(b, 11) as usize);
    let states_at = (HEADER_WORDS + count * CHECKPOINT_WORDS + ids * ID_WORDS) * 8 + stop.div_ceil(8) * 8;
    let mut h = Fnv::new();
    h.write(&b[..(HEADER_WORDS - 1) * 8]);
    h.write(&b[HEADER_WORDS * 8..states_at.min(b.len())]);
    set_word(b, HEADER_WORDS - 1, h.finish());
}

/// Finding 1: header fields edited (with and without the checksum
/// recomputed) once panicked in a slice range of the index reader in
/// `decode --seek`, `index` and export. Each edit is now rejected at open and
/// the index rebuilt; the seek prints what it printed before.
#[test]
fn edited_header_fields_are_rejected_and_rebuilt() {
    let Some(snap) = scratch("juno_r1_1", "header", 1) else { return };
    let s = snap.to_str().unwrap();
    let (code, out, err) = tracesight(&["index", s, "--interval-kib", "4"]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, reference, _) = tracesight(&["decode", s, "--seek", "7000", "--count", "20"]);
    assert_eq!(reference.lines().count(), 20);
    let idx = index_file(&snap);
    let good = std::fs::read(&idx).unwrap();
    let len = good.len() as u64;
    let count = word(&good, 6);
    let states_len = word(&good, 12);
    let body = len - states_len;
    // What an edit is called, the words it writes (index, value), and
    // whether the records checksum is recomputed after it.
    type Edit<'a> = (&'a str, Vec<(usize, u64)>, bool);
    let edits: Vec<Edit> = vec![
        ("huge id count", vec![(7, 1 << 61)], false),
        ("huge id count, rehashed", vec![(7, 1 << 61)], true),
        // The sum of the records' size and the states' length wraps to the
        // file's length: the old reader sliced far past the map.
        ("wrapping states length", vec![(7, 1 << 57), (12, len.wrapping_sub(body + (1u64 << 57) * 72))], true),
        ("three more trace IDs", vec![(7, word(&good, 7) + 3), (12, states_len - 3 * 72)], true),
        ("one checkpoint less", vec![(6, count - 1), (12, states_len + 19 * 8)], true),
        ("huge stop text", vec![(11, u64::MAX - 6)], true),
        ("zero checkpoints", vec![(6, 0)], true),
    ];
    for (what, words, rehashed) in edits {
        let mut bad = good.clone();
        for (i, v) in words {
            set_word(&mut bad, i, v);
        }
        if rehashed {
            rehash(&mut bad);
        }
        std::fs::write(&idx, &bad).unwrap();
        let (code, got, err) = tracesight(&["decode", s, "--seek", "7000", "--count", "20"]);
        assert_eq!(code, 0, "{what}: {err}");
        assert!(err.contains("rebuilt"), "{what}: {err}");
        assert_eq!(got, reference, "{what}");
        std::fs::write(&idx, &bad).unwrap();
        let (code, out, err) = tracesight(&["index", s, "--interval-kib", "4"]);
        assert!(code == 0 && out.contains("rejected") && out.contains("built in"), "{what}: {out}{err}");
    }
    let _ = std::fs::remove_dir_all(snap.parent().unwrap());
}

/// Finding 3: the totals in the header were not protected: larger totals
/// made a seek past the real end print nothing and succeed. Totals that
/// disagree with the records are rejected at open; totals that agree with
/// edited records (both raised) are found wrong by the seek, which rebuilds.
#[test]
fn wrong_totals_are_rejected_or_found_by_the_seek() {
    let Some(snap) = scratch("juno_r1_1", "totals", 1) else { return };
    let s = snap.to_str().unwrap();
    let (code, _, err) = tracesight(&["index", s, "--interval-kib", "4"]);
    assert_eq!(code, 0, "{err}");
    let idx = index_file(&snap);
    let good = std::fs::read(&idx).unwrap();
    let total = word(&good, 9);
    let (_, last, _) = tracesight(&["decode", s, "--seek", &(total - 1).to_string(), "--count", "1"]);
    assert_eq!(last.lines().count(), 1);

    // Only the header's total raised: disagrees with the per-ID totals.
    let mut bad = good.clone();
    set_word(&mut bad, 9, total + 1000);
    rehash(&mut bad);
    std::fs::write(&idx, &bad).unwrap();
    let (code, out, err) = tracesight(&["index", s, "--interval-kib", "4"]);
    assert!(code == 0 && out.contains("totals") && out.contains("built in"), "{out}{err}");

    // Header and first per-ID total raised together: consistent records,
    // so only decoding can tell. The seek past the real end used to print
    // nothing with exit status 0.
    let mut bad = good.clone();
    set_word(&mut bad, 9, total + 1000);
    let count = word(&good, 6) as usize;
    let id0 = HEADER_WORDS + count * CHECKPOINT_WORDS;
    set_word(&mut bad, id0 + 1, word(&good, id0 + 1) + 1000);
    rehash(&mut bad);
    std::fs::write(&idx, &bad).unwrap();
    let (code, got, err) = tracesight(&["decode", s, "--seek", &(total + 10).to_string(), "--count", "5"]);
    assert_eq!(code, 1, "{got}{err}");
    assert!(err.contains("promised") && err.contains("rebuilt") && err.contains("no element there"), "{err}");
    assert!(got.is_empty());
    // A seek that straddles the real end gives what is there, then rebuilds.
    std::fs::write(&idx, &bad).unwrap();
    let (code, got, err) = tracesight(&["decode", s, "--seek", &(total - 1).to_string(), "--count", "5"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(got, last);
    assert!(err.contains("promised"), "{err}");
    let _ = std::fs::remove_dir_all(snap.parent().unwrap());
}

/// Finding 4: 16 KiB overwritten in the middle of a trace, its size and
/// modification time kept (`touch -r`), made seeks print elements from the
/// old decode with exit status 0. The segment hashes catch it: a seek that
/// decodes the changed bytes rebuilds and prints what a full decode of the
/// new trace gives; `index` checks the whole trace.
#[test]
fn a_trace_changed_in_place_is_caught_by_segment_hashes() {
    let Some(snap) = scratch("juno_r1_1", "changed", 8) else { return };
    let s = snap.to_str().unwrap();
    let trace = snap.join("cstrace.bin");
    let (code, _, err) = tracesight(&["index", s]);
    assert_eq!(code, 0, "{err}");
    let mtime = std::fs::metadata(&trace).unwrap().modified().unwrap();
    // Trace data from elsewhere in the capture, frame-aligned, so the
    // changed trace still decodes (to other elements).
    let mut t = std::fs::read(&trace).unwrap();
    let size = t.len();
    let (at, from) = (size / 2, 3 * 1024 + 16 * 7);
    let chunk: Vec<u8> = t[from..from + 16 * 1024].to_vec();
    t[at..at + 16 * 1024].copy_from_slice(&chunk);
    std::fs::write(&trace, &t).unwrap();
    std::fs::OpenOptions::new().write(true).open(&trace).unwrap().set_modified(mtime).unwrap();

    let (code, full, err) = tracesight(&["decode", s, "--elements-only"]);
    assert_eq!(code, 0, "{err}");
    // (A decoder error message is glued to the element line after it, as
    // trc_pkt_lister prints it; a seek prints only the element.)
    let lines: Vec<&str> = full.lines().filter(|l| l.contains("OCSD_GEN_TRC_ELEM_")).map(|l| &l[l.rfind("Idx:").unwrap()..]).collect();
    // Elements from before the change to well after it.
    let idx_of = |l: &str| l.strip_prefix("Idx:").and_then(|r| r.split(';').next()).unwrap().parse::<usize>().unwrap();
    let n = lines.iter().position(|l| idx_of(l) >= at - 4096).unwrap();
    let k = lines.iter().position(|l| idx_of(l) >= at + 20 * 1024).unwrap() - n;
    let (code, got, err) = tracesight(&["decode", s, "--seek", &n.to_string(), "--count", &k.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("changed since the index was built") && err.contains("rebuilt"), "{err}");
    assert_eq!(got, lines[n..n + k].join("\n") + "\n");

    // `index` reads the whole trace against an index it would reuse.
    let (code, _, _) = tracesight(&["index", s]);
    assert_eq!(code, 0);
    t[at + 100] ^= 0x5a;
    std::fs::write(&trace, &t).unwrap();
    std::fs::OpenOptions::new().write(true).open(&trace).unwrap().set_modified(mtime).unwrap();
    let (code, out, err) = tracesight(&["index", s]);
    assert!(code == 0 && out.contains("changed since the index was built") && out.contains("built in"), "{out}{err}");
    let _ = std::fs::remove_dir_all(snap.parent().unwrap());
}
