// House rules checked over the repository's own files, without a broker:
//
// (a) no source file under src/ or crates/ is longer than 800 lines;
// (b) no comment in src/, crates/, tests/, bench/ or scripts/ points to a document that is not in the
//     repository (a path mentioned in a comment must exist in the repository);
// (c) no comment tells the history of the work: neither the word `FORBIDDEN_WORD` names (in
//     any case; RocketMQ's `SessionCredentials` noun is allowed) nor a calendar date.
//
// Comments are what a Rust lexer calls comments (`//`, `///`, `//!`, `/* */`) in `.rs` files,
// and full lines starting with `#` in shell and Python files. String literals, data files
// (bench/data, plots, the bench journal) and Markdown are not comments and are not read.
// Every failure names the rule, the file and the line.

use std::fmt;
use std::path::{Path, PathBuf};

const MAX_SRC_LINES: usize = 800;

/// File names of documents that live outside the repository. A comment may name one only
/// through a path that exists inside the repository.
const OUTSIDE_DOCUMENTS: &[&str] = &[
    "protocol.md",
    "compat.md",
    "peer.md",
    "performance.md",
    "transactions.md",
    "ha.md",
    "operations.md",
    "acl.md",
    "style.md",
];

/// Directory spellings that only lead outside the repository.
const OUTSIDE_DIRECTORIES: &[&str] = &["shared/docs", "../shared"];

/// The Unix epoch's date: a fixed point of time arithmetic, never the date of a finding.
const UNIX_EPOCH_DATE: &str = "1970-01-01";

const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Jan",
    "Feb",
    "Mar",
    "Apr",
    "May",
    "Jun",
    "Jul",
    "Aug",
    "Sep",
    "Sept",
    "Oct",
    "Nov",
    "Dec",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Violation {
    rule: &'static str,
    file: String,
    line: usize,
    text: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: [{}] {}",
            self.file,
            self.line,
            self.rule,
            self.text.trim()
        )
    }
}

fn fail_on(rule: &str, found: &[Violation]) {
    if found.is_empty() {
        return;
    }
    let list: Vec<String> = found.iter().map(|v| format!("  {v}")).collect();
    panic!(
        "house rule {rule}: {} violation(s)\n{}",
        found.len(),
        list.join("\n")
    );
}

/// Every file under `dir` (relative to the repository root), sorted, skipping what is not
/// source: build output, data, plots and the bench journal.
fn files_under(dir: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root().join(dir)];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let skip = matches!(
                    name.as_str(),
                    "target" | "data" | "plots" | "journal" | "results"
                ) || name.starts_with('.');
                if !skip {
                    stack.push(path);
                }
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The comment text on each line of a Rust source, as (1-based line, text). Tracks strings,
/// raw strings, char literals and nested block comments across lines, so `//` inside a string
/// is not a comment.
fn rust_comments(src: &str) -> Vec<(usize, String)> {
    #[derive(Clone, Copy)]
    enum State {
        Code,
        Str,
        RawStr(usize),
        Block(usize),
    }
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut state = State::Code;
    for (idx, line) in src.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut comment = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            match state {
                State::Code => {
                    if c == '/' && next == Some('/') {
                        comment.extend(&chars[i..]);
                        break;
                    } else if c == '/' && next == Some('*') {
                        state = State::Block(1);
                        i += 2;
                        continue;
                    } else if c == '"' {
                        state = State::Str;
                    } else if c == 'r'
                        && (next == Some('"') || next == Some('#'))
                        && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'))
                    {
                        let mut j = i + 1;
                        while chars.get(j) == Some(&'#') {
                            j += 1;
                        }
                        if chars.get(j) == Some(&'"') {
                            state = State::RawStr(j - i - 1);
                            i = j + 1;
                            continue;
                        }
                    } else if c == '\'' {
                        // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
                        if next == Some('\\') {
                            let mut j = i + 2;
                            while j < chars.len() && chars[j] != '\'' {
                                j += 1;
                            }
                            i = j + 1;
                            continue;
                        } else if chars.get(i + 2) == Some(&'\'') {
                            i += 3;
                            continue;
                        }
                    }
                }
                State::Str => {
                    if c == '\\' {
                        i += 2;
                        continue;
                    } else if c == '"' {
                        state = State::Code;
                    }
                }
                State::RawStr(hashes) => {
                    if c == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                        state = State::Code;
                        i += 1 + hashes;
                        continue;
                    }
                }
                State::Block(depth) => {
                    if c == '*' && next == Some('/') {
                        state = if depth == 1 {
                            State::Code
                        } else {
                            State::Block(depth - 1)
                        };
                        i += 2;
                        continue;
                    } else if c == '/' && next == Some('*') {
                        state = State::Block(depth + 1);
                        i += 2;
                        continue;
                    }
                    comment.push(c);
                }
            }
            i += 1;
        }
        if !comment.trim().is_empty() {
            out.push((idx + 1, comment));
        }
    }
    out
}

/// Full-line `#` comments of a shell or Python file (the `#!` line included; it names no
/// document).
fn hash_comments(src: &str) -> Vec<(usize, String)> {
    src.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with('#'))
        .map(|(i, l)| (i + 1, l.to_string()))
        .collect()
}

/// The comments of every checked file: `.rs` files in src/, crates/, tests/, bench/ and
/// scripts/, and shell and Python files there.
fn all_comments() -> Vec<(String, Vec<(usize, String)>)> {
    let mut out = Vec::new();
    for dir in ["src", "crates", "tests", "bench", "scripts"] {
        for path in files_under(dir) {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let comments = match ext {
                "rs" => rust_comments(&text),
                "sh" | "py" | "bash" => hash_comments(&text),
                "" if text.starts_with("#!") => hash_comments(&text),
                _ => continue,
            };
            out.push((relative(&path), comments));
        }
    }
    out
}

/// Path-like words of a comment: runs of characters a path is made of, without the
/// punctuation that ends a sentence.
fn path_words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || "._/-~".contains(c)))
        .map(|w| w.trim_end_matches(['.', '-', '/']))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Does `word` name a file or directory of the repository, from the root or from `file`'s
/// directory?
fn exists_in_repo(file: &str, word: &str) -> bool {
    let root = root();
    let from_root = root.join(word);
    let from_dir = root
        .join(file)
        .parent()
        .map(|d| d.join(word))
        .unwrap_or_default();
    [from_root, from_dir].iter().any(|p| {
        p.exists()
            && p.canonicalize()
                .map(|c| c.starts_with(root.canonicalize().unwrap_or(root.clone())))
                .unwrap_or(false)
    })
}

/// Where a comment line points outside the repository, if it does.
fn outside_reference(file: &str, text: &str) -> Option<String> {
    for word in path_words(text) {
        let lower = word.to_ascii_lowercase();
        if OUTSIDE_DIRECTORIES.iter().any(|d| lower.contains(d)) {
            return Some(word.to_string());
        }
        let name = lower.rsplit('/').next().unwrap_or(&lower);
        if OUTSIDE_DOCUMENTS.contains(&name) && !exists_in_repo(file, word) {
            return Some(word.to_string());
        }
    }
    None
}

/// The word rule (c) forbids in comments.
const FORBIDDEN_WORD: &str = "session";

/// Whether the comment uses `FORBIDDEN_WORD`, in any case, other than as the first half of
/// RocketMQ's credentials noun (`SessionCredentials`, written apart or joined).
fn mentions_session(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(FORBIDDEN_WORD) {
        let end = from + at + FORBIDDEN_WORD.len();
        let rest = lower[end..].trim_start_matches([' ', '_', '-']);
        if !rest.starts_with("credential") {
            return true;
        }
        from = end;
    }
    false
}

fn is_digit_at(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_digit)
}

/// A calendar date in a comment: YYYY-MM-DD (not part of a longer number, and not inside a
/// path that exists in the repository), or a month's name or abbreviation followed by a day.
/// Dates that are data are allowed: the Unix epoch, and any line that gives a timestamp (a
/// date followed by `T` and an hour), as a test of time arithmetic does.
fn date_in(file: &str, text: &str) -> Option<String> {
    let b = text.as_bytes();
    let is_iso_at = |i: usize| {
        (0..4).all(|k| is_digit_at(b, i + k))
            && b.get(i + 4) == Some(&b'-')
            && (5..7).all(|k| is_digit_at(b, i + k))
            && b.get(i + 7) == Some(&b'-')
            && (8..10).all(|k| is_digit_at(b, i + k))
            && !is_digit_at(b, i + 10)
            && (i == 0 || !b[i - 1].is_ascii_digit())
    };
    let gives_timestamp = (0..b.len())
        .any(|i| is_iso_at(i) && b.get(i + 10) == Some(&b'T') && is_digit_at(b, i + 11));
    if gives_timestamp {
        return None;
    }
    for i in 0..b.len() {
        if is_iso_at(i) {
            let date = &text[i..i + 10];
            if date == UNIX_EPOCH_DATE {
                continue;
            }
            let in_repo_path = path_words(text)
                .into_iter()
                .any(|w| w.contains(date) && w.contains('/') && exists_in_repo(file, w));
            if !in_repo_path {
                return Some(date.to_string());
            }
        }
    }
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    for pair in words.windows(2) {
        let day_ok = pair[1].len() <= 2
            && pair[1].bytes().all(|c| c.is_ascii_digit())
            && (1..=31).contains(&pair[1].parse::<u32>().unwrap_or(0));
        if MONTHS.contains(&pair[0]) && day_ok {
            return Some(format!("{} {}", pair[0], pair[1]));
        }
    }
    None
}

#[test]
fn rule_a_no_src_file_over_800_lines() {
    let mut found = Vec::new();
    for path in files_under("src").into_iter().chain(files_under("crates")) {
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read source file");
        let lines = text.lines().count();
        if lines > MAX_SRC_LINES {
            found.push(Violation {
                rule: "a: file over 800 lines",
                file: relative(&path),
                line: MAX_SRC_LINES + 1,
                text: format!("{lines} lines; split the file"),
            });
        }
    }
    fail_on("(a) no file under src/ or crates/ over 800 lines", &found);
}

#[test]
fn rule_b_no_comment_points_outside_the_repository() {
    let mut found = Vec::new();
    for (file, comments) in all_comments() {
        for (line, text) in comments {
            if let Some(word) = outside_reference(&file, &text) {
                found.push(Violation {
                    rule: "b: document outside the repository",
                    file: file.clone(),
                    line,
                    text: format!("`{word}` in: {}", text.trim()),
                });
            }
        }
    }
    fail_on(
        "(b) comments name no document outside the repository",
        &found,
    );
}

#[test]
fn rule_c_no_comment_names_a_session_or_a_date() {
    let mut found = Vec::new();
    for (file, comments) in all_comments() {
        for (line, text) in comments {
            if mentions_session(&text) {
                found.push(Violation {
                    rule: "c: session",
                    file: file.clone(),
                    line,
                    text: text.clone(),
                });
            }
            if let Some(date) = date_in(&file, &text) {
                found.push(Violation {
                    rule: "c: date",
                    file: file.clone(),
                    line,
                    text: format!("`{date}` in: {}", text.trim()),
                });
            }
        }
    }
    fail_on("(c) comments name no session and no date", &found);
}

/// The checks themselves: what counts as a comment, and what each rule lets through.
#[test]
fn the_checks_find_what_they_should() {
    let src = "let s = \"// not a comment on anything\"; // but this is\n\
               let r = r#\"also \"// not\"#; /* block\n still block */ let c = '\"';\n\
               let l: &'static str = \"x\"; // after a lifetime\n";
    let got = rust_comments(src);
    let lines: Vec<usize> = got.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, vec![1, 2, 3, 4], "{got:?}");
    assert!(!got[0].1.contains("not a comment"), "{got:?}");

    // The document names are put together here, so this file names none itself.
    let protocol = ["PROTOCOL", ".md"].concat();
    assert!(outside_reference("src/x.rs", &format!("// see {protocol}, section 3")).is_some());
    assert!(outside_reference("src/x.rs", "// see ../shared/docs/HA.md").is_some());
    assert!(outside_reference("src/x.rs", "// see ARCHITECTURE.md").is_none());
    assert!(outside_reference(
        "src/x.rs",
        &format!("// the S{}5 of it", ["HA", ".md"].concat())
    )
    .is_none());

    assert!(mentions_session("// found in the fourth Session"));
    assert!(!mentions_session(
        "// SessionCredentials carry the access key"
    ));
    assert!(!mentions_session("// the session credentials' signature"));

    assert!(date_in("src/x.rs", "// measured 2026-12-04 on the VM").is_some());
    assert!(date_in("src/x.rs", "// fixed on Dec 4").is_some());
    assert!(date_in("src/x.rs", "// December 12, late").is_some());
    assert!(date_in("src/x.rs", "// index file 20261204120000000").is_none());
    assert!(date_in("src/x.rs", "// a message may 2x the cost").is_none());
    assert!(date_in("src/x.rs", "// days since 1970-01-01").is_none());
    assert!(date_in("src/x.rs", "// 2024-02-29T12:00Z -> Feb 1 .. Mar 1").is_none());
}
