//! The compiled form of a SQL92 selector: an expression tree built by `parser`, walked by
//! `eval`.
//!
//! Invariant (enforced by the parser): the tree is at most a small multiple of
//! `SQL92_NESTING_DEPTH_MAX` deep, so recursive evaluation and drop cannot overflow the stack;
//! long `AND`/`OR` chains are flat vectors rather than deep binary trees for the same reason.
//! Literal strings live in the tree so evaluation borrows instead of allocating.

/// A literal value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Box<str>),
}

/// `=`, `<>` and the ordering comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// `CONTAINS`, `STARTSWITH`, `ENDSWITH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StrOp {
    Contains,
    StartsWith,
    EndsWith,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Expr {
    Literal(Literal),
    /// A message property (user or system, e.g. `TAGS`); NULL when absent.
    Property(Box<str>),
    /// Unary minus on a non-literal (literals are folded by the parser).
    Neg(Box<Expr>),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    /// `list` is sorted and deduplicated so membership is a binary search.
    In {
        expr: Box<Expr>,
        list: Vec<Box<str>>,
        negated: bool,
    },
    StrMatch {
        op: StrOp,
        expr: Box<Expr>,
        pattern: Box<str>,
        negated: bool,
    },
}

/// What an expression statically yields, for RocketMQ's compile-time operand checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A boolean: a comparison, a logical operator, TRUE or FALSE.
    Bool,
    Number,
    Str,
    Null,
    /// A property: a string at run time, converted on demand.
    Property,
}

impl Expr {
    pub(super) fn kind(&self) -> Kind {
        match self {
            Expr::Literal(Literal::Null) => Kind::Null,
            Expr::Literal(Literal::Bool(_)) => Kind::Bool,
            Expr::Literal(Literal::Int(_) | Literal::Float(_)) | Expr::Neg(_) => Kind::Number,
            Expr::Literal(Literal::Str(_)) => Kind::Str,
            Expr::Property(_) => Kind::Property,
            Expr::Not(_)
            | Expr::And(_)
            | Expr::Or(_)
            | Expr::Cmp(..)
            | Expr::IsNull { .. }
            | Expr::Between { .. }
            | Expr::In { .. }
            | Expr::StrMatch { .. } => Kind::Bool,
        }
    }
}
