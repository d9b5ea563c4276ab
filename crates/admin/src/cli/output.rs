//! What the admin commands print: aligned tables (mqadmin's `#Column` headers), `key: value`
//! lists, one JSON document for `--json`, and times as UTC text; plus the reading of
//! mqadmin's timestamp arguments.

use serde::Serialize;

use super::{CliError, Ctx};
use crate::common::time::{civil_from_days, days_from_civil};

/// Rows of text printed in columns as wide as their widest cell, two spaces apart.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| format!("#{h}")).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut width = vec![0usize; cols];
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in &self.rows {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                if i + 1 == r.len() {
                    line.push_str(c);
                } else {
                    line.push_str(&format!("{c:<w$}  ", w = width[i]));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `key: value` lines with the keys padded to one width.
pub fn key_values<'a>(pairs: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let pairs: Vec<(&str, String)> = pairs.into_iter().collect();
    let w = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in pairs {
        out.push_str(&format!("{:<w$}  {v}\n", format!("{k}:"), w = w + 1));
    }
    out
}

/// Prints `value` as JSON with `--json`, else the text `text` makes.
pub fn emit<T: Serialize>(
    ctx: &Ctx,
    value: &T,
    text: impl FnOnce() -> String,
) -> Result<(), CliError> {
    if ctx.json {
        let s = serde_json::to_string_pretty(value)
            .map_err(|e| CliError::Usage(format!("cannot write JSON: {e}")))?;
        println!("{s}");
    } else {
        print!("{}", text());
    }
    Ok(())
}

/// Epoch milliseconds as `yyyy-MM-dd HH:mm:ss,SSS` (UTC).
pub fn fmt_ms(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02},{:03}",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// mqadmin's timestamp argument: `now`, epoch milliseconds, or `yyyy-MM-dd#HH:mm:ss:SSS`
/// (read as UTC).
pub fn parse_timestamp(s: &str) -> Result<i64, CliError> {
    let s = s.trim();
    if s == "now" {
        return Ok(crate::common::now_ms());
    }
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || {
        CliError::Usage(format!(
            "timestamp {s:?} is neither now, epoch milliseconds nor yyyy-MM-dd#HH:mm:ss:SSS"
        ))
    };
    let (date, time) = s.split_once('#').ok_or_else(bad)?;
    let d: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let t: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let ok = d.len() == 3
        && t.len() == 4
        && (1..=12).contains(&d[1])
        && (1..=31).contains(&d[2])
        && (0..24).contains(&t[0])
        && (0..60).contains(&t[1])
        && (0..60).contains(&t[2])
        && (0..1000).contains(&t[3]);
    if !ok {
        return Err(bad());
    }
    let days = days_from_civil(d[0], d[1], d[2]);
    Ok(((days * 24 + t[0]) * 60 + t[1]) * 60_000 + t[2] * 1000 + t[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns are as wide as their widest cell; headers get mqadmin's `#`.
    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&["Topic", "QID"]);
        t.row(vec!["a-long-topic".into(), "0".into()]);
        t.row(vec!["t".into(), "12".into()]);
        assert_eq!(
            t.render(),
            "#Topic        #QID\na-long-topic  0\nt             12\n"
        );
    }

    /// Times print as UTC and mqadmin's date form reads back to the same instant.
    #[test]
    fn timestamps_round_trip() {
        assert_eq!(fmt_ms(0), "1970-01-01 00:00:00,000");
        let ms = 1_709_251_199_123; // the last second of a leap-year February
        assert_eq!(fmt_ms(ms), "2024-02-29 23:59:59,123");
        assert_eq!(parse_timestamp("2024-02-29#23:59:59:123").unwrap(), ms);
        assert_eq!(parse_timestamp("42").unwrap(), 42);
        assert!(parse_timestamp("now").unwrap() > ms);
        for bad in [
            "yesterday",
            "2024-13-01#00:00:00:000",
            "2024-01-01#00:00:00",
            "2024-01-01",
        ] {
            assert!(parse_timestamp(bad).is_err(), "{bad}");
        }
    }
}
