//! Recursive-descent parser for RocketMQ's SQL92 selector grammar (SelectorParser.jj), with
//! RocketMQ's compile-time operand checks.
//!
//! Called by `Sql92Filter::compile`. Grammar, loosest binding first:
//!
//! ```text
//! selector   := or_expr EOF
//! or_expr    := and_expr (OR and_expr)*
//! and_expr   := not_expr (AND not_expr)*
//! not_expr   := NOT not_expr | equality
//! equality   := comparison ( (= | <>) comparison | IS [NOT] NULL )*
//! comparison := operand ( (< | <= | > | >=) operand
//!                       | [NOT] BETWEEN operand AND operand
//!                       | [NOT] IN '(' string (',' string)* ')'
//!                       | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string )*
//! operand    := (+ | -) operand | NOT operand | primary
//! primary    := string | integer | float | TRUE | FALSE | NULL | identifier | '(' or_expr ')'
//! ```
//!
//! One deliberate difference from RocketMQ: there, `NOT` binds tighter than comparisons, so
//! `NOT a > 5` is `(NOT a) > 5` and rejected; here `NOT` also sits between `AND` and the
//! comparisons as in standard SQL, so `NOT a > 5` means `NOT (a > 5)`. Every expression RocketMQ
//! accepts parses to the same meaning.
//!
//! Invariants: recursion depth (parentheses, NOT, signs, chained comparisons) is bounded by
//! `SQL92_NESTING_DEPTH_MAX`, so no input can overflow the stack; every failure is a
//! `FilterError` naming the character position.

use super::ast::{CmpOp, Expr, Kind, Literal, StrOp};
use super::lexer::{Tok, Token};
use crate::filter::{FilterError, SQL92_NESTING_DEPTH_MAX};

pub(super) struct Parser {
    tokens: Vec<Token>,
    /// Index of the next unconsumed token; `tokens` always ends with `Eof`, which is never
    /// consumed, so `tokens[next]` is always valid.
    next: usize,
    depth: usize,
}

impl Parser {
    pub(super) fn new(tokens: Vec<Token>) -> Parser {
        assert!(
            tokens.last().is_some_and(|t| t.tok == Tok::Eof),
            "lexer output ends with Eof"
        );
        Parser {
            tokens,
            next: 0,
            depth: 0,
        }
    }

    /// Parses the whole selector; the result is boolean-valued.
    pub(super) fn parse_selector(&mut self) -> Result<Expr, FilterError> {
        if self.peek() == &Tok::Eof {
            return Err(FilterError::Empty);
        }
        let pos = self.pos();
        let expr = self.or_expr()?;
        if self.peek() != &Tok::Eof {
            return Err(self.unexpected("AND, OR or the end of the expression"));
        }
        check_boolean(&expr, pos)?;
        Ok(expr)
    }

    fn peek(&self) -> &Tok {
        &self.tokens[self.next].tok
    }

    fn peek2(&self) -> &Tok {
        let i = (self.next + 1).min(self.tokens.len() - 1);
        &self.tokens[i].tok
    }

    fn pos(&self) -> usize {
        self.tokens[self.next].pos
    }

    fn bump(&mut self) -> Tok {
        let tok = self.tokens[self.next].tok.clone();
        if tok != Tok::Eof {
            self.next += 1;
        }
        tok
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == tok {
            self.bump();
            return true;
        }
        false
    }

    fn expect(&mut self, tok: &Tok, expected: &'static str) -> Result<(), FilterError> {
        if self.eat(tok) {
            return Ok(());
        }
        Err(self.unexpected(expected))
    }

    fn unexpected(&self, expected: &'static str) -> FilterError {
        let token = &self.tokens[self.next];
        if token.tok == Tok::Eof {
            return FilterError::UnexpectedEnd {
                pos: token.pos,
                expected,
            };
        }
        FilterError::UnexpectedToken {
            found: token.text.clone(),
            pos: token.pos,
            expected,
        }
    }

    /// Accounts one level of nesting; every recursive or chaining step goes through here.
    fn enter(&mut self) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > SQL92_NESTING_DEPTH_MAX {
            return Err(FilterError::TooDeep {
                pos: self.pos(),
                depth_max: SQL92_NESTING_DEPTH_MAX,
            });
        }
        Ok(())
    }

    fn leave(&mut self, levels: usize) {
        assert!(self.depth >= levels, "parser depth accounting");
        self.depth -= levels;
    }

    fn or_expr(&mut self) -> Result<Expr, FilterError> {
        self.enter()?;
        let mut pos = self.pos();
        let mut items = vec![self.and_expr()?];
        while self.peek() == &Tok::Or {
            check_boolean(items.last().expect("non-empty"), pos)?;
            self.bump();
            pos = self.pos();
            items.push(self.and_expr()?);
        }
        if items.len() > 1 {
            check_boolean(items.last().expect("non-empty"), pos)?;
        }
        self.leave(1);
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::Or(items)
        })
    }

    fn and_expr(&mut self) -> Result<Expr, FilterError> {
        let mut pos = self.pos();
        let mut items = vec![self.not_expr()?];
        while self.peek() == &Tok::And {
            check_boolean(items.last().expect("non-empty"), pos)?;
            self.bump();
            pos = self.pos();
            items.push(self.not_expr()?);
        }
        if items.len() == 1 {
            return Ok(items.remove(0));
        }
        check_boolean(items.last().expect("non-empty"), pos)?;
        Ok(Expr::And(items))
    }

    fn not_expr(&mut self) -> Result<Expr, FilterError> {
        if self.peek() != &Tok::Not {
            return self.equality();
        }
        self.bump();
        self.enter()?;
        let pos = self.pos();
        let inner = self.not_expr()?;
        self.leave(1);
        check_boolean(&inner, pos)?;
        Ok(Expr::Not(Box::new(inner)))
    }

    fn equality(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.comparison()?;
        let mut links = 0;
        loop {
            let op = match self.peek() {
                Tok::Eq => CmpOp::Eq,
                Tok::Ne => CmpOp::Ne,
                Tok::Is => {
                    self.bump();
                    let negated = self.eat(&Tok::Not);
                    self.expect(&Tok::Null, "NULL")?;
                    self.enter()?;
                    links += 1;
                    left = Expr::IsNull {
                        expr: Box::new(left),
                        negated,
                    };
                    continue;
                }
                _ => break,
            };
            let op_pos = self.pos();
            self.bump();
            self.enter()?;
            links += 1;
            let right = self.comparison()?;
            check_equality(&left, &right, op_pos)?;
            left = Expr::Cmp(op, Box::new(left), Box::new(right));
        }
        self.leave(links);
        Ok(left)
    }

    fn comparison(&mut self) -> Result<Expr, FilterError> {
        let mut left_pos = self.pos();
        let mut left = self.operand()?;
        let mut links = 0;
        loop {
            let negated = self.peek() == &Tok::Not
                && matches!(
                    self.peek2(),
                    Tok::Between | Tok::In | Tok::Contains | Tok::StartsWith | Tok::EndsWith
                );
            if negated {
                self.bump();
            }
            let op_pos = self.pos();
            let next = match self.peek() {
                Tok::Lt | Tok::Le | Tok::Gt | Tok::Ge => {
                    let op = match self.bump() {
                        Tok::Lt => CmpOp::Lt,
                        Tok::Le => CmpOp::Le,
                        Tok::Gt => CmpOp::Gt,
                        _ => CmpOp::Ge,
                    };
                    self.enter()?;
                    let right_pos = self.pos();
                    let right = self.operand()?;
                    check_orderable(&left, left_pos, op_pos)?;
                    check_orderable(&right, right_pos, op_pos)?;
                    Expr::Cmp(op, Box::new(left), Box::new(right))
                }
                Tok::Between => {
                    self.bump();
                    self.enter()?;
                    let low_pos = self.pos();
                    let low = self.operand()?;
                    self.expect(&Tok::And, "AND")?;
                    let high_pos = self.pos();
                    let high = self.operand()?;
                    check_orderable(&left, left_pos, op_pos)?;
                    check_orderable(&low, low_pos, op_pos)?;
                    check_orderable(&high, high_pos, op_pos)?;
                    Expr::Between {
                        expr: Box::new(left),
                        low: Box::new(low),
                        high: Box::new(high),
                        negated,
                    }
                }
                Tok::In => {
                    self.bump();
                    self.enter()?;
                    let list = self.in_list()?;
                    Expr::In {
                        expr: Box::new(left),
                        list,
                        negated,
                    }
                }
                Tok::Contains | Tok::StartsWith | Tok::EndsWith => {
                    let op = match self.bump() {
                        Tok::Contains => StrOp::Contains,
                        Tok::StartsWith => StrOp::StartsWith,
                        _ => StrOp::EndsWith,
                    };
                    self.enter()?;
                    let pattern = self.string_literal()?;
                    Expr::StrMatch {
                        op,
                        expr: Box::new(left),
                        pattern,
                        negated,
                    }
                }
                _ => break,
            };
            links += 1;
            left = next;
            left_pos = op_pos;
        }
        self.leave(links);
        Ok(left)
    }

    fn in_list(&mut self) -> Result<Vec<Box<str>>, FilterError> {
        self.expect(&Tok::LParen, "'('")?;
        let mut list = vec![self.string_literal()?];
        while self.eat(&Tok::Comma) {
            list.push(self.string_literal()?);
        }
        self.expect(&Tok::RParen, "',' or ')'")?;
        list.sort_unstable();
        list.dedup();
        Ok(list)
    }

    fn string_literal(&mut self) -> Result<Box<str>, FilterError> {
        if let Tok::Str(s) = self.peek() {
            let s = s.clone().into_boxed_str();
            self.bump();
            return Ok(s);
        }
        Err(self.unexpected("a string literal"))
    }

    fn operand(&mut self) -> Result<Expr, FilterError> {
        let pos = self.pos();
        match self.peek() {
            Tok::Plus | Tok::Minus | Tok::Not => {}
            _ => return self.primary(),
        }
        let sign = self.bump();
        self.enter()?;
        let result = self.signed_operand(sign, pos);
        self.leave(1);
        result
    }

    fn signed_operand(&mut self, sign: Tok, pos: usize) -> Result<Expr, FilterError> {
        // `-9223372036854775808`: the magnitude alone overflows i64, so fold it here.
        if sign == Tok::Minus {
            if let Tok::Int(magnitude) = *self.peek() {
                let token = self.tokens[self.next].clone();
                self.bump();
                let value = 0i64
                    .checked_sub_unsigned(magnitude)
                    .ok_or(FilterError::BadNumber {
                        text: format!("-{}", token.text),
                        pos,
                    })?;
                return Ok(Expr::Literal(Literal::Int(value)));
            }
        }
        let inner_pos = self.pos();
        let inner = self.operand()?;
        match sign {
            Tok::Not => {
                check_boolean(&inner, inner_pos)?;
                Ok(Expr::Not(Box::new(inner)))
            }
            Tok::Plus => {
                check_numeric(&inner, inner_pos, "unary '+'")?;
                Ok(inner)
            }
            _ => {
                check_numeric(&inner, inner_pos, "unary '-'")?;
                Ok(match inner {
                    Expr::Literal(Literal::Int(v)) => match v.checked_neg() {
                        Some(n) => Expr::Literal(Literal::Int(n)),
                        None => Expr::Literal(Literal::Float(-(v as f64))),
                    },
                    Expr::Literal(Literal::Float(v)) => Expr::Literal(Literal::Float(-v)),
                    other => Expr::Neg(Box::new(other)),
                })
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, FilterError> {
        let pos = self.pos();
        let expr = match self.peek().clone() {
            Tok::Str(s) => Expr::Literal(Literal::Str(s.into_boxed_str())),
            Tok::Int(magnitude) => match i64::try_from(magnitude) {
                Ok(v) => Expr::Literal(Literal::Int(v)),
                Err(_) => {
                    return Err(FilterError::BadNumber {
                        text: self.tokens[self.next].text.clone(),
                        pos,
                    })
                }
            },
            Tok::Float(v) => Expr::Literal(Literal::Float(v)),
            Tok::True => Expr::Literal(Literal::Bool(true)),
            Tok::False => Expr::Literal(Literal::Bool(false)),
            Tok::Null => Expr::Literal(Literal::Null),
            Tok::Ident(name) => Expr::Property(name.into_boxed_str()),
            Tok::LParen => {
                self.bump();
                let inner = self.or_expr()?;
                self.expect(&Tok::RParen, "')'")?;
                return Ok(inner);
            }
            _ => return Err(self.unexpected("an operand")),
        };
        self.bump();
        Ok(expr)
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Bool => "a boolean",
        Kind::Number => "a number",
        Kind::Str => "a string",
        Kind::Null => "NULL",
        Kind::Property => "a property",
    }
}

fn invalid(reason: String, pos: usize) -> FilterError {
    FilterError::Invalid { reason, pos }
}

/// Operands of AND, OR, NOT and the selector itself: a boolean or a property (converted at
/// evaluation), as RocketMQ's `asBooleanExpression`.
fn check_boolean(expr: &Expr, pos: usize) -> Result<(), FilterError> {
    match expr.kind() {
        Kind::Bool | Kind::Property => Ok(()),
        other => Err(invalid(
            format!("expected a boolean expression, found {}", kind_name(other)),
            pos,
        )),
    }
}

/// Operands of `<`, `<=`, `>`, `>=` and BETWEEN: numbers or properties only, as RocketMQ's
/// `checkLessThanOperand` (a string literal there is a compile error, not a runtime NULL).
fn check_orderable(expr: &Expr, pos: usize, op_pos: usize) -> Result<(), FilterError> {
    match expr.kind() {
        Kind::Number | Kind::Property => Ok(()),
        other => Err(invalid(
            format!(
                "{} cannot be compared with an ordering operator (operator at {op_pos})",
                kind_name(other)
            ),
            pos,
        )),
    }
}

fn check_numeric(expr: &Expr, pos: usize, what: &str) -> Result<(), FilterError> {
    match expr.kind() {
        Kind::Number | Kind::Property => Ok(()),
        other => Err(invalid(
            format!("{what} needs a number, found {}", kind_name(other)),
            pos,
        )),
    }
}

/// `=` and `<>`: NULL is never an operand (RocketMQ's `checkEqualOperand`), and two operands
/// whose types are known at compile time must agree.
fn check_equality(left: &Expr, right: &Expr, op_pos: usize) -> Result<(), FilterError> {
    let (lk, rk) = (left.kind(), right.kind());
    if lk == Kind::Null || rk == Kind::Null {
        return Err(invalid(
            "NULL cannot be compared with '=' or '<>'; use IS NULL or IS NOT NULL".to_string(),
            op_pos,
        ));
    }
    let known = |k: Kind| k != Kind::Property;
    if known(lk) && known(rk) && lk != rk {
        return Err(invalid(
            format!(
                "{} cannot be compared with {}",
                kind_name(lk),
                kind_name(rk)
            ),
            op_pos,
        ));
    }
    Ok(())
}
