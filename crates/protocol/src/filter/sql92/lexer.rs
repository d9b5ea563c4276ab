//! Lexer for the SQL92 message selector: turns the expression text into tokens.
//!
//! Called only by `parser`. Token syntax follows RocketMQ's SelectorParser.jj: keywords are
//! case-insensitive whole identifiers; identifiers are ASCII `[A-Za-z_$][A-Za-z0-9_$.]*`; strings
//! are single-quoted with `''` as the escaped quote; integers are decimal digits with an optional
//! `L` suffix; floats have a fraction and/or an exponent. Invariant: every token records the
//! character offset (0-based, in `char`s, not bytes) where it starts, which is what error
//! messages print, and lexing never panics: bad input is a `FilterError`.

use crate::filter::FilterError;

/// One lexical token. Integers keep their unsigned magnitude so the parser can accept
/// `-9223372036854775808` (the magnitude alone does not fit an i64).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Str(String),
    Int(u64),
    Float(f64),
    And,
    Or,
    Not,
    Between,
    In,
    Is,
    Null,
    True,
    False,
    Contains,
    StartsWith,
    EndsWith,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Eof,
}

/// A token and where it starts: `pos` in chars (for messages), `text` the source slice (for
/// quoting the offending token back to the user).
#[derive(Debug, Clone)]
pub(super) struct Token {
    pub tok: Tok,
    pub pos: usize,
    pub text: String,
}

/// Longest token text quoted back in an error message; a 60 KiB string literal in a message
/// helps nobody.
const QUOTE_LEN_MAX: usize = 40;

/// The source text of a token, shortened for error messages.
pub(super) fn quote(text: &str) -> String {
    if text.chars().count() <= QUOTE_LEN_MAX {
        return text.to_string();
    }
    let mut short: String = text.chars().take(QUOTE_LEN_MAX).collect();
    short.push_str("...");
    short
}

fn keyword(word: &str) -> Option<Tok> {
    const KEYWORDS: [(&str, Tok); 12] = [
        ("AND", Tok::And),
        ("OR", Tok::Or),
        ("NOT", Tok::Not),
        ("BETWEEN", Tok::Between),
        ("IN", Tok::In),
        ("IS", Tok::Is),
        ("NULL", Tok::Null),
        ("TRUE", Tok::True),
        ("FALSE", Tok::False),
        ("CONTAINS", Tok::Contains),
        ("STARTSWITH", Tok::StartsWith),
        ("ENDSWITH", Tok::EndsWith),
    ];
    KEYWORDS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(word))
        .map(|(_, tok)| tok.clone())
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$'
}

fn is_ident_part(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.'
}

/// Cursor over the source: `chars[i]` is (byte offset, char); `i` is also the char position.
struct Lexer<'s> {
    src: &'s str,
    chars: Vec<(usize, char)>,
    i: usize,
}

impl<'s> Lexer<'s> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.i + ahead).map(|&(_, c)| c)
    }

    fn byte_at(&self, i: usize) -> usize {
        self.chars.get(i).map_or(self.src.len(), |&(b, _)| b)
    }

    fn slice(&self, start: usize) -> &'s str {
        &self.src[self.byte_at(start)..self.byte_at(self.i)]
    }

    fn eat_digits(&mut self) -> usize {
        let start = self.i;
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    fn string(&mut self, start: usize) -> Result<Tok, FilterError> {
        self.i += 1; // opening quote
        let mut value = String::new();
        loop {
            match self.peek(0) {
                None => return Err(FilterError::UnterminatedString { pos: start }),
                Some('\'') if self.peek(1) == Some('\'') => {
                    value.push('\'');
                    self.i += 2;
                }
                Some('\'') => {
                    self.i += 1;
                    return Ok(Tok::Str(value));
                }
                Some(c) => {
                    value.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// Numbers: `digits [L]`, `digits . digits? exp?`, `. digits exp?`, `digits exp`.
    fn number(&mut self, start: usize) -> Result<Tok, FilterError> {
        let int_digits = self.eat_digits();
        let mut is_float = false;
        if self.peek(0) == Some('.') {
            self.i += 1;
            let frac_digits = self.eat_digits();
            if int_digits == 0 && frac_digits == 0 {
                return Err(FilterError::BadChar {
                    ch: '.',
                    pos: start,
                });
            }
            is_float = true;
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = usize::from(matches!(self.peek(1), Some('+' | '-')));
            if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                self.i += 1 + sign;
                self.eat_digits();
                is_float = true;
            }
        }
        let text = self.slice(start);
        let bad = || FilterError::BadNumber {
            text: quote(text),
            pos: start,
        };
        if is_float {
            let value: f64 = text.parse().map_err(|_| bad())?;
            if !value.is_finite() {
                return Err(bad());
            }
            return Ok(Tok::Float(value));
        }
        let value: u64 = text.parse().map_err(|_| bad())?;
        // Java's long suffix, accepted only when it ends the token (`5L`, not `5Lx`).
        if matches!(self.peek(0), Some('l' | 'L')) && !self.peek(1).is_some_and(is_ident_part) {
            self.i += 1;
        }
        Ok(Tok::Int(value))
    }

    fn operator(&mut self, c: char, start: usize) -> Result<Tok, FilterError> {
        let next = self.peek(1);
        let (tok, len) = match (c, next) {
            ('<', Some('>')) => (Tok::Ne, 2),
            ('<', Some('=')) => (Tok::Le, 2),
            ('>', Some('=')) => (Tok::Ge, 2),
            ('<', _) => (Tok::Lt, 1),
            ('>', _) => (Tok::Gt, 1),
            ('=', _) => (Tok::Eq, 1),
            ('(', _) => (Tok::LParen, 1),
            (')', _) => (Tok::RParen, 1),
            (',', _) => (Tok::Comma, 1),
            ('+', _) => (Tok::Plus, 1),
            ('-', _) => (Tok::Minus, 1),
            _ => return Err(FilterError::BadChar { ch: c, pos: start }),
        };
        self.i += len;
        Ok(tok)
    }

    fn next_token(&mut self) -> Result<Token, FilterError> {
        while self
            .peek(0)
            .is_some_and(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c'))
        {
            self.i += 1;
        }
        let start = self.i;
        let Some(c) = self.peek(0) else {
            return Ok(Token {
                tok: Tok::Eof,
                pos: start,
                text: "end of expression".to_string(),
            });
        };
        let tok = if c == '\'' {
            self.string(start)?
        } else if c.is_ascii_digit()
            || (c == '.' && self.peek(1).is_some_and(|d| d.is_ascii_digit()))
        {
            self.number(start)?
        } else if is_ident_start(c) {
            while self.peek(0).is_some_and(is_ident_part) {
                self.i += 1;
            }
            let word = self.slice(start);
            keyword(word).unwrap_or_else(|| Tok::Ident(word.to_string()))
        } else {
            self.operator(c, start)?
        };
        Ok(Token {
            tok,
            pos: start,
            text: quote(self.slice(start)),
        })
    }
}

/// Splits `src` into tokens, ending with exactly one `Tok::Eof`.
pub(super) fn tokenize(src: &str) -> Result<Vec<Token>, FilterError> {
    let mut lexer = Lexer {
        src,
        chars: src.char_indices().collect(),
        i: 0,
    };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let done = token.tok == Tok::Eof;
        tokens.push(token);
        if done {
            return Ok(tokens);
        }
    }
}
