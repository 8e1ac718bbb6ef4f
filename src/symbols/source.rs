//! Finding source files named by the debug information, as debuggers do:
//!
//! - `--substitute-path OLD=NEW` (repeatable) rewrites a path that starts
//!   with the directory OLD (matched on whole path components) to start with
//!   NEW instead; the first matching rule applies, as in GDB.
//! - `--source-root DIR` (repeatable) looks for the file under DIR: the whole
//!   path below DIR, then shorter and shorter trailing parts of it, down to
//!   the file name alone.
//!
//! When nothing is found the answer says so and lists every place tried.

use std::collections::HashMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The outcome of looking for a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceLookup {
    /// Found at this path.
    Found(PathBuf),
    /// Not found; every path tried, in order.
    NotFound { file: String, tried: Vec<PathBuf> },
}

impl fmt::Display for SourceLookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceLookup::Found(p) => write!(f, "{}", p.display()),
            SourceLookup::NotFound { file, tried } => {
                write!(f, "source file {file} not found")?;
                if tried.is_empty() {
                    return Ok(());
                }
                write!(f, " (tried ")?;
                for (i, t) in tried.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{}", t.display())?;
                }
                write!(f, "; use --source-root DIR or --substitute-path OLD=NEW)")
            }
        }
    }
}

impl SourceLookup {
    pub fn path(&self) -> Option<&Path> {
        match self {
            SourceLookup::Found(p) => Some(p),
            SourceLookup::NotFound { .. } => None,
        }
    }
}

/// The text of a source file, split into lines.
#[derive(Debug)]
pub struct SourceText {
    pub path: PathBuf,
    text: String,
    starts: Vec<usize>,
}

impl SourceText {
    fn new(path: PathBuf, text: String) -> SourceText {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        if starts.last() == Some(&text.len()) {
            starts.pop();
        }
        SourceText { path, text, starts }
    }

    /// Line `n` (1-based), without its line ending.
    pub fn line(&self, n: u32) -> Option<&str> {
        let i = (n as usize).checked_sub(1)?;
        let start = *self.starts.get(i)?;
        let end = self.starts.get(i + 1).copied().unwrap_or(self.text.len());
        Some(self.text[start..end].trim_end_matches(['\n', '\r']))
    }

    pub fn line_count(&self) -> usize {
        self.starts.len()
    }
}

/// Source directories and path substitutions, with a cache of files read.
#[derive(Debug, Default)]
pub struct SourceResolver {
    roots: Vec<PathBuf>,
    substitutions: Vec<(String, String)>,
    cache: HashMap<String, Result<Arc<SourceText>, SourceLookup>>,
}

/// A `--substitute-path` argument, `OLD=NEW` (OLD not empty), as its two
/// paths.
pub fn parse_substitution(arg: &str) -> Result<(String, String), super::SymbolError> {
    match arg.split_once('=') {
        Some((old, new)) if !old.is_empty() => Ok((old.to_string(), new.to_string())),
        _ => Err(super::SymbolError::BadSubstitution { arg: arg.to_string() }),
    }
}

impl SourceResolver {
    pub fn new() -> SourceResolver {
        SourceResolver::default()
    }

    /// A resolver from the `--source-root DIR` and `--substitute-path
    /// OLD=NEW` arguments.
    pub fn from_args<R: AsRef<Path>, S: AsRef<str>>(
        roots: &[R],
        substitutions: &[S],
    ) -> Result<SourceResolver, super::SymbolError> {
        let mut r = SourceResolver::new();
        for d in roots {
            r.add_root(d.as_ref());
        }
        for s in substitutions {
            r.add_substitution_arg(s.as_ref())?;
        }
        Ok(r)
    }

    /// Add a `--source-root` directory.
    pub fn add_root(&mut self, dir: impl Into<PathBuf>) {
        self.roots.push(dir.into());
        self.cache.clear();
    }

    /// Add a substitution rule.
    pub fn add_substitution(&mut self, old: &str, new: &str) {
        let old = old.trim_end_matches('/');
        let new = if new.len() > 1 { new.trim_end_matches('/') } else { new };
        self.substitutions.push((old.to_string(), new.to_string()));
        self.cache.clear();
    }

    /// Add a rule given as `OLD=NEW`.
    pub fn add_substitution_arg(&mut self, arg: &str) -> Result<(), super::SymbolError> {
        let (old, new) = parse_substitution(arg)?;
        self.add_substitution(&old, &new);
        Ok(())
    }

    /// `path` rewritten by the first rule whose OLD is a leading run of its
    /// components.
    pub fn substitute(&self, path: &str) -> Option<String> {
        self.substitutions.iter().find_map(|(old, new)| {
            let rest = path.strip_prefix(old.as_str())?;
            if old.is_empty() || !(rest.is_empty() || rest.starts_with('/') || old.ends_with('/')) {
                return None;
            }
            Some(format!("{new}{rest}"))
        })
    }

    /// Every place the file is looked for, in order.
    pub fn candidates(&self, file: &str) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        let rewritten = self.substitute(file);
        let primary = rewritten.clone().unwrap_or_else(|| file.to_string());
        out.push(PathBuf::from(&primary));
        if rewritten.is_some() {
            out.push(PathBuf::from(file));
        }
        // Trailing parts of the path: a/b/c.c, b/c.c, c.c.
        let parts: Vec<&str> = Path::new(&primary)
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => s.to_str(),
                _ => None,
            })
            .collect();
        for root in &self.roots {
            for k in 0..parts.len() {
                let mut p = root.clone();
                for part in &parts[k..] {
                    p.push(part);
                }
                out.push(p);
            }
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|p| seen.insert(p.clone()));
        out
    }

    /// Find the file named `file` by the debug information.
    pub fn resolve(&self, file: &str) -> SourceLookup {
        let tried = self.candidates(file);
        match tried.iter().find(|p| p.is_file()) {
            Some(p) => SourceLookup::Found(p.clone()),
            None => SourceLookup::NotFound { file: file.to_string(), tried },
        }
    }

    /// Find and read `file` (cached).
    pub fn load(&mut self, file: &str) -> Result<Arc<SourceText>, SourceLookup> {
        if let Some(r) = self.cache.get(file) {
            return r.clone();
        }
        let r = match self.resolve(file) {
            SourceLookup::Found(p) => match std::fs::read(&p) {
                Ok(b) => Ok(Arc::new(SourceText::new(p, String::from_utf8_lossy(&b).into_owned()))),
                Err(_) => Err(SourceLookup::NotFound { file: file.to_string(), tried: vec![p] }),
            },
            nf => Err(nf),
        };
        self.cache.insert(file.to_string(), r.clone());
        r
    }

    /// Line `line` of `file`, or why it cannot be shown.
    pub fn line(&mut self, file: &str, line: u32) -> Result<String, super::SymbolError> {
        let t = self.load(file).map_err(super::SymbolError::SourceNotFound)?;
        t.line(line).map(str::to_string).ok_or_else(|| super::SymbolError::NoLine {
            path: t.path.clone(),
            line,
            count: t.line_count(),
        })
    }
}

/// Under every `file:line` line of an addr2line-style listing (`symbolize
/// --show-source`), the source line itself (indented), or why it cannot be
/// shown. Each file is read once.
pub fn with_source_lines(listing: &str, resolver: &SourceResolver) -> String {
    /// A file's lines, or why they are not there.
    enum Text {
        Lines(Vec<String>),
        Missing(String),
    }
    let mut files: HashMap<String, Text> = HashMap::new();
    let mut out = String::with_capacity(listing.len() * 2);
    for line in listing.lines() {
        out.push_str(line);
        out.push('\n');
        let loc = line.split(" (discriminator").next().unwrap_or(line);
        let Some((file, num)) = loc.rsplit_once(':') else { continue };
        let Ok(num) = num.trim().parse::<usize>() else { continue };
        if file == "??" || file.starts_with("0x") {
            continue;
        }
        let text = files.entry(file.to_string()).or_insert_with(|| match resolver.resolve(file) {
            SourceLookup::Found(p) => match std::fs::read_to_string(&p) {
                Ok(t) => Text::Lines(t.lines().map(str::to_string).collect()),
                Err(e) => Text::Missing(format!("{}: {e}", p.display())),
            },
            nf => Text::Missing(nf.to_string()),
        });
        match text {
            Text::Lines(lines) => match num.checked_sub(1).and_then(|i| lines.get(i)) {
                Some(t) => out.push_str(&format!("    {}\n", t.trim_end())),
                None if num == 0 => {}
                None => out.push_str(&format!("    ({file} has {} lines, not {num})\n", lines.len())),
            },
            Text::Missing(why) => out.push_str(&format!("    (source not shown: {why})\n")),
        }
    }
    out
}
