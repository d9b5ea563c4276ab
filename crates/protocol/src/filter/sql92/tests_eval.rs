//! Evaluation semantics: three-valued logic, conversions, every operator, precedence.

use std::collections::HashMap;

use super::Sql92Filter;

fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Compiles `expr` (panicking with the error in a test) and evaluates it over `pairs`.
fn check(expr: &str, pairs: &[(&str, &str)]) -> bool {
    let filter = Sql92Filter::compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let map = props(pairs);
    filter.matches(&|k| map.get(k).map(String::as_str))
}

#[test]
fn issue_example_matches_exactly_the_right_messages() {
    // Proves the issue's selector: numeric a > 5 and region in the set, nothing else.
    let expr = "a > 5 AND region IN ('eu','us')";
    assert!(check(expr, &[("a", "6"), ("region", "eu")]));
    assert!(check(expr, &[("a", "100"), ("region", "us")]));
    assert!(!check(expr, &[("a", "5"), ("region", "eu")]));
    assert!(!check(expr, &[("a", "6"), ("region", "asia")]));
    assert!(!check(expr, &[("a", "6"), ("region", "EU")]));
    assert!(!check(expr, &[("region", "eu")]));
    assert!(!check(expr, &[("a", "6")]));
    assert!(!check(expr, &[("a", "six"), ("region", "eu")]));
    assert!(check(expr, &[("a", "5.5"), ("region", "eu")]));
}

#[test]
fn missing_property_is_unknown_not_false() {
    // Proves NULL semantics: a missing property makes comparisons UNKNOWN, and NOT UNKNOWN is
    // still UNKNOWN, so neither `a > 5` nor its negation matches.
    assert!(!check("a > 5", &[]));
    assert!(!check("NOT (a > 5)", &[]));
    assert!(!check("NOT a > 5", &[]));
    assert!(!check("a = 'x'", &[]));
    assert!(!check("a <> 'x'", &[]));
    assert!(!check("a IN ('x')", &[]));
    assert!(!check("a NOT IN ('x')", &[]));
    assert!(!check("a BETWEEN 1 AND 3", &[]));
    assert!(!check("a NOT BETWEEN 1 AND 3", &[]));
    assert!(!check("a CONTAINS 'x'", &[]));
    assert!(!check("a NOT CONTAINS 'x'", &[]));
    assert!(check("a IS NULL", &[]));
    assert!(!check("a IS NOT NULL", &[]));
    assert!(!check("a IS NULL", &[("a", "")]));
    assert!(check("a IS NOT NULL", &[("a", "")]));
}

#[test]
fn kleene_and_or_with_unknown() {
    // Proves FALSE AND UNKNOWN = FALSE, TRUE OR UNKNOWN = TRUE, and the UNKNOWN cases.
    assert!(check("NOT (missing > 1 AND 1 = 2)", &[]));
    assert!(check("missing > 1 OR 1 = 1", &[]));
    assert!(check("1 = 1 OR missing > 1", &[]));
    assert!(!check("missing > 1 OR 1 = 2", &[]));
    assert!(!check("NOT (missing > 1 OR 1 = 2)", &[]));
    assert!(!check("missing > 1 AND 1 = 1", &[]));
    assert!(!check("NOT (missing > 1 AND 1 = 1)", &[]));
    assert!(check("TRUE", &[]));
    assert!(!check("FALSE", &[]));
    assert!(check("NOT FALSE", &[]));
}

#[test]
fn precedence_not_over_and_over_or() {
    // Proves NOT binds tighter than AND, and AND tighter than OR.
    // TRUE OR (FALSE AND FALSE) = TRUE; (TRUE OR FALSE) AND FALSE would be FALSE.
    assert!(check("TRUE OR FALSE AND FALSE", &[]));
    // (NOT FALSE) AND TRUE = TRUE; NOT (FALSE AND TRUE) also TRUE, so use a distinguishing one:
    // (NOT TRUE) AND FALSE = FALSE vs NOT (TRUE AND FALSE) = TRUE.
    assert!(!check("NOT TRUE AND FALSE", &[]));
    // (NOT FALSE) OR FALSE = TRUE vs NOT (FALSE OR FALSE)... both TRUE; use TRUE:
    // (NOT TRUE) OR TRUE = TRUE vs NOT (TRUE OR TRUE) = FALSE.
    assert!(check("NOT TRUE OR TRUE", &[]));
    // NOT applies to a whole comparison, as in SQL.
    assert!(check("NOT a > 5", &[("a", "3")]));
    assert!(!check("NOT a > 5", &[("a", "7")]));
    // Parentheses override.
    assert!(!check("(TRUE OR FALSE) AND FALSE", &[]));
    assert!(check("a = 1 OR b = 2 AND c = 3", &[("a", "1")]));
    assert!(!check("(a = 1 OR b = 2) AND c = 3", &[("a", "1")]));
}

#[test]
fn numeric_comparisons_convert_property_strings() {
    // Proves the documented conversion: decimal strings compare numerically, others UNKNOWN.
    let cases: &[(&str, &str, bool)] = &[
        ("a = 10", "10", true),
        ("a = 10", "010", true),
        ("a = 10", "10.0", true),
        ("a = 10", "1e1", true),
        ("a <> 10", "11", true),
        ("a <> 10", "ten", false),
        ("a = 10", " 10", false),
        ("a > 9", "10", true),
        ("a >= 10", "10", true),
        ("a < 10", "-3", true),
        ("a <= -3", "-3", true),
        ("a > 1.5", "2", true),
        ("a < 1.5", "1.49", true),
        ("a > 9.99", "10", true),
        ("a > -0.5", "0", true),
        ("a > 1", "inf", false),
        ("a > 1", "NaN", false),
        ("a > 1", "0x10", false),
        ("a > 1", "", false),
        ("a > 1", "1e", false),
        ("a > 1", ".5e1", true),
        ("a > 9223372036854775806", "9223372036854775807", true),
        ("a < 9223372036854775807", "9223372036854775806", true),
        ("a = -9223372036854775808", "-9223372036854775808", true),
        ("a > 9223372036854775807", "1e19", true),
        ("a = 9007199254740993", "9007199254740992.0", false),
        ("a > 1L", "2", true),
        ("a = '10'", "10.0", false),
        ("a = '10'", "10", true),
    ];
    for &(expr, value, want) in cases {
        assert_eq!(
            check(expr, &[("a", value)]),
            want,
            "{expr} with a={value:?}"
        );
    }
}

#[test]
fn between_in_and_string_operators() {
    // Proves BETWEEN is inclusive, NOT variants negate, IN is exact, string ops are exact-case.
    assert!(check("a BETWEEN 1 AND 3", &[("a", "1")]));
    assert!(check("a BETWEEN 1 AND 3", &[("a", "3")]));
    assert!(!check("a BETWEEN 1 AND 3", &[("a", "4")]));
    assert!(check("a NOT BETWEEN 1 AND 3", &[("a", "4")]));
    assert!(!check("a NOT BETWEEN 1 AND 3", &[("a", "2")]));
    assert!(!check("a BETWEEN 1 AND 3", &[("a", "x")]));
    assert!(!check("a NOT BETWEEN 1 AND 3", &[("a", "x")]));
    assert!(check("a BETWEEN -1.5 AND -1", &[("a", "-1.2")]));
    assert!(check("TAGS IN ('TagA', 'TagB')", &[("TAGS", "TagB")]));
    assert!(!check("TAGS IN ('TagA', 'TagB')", &[("TAGS", "TagC")]));
    assert!(check("TAGS NOT IN ('TagA', 'TagB')", &[("TAGS", "TagC")]));
    assert!(!check("TAGS NOT IN ('TagA', 'TagB')", &[("TAGS", "TagA")]));
    assert!(check("k IN ('it''s')", &[("k", "it's")]));
    assert!(check("s CONTAINS 'ell'", &[("s", "hello")]));
    assert!(!check("s CONTAINS 'ELL'", &[("s", "hello")]));
    assert!(check("s NOT CONTAINS 'xyz'", &[("s", "hello")]));
    assert!(check("s STARTSWITH 'he'", &[("s", "hello")]));
    assert!(!check("s STARTSWITH 'lo'", &[("s", "hello")]));
    assert!(check("s NOT STARTSWITH 'lo'", &[("s", "hello")]));
    assert!(check("s ENDSWITH 'lo'", &[("s", "hello")]));
    assert!(check("s NOT ENDSWITH 'he'", &[("s", "hello")]));
    assert!(check("s CONTAINS ''", &[("s", "hello")]));
    assert!(check("s STARTSWITH 'hé'", &[("s", "héllo")]));
}

#[test]
fn booleans_and_string_equality() {
    // Proves boolean literals compare with "true"/"false" property strings, strings compare
    // exactly, and a bare property is usable as a boolean.
    assert!(check("flag = TRUE", &[("flag", "true")]));
    assert!(check("flag = TRUE", &[("flag", "TRUE")]));
    assert!(check("flag <> TRUE", &[("flag", "false")]));
    assert!(!check("flag = TRUE", &[("flag", "yes")]));
    assert!(!check("flag <> TRUE", &[("flag", "yes")]));
    assert!(check("flag", &[("flag", "True")]));
    assert!(!check("flag", &[("flag", "1")]));
    assert!(check("NOT flag", &[("flag", "false")]));
    assert!(check("a = b", &[("a", "x"), ("b", "x")]));
    assert!(!check("a = b", &[("a", "1"), ("b", "1.0")]));
    assert!(check("a > b", &[("a", "2"), ("b", "1.0")]));
    assert!(check("(a > 5) = TRUE", &[("a", "6")]));
    assert!(check("name = 'o''brien'", &[("name", "o'brien")]));
    assert!(check("x.y_z$ = 'v'", &[("x.y_z$", "v")]));
    assert!(check("a = -b", &[("a", "-3"), ("b", "3")]));
    assert!(check("-a < 0", &[("a", "3")]));
    assert!(!check("-a < 0", &[("a", "x")]));
}

#[test]
fn keywords_are_case_insensitive() {
    // Proves keywords match in any case while property names stay case-sensitive.
    assert!(check(
        "a between 1 and 3 and b in ('x') or c is null",
        &[("a", "2"), ("b", "x"), ("c", "1")]
    ));
    assert!(check("a Is NoT nUlL aNd TrUe", &[("a", "1")]));
    assert!(!check("A IS NOT NULL", &[("a", "1")]));
}
