//! A forgiving ini reader that follows OpenCSD's snapshot parser.
//!
//! * Lines end at `\n`; everything from the first `\r`, `;` or `#` on a line
//!   is dropped (so a comment may follow a value, and CRLF files work).
//! * A line containing `[` and, after it, `]` is a section header; the name
//!   is the trimmed text between them.
//! * Other non-blank lines are `key=value`, split at the first `=`, both
//!   sides trimmed of spaces and tabs.
//! * Sections, keys and duplicate keys are kept in file order, with their
//!   line numbers.  Lines that are neither are kept as warnings.
//! * Bytes that are not UTF-8 are decoded lossily.  Nothing here panics.

/// One `key=value` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: String,
    /// 1-based line number.
    pub line: usize,
}

/// A `[name]` section and its entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    /// 1-based line number of the header.
    pub line: usize,
    pub entries: Vec<Entry>,
}

impl Section {
    /// First value for `key` (keys are case-sensitive, as in OpenCSD).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entry(key).map(|e| e.value.as_str())
    }

    /// First entry for `key`.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key == key)
    }

    /// All entries for `key`, in file order.
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| e.key == key)
    }
}

/// A line the reader could not interpret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IniWarning {
    pub line: usize,
    pub msg: String,
}

/// A parsed ini file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ini {
    /// Sections in file order (the same name may appear several times).
    pub sections: Vec<Section>,
    /// `key=value` lines found before the first section header.
    pub preamble: Vec<Entry>,
    pub warnings: Vec<IniWarning>,
}

impl Ini {
    pub fn parse(bytes: &[u8]) -> Ini {
        Ini::parse_str(&String::from_utf8_lossy(bytes))
    }

    pub fn parse_str(text: &str) -> Ini {
        let mut ini = Ini::default();
        for (n, raw) in text.split('\n').enumerate() {
            let line_no = n + 1;
            let line = match raw.find(['\r', ';', '#']) {
                Some(cut) => &raw[..cut],
                None => raw,
            };
            if let Some(name) = section_header(line) {
                ini.sections.push(Section {
                    name: trim(name).to_string(),
                    line: line_no,
                    entries: Vec::new(),
                });
                continue;
            }
            if trim(line).is_empty() {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                ini.warnings.push(IniWarning {
                    line: line_no,
                    msg: format!("couldn't parse '{}' as key=value", trim(line)),
                });
                continue;
            };
            let entry = Entry {
                key: trim(k).to_string(),
                value: trim(v).to_string(),
                line: line_no,
            };
            match ini.sections.last_mut() {
                Some(s) => s.entries.push(entry),
                None => {
                    ini.warnings.push(IniWarning {
                        line: line_no,
                        msg: format!("definition of '{}' has no section header", entry.key),
                    });
                    ini.preamble.push(entry);
                }
            }
        }
        ini
    }

    /// First section called `name` (case-sensitive).
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// All sections called `name`, in file order.
    pub fn sections_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Section> + 'a {
        self.sections.iter().filter(move |s| s.name == name)
    }

    /// Entries of every section called `name`, in file order.
    pub fn entries_in<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.sections_named(name).flat_map(|s| s.entries.iter())
    }
}

/// Text between `[` and the next `]`, if the line has both.
fn section_header(line: &str) -> Option<&str> {
    let open = line.find('[')?;
    let rest = &line[open + 1..];
    let close = rest.find(']')?;
    Some(&rest[..close])
}

/// Trim spaces and tabs (not other whitespace), like OpenCSD.
pub fn trim(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// Parse an unsigned number the way C's `strtoull(s, &end, 0)` does and
/// require the whole string to be used: optional spaces/tabs, optional `+`
/// or `-` (negation wraps), `0x`/`0X` hex, leading `0` octal, else decimal.
/// Values too large for 64 bits saturate.  Returns `None` if there are no
/// digits or anything follows them.
pub fn parse_c_unsigned(s: &str) -> Option<u64> {
    let (value, used, any) = c_strtoull(s);
    (any && used == s.len()).then_some(value)
}

/// `strtoul(s, NULL, 0)` as OpenCSD uses it for register values: the value
/// of the longest valid prefix, 0 if there is none.
pub fn c_strtoul_prefix(s: &str) -> u64 {
    c_strtoull(s).0
}

/// Returns (value, bytes used, whether any digit was read).
fn c_strtoull(s: &str) -> (u64, usize, bool) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c') {
        i += 1;
    }
    let mut negative = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        negative = b[i] == b'-';
        i += 1;
    }
    let mut radix = 10u64;
    if i + 1 < b.len()
        && b[i] == b'0'
        && (b[i + 1] | 0x20) == b'x'
        && b.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit())
    {
        radix = 16;
        i += 2;
    } else if i < b.len() && b[i] == b'0' {
        radix = 8;
    }
    let mut value = 0u64;
    let mut overflow = false;
    let mut any = false;
    while i < b.len() {
        let Some(digit) = (b[i] as char).to_digit(radix as u32) else {
            break;
        };
        any = true;
        match value
            .checked_mul(radix)
            .and_then(|v| v.checked_add(digit as u64))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
        i += 1;
    }
    if !any {
        return (0, 0, false);
    }
    if overflow {
        value = u64::MAX;
    } else if negative {
        value = value.wrapping_neg();
    }
    (value, i, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keys_comments() {
        let text = "; top comment\n[snapshot]\r\nversion = 1.0 ; trailing\n# hash\n\n[ regs ]\nA=1\nA=2\nB = x#y\nnot a pair\n";
        let ini = Ini::parse_str(text);
        assert_eq!(ini.sections.len(), 2);
        assert_eq!(ini.sections[0].name, "snapshot");
        assert_eq!(ini.sections[0].get("version"), Some("1.0"));
        assert_eq!(ini.sections[0].entries[0].line, 3);
        let regs = ini.section("regs").unwrap();
        assert_eq!(regs.line, 6);
        let a: Vec<_> = regs.get_all("A").map(|e| e.value.as_str()).collect();
        assert_eq!(a, ["1", "2"]);
        assert_eq!(regs.get("B"), Some("x"));
        assert_eq!(ini.warnings.len(), 1);
        assert_eq!(ini.warnings[0].line, 10);
    }

    #[test]
    fn preamble_and_non_utf8() {
        let ini = Ini::parse(b"k=v\n[s]\nname=\xff\xfe\n");
        assert_eq!(ini.preamble.len(), 1);
        assert_eq!(ini.warnings.len(), 1);
        assert_eq!(
            ini.section("s").unwrap().get("name"),
            Some("\u{fffd}\u{fffd}")
        );
    }

    #[test]
    fn c_numbers() {
        assert_eq!(parse_c_unsigned("0x10"), Some(16));
        assert_eq!(parse_c_unsigned("0X1f"), Some(31));
        assert_eq!(parse_c_unsigned("42"), Some(42));
        assert_eq!(parse_c_unsigned("010"), Some(8));
        assert_eq!(parse_c_unsigned("0"), Some(0));
        assert_eq!(parse_c_unsigned(""), None);
        assert_eq!(parse_c_unsigned("0x"), None);
        assert_eq!(parse_c_unsigned("12z"), None);
        assert_eq!(parse_c_unsigned("-1"), Some(u64::MAX));
        assert_eq!(parse_c_unsigned("99999999999999999999999"), Some(u64::MAX));
        assert_eq!(c_strtoul_prefix("12z"), 12);
        assert_eq!(c_strtoul_prefix("zz"), 0);
        assert_eq!(c_strtoul_prefix("0x"), 0);
        assert_eq!(c_strtoul_prefix("09"), 0);
    }
}
