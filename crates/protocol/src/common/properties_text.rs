//! Java `Properties` text, as admin tools send a config change (UPDATE_BROKER_CONFIG,
//! UPDATE_NAMESRV_CONFIG) and as the config answers are read: one `key=value` per line
//! (`key: value` and `key value` too), `#` and `!` comments, backslash escapes and
//! continuation lines, as `java.util.Properties.load` reads them.

/// The pairs of `text` in order; a later duplicate key wins where a caller collects them.
/// Malformed input cannot fail: like Java, whatever a line holds becomes a key and a value.
pub fn parse(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(first) = lines.next() {
        let mut logical = first.trim_start().to_string();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        // An odd number of trailing backslashes continues the line.
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some(next) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        out.push(split_pair(&logical));
    }
    out
}

fn ends_with_continuation(line: &str) -> bool {
    line.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or whitespace, and unescapes both halves.
fn split_pair(line: &str) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut key = String::new();
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            key.push(chars[i + 1]);
            i += 2;
            continue;
        }
        if c == '=' || c == ':' || c.is_whitespace() {
            break;
        }
        key.push(c);
        i += 1;
    }
    // Skip whitespace, one separator, whitespace.
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    if i < chars.len() && (chars[i] == '=' || chars[i] == ':') {
        i += 1;
    }
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    let rest: String = chars[i..].iter().collect();
    (unescape(&key), unescape(&rest))
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = it.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::parse;

    /// Separators, comments, escapes and continuation lines read as `Properties.load` reads them.
    #[test]
    fn reads_java_properties_text() {
        let text = "# a comment\n! another\nbrokerPermission=4\n  a : b c\nx y\n\
                    long=one,\\\n   two\nesc\\=key=v\\u0041\nempty=\n\n";
        let got = parse(text);
        let want: Vec<(String, String)> = [
            ("brokerPermission", "4"),
            ("a", "b c"),
            ("x", "y"),
            ("long", "one,two"),
            ("esc=key", "vA"),
            ("empty", ""),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(got, want);
        assert!(parse("").is_empty());
    }
}
