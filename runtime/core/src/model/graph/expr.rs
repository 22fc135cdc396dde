//! Dimension expressions: a graph file's dimension may be derived from others (`K: N/4`,
//! `L: (N - TAPS)/D + 1`), and a tensor's axis may be written as one (`shape: [M, N/2]`).
//!
//! The language is integers, dimension names, `+ - * /` and parentheses, with the usual
//! precedence. Every value is a `u64`; `/` divides exactly. Guarantees: an expression that
//! would overflow, go below zero, divide by zero or leave a remainder is an error naming the
//! expression and the values it met, never a wrapped or truncated size; derived dimensions
//! are evaluated in dependency order, and a cycle is an error naming it. An expression is at
//! most [`MAX_EXPRESSION_BYTES`] long, of at most [`MAX_OPERANDS`] numbers and names, its
//! parentheses nested at most [`MAX_NESTING`] deep, each checked as it is read: a longer one
//! is an error saying the limit, never a deep recursion that overflows the stack.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expr {
    /// An integer.
    Number(u64),
    /// A dimension's value.
    Name(String),
    /// Two operands and an operator.
    Binary(Box<Expr>, Op, Box<Expr>),
}

/// An operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            Op::Div => "/",
        })
    }
}

/// The longest an expression may be, in bytes.
pub(crate) const MAX_EXPRESSION_BYTES: usize = 1024;

/// The most operands (numbers and names) an expression may have.
pub(crate) const MAX_OPERANDS: usize = 256;

/// The deepest its parentheses may nest.
pub(crate) const MAX_NESTING: usize = 64;

/// What is wrong with an expression, or with evaluating it; without the expression's text
/// (the caller names it, with the graph file's line).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum ExprError {
    /// Longer than [`MAX_EXPRESSION_BYTES`].
    #[error("it is {bytes} bytes long, longer than an expression may be ({MAX_EXPRESSION_BYTES})")]
    TooLong {
        /// Its length.
        bytes: usize,
    },
    /// More than [`MAX_OPERANDS`] numbers and names.
    #[error("it has more than {MAX_OPERANDS} numbers and names, more than an expression may have")]
    TooManyOperands,
    /// Parentheses nested deeper than [`MAX_NESTING`].
    #[error("its parentheses nest more than {MAX_NESTING} deep, deeper than an expression may")]
    TooDeep,
    /// A number past `u64`, shown when short enough to read.
    #[error("{digits} is too large a number")]
    LargeNumber {
        /// The number's digits.
        digits: String,
    },
    /// A number past `u64`, too long to show.
    #[error("a number of {digits} digits is too large")]
    LongNumber {
        /// How many digits it has.
        digits: usize,
    },
    /// A character that is no part of the language.
    #[error("unexpected {0:?}")]
    Unexpected(char),
    /// A `(` without its `)`.
    #[error("a ( is not closed")]
    Unclosed,
    /// A `)` without its `(`.
    #[error("unexpected )")]
    UnexpectedClose,
    /// An operator where an operand was due.
    #[error("{0} has no left operand")]
    NoLeftOperand(Op),
    /// The text ends where an operand was due.
    #[error("it ends where an operand was expected")]
    EndsEarly,
    /// Two operands side by side.
    #[error("an operator is missing between two operands")]
    MissingOperator,
    /// A name that no dimension has.
    #[error("{0} is not a declared dimension")]
    Unknown(String),
    /// Derived dimensions that read each other, in name order.
    #[error("it depends on itself through {}", .0.join(", "))]
    Cycle(Vec<String>),
    /// A division by zero.
    #[error("{0} / 0 divides by zero")]
    DivideByZero(u64),
    /// A division that leaves a remainder.
    #[error("{0} / {1} is not a whole number (a dimension must divide exactly)")]
    NotWhole(u64, u64),
    /// A subtraction below zero.
    #[error("{0} - {1} is below zero")]
    BelowZero(u64, u64),
    /// A sum or product past `u64`.
    #[error("{0} {1} {2} overflows")]
    Overflows(u64, Op, u64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Number(u64),
    Name(String),
    Op(Op),
    Open,
    Close,
}

/// The tokens of `text`, each limit of the module's checked as they are read.
fn tokens(text: &str) -> Result<Vec<Token>, ExprError> {
    if text.len() > MAX_EXPRESSION_BYTES {
        return Err(ExprError::TooLong { bytes: text.len() });
    }
    let mut out = Vec::new();
    let (mut operands, mut depth) = (0, 0);
    let mut chars = text.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if matches!(c, '0'..='9' | '_') || c.is_ascii_alphabetic() {
            operands += 1;
            if operands > MAX_OPERANDS {
                return Err(ExprError::TooManyOperands);
            }
        }
        match c {
            ' ' | '\t' => {
                chars.next();
            }
            '0'..='9' => {
                let mut end = i;
                while let Some(&(j, d)) = chars.peek() {
                    if !d.is_ascii_digit() {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                let digits = &text[i..end];
                let n = digits.parse().map_err(|_| match digits.len() {
                    ..=24 => ExprError::LargeNumber {
                        digits: digits.to_string(),
                    },
                    n => ExprError::LongNumber { digits: n },
                })?;
                out.push(Token::Number(n));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut end = i;
                while let Some(&(j, d)) = chars.peek() {
                    if !(d.is_ascii_alphanumeric() || d == '_') {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                out.push(Token::Name(text[i..end].to_string()));
            }
            '+' | '-' | '*' | '/' => {
                chars.next();
                out.push(Token::Op(match c {
                    '+' => Op::Add,
                    '-' => Op::Sub,
                    '*' => Op::Mul,
                    _ => Op::Div,
                }));
            }
            '(' => {
                chars.next();
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(ExprError::TooDeep);
                }
                out.push(Token::Open);
            }
            ')' => {
                chars.next();
                depth = depth.saturating_sub(1);
                out.push(Token::Close);
            }
            other => return Err(ExprError::Unexpected(other)),
        }
    }
    Ok(out)
}

/// A recursive-descent parser over the tokens: `sum := product (("+"|"-") product)*`,
/// `product := atom (("*"|"/") atom)*`, `atom := number | name | "(" sum ")"`.
struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn sum(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.product()?;
        while let Some(Token::Op(op @ (Op::Add | Op::Sub))) = self.peek().cloned() {
            self.at += 1;
            left = Expr::Binary(Box::new(left), op, Box::new(self.product()?));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.atom()?;
        while let Some(Token::Op(op @ (Op::Mul | Op::Div))) = self.peek().cloned() {
            self.at += 1;
            left = Expr::Binary(Box::new(left), op, Box::new(self.atom()?));
        }
        Ok(left)
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        match self.next() {
            Some(Token::Number(n)) => Ok(Expr::Number(n)),
            Some(Token::Name(name)) => Ok(Expr::Name(name)),
            Some(Token::Open) => {
                let inner = self.sum()?;
                match self.next() {
                    Some(Token::Close) => Ok(inner),
                    _ => Err(ExprError::Unclosed),
                }
            }
            Some(Token::Op(op)) => Err(ExprError::NoLeftOperand(op)),
            Some(Token::Close) => Err(ExprError::UnexpectedClose),
            None => Err(ExprError::EndsEarly),
        }
    }
}

impl Expr {
    /// Parses `text`; the error says what is wrong, without the text (the caller names it).
    pub(super) fn parse(text: &str) -> Result<Expr, ExprError> {
        let mut parser = Parser {
            tokens: tokens(text)?,
            at: 0,
        };
        let expr = parser.sum()?;
        match parser.next() {
            None => Ok(expr),
            Some(Token::Close) => Err(ExprError::UnexpectedClose),
            Some(_) => Err(ExprError::MissingOperator),
        }
    }

    /// The dimension names it reads, each once, in order of first use.
    pub(super) fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Number(_) => {}
            Expr::Name(name) => {
                if !out.contains(&name.as_str()) {
                    out.push(name);
                }
            }
            Expr::Binary(a, _, b) => {
                a.collect_names(out);
                b.collect_names(out);
            }
        }
    }

    /// Its value with the dimensions `dims`; the error names the operation that fails.
    pub(super) fn eval(&self, dims: &BTreeMap<String, u64>) -> Result<u64, ExprError> {
        match self {
            Expr::Number(n) => Ok(*n),
            Expr::Name(name) => dims
                .get(name)
                .copied()
                .ok_or_else(|| ExprError::Unknown(name.clone())),
            Expr::Binary(a, op, b) => {
                let (x, y) = (a.eval(dims)?, b.eval(dims)?);
                let result = match op {
                    Op::Add => x.checked_add(y),
                    Op::Sub => x.checked_sub(y),
                    Op::Mul => x.checked_mul(y),
                    Op::Div if y == 0 => return Err(ExprError::DivideByZero(x)),
                    Op::Div if x % y != 0 => return Err(ExprError::NotWhole(x, y)),
                    Op::Div => Some(x / y),
                };
                result.ok_or(match op {
                    Op::Sub => ExprError::BelowZero(x, y),
                    _ => ExprError::Overflows(x, *op, y),
                })
            }
        }
    }
}

/// The values of every dimension: `given` as they are, then each of `derived` once the
/// dimensions it reads have values. The error names the dimension and why: an unknown name,
/// a cycle, or an operation that fails.
pub(super) fn derive(
    mut given: BTreeMap<String, u64>,
    derived: &BTreeMap<String, Expr>,
) -> Result<BTreeMap<String, u64>, (String, ExprError)> {
    let mut pending: Vec<(&String, &Expr)> = derived.iter().collect();
    while !pending.is_empty() {
        let before = pending.len();
        let mut index = 0;
        while index < pending.len() {
            let (name, expr) = pending[index];
            let ready = expr.names().iter().all(|n| given.contains_key(*n));
            if !ready {
                index += 1;
                continue;
            }
            let value = expr.eval(&given).map_err(|why| (name.clone(), why))?;
            given.insert(name.clone(), value);
            pending.swap_remove(index);
        }
        if pending.len() == before {
            // Nothing could be evaluated: a name nobody declares, or a cycle.
            let (name, expr) = pending[0];
            let unknown = expr
                .names()
                .into_iter()
                .find(|n| !given.contains_key(*n) && !derived.contains_key(*n));
            let why = match unknown {
                Some(n) => ExprError::Unknown(n.to_string()),
                None => {
                    let mut cycle: Vec<String> =
                        pending.iter().map(|(n, _)| n.to_string()).collect();
                    cycle.sort_unstable();
                    ExprError::Cycle(cycle)
                }
            };
            return Err((name.clone(), why));
        }
    }
    Ok(given)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    fn value(text: &str, with: &[(&str, u64)]) -> Result<u64, ExprError> {
        Expr::parse(text)?.eval(&dims(with))
    }

    #[test]
    fn precedence_and_parentheses_are_the_usual() {
        let at = [("N", 1024), ("M", 128), ("D", 4)];
        assert_eq!(value("N/4", &at), Ok(256));
        assert_eq!(value("N / D + 1", &at), Ok(257));
        assert_eq!(value("N - 2 * 8", &at), Ok(1008));
        assert_eq!(value("(N - 16) / D + 1", &at), Ok(253));
        assert_eq!(value("N*M", &at), Ok(131_072));
        assert_eq!(value("N - M - 1", &at), Ok(895), "left to right");
        assert_eq!(value("N / 2 / 2", &at), Ok(256), "left to right");
        assert_eq!(value("((7))", &at), Ok(7));
        assert_eq!(Expr::parse("(N-16)/D+1").unwrap().names(), ["N", "D"]);
    }

    #[test]
    fn every_unsound_size_is_an_error_never_a_wrapped_one() {
        let at = [("N", 1022), ("Z", 0), ("B", u64::MAX)];
        for (text, want) in [
            ("N/4", "1022 / 4 is not a whole number"),
            ("N/Z", "divides by zero"),
            ("4 - N", "4 - 1022 is below zero"),
            ("B + 1", "overflows"),
            ("B * 2", "overflows"),
            ("Q + 1", "Q is not a declared dimension"),
            ("99999999999999999999", "too large a number"),
        ] {
            let e = value(text, &at).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn malformed_expressions_say_what_is_wrong() {
        for (text, want) in [
            ("", "ends where an operand"),
            ("N +", "ends where an operand"),
            ("* N", "has no left operand"),
            ("(N", "not closed"),
            ("N)", "unexpected )"),
            ("N M", "operator is missing"),
            ("N % 2", "unexpected '%'"),
            ("-N", "has no left operand"),
        ] {
            let e = Expr::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn nesting_operands_and_length_are_bounded_before_parsing() {
        let nested = format!("{}N{}", "(".repeat(20_000), ")".repeat(20_000));
        let e = Expr::parse(&nested).unwrap_err().to_string();
        assert!(e.contains("longer than an expression may be (1024)"), "{e}");
        let nested = format!("{}N{}", "(".repeat(65), ")".repeat(65));
        let e = Expr::parse(&nested).unwrap_err().to_string();
        assert!(e.contains("nest more than 64 deep"), "{e}");
        let at_limit = format!("{}N{}", "(".repeat(64), ")".repeat(64));
        assert_eq!(value(&at_limit, &[("N", 3)]), Ok(3));
        let sum = vec!["1"; 257].join("+");
        let e = Expr::parse(&sum).unwrap_err().to_string();
        assert!(e.contains("more than 256 numbers and names"), "{e}");
        assert_eq!(value(&vec!["1"; 256].join("+"), &[]), Ok(256));
        let e = Expr::parse(&vec!["1"; 100_000].join("+"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bytes long"), "{e}");
        // Unbalanced closings do not hide an opening's depth.
        let e = Expr::parse(&format!("{}{}N", ")".repeat(10), "(".repeat(65)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nest more than 64"), "{e}");
    }

    #[test]
    fn derived_dimensions_follow_their_dependencies_in_any_order() {
        let derived: BTreeMap<String, Expr> = [("A", "K*2"), ("K", "N/4"), ("L", "A + K")]
            .iter()
            .map(|(n, e)| (n.to_string(), Expr::parse(e).unwrap()))
            .collect();
        let all = derive(dims(&[("N", 64)]), &derived).unwrap();
        assert_eq!(all, dims(&[("N", 64), ("K", 16), ("A", 32), ("L", 48)]));
    }

    #[test]
    fn cycles_and_unknown_names_are_named() {
        let parse = |pairs: &[(&str, &str)]| -> BTreeMap<String, Expr> {
            pairs
                .iter()
                .map(|(n, e)| (n.to_string(), Expr::parse(e).unwrap()))
                .collect()
        };
        let (name, why) =
            derive(dims(&[("N", 8)]), &parse(&[("A", "B+1"), ("B", "A*2")])).unwrap_err();
        assert_eq!(name, "A");
        assert!(
            why.to_string().contains("depends on itself through A, B"),
            "{why}"
        );
        let (name, why) = derive(dims(&[("N", 8)]), &parse(&[("A", "X+N")])).unwrap_err();
        assert_eq!(name, "A");
        assert!(
            why.to_string().contains("X is not a declared dimension"),
            "{why}"
        );
        let (name, why) = derive(dims(&[("N", 6)]), &parse(&[("K", "N/4")])).unwrap_err();
        assert_eq!(name, "K");
        assert!(
            why.to_string().contains("6 / 4 is not a whole number"),
            "{why}"
        );
    }
}
