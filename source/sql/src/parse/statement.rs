//! One statement's text into its syntax tree: MySQL's dialect, with the forms sqlparser reads
//! otherwise put right (`LOCK IN SHARE MODE`, `MOD`, `BINARY x`), and its names.

use sqlparser::ast::{ObjectName, Statement};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use crate::parse::lexer;
use ringrep_engine::error::{code, Error, Result};

/// A statement's text as the parser is given it: trimmed, no trailing `;`, quotes normalized.
pub(crate) fn normalized(sql: &str) -> String {
    lexer::normalize_quotes(sql.trim().trim_end_matches(';').trim())
}

/// Parses exactly one statement; a syntax error reads as MySQL's (error 1064).
pub(crate) fn parse_one(sql: &str) -> Result<Statement> {
    let syntax = |e: sqlparser::parser::ParserError| {
        let msg = e.to_string();
        let detail = msg.strip_prefix("sql parser error: ").unwrap_or(&msg);
        Error::syntax(format!("You have an error in your SQL syntax; {detail}"))
    };
    let or_text = lexer::pipes_as_or(sql);
    let sql = or_text.as_deref().unwrap_or(sql);
    let bit_text = lexer::bit_literals(sql);
    let sql = bit_text.as_deref().unwrap_or(sql);
    let mut stmts = match Parser::parse_sql(&MySqlDialect {}, sql) {
        Ok(stmts) => stmts,
        // MySQL's older spelling of FOR SHARE, which the parser lacks (tried only when the
        // text does not parse, so other statements pay nothing for it).
        // MySQL's `a MOD b` operator, which the parser reads as `a AS mod` (tried likewise).
        Err(e) => {
            let fixed = lexer::find_top_level(sql, "LOCK IN SHARE MODE")
                .map(|at| format!("{}FOR SHARE{}", &sql[..at], &sql[at + 18..]));
            let fixed = lexer::mod_operators(fixed.as_deref().unwrap_or(sql)).or(fixed);
            match fixed {
                Some(fixed) => {
                    Parser::parse_sql(&MySqlDialect {}, &fixed).map_err(|_| syntax(e))?
                }
                None => return Err(syntax(e)),
            }
        }
    };
    // The parser reads `UPDATE IGNORE t` as an UPDATE of a table named `ignore`.
    if matches!(stmts.first(), Some(Statement::Update(_)))
        && lexer::first_words(sql, 2) == ["UPDATE", "IGNORE"]
    {
        return Err(Error::unsupported("UPDATE IGNORE"));
    }
    if mentions_binary_prefix(sql) {
        for stmt in &mut stmts {
            bind_binary_prefix(stmt);
        }
    }
    // Window functions are not evaluated: refused, rather than run as plain aggregates that
    // fold the rows into one (`SUM(x) OVER ()`).
    if lexer::mentions(sql, "OVER") {
        let windowed = sqlparser::ast::visit_expressions(&stmts, |e| match e {
            sqlparser::ast::Expr::Function(f) if f.over.is_some() => {
                std::ops::ControlFlow::Break(())
            }
            _ => std::ops::ControlFlow::Continue(()),
        });
        if windowed.is_break() {
            return Err(Error::unsupported("window functions (OVER)"));
        }
    }
    match stmts.len() {
        1 => Ok(stmts.remove(0)),
        0 => Err(Error::new(code::ER_EMPTY_QUERY, "Query was empty")),
        _ => Err(Error::syntax(
            "You have an error in your SQL syntax; multi-statements are off",
        )),
    }
}

/// Whether `sql` may hold MySQL's `BINARY x` prefix and no `CAST(... AS BINARY)`, which
/// parses alike (see [`bind_binary_prefix`]).
fn mentions_binary_prefix(sql: &str) -> bool {
    if !lexer::mentions(sql, "BINARY") {
        return false;
    }
    let upper = sql.to_ascii_uppercase();
    let words: Vec<&str> = upper.split_ascii_whitespace().collect();
    !words
        .windows(2)
        .any(|w| w[0] == "AS" && w[1].starts_with("BINARY"))
}

/// sqlparser reads MySQL's `BINARY x = y` as `BINARY (x = y)`: the prefix takes the whole
/// expression after it. MySQL binds it to its operand like any unary operator, so the cast
/// moves down to the leftmost operand, `(BINARY x) = y`: what `WHERE BINARY name = 'bob'`
/// (an exact comparison) means. Only for a statement without `AS BINARY`, whose casts parse
/// the same way.
fn bind_binary_prefix(stmt: &mut Statement) {
    use sqlparser::ast::{visit_expressions_mut, CastKind, DataType, Expr};
    fn binary(e: Expr) -> Expr {
        Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(e),
            data_type: DataType::Binary(None),
            format: None,
        }
    }
    fn push_down(e: Expr) -> Expr {
        match e {
            Expr::BinaryOp { left, op, right } => Expr::BinaryOp {
                left: Box::new(push_down(*left)),
                op,
                right,
            },
            Expr::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => Expr::Like {
                negated,
                any,
                expr: Box::new(push_down(*expr)),
                pattern,
                escape_char,
            },
            Expr::In {
                expr,
                target,
                negated,
                global,
            } => Expr::In {
                expr: Box::new(push_down(*expr)),
                target,
                negated,
                global,
            },
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => Expr::Between {
                expr: Box::new(push_down(*expr)),
                negated,
                low,
                high,
            },
            Expr::IsNull(x) => Expr::IsNull(Box::new(push_down(*x))),
            Expr::IsNotNull(x) => Expr::IsNotNull(Box::new(push_down(*x))),
            other => binary(other),
        }
    }
    let _ = visit_expressions_mut(stmt, |e| {
        if let Expr::Cast {
            kind: CastKind::Cast,
            data_type: DataType::Binary(None),
            format: None,
            expr,
        } = e
        {
            // `push_down` of an operand alone gives back the same cast.
            let inner = std::mem::replace(expr.as_mut(), Expr::value(sqlparser::ast::Value::Null));
            *e = push_down(inner);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

pub(crate) fn split_name(name: &ObjectName) -> Result<(Option<String>, String)> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| {
            p.as_ident()
                .map(|i| i.value.clone())
                .unwrap_or_else(|| p.to_string())
        })
        .collect();
    match parts.as_slice() {
        [t] => Ok((None, t.clone())),
        [d, t] => Ok((Some(d.clone()), t.clone())),
        _ => Err(Error::syntax(format!("bad table name {name}"))),
    }
}
