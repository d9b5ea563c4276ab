//! Evaluation of a compiled selector against one message's properties, with SQL's
//! three-valued logic.
//!
//! Called by `Sql92Filter::matches` once per candidate record on the pull path, so it borrows
//! (literals from the tree, values from the property getter) and does not allocate.
//!
//! Conversion rule (ours, documented because RocketMQ's Java is looser and type-dependent): a
//! property value is always a string. When an operator needs a number (`<`, `<=`, `>`, `>=`,
//! BETWEEN, unary minus, or `=`/`<>` against a number) the string is converted if it is a
//! decimal number: `[+-]digits` (an i64 when it fits) or `[+-]digits[.digits][(e|E)[+-]digits]`
//! (a finite f64); no whitespace, no `NaN`/`Infinity`, no hex. When an operator needs a boolean
//! (`AND`, `OR`, `NOT`, the whole selector, `=`/`<>` against TRUE/FALSE) the strings `true` and
//! `false` convert, ignoring ASCII case. A value that does not convert, a missing property, and
//! any operand of the wrong type all make the result UNKNOWN (NULL), never an error; `matches`
//! is true only for TRUE. Integers compare exactly with each other and with floats (no rounding
//! of large i64 to f64).

use std::cmp::Ordering;

use super::ast::{CmpOp, Expr, Literal, StrOp};

/// A run-time value. `Str` borrows from the expression tree or from the property source.
#[derive(Debug, Clone, Copy)]
enum Value<'v> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'v str),
}

/// A numeric value after conversion.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

/// Three-valued boolean: `None` is UNKNOWN.
type Tri = Option<bool>;

/// Evaluates `expr` to a three-valued boolean.
pub(super) fn eval_bool<'m>(expr: &Expr, get: &dyn Fn(&str) -> Option<&'m str>) -> Tri {
    to_bool(eval(expr, get))
}

fn eval<'v, 'm: 'v>(expr: &'v Expr, get: &dyn Fn(&str) -> Option<&'m str>) -> Value<'v> {
    match expr {
        Expr::Literal(lit) => match lit {
            Literal::Null => Value::Null,
            Literal::Bool(b) => Value::Bool(*b),
            Literal::Int(i) => Value::Int(*i),
            Literal::Float(f) => Value::Float(*f),
            Literal::Str(s) => Value::Str(s),
        },
        Expr::Property(name) => get(name).map_or(Value::Null, Value::Str),
        Expr::Neg(inner) => match to_num(eval(inner, get)) {
            Some(Num::Int(i)) => i
                .checked_neg()
                .map_or(Value::Float(-(i as f64)), Value::Int),
            Some(Num::Float(f)) => Value::Float(-f),
            None => Value::Null,
        },
        Expr::Not(inner) => tri(eval_bool(inner, get).map(|b| !b)),
        Expr::And(items) => tri(and_all(items, get)),
        Expr::Or(items) => tri(or_any(items, get)),
        Expr::Cmp(op, left, right) => tri(compare(*op, eval(left, get), eval(right, get))),
        Expr::IsNull { expr, negated } => {
            Value::Bool(matches!(eval(expr, get), Value::Null) != *negated)
        }
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let value = eval(expr, get);
            let above = compare(CmpOp::Ge, value, eval(low, get));
            let below = compare(CmpOp::Le, value, eval(high, get));
            tri(negate_if(and(above, below), *negated))
        }
        Expr::In {
            expr,
            list,
            negated,
        } => {
            let found = match eval(expr, get) {
                Value::Str(s) => Some(list.binary_search_by(|item| (**item).cmp(s)).is_ok()),
                _ => None,
            };
            tri(negate_if(found, *negated))
        }
        Expr::StrMatch {
            op,
            expr,
            pattern,
            negated,
        } => {
            let found = match eval(expr, get) {
                Value::Str(s) => Some(match op {
                    StrOp::Contains => s.contains(&**pattern),
                    StrOp::StartsWith => s.starts_with(&**pattern),
                    StrOp::EndsWith => s.ends_with(&**pattern),
                }),
                _ => None,
            };
            tri(negate_if(found, *negated))
        }
    }
}

fn tri<'v>(value: Tri) -> Value<'v> {
    value.map_or(Value::Null, Value::Bool)
}

fn negate_if(value: Tri, negated: bool) -> Tri {
    value.map(|b| b != negated)
}

/// Kleene AND: FALSE wins over UNKNOWN.
fn and(a: Tri, b: Tri) -> Tri {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// Short-circuits on the first FALSE; UNKNOWN otherwise poisons a TRUE result.
fn and_all<'m>(items: &[Expr], get: &dyn Fn(&str) -> Option<&'m str>) -> Tri {
    let mut result = Some(true);
    for item in items {
        result = and(result, eval_bool(item, get));
        if result == Some(false) {
            break;
        }
    }
    result
}

/// Short-circuits on the first TRUE; UNKNOWN otherwise poisons a FALSE result.
fn or_any<'m>(items: &[Expr], get: &dyn Fn(&str) -> Option<&'m str>) -> Tri {
    let mut result = Some(false);
    for item in items {
        result = match (result, eval_bool(item, get)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        };
        if result == Some(true) {
            break;
        }
    }
    result
}

fn to_bool(value: Value<'_>) -> Tri {
    match value {
        Value::Bool(b) => Some(b),
        Value::Str(s) => parse_bool(s),
        Value::Null | Value::Int(_) | Value::Float(_) => None,
    }
}

fn parse_bool(s: &str) -> Tri {
    if s.eq_ignore_ascii_case("true") {
        Some(true)
    } else if s.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

fn to_num(value: Value<'_>) -> Option<Num> {
    match value {
        Value::Int(i) => Some(Num::Int(i)),
        Value::Float(f) => Some(Num::Float(f)),
        Value::Str(s) => parse_num(s),
        Value::Null | Value::Bool(_) => None,
    }
}

/// The conversion rule in the module doc: strict decimal syntax, checked by hand because Rust's
/// `f64::from_str` also accepts `inf`, `NaN` and `infinity`.
fn parse_num(s: &str) -> Option<Num> {
    let bytes = s.as_bytes();
    let mut i = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let int_digits = digits(&mut i);
    let mut frac_digits = 0;
    let mut is_float = false;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = digits(&mut i);
        is_float = true;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        i += usize::from(matches!(bytes.get(i), Some(b'+' | b'-')));
        if digits(&mut i) == 0 {
            return None;
        }
        is_float = true;
    }
    if i != bytes.len() {
        return None;
    }
    if !is_float {
        if let Ok(v) = s.parse::<i64>() {
            return Some(Num::Int(v));
        }
    }
    let v: f64 = s.parse().ok()?;
    v.is_finite().then_some(Num::Float(v))
}

/// Exact ordering of an i64 against a finite-or-not f64 (NaN → None).
fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() {
        return None;
    }
    if f >= TWO_POW_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_POW_63 {
        return Some(Ordering::Greater);
    }
    // In range, so the truncation is exactly representable as i64.
    let whole = f.trunc();
    Some(
        i.cmp(&(whole as i64))
            .then_with(|| whole.partial_cmp(&f).unwrap_or(Ordering::Equal)),
    )
}

fn cmp_num(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).map(Ordering::reverse),
    }
}

fn is_num(value: Value<'_>) -> bool {
    matches!(value, Value::Int(_) | Value::Float(_))
}

/// `=`/`<>` equality: strings with strings exactly, numbers numerically (converting a string
/// side), booleans with booleans (converting a string side); anything else is UNKNOWN.
fn equal(left: Value<'_>, right: Value<'_>) -> Tri {
    match (left, right) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Str(a), Value::Str(b)) => Some(a == b),
        (Value::Bool(a), Value::Bool(b)) => Some(a == b),
        (Value::Bool(a), Value::Str(s)) | (Value::Str(s), Value::Bool(a)) => {
            parse_bool(s).map(|b| a == b)
        }
        (l, r) if is_num(l) || is_num(r) => {
            cmp_num(to_num(l)?, to_num(r)?).map(|o| o == Ordering::Equal)
        }
        _ => None,
    }
}

fn compare(op: CmpOp, left: Value<'_>, right: Value<'_>) -> Tri {
    let ordering = match op {
        CmpOp::Eq => return equal(left, right),
        CmpOp::Ne => return equal(left, right).map(|eq| !eq),
        _ => cmp_num(to_num(left)?, to_num(right)?)?,
    };
    Some(match op {
        CmpOp::Lt => ordering == Ordering::Less,
        CmpOp::Le => ordering != Ordering::Greater,
        CmpOp::Gt => ordering == Ordering::Greater,
        _ => ordering != Ordering::Less,
    })
}
