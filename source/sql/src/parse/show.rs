//! The words and the filter (`LIKE`, `WHERE`) of SHOW statements.

use ringrep_engine::error::{Error, Result};

/// The filter of a SHOW statement: `LIKE 'pattern'` on its first column, or `WHERE expr` over
/// its columns by their names.
pub(crate) enum ShowFilter {
    Like(String),
    Where(Box<sqlparser::ast::Expr>),
}

impl ShowFilter {
    /// The filter of a parsed SHOW statement's options.
    pub(crate) fn of(options: &sqlparser::ast::ShowStatementOptions) -> Option<ShowFilter> {
        use sqlparser::ast::ShowStatementFilterPosition as P;
        let f = match options.filter_position.as_ref()? {
            P::Infix(f) | P::Suffix(f) => f,
        };
        Self::of_filter(f)
    }

    /// The filter of a parsed `ShowStatementFilter`.
    pub(crate) fn of_filter(f: &sqlparser::ast::ShowStatementFilter) -> Option<ShowFilter> {
        use sqlparser::ast::ShowStatementFilter as F;
        match f {
            F::Like(p) | F::ILike(p) | F::NoKeyword(p) => Some(ShowFilter::Like(p.clone())),
            F::Where(e) => Some(ShowFilter::Where(Box::new(e.clone()))),
        }
    }
}

/// A SHOW statement the parser does not know, taken apart by words: SHOW TABLE STATUS and
/// SHOW INDEX.
pub(crate) struct ShowWords {
    /// The words and names after the statement's keywords, up to LIKE or WHERE.
    pub(crate) words: Vec<String>,
    pub(crate) filter: Option<ShowFilter>,
}

pub(crate) fn show_words(text: &str, keywords: usize) -> Result<ShowWords> {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let syntax = |detail: String| {
        Error::syntax(format!(
            "You have an error in your SQL syntax; {detail} in '{text}'"
        ))
    };
    let tokens = Tokenizer::new(&MySqlDialect {}, text)
        .tokenize()
        .map_err(|e| syntax(e.to_string()))?;
    let mut words = Vec::new();
    let mut filter = None;
    let mut it = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .skip(keywords)
        .peekable();
    while let Some(t) = it.next() {
        match t {
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("LIKE") => {
                match it.next() {
                    Some(Token::SingleQuotedString(p) | Token::DoubleQuotedString(p)) => {
                        filter = Some(ShowFilter::Like(p.clone()));
                    }
                    _ => return Err(syntax("LIKE needs a quoted pattern".into())),
                }
                break;
            }
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("WHERE") => {
                let at = crate::parse::lexer::find_top_level(text, "WHERE")
                    .ok_or_else(|| syntax("WHERE".into()))?;
                let e = sqlparser::parser::Parser::new(&MySqlDialect {})
                    .try_with_sql(&text[at + 5..])
                    .and_then(|mut p| p.parse_expr())
                    .map_err(|e| syntax(e.to_string()))?;
                filter = Some(ShowFilter::Where(Box::new(e)));
                break;
            }
            Token::Word(w) => words.push(w.value.clone()),
            Token::Period => {
                // `db.table`: joined back into one name.
                let Some(Token::Word(w)) = it.next() else {
                    return Err(syntax("a name after '.'".into()));
                };
                let last = words.pop().unwrap_or_default();
                words.push(format!("{last}.{}", w.value));
            }
            Token::SemiColon => break,
            other => return Err(syntax(format!("unexpected {other}"))),
        }
    }
    Ok(ShowWords { words, filter })
}
