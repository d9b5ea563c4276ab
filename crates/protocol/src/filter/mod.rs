//! Broker-side message filtering by expression: RocketMQ's SQL92 property selector.
//!
//! Owns the selector language only (parsing, compile-time checks, evaluation); it is pure: no
//! I/O, no shared state. Callers: the broker's CHECK_CLIENT_CONFIG handler and heartbeat
//! registration compile a consumer's `expressionType=SQL92` subscription once
//! ([`Sql92Filter::compile`], which rejects a bad expression with a positioned message), and the
//! pull path calls [`Sql92Filter::matches`] on the decoded properties of each candidate record.
//! An empty or `*` subscription means "all messages" in RocketMQ and is the caller's to handle
//! before compiling (`compile("")` is [`FilterError::Empty`]). Tag filtering (hash codes in the
//! ConsumeQueue) is not here: it needs no parser.
//!
//! Invariants: no input panics or overflows the stack (length and nesting are bounded by
//! [`SQL92_EXPRESSION_LEN_MAX`] and [`SQL92_NESTING_DEPTH_MAX`]); evaluation is total and
//! yields TRUE, FALSE or UNKNOWN, and only TRUE matches.

mod sql92;

pub use sql92::Sql92Filter;

/// Longest selector accepted, in bytes. RocketMQ subscriptions are short; this only bounds the
/// work a hostile client can make the parser do.
pub const SQL92_EXPRESSION_LEN_MAX: usize = 64 * 1024;

/// Deepest nesting accepted: parentheses, NOT, unary signs and chained comparisons each count
/// one level. Bounds parser and evaluator recursion.
pub const SQL92_NESTING_DEPTH_MAX: usize = 64;

/// Why an expression did not compile. Positions are 0-based character (not byte) offsets into
/// the expression text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FilterError {
    #[error("empty expression")]
    Empty,
    #[error("expression too long: {len_bytes} bytes, at most {len_max} allowed")]
    TooLong { len_bytes: usize, len_max: usize },
    #[error("expression nested too deeply at {pos}: at most {depth_max} levels allowed")]
    TooDeep { pos: usize, depth_max: usize },
    #[error("unexpected character '{ch}' at {pos}")]
    BadChar { ch: char, pos: usize },
    #[error("unterminated string literal starting at {pos}")]
    UnterminatedString { pos: usize },
    #[error("invalid or out-of-range number '{text}' at {pos}")]
    BadNumber { text: String, pos: usize },
    #[error("unexpected token '{found}' at {pos}, expected {expected}")]
    UnexpectedToken {
        found: String,
        pos: usize,
        expected: &'static str,
    },
    #[error("unexpected end of expression at {pos}, expected {expected}")]
    UnexpectedEnd { pos: usize, expected: &'static str },
    /// A well-formed expression that RocketMQ rejects at compile time (e.g. `a > 'x'`,
    /// `a = NULL`, `5 AND b`).
    #[error("{reason} at {pos}")]
    Invalid { reason: String, pos: usize },
}
