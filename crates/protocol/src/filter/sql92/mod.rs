//! SQL92 selector: lexer → parser (with RocketMQ's compile-time checks) → expression tree →
//! three-valued evaluation.
//!
//! Owns [`Sql92Filter`], the compiled, immutable, shareable (`Clone + Send + Sync`) form of one
//! subscription expression. The language and its conversion rules are documented in `parser`
//! (grammar) and `eval` (types, NULL). Invariant: a `Sql92Filter` only exists for an expression
//! that passed every check, so `matches` has no error path.

mod ast;
mod eval;
mod lexer;
mod parser;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_eval;

use super::{FilterError, SQL92_EXPRESSION_LEN_MAX};

/// A compiled SQL92 message selector.
#[derive(Debug, Clone, PartialEq)]
pub struct Sql92Filter {
    source: Box<str>,
    expr: ast::Expr,
}

impl Sql92Filter {
    /// Parses and checks `expr`. Errors carry a clear message with the character position,
    /// e.g. "unexpected token 'AND' at 12, expected an operand".
    pub fn compile(expr: &str) -> Result<Sql92Filter, FilterError> {
        if expr.len() > SQL92_EXPRESSION_LEN_MAX {
            return Err(FilterError::TooLong {
                len_bytes: expr.len(),
                len_max: SQL92_EXPRESSION_LEN_MAX,
            });
        }
        let tokens = lexer::tokenize(expr)?;
        let tree = parser::Parser::new(tokens).parse_selector()?;
        Ok(Sql92Filter {
            source: expr.into(),
            expr: tree,
        })
    }

    /// Evaluates against one message's properties (user properties plus system ones such as
    /// `TAGS`; `get` returns None for an absent property). True only when the result is
    /// boolean TRUE: FALSE, UNKNOWN (NULL) and type mismatches do not match.
    ///
    /// The returned values borrow from the property source (`'m`), not from the key: with
    /// `Fn(&str) -> Option<&str>` the elided lifetimes would tie the value to the key and no
    /// closure over a local map could be passed.
    pub fn matches<'m>(&self, get: &dyn Fn(&str) -> Option<&'m str>) -> bool {
        eval::eval_bool(&self.expr, get) == Some(true)
    }

    /// The expression text as compiled.
    pub fn source(&self) -> &str {
        &self.source
    }
}

impl std::fmt::Display for Sql92Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}
