//! Helpers the integration tests share: copies of captures (an index is
//! written beside a capture's trace, which must not land in the sources or
//! in ../shared) and runs of the `tracesight` binary.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// Copy the directory tree `src` to `dst`, leaving out index files so that
/// every copy starts without one.
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else if e.path().extension() != Some("tsidx".as_ref()) {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// Run `tracesight` with `args`: whether it succeeded, its standard output
/// and its standard error.
pub fn run_tracesight(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tracesight")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}
