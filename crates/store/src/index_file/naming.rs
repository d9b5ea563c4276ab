//! The two small pieces of Java behaviour the IndexFile format depends on: `String.hashCode`
//! (over UTF-16 units, wrapping i32) for key hashes, and the `yyyyMMddHHmmssSSS` file name,
//! computed here from Unix milliseconds in UTC (RocketMQ uses local time; only the ordering of
//! names matters to readers, and UTC keeps it monotone across DST changes).

use crate::common::time::{civil_from_days, days_from_civil};
pub(super) use crate::protocol::java_hash::java_string_hash;

/// IndexFile's `indexKeyHashMethod`: `abs(hashCode)`, with the one overflowing value mapped to 0.
pub(super) fn index_key_hash(key: &str) -> i32 {
    java_string_hash(key).checked_abs().unwrap_or(0)
}

const MS_PER_DAY: i64 = 86_400_000;

/// `yyyyMMddHHmmssSSS` (UTC) of a non-negative Unix millisecond time.
pub(super) fn file_name_from_ms(ms: i64) -> Option<String> {
    if ms < 0 {
        return None;
    }
    let (y, mo, d) = civil_from_days(ms / MS_PER_DAY);
    if y > 9999 {
        return None;
    }
    let in_day = ms % MS_PER_DAY;
    let (h, mi, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    Some(format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{milli:03}"))
}

/// Inverse of `file_name_from_ms`; `None` for anything that is not a valid 17-digit time.
pub(super) fn ms_from_file_name(name: &str) -> Option<i64> {
    if name.len() != 17 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |from: usize, to: usize| name[from..to].parse::<i64>().ok();
    let (y, mo, d) = (num(0, 4)?, num(4, 6)?, num(6, 8)?);
    let (h, mi, s, milli) = (num(8, 10)?, num(10, 12)?, num(12, 14)?, num(14, 17)?);
    if y < 1970 || !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    Some(days * MS_PER_DAY + h * 3_600_000 + mi * 60_000 + s * 1000 + milli)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
