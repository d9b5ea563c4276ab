//! Compilation: accepted syntax, rejected input with positioned messages, limits, and
//! property tests that nothing panics.

use std::collections::HashMap;

use proptest::prelude::*;

use super::Sql92Filter;
use crate::filter::{FilterError, SQL92_EXPRESSION_LEN_MAX, SQL92_NESTING_DEPTH_MAX};

fn err(expr: &str) -> FilterError {
    match Sql92Filter::compile(expr) {
        Ok(f) => panic!("{expr:?} compiled to {f:?}"),
        Err(e) => e,
    }
}

#[test]
fn accepts_rocketmq_examples() {
    // Proves the expressions from RocketMQ's docs and examples compile.
    for expr in [
        "a > 5 AND region IN ('eu','us')",
        "(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)",
        "(TAGS IN ('TagA', 'TagB')) AND (c1 BETWEEN 4 AND 7) AND (c2 = 'v6')",
        "a between 0 and 3",
        "a NOT BETWEEN 0 AND 3 OR b NOT IN ('x') OR c NOT CONTAINS 'y'",
        "s STARTSWITH 'a' AND s ENDSWITH 'z' AND s CONTAINS 'm'",
        "a = 1.5e3 OR a = .5 OR a = 1. OR a = 7L OR a = -9223372036854775808",
        "TRUE",
        "x <> FALSE",
        "  a\t>\n5\r ",
        "((((a > 1))))",
    ] {
        Sql92Filter::compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    }
}

#[test]
fn malformed_input_is_rejected_with_position() {
    // Proves each malformed shape from the brief yields the right error and position.
    assert_eq!(
        err("a >"),
        FilterError::UnexpectedEnd {
            pos: 3,
            expected: "an operand"
        }
    );
    assert_eq!(
        err("a IN ()"),
        FilterError::UnexpectedToken {
            found: ")".into(),
            pos: 6,
            expected: "a string literal"
        }
    );
    assert_eq!(err("a = 'abc"), FilterError::UnterminatedString { pos: 4 });
    assert_eq!(
        err("a = 'it''s"),
        FilterError::UnterminatedString { pos: 4 }
    );
    assert_eq!(
        err("a BETWEEN 1"),
        FilterError::UnexpectedEnd {
            pos: 11,
            expected: "AND"
        }
    );
    let e = err("a > 5 AND AND b");
    assert_eq!(
        e.to_string(),
        "unexpected token 'AND' at 10, expected an operand"
    );
    assert_eq!(err(""), FilterError::Empty);
    assert_eq!(err("   "), FilterError::Empty);
    assert_eq!(err("a # 1"), FilterError::BadChar { ch: '#', pos: 2 });
    // Positions count characters, not bytes.
    assert_eq!(
        err("'é' = 'é' ?"),
        FilterError::BadChar { ch: '?', pos: 10 }
    );
    assert!(matches!(
        err("a > 5 b"),
        FilterError::UnexpectedToken { pos: 6, .. }
    ));
    assert!(matches!(
        err("(a > 5"),
        FilterError::UnexpectedEnd { pos: 6, .. }
    ));
    assert!(matches!(
        err("a > 5)"),
        FilterError::UnexpectedToken { pos: 5, .. }
    ));
    assert!(matches!(
        err("a IN ('x',)"),
        FilterError::UnexpectedToken { pos: 10, .. }
    ));
    assert!(matches!(
        err("a IN ('x' 'y')"),
        FilterError::UnexpectedToken { .. }
    ));
    assert!(matches!(
        err("a IN (1, 2)"),
        FilterError::UnexpectedToken { pos: 6, .. }
    ));
    assert!(matches!(
        err("a IS 5"),
        FilterError::UnexpectedToken { pos: 5, .. }
    ));
    assert!(matches!(
        err("a CONTAINS b"),
        FilterError::UnexpectedToken { .. }
    ));
    assert!(matches!(
        err("a NOT > 5"),
        FilterError::UnexpectedToken { pos: 2, .. }
    ));
}

#[test]
fn type_errors_rocketmq_rejects_at_compile_time() {
    // Proves RocketMQ's compile-time operand checks: ordering needs numbers, = NULL is refused,
    // logical operators need booleans, literal types must agree.
    for expr in [
        "a > 'x'",
        "'x' < a",
        "a BETWEEN 'a' AND 'z'",
        "a > TRUE",
        "a > NULL",
        "(a > 1) > 0",
        "a = NULL",
        "NULL <> a",
        "5",
        "'x'",
        "NULL",
        "a > 1 AND 5",
        "'s' OR a > 1",
        "NOT 5",
        "1 = 'a'",
        "TRUE = 1",
        "-'x' = a",
        "-TRUE",
    ] {
        let e = err(expr);
        assert!(
            matches!(e, FilterError::Invalid { .. }),
            "{expr}: expected Invalid, got {e:?}"
        );
    }
    assert_eq!(
        err("a = NULL").to_string(),
        "NULL cannot be compared with '=' or '<>'; use IS NULL or IS NOT NULL at 2"
    );
}

#[test]
fn number_literals_out_of_range_are_errors() {
    // Proves integer literals are bounded by i64 and floats must be finite.
    assert!(Sql92Filter::compile("a = 9223372036854775807").is_ok());
    assert!(matches!(
        err("a = 9223372036854775808"),
        FilterError::BadNumber { pos: 4, .. }
    ));
    assert!(matches!(
        err("a = -9223372036854775809"),
        FilterError::BadNumber { .. }
    ));
    assert!(matches!(
        err("a = 99999999999999999999999"),
        FilterError::BadNumber { .. }
    ));
    assert!(matches!(err("a = 1e400"), FilterError::BadNumber { .. }));
}

#[test]
fn length_and_depth_are_bounded() {
    // Proves the limits: over-long and over-nested input are errors, just-inside compiles.
    let long = format!("a = '{}'", "x".repeat(SQL92_EXPRESSION_LEN_MAX));
    assert!(matches!(err(&long), FilterError::TooLong { .. }));

    let nested = |n: usize| format!("{}a > 1{}", "(".repeat(n), ")".repeat(n));
    // The selector itself and the comparison take one level each.
    assert!(Sql92Filter::compile(&nested(SQL92_NESTING_DEPTH_MAX - 2)).is_ok());
    assert!(matches!(
        err(&nested(SQL92_NESTING_DEPTH_MAX - 1)),
        FilterError::TooDeep { .. }
    ));
    assert!(matches!(
        err(&nested(SQL92_NESTING_DEPTH_MAX)),
        FilterError::TooDeep { .. }
    ));
    assert!(matches!(
        err(&"(".repeat(50_000)),
        FilterError::TooDeep { .. }
    ));
    assert!(matches!(
        err(&format!("{}TRUE", "NOT ".repeat(10_000))),
        FilterError::TooDeep { .. }
    ));
    assert!(matches!(
        err(&format!("a = {}1", "-".repeat(30_000))),
        FilterError::TooDeep { .. }
    ));
    assert!(matches!(
        err(&format!("TRUE{}", " = TRUE".repeat(5_000))),
        FilterError::TooDeep { .. }
    ));

    // Long flat AND/OR chains are not nesting: they compile and evaluate iteratively.
    let chain = (0..3_000)
        .map(|i| format!("a = '{i}'"))
        .collect::<Vec<_>>()
        .join(" OR ");
    assert!(chain.len() < SQL92_EXPRESSION_LEN_MAX);
    let filter = Sql92Filter::compile(&chain).expect("flat chain compiles");
    assert!(filter.matches(&|k| (k == "a").then_some("2999")));
    assert!(!filter.matches(&|k| (k == "a").then_some("3000")));
}

#[test]
fn filter_is_clone_send_sync_and_keeps_source() {
    // Proves the compiled filter can be shared across shards and reports its text.
    fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
    assert_shareable::<Sql92Filter>();
    let f = Sql92Filter::compile("a IS NULL").expect("compiles");
    assert_eq!(f.source(), "a IS NULL");
    assert_eq!(f.to_string(), "a IS NULL");
    assert_eq!(f.clone(), f);
}

/// Tokens that make random selector text likely to get deep into the parser.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("TAGS".to_string()),
        Just("b.c".to_string()),
        Just(" AND ".to_string()),
        Just(" OR ".to_string()),
        Just(" NOT ".to_string()),
        Just(" BETWEEN ".to_string()),
        Just(" IN ".to_string()),
        Just(" IS ".to_string()),
        Just(" NULL ".to_string()),
        Just(" TRUE ".to_string()),
        Just(" FALSE ".to_string()),
        Just(" CONTAINS ".to_string()),
        Just(" STARTSWITH ".to_string()),
        Just(" ENDSWITH ".to_string()),
        Just("=".to_string()),
        Just("<>".to_string()),
        Just("<".to_string()),
        Just(">=".to_string()),
        Just("(".to_string()),
        Just(")".to_string()),
        Just(",".to_string()),
        Just("-".to_string()),
        Just("+".to_string()),
        Just("'x'".to_string()),
        Just("'".to_string()),
        "-?[0-9]{1,20}(\\.[0-9]{0,3})?(e[+-]?[0-9]{1,3})?L?",
        "[ -~]{0,3}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("x".to_string()),
        Just("true".to_string()),
        Just("".to_string()),
        Just("NaN".to_string()),
        "-?[0-9]{1,20}(\\.[0-9]{0,3})?(e[+-]?[0-9]{1,3})?",
        ".{0,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// compile() returns Ok or Err, never panics, on arbitrary text.
    #[test]
    fn compile_never_panics_on_arbitrary_text(s in ".{0,200}") {
        let _ = Sql92Filter::compile(&s);
    }

    /// On selector-shaped text, compile() never panics, and any compiled filter evaluates
    /// without panicking over arbitrary property maps; NOT of a filter never matches together
    /// with the filter (three-valued logic can make both false, never both true).
    #[test]
    fn compiled_filters_evaluate_without_panic(
        parts in proptest::collection::vec(fragment(), 1..25),
        a in proptest::option::of(value()),
        tags in proptest::option::of(value()),
        bc in proptest::option::of(value()),
    ) {
        let expr = parts.concat();
        if let Ok(filter) = Sql92Filter::compile(&expr) {
            let mut map = HashMap::new();
            for (k, v) in [("a", a), ("TAGS", tags), ("b.c", bc)] {
                if let Some(v) = v {
                    map.insert(k, v);
                }
            }
            let get = |k: &str| map.get(k).map(String::as_str);
            let matched = filter.matches(&get);
            let negated = Sql92Filter::compile(&format!("NOT ({expr})"));
            if let Ok(negated) = negated {
                prop_assert!(!(matched && negated.matches(&get)), "{expr} and its NOT both matched");
            }
        }
    }
}
