//! Summing profiles of one format, so that traces decoded one per job can
//! be combined: AutoFDO (per binary, by path and build ID), BOLT (per
//! branch and run) and folded stacks (per stack). Counts saturate at
//! u64::MAX with a warning, as simpleperf's merge does.

use std::path::{Path, PathBuf};

use super::autofdo::{AutofdoProfile, SPLIT_NOTE};
use super::bolt::BoltProfile;
use super::{add_saturating, folded, ProfileError};

/// The profile formats that can be merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MergeFormat {
    Autofdo,
    Bolt,
    Folded,
}

/// The format a profile's text looks like: AutoFDO starts with a count (or
/// the split note), BOLT with `B` or `F` records, anything else is taken
/// for folded stacks.
pub fn detect(text: &str) -> MergeFormat {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if first == SPLIT_NOTE || (!first.is_empty() && first.bytes().all(|b| b.is_ascii_digit())) {
        MergeFormat::Autofdo
    } else if first.starts_with("B ") || first.starts_with("F ") {
        MergeFormat::Bolt
    } else {
        MergeFormat::Folded
    }
}

/// The merged text and whether a count saturated.
pub struct Merged {
    pub text: String,
    pub format: MergeFormat,
    pub saturated: bool,
}

/// Merge `inputs` (path, text). With `format` given every input is read as
/// that; otherwise all must look alike.
pub fn merge_texts(inputs: &[(PathBuf, String)], format: Option<MergeFormat>) -> Result<Merged, ProfileError> {
    let Some((first_path, first_text)) = inputs.first() else {
        return Err(ProfileError::NoProfiles);
    };
    let format = match format {
        Some(f) => f,
        None => {
            let f = detect(first_text);
            for (p, t) in &inputs[1..] {
                let g = detect(t);
                if g != f {
                    return Err(ProfileError::MixedFormats {
                        path: p.clone(),
                        found: g,
                        first: first_path.clone(),
                        expected: f,
                    });
                }
            }
            f
        }
    };
    Ok(match format {
        MergeFormat::Autofdo => {
            let mut all = AutofdoProfile::default();
            for (p, t) in inputs {
                all.merge(AutofdoProfile::parse(p, t)?);
            }
            Merged { text: all.write(), format, saturated: all.saturated }
        }
        MergeFormat::Bolt => {
            let mut all = BoltProfile::default();
            for (p, t) in inputs {
                all.merge(&BoltProfile::parse(p, t)?);
            }
            Merged { text: all.write(), format, saturated: all.saturated }
        }
        MergeFormat::Folded => {
            let mut all = std::collections::BTreeMap::new();
            let mut sat = false;
            for (p, t) in inputs {
                let (m, s) = folded::parse(p, t)?;
                sat |= s;
                for (k, v) in m {
                    sat |= add_saturating(all.entry(k).or_default(), v);
                }
            }
            Merged { text: folded::write(&all), format, saturated: sat }
        }
    })
}

/// Read the files and merge them.
pub fn merge_files(paths: &[PathBuf], format: Option<MergeFormat>) -> Result<Merged, ProfileError> {
    let mut inputs = Vec::with_capacity(paths.len());
    for p in paths {
        inputs.push((p.clone(), read_profile(p)?));
    }
    merge_texts(&inputs, format)
}

/// Read a profile file (regular files only).
pub fn read_profile(p: &Path) -> Result<String, ProfileError> {
    let io = |error| ProfileError::Io { path: p.to_path_buf(), error };
    let meta = std::fs::metadata(p).map_err(io)?;
    if !meta.is_file() {
        return Err(ProfileError::Io {
            path: p.to_path_buf(),
            error: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        });
    }
    std::fs::read_to_string(p).map_err(|error| ProfileError::Io { path: p.to_path_buf(), error })
}
