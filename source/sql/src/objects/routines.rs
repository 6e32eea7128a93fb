//! Stored procedures, as far as RonDB's suites and everyday scripts use them: `CREATE
//! PROCEDURE db.name([IN] p type, ...)` with a `BEGIN ... END` body of DECLARE, SET, IF /
//! ELSEIF / ELSE, WHILE, REPEAT, nested BEGIN ... END and SQL statements; `CALL`; `DROP
//! PROCEDURE [IF EXISTS]`; `SHOW CREATE PROCEDURE`; and their rows in
//! `information_schema.ROUTINES`.
//!
//! A procedure is a row of `mysql.ringrep_routines` holding its CREATE text, so it is durable
//! and replicated like any other row, and parsed again when called. Parameters and local
//! variables take precedence over column names, as in MySQL: their values go into each
//! statement as literals before it runs. A procedure runs with the caller's privileges (MySQL's
//! `SQL SECURITY INVOKER`). Each statement of it runs as the caller's statements do (in
//! autocommit mode, each commits). What a CALL returns is the result of the last SELECT the
//! procedure ran, or OK: one result, where MySQL sends each SELECT's.

use std::collections::{HashMap, VecDeque};

use binlog_format::schema::{ColumnType, LobSize};
use binlog_format::Value;

use crate::expr::truthy;
use crate::parse::lexer::{find_top_level, split_top_level_commas};
use crate::{Outcome, SqlSession};
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::SYSTEM_DB;

/// The table that holds the procedures.
pub(crate) const ROUTINES_TABLE: &str = "ringrep_routines";

/// A procedure as `mysql.ringrep_routines` holds it.
#[derive(Debug, Clone)]
pub(crate) struct StoredProcedure {
    pub(crate) db: String,
    pub(crate) name: String,
    /// Its CREATE PROCEDURE text.
    pub(crate) definition: String,
    /// `user@host` of the account that created it.
    pub(crate) definer: String,
    pub(crate) created_us: i64,
}

/// One statement of a procedure's (or a trigger's) body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// `DECLARE a, b type [DEFAULT expr]`.
    Declare {
        names: Vec<String>,
        default: Option<String>,
    },
    /// `SET v = expr` of a local variable or parameter.
    Set { name: String, expr: String },
    /// `IF c THEN ... [ELSEIF c THEN ...] [ELSE ...] END IF`.
    If {
        branches: Vec<(String, Vec<Step>)>,
        otherwise: Vec<Step>,
    },
    /// `WHILE c DO ... END WHILE`.
    While { cond: String, body: Vec<Step> },
    /// `REPEAT ... UNTIL c END REPEAT`.
    Repeat { body: Vec<Step>, until: String },
    /// `SIGNAL SQLSTATE 'state' [SET item = value, ...]`: the condition's state and its
    /// items (MESSAGE_TEXT, MYSQL_ERRNO), by upper-case name.
    Signal {
        sqlstate: String,
        items: Vec<(String, String)>,
    },
    /// `SELECT ... INTO target, ...`: the query without its INTO, and the variables
    /// (local, or `@user`) its one row goes into.
    SelectInto { query: String, targets: Vec<String> },
    /// Any other statement, run as the caller's statements are.
    Sql(String),
}

/// What a running procedure or trigger body sees besides the tables: its local variables
/// and parameters, and in a trigger the rows it fires for.
#[derive(Debug, Default)]
pub(crate) struct Frame {
    /// Local variables and parameters, by lower-case name.
    pub(crate) vars: HashMap<String, Value>,
    /// The trigger's rows, in a trigger.
    pub(crate) rows: Option<TriggerRows>,
}

/// The rows a trigger fires for: `NEW` and `OLD` with their table's columns.
#[derive(Debug)]
pub(crate) struct TriggerRows {
    /// The table the trigger is on.
    pub(crate) def: std::sync::Arc<binlog_format::schema::TableDef>,
    /// The row being written (INSERT, UPDATE); `SET NEW.col` changes it in a BEFORE trigger.
    pub(crate) new: Option<Vec<Value>>,
    /// The row as it was (UPDATE, DELETE).
    pub(crate) old: Option<Vec<Value>>,
    /// The columns `SET NEW.col` assigned.
    pub(crate) set: Vec<usize>,
    /// The statement's time zone, for time values written into statements.
    pub(crate) tz: i64,
}

impl TriggerRows {
    /// The slot of column `name` in the rows, or 1054 naming the row.
    fn column(&self, row: &str, name: &str) -> Result<usize> {
        self.def
            .column_index(name)
            .filter(|&i| self.def.columns[i].name != ringrep_engine::HIDDEN_ROW_ID)
            .ok_or_else(|| Error::bad_field(name, row))
    }

    /// The value of `NEW.name` or `OLD.name` (`row` upper-case).
    fn value(&self, row: &str, name: &str) -> Result<Value> {
        let values = if row == "NEW" { &self.new } else { &self.old };
        let event = if self.new.is_none() {
            "DELETE"
        } else {
            "INSERT"
        };
        let values = values.as_ref().ok_or_else(|| {
            Error::new(
                code::ER_TRG_NO_SUCH_ROW_IN_TRG,
                format!("There is no {row} row in on {event} trigger"),
            )
        })?;
        Ok(values[self.column(row, name)?].clone())
    }
}

/// A parsed procedure.
#[derive(Debug, Clone, PartialEq)]
struct Procedure {
    db: String,
    name: String,
    params: Vec<String>,
    body: Vec<Step>,
}

pub(crate) fn syntax(detail: impl std::fmt::Display) -> Error {
    Error::syntax(format!(
        "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '{detail}'"
    ))
}

/// The first word of `s`, upper-cased.
pub(crate) fn first_word(s: &str) -> String {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| !w.is_empty())
        .unwrap_or_default()
        .to_ascii_uppercase()
}

/// Whether `s` starts with the words `words` (case-insensitive, any spacing).
pub(crate) fn starts_with_words(s: &str, words: &[&str]) -> bool {
    let mut it = s.split_whitespace();
    words.iter().all(|w| {
        it.next().is_some_and(|x| {
            x.trim_end_matches(';')
                .eq_ignore_ascii_case(w.trim_end_matches(';'))
        })
    })
}

/// Whether `piece` starts with a label (`name: WHILE ...`).
fn is_labelled(piece: &str) -> bool {
    let t = piece.trim_start();
    let word = t
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(t.len());
    word > 0 && t[word..].starts_with(':') && !t[word..].starts_with(":=")
}

/// Splits `s` at its top-level semicolons (outside quotes and parentheses).
pub(crate) fn split_statements(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match quote {
            Some(q) => {
                if c == '\\' && q != '`' {
                    chars.next();
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => quote = Some(c),
                '(' => depth += 1,
                ')' => depth -= 1,
                ';' if depth == 0 => {
                    out.push(s[start..i].trim().to_string());
                    start = i + 1;
                }
                _ => {}
            },
        }
    }
    out.push(s[start..].trim().to_string());
    out.retain(|p| !p.is_empty());
    out
}

/// Takes `keyword ...` apart at the top-level word `at` (`DO`, `THEN`): the text between,
/// and what follows (the first statement of the block), pushed back onto `pieces`.
fn split_header(
    piece: &str,
    skip: usize,
    at: &str,
    pieces: &mut VecDeque<String>,
) -> Result<String> {
    let pos = find_top_level(piece, at).ok_or_else(|| syntax(piece))?;
    let rest = piece[pos + at.len()..].trim();
    if !rest.is_empty() {
        pieces.push_front(rest.to_string());
    }
    Ok(piece[skip..pos].trim().to_string())
}

/// Parses statements from `pieces` until one that starts with one of `ends` (returned, not
/// consumed), or the end of the body (an error when `ends` is not empty).
pub(crate) fn parse_block(
    pieces: &mut VecDeque<String>,
    ends: &[&[&str]],
) -> Result<(Vec<Step>, Option<String>)> {
    let mut steps = Vec::new();
    while let Some(piece) = pieces.pop_front() {
        if ends.iter().any(|e| starts_with_words(&piece, e)) {
            let first = piece.clone();
            pieces.push_front(piece);
            return Ok((steps, Some(first)));
        }
        let word = first_word(&piece);
        let step = match word.as_str() {
            "DECLARE" => {
                let rest = piece[7..].trim();
                let upper = rest.to_ascii_uppercase();
                if upper.contains(" CURSOR ") || upper.contains(" HANDLER ") {
                    return Err(Error::unsupported(
                        "cursors and handlers in stored procedures",
                    ));
                }
                let (decl, default) = match find_top_level(rest, "DEFAULT") {
                    Some(at) => (&rest[..at], Some(rest[at + 7..].trim().to_string())),
                    None => (rest, None),
                };
                // `a, b INT`: the names, then the type (ignored: values keep their own kind).
                let mut names: Vec<String> = split_top_level_commas(decl)
                    .iter()
                    .map(|n| {
                        n.split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_lowercase()
                    })
                    .collect();
                names.retain(|n| !n.is_empty());
                Step::Declare { names, default }
            }
            "SET" => {
                // `SET a = 1, b := 2`: one step per assignment.
                for assignment in split_top_level_commas(piece[3..].trim()) {
                    let eq = assignment.find('=').ok_or_else(|| syntax(&piece))?;
                    let name = assignment[..eq].trim().trim_end_matches(':').trim();
                    steps.push(Step::Set {
                        name: name.trim_matches('`').to_lowercase(),
                        expr: assignment[eq + 1..].trim().to_string(),
                    });
                }
                continue;
            }
            "IF" => {
                let cond = split_header(&piece, 2, "THEN", pieces)?;
                let mut branches = Vec::new();
                let mut otherwise = Vec::new();
                let mut cond = cond;
                loop {
                    let (body, end) =
                        parse_block(pieces, &[&["ELSEIF"], &["ELSE"], &["END", "IF"]])?;
                    branches.push((cond.clone(), body));
                    let end = end.ok_or_else(|| syntax("END IF"))?;
                    let end_piece = pieces.pop_front().unwrap_or_default();
                    if starts_with_words(&end, &["ELSEIF"]) {
                        cond = split_header(&end_piece, 6, "THEN", pieces)?;
                        continue;
                    }
                    if starts_with_words(&end, &["ELSE"]) {
                        let rest = end_piece[4..].trim();
                        if !rest.is_empty() {
                            pieces.push_front(rest.to_string());
                        }
                        let (body, end) = parse_block(pieces, &[&["END", "IF"]])?;
                        end.ok_or_else(|| syntax("END IF"))?;
                        pieces.pop_front();
                        otherwise = body;
                    }
                    break;
                }
                Step::If {
                    branches,
                    otherwise,
                }
            }
            "WHILE" => {
                let cond = split_header(&piece, 5, "DO", pieces)?;
                let (body, end) = parse_block(pieces, &[&["END", "WHILE"]])?;
                end.ok_or_else(|| syntax("END WHILE"))?;
                pieces.pop_front();
                Step::While { cond, body }
            }
            "REPEAT" => {
                let rest = piece[6..].trim();
                if !rest.is_empty() {
                    pieces.push_front(rest.to_string());
                }
                let (body, end) = parse_block(pieces, &[&["UNTIL"]])?;
                end.ok_or_else(|| syntax("UNTIL"))?;
                let until = pieces.pop_front().unwrap_or_default();
                let at = find_top_level(&until, "END").ok_or_else(|| syntax(&until))?;
                Step::Repeat {
                    body,
                    until: until[5..at].trim().to_string(),
                }
            }
            "BEGIN" => {
                let rest = piece[5..].trim();
                if !rest.is_empty() {
                    pieces.push_front(rest.to_string());
                }
                let (body, end) = parse_block(pieces, &[&["END"]])?;
                end.ok_or_else(|| syntax("END"))?;
                pieces.pop_front();
                steps.extend(body);
                continue;
            }
            "SIGNAL" => parse_signal(&piece)?,
            "SELECT" if find_top_level(&piece, "INTO").is_some() => parse_select_into(&piece)?,
            "LEAVE" | "ITERATE" | "LOOP" | "CASE" | "OPEN" | "FETCH" | "CLOSE" | "RESIGNAL"
            | "RETURN" => return Err(Error::unsupported(format!("{word} in stored procedures"))),
            _ if is_labelled(&piece) => {
                return Err(Error::unsupported("labels in stored procedures"))
            }
            _ => Step::Sql(piece),
        };
        steps.push(step);
    }
    if ends.is_empty() {
        Ok((steps, None))
    } else {
        Err(syntax("end of the procedure body"))
    }
}

/// Parses `SIGNAL SQLSTATE [VALUE] 'state' [SET name = value, ...]`.
fn parse_signal(piece: &str) -> Result<Step> {
    let rest = piece[6..].trim_start();
    if !starts_with_words(rest, &["SQLSTATE"]) {
        // `SIGNAL condition_name` needs DECLARE ... CONDITION, which ringrep has not.
        return Err(Error::unsupported("SIGNAL of a named condition"));
    }
    let mut rest = rest[8..].trim_start();
    if starts_with_words(rest, &["VALUE"]) {
        rest = rest[5..].trim_start();
    }
    let (sqlstate, after) =
        crate::parse::lexer::take_string(rest).ok_or_else(|| syntax(piece.trim()))?;
    let bad = sqlstate.len() != 5
        || !sqlstate.chars().all(|c| c.is_ascii_alphanumeric())
        || sqlstate.starts_with("00");
    if bad {
        return Err(Error::new(
            code::ER_SP_BAD_SQLSTATE,
            format!("Bad SQLSTATE: '{sqlstate}'"),
        ));
    }
    let after = after.trim();
    let mut items = Vec::new();
    if !after.is_empty() {
        if !starts_with_words(after, &["SET"]) {
            return Err(syntax(after));
        }
        for item in split_top_level_commas(after[3..].trim()) {
            let eq = item.find('=').ok_or_else(|| syntax(&item))?;
            let name = item[..eq].trim().to_ascii_uppercase();
            if !matches!(
                name.as_str(),
                "MESSAGE_TEXT"
                    | "MYSQL_ERRNO"
                    | "CLASS_ORIGIN"
                    | "SUBCLASS_ORIGIN"
                    | "CONSTRAINT_CATALOG"
                    | "CONSTRAINT_SCHEMA"
                    | "CONSTRAINT_NAME"
                    | "CATALOG_NAME"
                    | "SCHEMA_NAME"
                    | "TABLE_NAME"
                    | "COLUMN_NAME"
                    | "CURSOR_NAME"
            ) {
                return Err(syntax(&item));
            }
            items.push((name, item[eq + 1..].trim().to_string()));
        }
    }
    Ok(Step::Signal { sqlstate, items })
}

/// Parses `SELECT ... INTO a, @b [FROM ...]` (INTO after the select list, or at the end).
fn parse_select_into(piece: &str) -> Result<Step> {
    let at = find_top_level(piece, "INTO").ok_or_else(|| syntax(piece))?;
    let after = &piece[at + 4..];
    let end = [
        "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "FOR", "LOCK", "UNION",
    ]
    .iter()
    .filter_map(|k| find_top_level(after, k))
    .min()
    .unwrap_or(after.len());
    let list = after[..end].trim();
    if starts_with_words(list, &["OUTFILE"]) || starts_with_words(list, &["DUMPFILE"]) {
        return Err(Error::unsupported("SELECT ... INTO OUTFILE"));
    }
    let targets: Vec<String> = split_top_level_commas(list)
        .iter()
        .map(|t| t.trim().trim_matches('`').to_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    if targets.is_empty() {
        return Err(syntax(piece));
    }
    let query = format!("{} {}", piece[..at].trim_end(), after[end..].trim_start());
    Ok(Step::SelectInto {
        query: query.trim().to_string(),
        targets,
    })
}

/// Parses `CREATE [DEFINER=...] PROCEDURE [IF NOT EXISTS] [db.]name(params) [characteristics] body`.
fn parse_procedure(text: &str, current_db: Option<&str>) -> Result<Procedure> {
    let at = find_top_level(text, "PROCEDURE").ok_or_else(|| syntax(text))?;
    let mut rest = text[at + 9..].trim_start();
    if starts_with_words(rest, &["IF", "NOT", "EXISTS"]) {
        rest = rest[rest
            .to_ascii_uppercase()
            .find("EXISTS")
            .map_or(0, |i| i + 6)..]
            .trim_start();
    }
    let open = rest.find('(').ok_or_else(|| syntax(rest))?;
    let name = rest[..open].trim().replace('`', "");
    let (db, name) = match name.split_once('.') {
        Some((d, n)) => (d.to_string(), n.to_string()),
        None => (
            current_db
                .ok_or_else(|| Error::new(code::ER_NO_DB_ERROR, "No database selected"))?
                .to_string(),
            name,
        ),
    };
    let close = open + matching(&rest[open..]).ok_or_else(|| syntax(rest))?;
    let mut params = Vec::new();
    for p in split_top_level_commas(&rest[open + 1..close]) {
        let words: Vec<&str> = p.split_whitespace().collect();
        let (mode, name) = match words.as_slice() {
            [] => continue,
            [m, n, ..] if ["IN", "OUT", "INOUT"].contains(&m.to_ascii_uppercase().as_str()) => {
                (m.to_ascii_uppercase(), *n)
            }
            [n, ..] => ("IN".to_string(), *n),
        };
        if mode != "IN" {
            return Err(Error::unsupported(format!(
                "{mode} parameters of stored procedures"
            )));
        }
        params.push(name.trim_matches('`').to_lowercase());
    }
    let mut body = rest[close + 1..].trim();
    // Characteristics before the body (COMMENT '...', DETERMINISTIC, SQL SECURITY ...) change
    // nothing here.
    if let Some(b) = find_top_level(body, "BEGIN") {
        body = &body[b..];
    }
    let mut pieces: VecDeque<String> = split_statements(body).into();
    let (steps, _) = parse_block(&mut pieces, &[])?;
    Ok(Procedure {
        db,
        name,
        params,
        body: steps,
    })
}

/// The offset of the parenthesis closing the one `s` starts with.
fn matching(s: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// A value as an SQL literal, to put into a statement in place of a variable: one that reads
/// back as the same kind of value (numbers unquoted, DECIMAL and DOUBLE as such, bytes in
/// hex, times as text in the session's time zone `tz`).
pub(crate) fn literal(v: &Value, tz: i64) -> String {
    let quoted = |text: &str| format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"));
    // A negative number in parentheses: `-x` or `a - x` must not become `--5`, a comment.
    let number = |text: String| match text.starts_with('-') {
        true => format!("({text})"),
        false => text,
    };
    match v {
        Value::Null => "NULL".into(),
        Value::Int(i) => number(i.to_string()),
        Value::UInt(u) => u.to_string(),
        Value::Decimal(d) if d.parse::<f64>().is_ok() => number(d.clone()),
        Value::Double(f) if f.is_finite() => number(format!("{f:e}")),
        Value::Float(f) if f.is_finite() => number(format!("{:e}", f64::from(*f))),
        Value::Bytes(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
            format!("X'{hex}'")
        }
        Value::Timestamp(_) | Value::DateTime(_) | Value::Date(_) => {
            quoted(&crate::expr::render(v, None, tz).unwrap_or_default())
        }
        other => quoted(&ringrep_engine::types::text_of(other)),
    }
}

/// `text` with every `NEW.col` and `OLD.col` of a trigger replaced by the row's value.
fn substitute_rows(text: &str, rows: &TriggerRows) -> Result<String> {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&MySqlDialect {}, text)
        .with_unescape(false)
        .tokenize()
        .map_err(syntax)?;
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let next_significant =
        |from: usize| (from..tokens.len()).find(|&j| !matches!(tokens[j], Token::Whitespace(_)));
    let mut prev: Option<&Token> = None;
    while i < tokens.len() {
        let t = &tokens[i];
        if let Token::Word(w) = t {
            let row = w.value.to_ascii_uppercase();
            let after_period = matches!(prev, Some(Token::Period));
            if w.quote_style.is_none() && (row == "NEW" || row == "OLD") && !after_period {
                if let Some(dot) = next_significant(i + 1).filter(|&j| tokens[j] == Token::Period) {
                    if let Some(col) = next_significant(dot + 1) {
                        if let Token::Word(c) = &tokens[col] {
                            out.push_str(&literal(&rows.value(&row, &c.value)?, rows.tz));
                            prev = Some(&tokens[col]);
                            i = col + 1;
                            continue;
                        }
                    }
                }
            }
        }
        if !matches!(t, Token::Whitespace(_)) {
            prev = Some(t);
        }
        out.push_str(&t.to_string());
        i += 1;
    }
    Ok(out)
}

/// `text` as a statement of a body running in `frame`: a trigger's `NEW.col` and `OLD.col`
/// and the variables in scope replaced by their values.
fn substitute_in(text: &str, frame: &Frame, tz: i64) -> Result<String> {
    match &frame.rows {
        Some(rows) => substitute(&substitute_rows(text, rows)?, &frame.vars, tz),
        None => substitute(text, &frame.vars, tz),
    }
}

/// `text` with every unqualified, unquoted use of a variable in `vars` replaced by its value.
fn substitute(text: &str, vars: &HashMap<String, Value>, tz: i64) -> Result<String> {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::tokenizer::{Token, Tokenizer};
    if vars.is_empty() {
        return Ok(text.to_string());
    }
    // Strings stay as written (escapes and doubled quotes kept), so the text goes back whole.
    let tokens = Tokenizer::new(&MySqlDialect {}, text)
        .with_unescape(false)
        .tokenize()
        .map_err(syntax)?;
    let mut out = String::with_capacity(text.len());
    let word_is = |t: Option<&Token>, kw: &str| matches!(t, Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw));
    let significant: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let inserting = word_is(significant.first().copied(), "INSERT")
        || word_is(significant.first().copied(), "REPLACE");
    // Inside `INSERT INTO t (columns)`: names there are columns, whatever is declared.
    let mut column_list: Option<i32> = None;
    let mut seen_into = false;
    // In a SELECT's list at the top level: a bare variable there keeps its name as the
    // column's header, as MySQL shows it.
    let mut depth = 0i32;
    let mut select_list = false;
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if depth == 0 && w.quote_style.is_none() => {
                let k = w.value.to_ascii_uppercase();
                if k == "SELECT" {
                    select_list = true;
                } else if [
                    "FROM", "INTO", "WHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "UNION",
                ]
                .contains(&k.as_str())
                {
                    select_list = false;
                }
            }
            _ => {}
        }
        let prev = tokens[..i]
            .iter()
            .rev()
            .find(|t| !matches!(t, Token::Whitespace(_)));
        let next = tokens[i + 1..]
            .iter()
            .find(|t| !matches!(t, Token::Whitespace(_)));
        if inserting {
            match t {
                Token::Word(w) if w.value.eq_ignore_ascii_case("INTO") => seen_into = true,
                Token::Word(w)
                    if seen_into
                        && column_list.is_none()
                        && ["VALUES", "VALUE", "SELECT", "SET"]
                            .iter()
                            .any(|k| w.value.eq_ignore_ascii_case(k)) =>
                {
                    seen_into = false
                }
                Token::LParen if seen_into && column_list.is_none() => column_list = Some(0),
                _ => {}
            }
            if let Some(depth) = column_list.as_mut() {
                match t {
                    Token::LParen => *depth += 1,
                    Token::RParen => {
                        *depth -= 1;
                        if *depth == 0 {
                            column_list = None;
                            seen_into = false;
                        }
                    }
                    _ => {}
                }
                out.push_str(&t.to_string());
                continue;
            }
        }
        // `SET col = ...` of an UPDATE (or `, col = ...` in its list): the column is assigned.
        let assigned = matches!(next, Some(Token::Eq))
            && (word_is(prev, "SET")
                || word_is(prev, "UPDATE")
                || matches!(prev, Some(Token::Comma)));
        match t {
            Token::Word(w)
                if w.quote_style.is_none()
                    && !assigned
                    && !matches!(prev, Some(Token::Period))
                    && !matches!(next, Some(Token::Period) | Some(Token::LParen)) =>
            {
                match vars.get(&w.value.to_lowercase()) {
                    Some(v) => {
                        out.push_str(&literal(v, tz));
                        let whole_item = depth == 0
                            && select_list
                            && (word_is(prev, "SELECT")
                                || word_is(prev, "DISTINCT")
                                || matches!(prev, Some(Token::Comma)))
                            && (next.is_none()
                                || word_is(next, "FROM")
                                || matches!(next, Some(Token::Comma) | Some(Token::SemiColon)));
                        if whole_item {
                            out.push_str(&format!(" AS `{}`", w.value.replace('`', "``")));
                        }
                    }
                    None => out.push_str(&t.to_string()),
                }
            }
            other => out.push_str(&other.to_string()),
        }
    }
    Ok(out)
}

fn routines_def() -> binlog_format::schema::TableDef {
    let col = |name: &str, ty| crate::table::computed::plain_column(name, ty, false);
    ringrep_engine::ddl::system_table(
        ROUTINES_TABLE,
        vec![
            col("db", ColumnType::VarChar { len: 64 }),
            col("name", ColumnType::VarChar { len: 64 }),
            col("type", ColumnType::VarChar { len: 9 }),
            col(
                "definition",
                ColumnType::Text {
                    size: LobSize::Long,
                },
            ),
            col("definer", ColumnType::VarChar { len: 288 }),
            col(
                "created_us",
                ColumnType::Integer {
                    width: binlog_format::schema::IntWidth::Big,
                    unsigned: false,
                },
            ),
        ],
        3,
    )
}

/// How deep CALLs may nest (MySQL's `max_sp_recursion_depth` is 0 for recursion; a chain of
/// different procedures is bounded here).
const MAX_DEPTH: usize = 16;

impl SqlSession {
    /// Every stored procedure.
    pub(crate) fn procedures(&self) -> Result<Vec<StoredProcedure>> {
        let Some(def) = self.engine().table_def(SYSTEM_DB, ROUTINES_TABLE) else {
            return Ok(Vec::new());
        };
        let text = |v: &Value| ringrep_engine::types::text_of(v);
        Ok(self
            .session
            .scan(&def, &[])?
            .into_iter()
            .filter(|r| text(&r[2]) == "PROCEDURE")
            .map(|r| {
                let created = match r[5] {
                    Value::Int(i) => i,
                    _ => 0,
                };
                StoredProcedure {
                    db: text(&r[0]),
                    name: text(&r[1]),
                    definition: text(&r[3]),
                    definer: text(&r[4]),
                    created_us: created,
                }
            })
            .collect())
    }

    /// Whether stored procedure `db.name` exists.
    pub(crate) fn procedure_exists(&self, db: &str, name: &str) -> Result<bool> {
        Ok(self.find_procedure(db, name)?.is_some())
    }

    fn find_procedure(&self, db: &str, name: &str) -> Result<Option<String>> {
        Ok(self
            .procedures()?
            .into_iter()
            .find(|p| p.db.eq_ignore_ascii_case(db) && p.name.eq_ignore_ascii_case(name))
            .map(|p| p.definition))
    }

    /// CREATE PROCEDURE: parsed now (a body ringrep cannot run is refused here, not at CALL),
    /// stored as its text.
    pub(crate) fn create_procedure(&mut self, text: &str) -> Result<Outcome> {
        let current = self.session.vars.database.clone();
        let p = parse_procedure(text, current.as_deref())?;
        self.require_routine_privilege(crate::Privs::CREATE_ROUTINE, &p.db)?;
        if !self.engine().with_state(|st| st.has_database(&p.db)) {
            return Err(Error::new(
                code::ER_BAD_DB_ERROR,
                format!("Unknown database '{}'", p.db),
            ));
        }
        if self.find_procedure(&p.db, &p.name)?.is_some() {
            if starts_with_words(
                &text[find_top_level(text, "PROCEDURE").map_or(0, |i| i + 9)..],
                &["IF", "NOT", "EXISTS"],
            ) {
                self.session.warn(
                    code::ER_SP_ALREADY_EXISTS.number,
                    format!("PROCEDURE {}.{} already exists", p.db, p.name),
                );
                return Ok(Outcome::Ok);
            }
            return Err(Error::new(
                code::ER_SP_ALREADY_EXISTS,
                format!("PROCEDURE {} already exists", p.name),
            ));
        }
        if !self.engine().with_state(|st| st.has_database(SYSTEM_DB)) {
            self.session.create_database(SYSTEM_DB, true)?;
        }
        if self.engine().table_def(SYSTEM_DB, ROUTINES_TABLE).is_none() {
            self.session.create_table(routines_def(), true)?;
        }
        let def = self.session.table_def(Some(SYSTEM_DB), ROUTINES_TABLE)?;
        let definer = self.definer();
        let now = self.session.now_us();
        let row = vec![
            Value::Text(p.db.clone()),
            Value::Text(p.name.clone()),
            Value::Text("PROCEDURE".into()),
            Value::Text(text.trim().to_string()),
            Value::Text(definer),
            Value::Int(now),
        ];
        let cols: Vec<usize> = (0..row.len()).collect();
        self.statement(|s| {
            s.session
                .insert(&def, &cols, vec![row], ringrep_engine::InsertMode::Insert)
        })?;
        // Its own transaction after the procedure's: a crash between leaves the procedure
        // without its creator's grant, which GRANT gives.
        self.grant_creator_routine(&p.db, &p.name)?;
        Ok(Outcome::Ok)
    }

    /// `user@host` of the session, as DEFINER shows it.
    pub(crate) fn definer(&self) -> String {
        match &self.authority {
            Some(a) => format!("{}@{}", a.account.user, a.account.host),
            None => "root@localhost".into(),
        }
    }

    fn require_routine_privilege(&self, p: crate::Privs, db: &str) -> Result<()> {
        self.require_database(p, Some(db))
    }

    /// `DROP PROCEDURE [IF EXISTS] [db.]name`.
    pub(crate) fn drop_procedure(&mut self, text: &str) -> Result<Outcome> {
        let at = find_top_level(text, "PROCEDURE").ok_or_else(|| syntax(text))?;
        let mut rest = text[at + 9..].trim();
        let if_exists = starts_with_words(rest, &["IF", "EXISTS"]);
        if if_exists {
            rest = rest[rest
                .to_ascii_uppercase()
                .find("EXISTS")
                .map_or(0, |i| i + 6)..]
                .trim();
        }
        let name = rest.trim_end_matches(';').trim().replace('`', "");
        let (db, name) = match name.split_once('.') {
            Some((d, n)) => (d.to_string(), n.to_string()),
            None => (self.session.current_db()?, name),
        };
        self.require_routine(crate::Privs::ALTER_ROUTINE, "alter routine", &db, &name)?;
        if self.find_procedure(&db, &name)?.is_none() {
            if if_exists {
                self.session.warn(
                    code::ER_SP_DOES_NOT_EXIST.number,
                    format!("PROCEDURE {db}.{name} does not exist"),
                );
                return Ok(Outcome::Ok);
            }
            return Err(Error::new(
                code::ER_SP_DOES_NOT_EXIST,
                format!("PROCEDURE {db}.{name} does not exist"),
            ));
        }
        let def = self.session.table_def(Some(SYSTEM_DB), ROUTINES_TABLE)?;
        let text = ringrep_engine::types::text_of;
        self.statement(|s| {
            s.session.delete_where(
                &def,
                &mut |r| {
                    Ok(text(&r[0]).eq_ignore_ascii_case(&db)
                        && text(&r[1]).eq_ignore_ascii_case(&name)
                        && text(&r[2]) == "PROCEDURE")
                },
                None,
            )
        })?;
        self.revoke_routine_grants(&db, &name)?;
        Ok(Outcome::Ok)
    }

    /// `SHOW CREATE PROCEDURE [db.]name`.
    pub(crate) fn show_create_procedure(&mut self, name: &str) -> Result<Outcome> {
        let name = name.replace('`', "");
        let (db, name) = match name.split_once('.') {
            Some((d, n)) => (d.to_string(), n.to_string()),
            None => (self.session.current_db()?, name),
        };
        let missing = || {
            Error::new(
                code::ER_SP_DOES_NOT_EXIST,
                format!("PROCEDURE {name} does not exist"),
            )
        };
        let p = self
            .procedures()?
            .into_iter()
            .find(|p| p.db.eq_ignore_ascii_case(&db) && p.name.eq_ignore_ascii_case(&name))
            .ok_or_else(missing)?;
        // As MySQL: a routine the account may not see does not exist to it, and one whose
        // body it may not read shows NULL for it.
        let (visible, readable) = self.routine_access(&db, &p.name, &p.definer);
        if !visible {
            return Err(missing());
        }
        let text = readable.then_some(p.definition);
        Ok(Outcome::text(
            &[
                "Procedure",
                "sql_mode",
                "Create Procedure",
                "character_set_client",
                "collation_connection",
                "Database Collation",
            ],
            vec![vec![
                Some(name),
                Some(crate::expr::SQL_MODE.into()),
                text,
                Some("utf8mb4".into()),
                Some("utf8mb4_0900_ai_ci".into()),
                Some("utf8mb4_0900_ai_ci".into()),
            ]],
        ))
    }

    /// `CALL [db.]name(args)`.
    pub(crate) fn call(&mut self, text: &str) -> Result<Outcome> {
        if self.call_depth >= MAX_DEPTH {
            return Err(Error::new(
                code::ER_SP_RECURSION_LIMIT,
                format!("Recursive limit {MAX_DEPTH} (as max_sp_recursion_depth variable) was exceeded for routine"),
            ));
        }
        let rest = text.trim()[4..].trim().trim_end_matches(';').trim();
        let (name, args) = match rest.find('(') {
            Some(open) => {
                let close = open + matching(&rest[open..]).ok_or_else(|| syntax(rest))?;
                (
                    rest[..open].trim(),
                    split_top_level_commas(&rest[open + 1..close]),
                )
            }
            None => (rest, Vec::new()),
        };
        let name = name.replace('`', "");
        let (db, pname) = match name.split_once('.') {
            Some((d, n)) => (d.to_string(), n.to_string()),
            None => (self.session.current_db()?, name.clone()),
        };
        self.require_routine(crate::Privs::EXECUTE, "execute", &db, &pname)?;
        let stored = self.find_procedure(&db, &pname)?.ok_or_else(|| {
            Error::new(
                code::ER_SP_DOES_NOT_EXIST,
                format!("PROCEDURE {db}.{pname} does not exist"),
            )
        })?;
        let p = parse_procedure(&stored, Some(&db))?;
        let args: Vec<String> = args.into_iter().filter(|a| !a.trim().is_empty()).collect();
        if args.len() != p.params.len() {
            return Err(Error::new(
                code::ER_SP_WRONG_NO_OF_ARGS,
                format!(
                    "Incorrect number of arguments for PROCEDURE {db}.{pname}; expected {}, got {}",
                    p.params.len(),
                    args.len()
                ),
            ));
        }
        let mut frame = Frame::default();
        for (param, arg) in p.params.iter().zip(&args) {
            let v = self.value_of(arg, &Frame::default())?;
            frame.vars.insert(param.clone(), v);
        }
        // Statements inside see the procedure's database as the current one.
        let saved_db = self.session.vars.database.replace(db);
        self.call_depth += 1;
        let mut last = None;
        let r = self.run_steps(&p.body, &mut frame, &mut last);
        self.call_depth -= 1;
        self.session.vars.database = saved_db;
        r?;
        Ok(last.unwrap_or(Outcome::Ok))
    }

    /// The value of expression `expr` in `frame`.
    fn value_of(&mut self, expr: &str, frame: &Frame) -> Result<Value> {
        let tz = self.session.vars.tz_offset;
        let sql = format!("SELECT {}", substitute_in(expr, frame, tz)?);
        match self.execute_inner(&sql)? {
            Outcome::Rows(rs) => Ok(rs
                .rows
                .into_iter()
                .next()
                .and_then(|r| r.into_iter().next())
                .unwrap_or(Value::Null)),
            _ => Ok(Value::Null),
        }
    }

    /// Runs the statements of a body in `frame`; `last` keeps the result of the last SELECT
    /// (a CALL's result). In a trigger (`frame.rows`), no statement may return rows.
    pub(crate) fn run_steps(
        &mut self,
        steps: &[Step],
        frame: &mut Frame,
        last: &mut Option<Outcome>,
    ) -> Result<()> {
        let tz = self.session.vars.tz_offset;
        for step in steps {
            match step {
                Step::Declare { names, default } => {
                    let v = match default {
                        Some(e) => self.value_of(e, frame)?,
                        None => Value::Null,
                    };
                    for n in names {
                        frame.vars.insert(n.clone(), v.clone());
                    }
                }
                Step::Set { name, expr } if frame.vars.contains_key(name) => {
                    let v = self.value_of(expr, frame)?;
                    frame.vars.insert(name.clone(), v);
                }
                Step::Set { name, expr } if frame.rows.is_some() && row_target(name).is_some() => {
                    let (row, column) = row_target(name).unwrap_or_default();
                    let v = self.value_of(expr, frame)?;
                    let Some(rows) = frame.rows.as_mut() else {
                        continue;
                    };
                    let c = rows.column(&row, &column)?;
                    // Checked when the trigger was created; a NEW row is there to set.
                    let Some(new) = rows.new.as_mut().filter(|_| row == "NEW") else {
                        return Err(Error::new(
                            code::ER_TRG_CANT_CHANGE_ROW,
                            format!("Updating of {row} row is not allowed in trigger"),
                        ));
                    };
                    new[c] = ringrep_engine::types::coerce(v, &rows.def.columns[c], 1, tz)?;
                    if !rows.set.contains(&c) {
                        rows.set.push(c);
                    }
                }
                Step::Set { name, expr } => {
                    let sql = format!("SET {name} = {}", substitute_in(expr, frame, tz)?);
                    self.execute_inner(&sql)?;
                }
                Step::If {
                    branches,
                    otherwise,
                } => {
                    let mut taken = false;
                    for (cond, body) in branches {
                        if truthy(&self.value_of(cond, frame)?) == Some(true) {
                            self.run_steps(body, frame, last)?;
                            taken = true;
                            break;
                        }
                    }
                    if !taken {
                        self.run_steps(otherwise, frame, last)?;
                    }
                }
                Step::While { cond, body } => {
                    while truthy(&self.value_of(cond, frame)?) == Some(true) {
                        self.run_steps(body, frame, last)?;
                    }
                }
                Step::Repeat { body, until } => loop {
                    self.run_steps(body, frame, last)?;
                    if truthy(&self.value_of(until, frame)?) == Some(true) {
                        break;
                    }
                },
                Step::Signal { sqlstate, items } => self.signal(sqlstate, items, frame)?,
                Step::SelectInto { query, targets } => {
                    let out = self.execute_inner(&substitute_in(query, frame, tz)?)?;
                    let Outcome::Rows(rs) = out else {
                        return Err(Error::internal("SELECT ... INTO returned no result set"));
                    };
                    if rs.columns.len() != targets.len() {
                        return Err(Error::new(
                            code::ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                            "The used SELECT statements have a different number of columns",
                        ));
                    }
                    match rs.rows.len() {
                        0 => self.session.warn(
                            code::ER_SP_FETCH_NO_DATA.number,
                            "No data - zero rows fetched, selected, or processed",
                        ),
                        1 => {
                            let row = rs.rows.into_iter().next().unwrap_or_default();
                            for (t, v) in targets.iter().zip(row) {
                                if let Some(user) = t.strip_prefix('@') {
                                    self.user_vars.insert(user.to_string(), v);
                                } else if frame.vars.contains_key(t) {
                                    frame.vars.insert(t.clone(), v);
                                } else {
                                    return Err(Error::new(
                                        code::ER_SP_UNDECLARED_VAR,
                                        format!("Undeclared variable: {t}"),
                                    ));
                                }
                            }
                        }
                        _ => {
                            return Err(Error::new(
                                code::ER_TOO_MANY_ROWS,
                                "Result consisted of more than one row",
                            ))
                        }
                    }
                }
                Step::Sql(sql) => {
                    let out = self.execute_inner(&substitute_in(sql, frame, tz)?)?;
                    if matches!(out, Outcome::Rows(_)) {
                        if frame.rows.is_some() {
                            return Err(returned_rows_in_trigger(sql));
                        }
                        *last = Some(out);
                    }
                }
            }
        }
        Ok(())
    }

    /// `SIGNAL SQLSTATE 'state' SET ...`: an error with that SQLSTATE (MYSQL_ERRNO 1644 unless
    /// given), or for class `01` a warning, after which the body goes on.
    fn signal(&mut self, sqlstate: &str, items: &[(String, String)], frame: &Frame) -> Result<()> {
        let class = &sqlstate[..2];
        let (mut number, mut message) = match class {
            "01" => (
                1642u16,
                "Unhandled user-defined warning condition".to_string(),
            ),
            "02" => (
                1643u16,
                "Unhandled user-defined not found condition".to_string(),
            ),
            _ => (
                1644u16,
                "Unhandled user-defined exception condition".to_string(),
            ),
        };
        for (item, expr) in items {
            let v = self.value_of(expr, frame)?;
            match item.as_str() {
                "MESSAGE_TEXT" => message = ringrep_engine::types::text_of(&v),
                "MYSQL_ERRNO" => {
                    number = crate::expr::to_f64(&v)
                        .filter(|n| (1.0..=65535.0).contains(n))
                        .map(|n| n as u16)
                        .ok_or_else(|| {
                            Error::new(
                                code::ER_WRONG_VALUE_FOR_VAR,
                                format!(
                                    "Variable 'MYSQL_ERRNO' can't be set to the value of '{}'",
                                    ringrep_engine::types::text_of(&v)
                                ),
                            )
                        })?;
                }
                _ => {}
            }
        }
        if class == "01" {
            self.session.warn(number, message);
            return Ok(());
        }
        let mut e = Error::new(code::ER_UNKNOWN_ERROR, message);
        e.code = number;
        e.sqlstate = static_sqlstate(sqlstate);
        e.kind = ringrep_engine::error::ErrorKind::User;
        Err(e)
    }
}

/// `new.col` / `old.col` (as a SET names its target, lower-cased): the row (upper-case) and
/// the column.
fn row_target(name: &str) -> Option<(String, String)> {
    let (row, column) = name.split_once('.')?;
    let row = row.trim_matches('`').to_ascii_uppercase();
    (row == "NEW" || row == "OLD").then(|| (row, column.trim_matches('`').to_string()))
}

/// The error for a statement of a trigger that returned rows: a SELECT (found when the
/// trigger is created), or a CALL of a procedure that selects.
fn returned_rows_in_trigger(sql: &str) -> Error {
    if first_word(sql) == "CALL" {
        let name = sql.trim()[4..]
            .split('(')
            .next()
            .unwrap_or_default()
            .trim()
            .replace('`', "");
        return Error::new(
            code::ER_SP_BADSELECT,
            format!("PROCEDURE {name} can't return a result set in the given context"),
        );
    }
    Error::new(
        code::ER_SP_NO_RETSET,
        "Not allowed to return a result set from a trigger",
    )
}

/// `sqlstate` as the `'static` text an error carries (each distinct state is kept once).
fn static_sqlstate(sqlstate: &str) -> &'static str {
    static SEEN: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    if sqlstate == "45000" {
        return "45000";
    }
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = seen.iter().find(|s| **s == sqlstate) {
        return s;
    }
    let kept: &'static str = Box::leak(sqlstate.to_string().into_boxed_str());
    seen.push(kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suites_procedure_parses() {
        let p = parse_procedure(
            "CREATE PROCEDURE test.fill_ring(IN p_id INT, IN p_count INT)\nBEGIN\nDECLARE i INT DEFAULT 0;\nWHILE i < p_count DO\nINSERT INTO test.rb_proc (id, val) VALUES (p_id, CONCAT('proc_', i));\nSET i = i + 1;\nEND WHILE;\nEND",
            None,
        )
        .expect("parse");
        assert_eq!((p.db.as_str(), p.name.as_str()), ("test", "fill_ring"));
        assert_eq!(p.params, ["p_id", "p_count"]);
        assert_eq!(
            p.body,
            vec![
                Step::Declare {
                    names: vec!["i".into()],
                    default: Some("0".into())
                },
                Step::While {
                    cond: "i < p_count".into(),
                    body: vec![
                        Step::Sql(
                            "INSERT INTO test.rb_proc (id, val) VALUES (p_id, CONCAT('proc_', i))"
                                .into()
                        ),
                        Step::Set {
                            name: "i".into(),
                            expr: "i + 1".into()
                        },
                    ]
                }
            ]
        );
    }

    #[test]
    fn if_elseif_else_and_repeat_parse() {
        let p = parse_procedure(
            "CREATE PROCEDURE p(n INT) BEGIN IF n > 1 THEN SELECT 'big'; ELSEIF n = 1 THEN SELECT 'one'; ELSE SELECT 'none'; END IF; REPEAT SET n = n - 1; UNTIL n <= 0 END REPEAT; END",
            Some("d"),
        )
        .expect("parse");
        assert_eq!(p.db, "d");
        let Step::If {
            branches,
            otherwise,
        } = &p.body[0]
        else {
            panic!("{:?}", p.body)
        };
        assert_eq!(branches.len(), 2);
        assert_eq!(otherwise, &vec![Step::Sql("SELECT 'none'".into())]);
        assert!(matches!(&p.body[1], Step::Repeat { until, .. } if until == "n <= 0"));
    }

    #[test]
    fn a_selected_variable_keeps_its_name() {
        let vars: HashMap<String, Value> = [("total".to_string(), Value::Int(10))].into();
        assert_eq!(
            substitute("SELECT total, total + 1 FROM t WHERE total > 1", &vars, 0).expect("sub"),
            "SELECT 10 AS `total`, 10 + 1 FROM t WHERE 10 > 1"
        );
        assert!(is_labelled("l1: WHILE 1 DO"));
        assert!(!is_labelled("SET a := 1"));
    }

    #[test]
    fn strings_keep_their_escapes_and_set_lists_split() {
        let vars: HashMap<String, Value> = [("n".to_string(), Value::Int(1))].into();
        assert_eq!(
            substitute("INSERT INTO t VALUES (n, 'don''t', 'a\\b')", &vars, 0).expect("sub"),
            "INSERT INTO t VALUES (1, 'don''t', 'a\\b')"
        );
        let p = parse_procedure(
            "CREATE PROCEDURE p() BEGIN DECLARE a, b INT; SET a = 1, b := 2; END",
            Some("d"),
        )
        .expect("parse");
        assert_eq!(p.body.len(), 3, "{:?}", p.body);
    }

    #[test]
    fn values_go_in_as_literals_of_their_kind() {
        assert_eq!(literal(&Value::Int(-5), 0), "(-5)");
        assert_eq!(literal(&Value::Decimal("-2.50".into()), 0), "(-2.50)");
        assert_eq!(literal(&Value::Decimal("2.50".into()), 0), "2.50");
        assert_eq!(literal(&Value::Double(0.5), 0), "5e-1");
        assert_eq!(literal(&Value::Text("it's".into()), 0), "'it''s'");
        assert_eq!(literal(&Value::Timestamp(0), 3600), "'1970-01-01 01:00:00'");
        let vars: HashMap<String, Value> = [("d".to_string(), Value::Int(-2))].into();
        assert_eq!(
            substitute("SELECT 1 - d, -d", &vars, 0).expect("sub"),
            "SELECT 1 - (-2), -(-2)"
        );
    }

    #[test]
    fn assignment_targets_stay_columns() {
        let vars: HashMap<String, Value> = [("v".to_string(), Value::Int(7))].into();
        assert_eq!(
            substitute("UPDATE t SET v = v + 1, w = v WHERE v > 1", &vars, 0).expect("sub"),
            "UPDATE t SET v = 7 + 1, w = 7 WHERE 7 > 1"
        );
    }

    #[test]
    fn variables_become_literals_but_not_columns_of_a_table_or_functions() {
        let vars: HashMap<String, Value> = [
            ("i".to_string(), Value::Int(3)),
            ("v".to_string(), Value::Text("it's".into())),
        ]
        .into();
        assert_eq!(
            substitute("INSERT INTO t (id, v) VALUES (i, CONCAT(v, t.i))", &vars, 0).expect("sub"),
            "INSERT INTO t (id, v) VALUES (3, CONCAT('it''s', t.i))"
        );
    }
}
