//! Triggers: `CREATE [DEFINER = user] TRIGGER [IF NOT EXISTS] [db.]name {BEFORE | AFTER}
//! {INSERT | UPDATE | DELETE} ON table FOR EACH ROW [{FOLLOWS | PRECEDES} other] body`,
//! `DROP TRIGGER [IF EXISTS]`, `SHOW TRIGGERS`, `SHOW CREATE TRIGGER` and their rows in
//! `information_schema.TRIGGERS`. Their firing on the rows INSERT, UPDATE, DELETE, REPLACE
//! and LOAD DATA change is `exec::fire`'s.
//!
//! A trigger is a row of `mysql.ringrep_triggers` holding its CREATE text, so it is durable
//! and replicated like any other row; its body is parsed again by the statement that fires
//! it, and run by the stored procedures' interpreter (`routines`): `NEW.col` and `OLD.col`
//! go into each statement as literals, `SET NEW.col = ...` in a BEFORE trigger changes the
//! row the statement writes. Triggers fire on the primary's SQL path, inside the statement
//! (a failing trigger undoes the statement); the replica's applier writes rows through the
//! engine's privileged path and never runs SQL, so nothing fires there: the rows a trigger
//! wrote arrive as rows of their own.
//!
//! Where MySQL differs: a trigger runs with the privileges of the account whose statement
//! fires it (MySQL: its DEFINER's); the tables a statement reads besides its target are not
//! protected from its triggers (MySQL's 1442 covers them too, here only the tables being
//! written).
//!
//! On a ring table a BEFORE INSERT trigger sees `NEW.ring_idx` as the column's default (0)
//! and `NEW.ring_meta` as NULL: the engine gives the slot when it writes the row, and an
//! AFTER INSERT trigger sees the slot it got. `SET NEW.ring_idx` (or the meta column) fails
//! as an INSERT naming the column does; a DELETE on a ring table with DELETE triggers is
//! refused, as the spec says.

use binlog_format::schema::{ColumnType, IntWidth, LobSize, TableDef};
use binlog_format::Value;

use crate::objects::routines::{parse_block, split_statements, syntax, Step};
use crate::table::computed::plain_column;
use crate::{Outcome, SqlSession};
use ringrep_engine::error::{code, Error, Result};
use ringrep_engine::{InsertMode, SYSTEM_DB};

/// The table that holds the triggers.
pub(crate) const TRIGGERS_TABLE: &str = "ringrep_triggers";

/// The statement a trigger fires for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TrgEvent {
    Insert,
    Update,
    Delete,
}

impl TrgEvent {
    pub(crate) fn name(self) -> &'static str {
        match self {
            TrgEvent::Insert => "INSERT",
            TrgEvent::Update => "UPDATE",
            TrgEvent::Delete => "DELETE",
        }
    }

    fn of(word: &str) -> Option<TrgEvent> {
        match word.to_ascii_uppercase().as_str() {
            "INSERT" => Some(TrgEvent::Insert),
            "UPDATE" => Some(TrgEvent::Update),
            "DELETE" => Some(TrgEvent::Delete),
            _ => None,
        }
    }
}

/// When a trigger fires: before the row is written, or after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timing {
    Before,
    After,
}

impl Timing {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Timing::Before => "BEFORE",
            Timing::After => "AFTER",
        }
    }

    fn of(word: &str) -> Option<Timing> {
        match word.to_ascii_uppercase().as_str() {
            "BEFORE" => Some(Timing::Before),
            "AFTER" => Some(Timing::After),
            _ => None,
        }
    }
}

/// A trigger as `mysql.ringrep_triggers` holds it.
#[derive(Debug, Clone)]
pub(crate) struct StoredTrigger {
    pub(crate) db: String,
    pub(crate) name: String,
    /// The table it is on (in `db`).
    pub(crate) table: String,
    pub(crate) event: TrgEvent,
    pub(crate) timing: Timing,
    /// Its place among the table's triggers of the same event and timing, from 1.
    pub(crate) order: i64,
    /// Its CREATE TRIGGER text.
    pub(crate) definition: String,
    /// `user@host` of its definer.
    pub(crate) definer: String,
    pub(crate) created_us: i64,
}

impl StoredTrigger {
    /// The body: what follows `FOR EACH ROW` (and FOLLOWS / PRECEDES).
    pub(crate) fn body(&self) -> String {
        parse_head(&self.definition)
            .map(|h| h.body)
            .unwrap_or_default()
    }

    /// `CREATE DEFINER=`user`@`host` TRIGGER ...`, as SHOW CREATE TRIGGER prints it: the
    /// statement as written from TRIGGER on.
    pub(crate) fn original_statement(&self) -> String {
        let rest = parse_head(&self.definition)
            .map(|h| self.definition[h.trigger_at..].to_string())
            .unwrap_or_else(|_| self.definition.clone());
        format!("CREATE DEFINER={} {rest}", quoted_account(&self.definer))
    }
}

/// `user@host` as `` `user`@`host` ``.
fn quoted_account(definer: &str) -> String {
    match definer.rsplit_once('@') {
        Some((u, h)) => format!("`{u}`@`{h}`"),
        None => format!("`{definer}`"),
    }
}

/// A CREATE TRIGGER statement taken apart.
#[derive(Debug, PartialEq)]
pub(crate) struct Head {
    /// The DEFINER clause's account, `user@host` (`None` without one, or CURRENT_USER).
    definer: Option<String>,
    if_not_exists: bool,
    db: Option<String>,
    name: String,
    timing: Timing,
    event: TrgEvent,
    table_db: Option<String>,
    table: String,
    /// FOLLOWS (true) or PRECEDES (false) another trigger.
    order: Option<(bool, String)>,
    /// Where the TRIGGER keyword starts in the text.
    trigger_at: usize,
    /// Where the table's name (with its database, if given) is in the text.
    table_span: (usize, usize),
    /// The body, as written.
    pub(crate) body: String,
}

/// A cursor over a statement's text, for its head (names and keywords).
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn skip_blanks(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// A bare word (letters, digits, `_`, `$`) or a backquoted name; its text.
    fn word(&mut self) -> Option<String> {
        self.skip_blanks();
        let rest = self.rest();
        if let Some(inner) = rest.strip_prefix('`') {
            let mut out = String::new();
            let mut chars = inner.char_indices();
            while let Some((i, c)) = chars.next() {
                if c == '`' {
                    if inner[i + 1..].starts_with('`') {
                        out.push('`');
                        chars.next();
                        continue;
                    }
                    self.pos += 1 + i + 1;
                    return Some(out);
                }
                out.push(c);
            }
            return None;
        }
        let len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len());
        if len == 0 {
            return None;
        }
        self.pos += len;
        Some(rest[..len].to_string())
    }

    /// Whether the next words are `words` (case-insensitive); consumed if so.
    fn keywords(&mut self, words: &[&str]) -> bool {
        let start = self.pos;
        for w in words {
            self.skip_blanks();
            let rest = self.rest();
            let len = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if !rest[..len].eq_ignore_ascii_case(w) {
                self.pos = start;
                return false;
            }
            self.pos += len;
        }
        true
    }

    /// `name` or `db.name`.
    fn name(&mut self) -> Option<(Option<String>, String)> {
        let first = self.word()?;
        self.skip_blanks();
        if self.rest().starts_with('.') {
            self.pos += 1;
            let second = self.word()?;
            return Some((Some(first), second));
        }
        Some((None, first))
    }

    /// The text up to the next blank outside quotes (an account: `'u'@'h'`, `u@h`).
    fn account(&mut self) -> String {
        self.skip_blanks();
        let rest = self.rest();
        let mut quote = None;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
                None if c.is_whitespace() => {
                    end = i;
                    break;
                }
                None => {}
            }
        }
        self.pos += end;
        rest[..end].to_string()
    }
}

/// `'user'@'host'`, `` `user`@`host` ``, `user@host` or CURRENT_USER[()] as `user@host`
/// (`None` for CURRENT_USER).
fn account_name(text: &str) -> Option<String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("CURRENT_USER") || t.eq_ignore_ascii_case("CURRENT_USER()") {
        return None;
    }
    let unquote = |s: &str| {
        s.trim()
            .trim_matches(|c| c == '\'' || c == '"' || c == '`')
            .to_string()
    };
    Some(match t.rsplit_once('@') {
        Some((u, h)) => format!("{}@{}", unquote(u), unquote(h)),
        None => format!("{}@%", unquote(t)),
    })
}

/// Takes a CREATE TRIGGER statement apart (the body is not parsed).
pub(crate) fn parse_head(text: &str) -> Result<Head> {
    let mut c = Cursor { text, pos: 0 };
    let near = |c: &Cursor<'_>| syntax(c.rest().trim());
    if !c.keywords(&["CREATE"]) {
        return Err(near(&c));
    }
    let mut definer = None;
    if c.keywords(&["DEFINER"]) {
        c.skip_blanks();
        if !c.rest().starts_with('=') {
            return Err(near(&c));
        }
        c.pos += 1;
        let account = c.account();
        if account.is_empty() {
            return Err(near(&c));
        }
        definer = account_name(&account);
    }
    c.skip_blanks();
    let trigger_at = c.pos;
    if !c.keywords(&["TRIGGER"]) {
        return Err(near(&c));
    }
    let if_not_exists = c.keywords(&["IF", "NOT", "EXISTS"]);
    let (db, name) = c.name().ok_or_else(|| near(&c))?;
    let timing = c
        .word()
        .as_deref()
        .and_then(Timing::of)
        .ok_or_else(|| near(&c))?;
    let event = c
        .word()
        .as_deref()
        .and_then(TrgEvent::of)
        .ok_or_else(|| near(&c))?;
    if !c.keywords(&["ON"]) {
        return Err(near(&c));
    }
    c.skip_blanks();
    let table_start = c.pos;
    let (table_db, table) = c.name().ok_or_else(|| near(&c))?;
    let table_span = (table_start, c.pos);
    if !c.keywords(&["FOR", "EACH", "ROW"]) {
        return Err(near(&c));
    }
    let order = if c.keywords(&["FOLLOWS"]) {
        Some((true, c.word().ok_or_else(|| near(&c))?))
    } else if c.keywords(&["PRECEDES"]) {
        Some((false, c.word().ok_or_else(|| near(&c))?))
    } else {
        None
    };
    let body = c.rest().trim().trim_end_matches(';').trim().to_string();
    if body.is_empty() {
        return Err(syntax(""));
    }
    Ok(Head {
        definer,
        if_not_exists,
        db,
        name,
        timing,
        event,
        table_db,
        table,
        order,
        trigger_at,
        table_span,
        body,
    })
}

/// `definition` (a CREATE TRIGGER text) with its ON clause naming `table` instead, as MySQL
/// rewrites a trigger when RENAME TABLE moves its table.
fn with_table(definition: &str, table: &str) -> String {
    match parse_head(definition) {
        Ok(h) => {
            let name = match &h.table_db {
                Some(db) => format!("`{db}`.`{table}`"),
                None => format!("`{table}`"),
            };
            format!(
                "{}{name}{}",
                &definition[..h.table_span.0],
                &definition[h.table_span.1..]
            )
        }
        Err(_) => definition.to_string(),
    }
}

/// Whether `text` (a CREATE statement) creates a trigger: `CREATE [DEFINER = x] TRIGGER`.
pub(crate) fn is_create_trigger(text: &str) -> bool {
    let mut c = Cursor { text, pos: 0 };
    if !c.keywords(&["CREATE"]) {
        return false;
    }
    if c.keywords(&["DEFINER"]) {
        c.skip_blanks();
        if !c.rest().starts_with('=') {
            return false;
        }
        c.pos += 1;
        c.account();
    }
    c.keywords(&["TRIGGER"])
}

/// The statements of a trigger's body.
pub(crate) fn parse_body(body: &str) -> Result<Vec<Step>> {
    let mut pieces = split_statements(body).into();
    Ok(parse_block(&mut pieces, &[])?.0)
}

/// The `NEW.col` and `OLD.col` a text names: (row upper-cased, column).
fn row_references(text: &str) -> Vec<(String, String)> {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(tokens) = Tokenizer::new(&MySqlDialect {}, text).tokenize() else {
        return Vec::new();
    };
    let tokens: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        let (Token::Word(w), Some(Token::Period), Some(Token::Word(col))) =
            (tokens[i], tokens.get(i + 1), tokens.get(i + 2))
        else {
            continue;
        };
        let row = w.value.to_ascii_uppercase();
        let qualified = i > 0 && matches!(tokens[i - 1], Token::Period);
        if w.quote_style.is_none() && !qualified && (row == "NEW" || row == "OLD") {
            out.push((row, col.value.clone()));
        }
    }
    out
}

/// The checks MySQL makes of a trigger's body when it is created: the rows it names exist for
/// its event, it sets only NEW and only before, it returns no rows and commits nothing.
fn check_body(steps: &[Step], event: TrgEvent, timing: Timing) -> Result<()> {
    let no_row = |row: &str| {
        let on = if row == "OLD" { "INSERT" } else { "DELETE" };
        Error::new(
            code::ER_TRG_NO_SUCH_ROW_IN_TRG,
            format!("There is no {row} row in on {on} trigger"),
        )
    };
    let check_text = |text: &str| -> Result<()> {
        for (row, _) in row_references(text) {
            if (row == "OLD" && event == TrgEvent::Insert)
                || (row == "NEW" && event == TrgEvent::Delete)
            {
                return Err(no_row(&row));
            }
        }
        Ok(())
    };
    for step in steps {
        match step {
            Step::Declare { default, .. } => {
                if let Some(d) = default {
                    check_text(d)?;
                }
            }
            Step::Set { name, expr } => {
                let variable = name.rsplit(['.', ' ']).next().unwrap_or(name);
                if variable
                    .trim_start_matches('@')
                    .eq_ignore_ascii_case("autocommit")
                {
                    return Err(Error::new(
                        code::ER_SP_CANT_SET_AUTOCOMMIT,
                        "Not allowed to set autocommit from a stored function or trigger",
                    ));
                }
                if let Some((row, _)) = name.split_once('.') {
                    match row.trim_matches('`').to_ascii_uppercase().as_str() {
                        "OLD" => {
                            return Err(Error::new(
                                code::ER_TRG_CANT_CHANGE_ROW,
                                "Updating of OLD row is not allowed in trigger",
                            ))
                        }
                        "NEW" if event == TrgEvent::Delete => return Err(no_row("NEW")),
                        "NEW" if timing == Timing::After => {
                            return Err(Error::new(
                                code::ER_TRG_CANT_CHANGE_ROW,
                                "Updating of NEW row is not allowed in after trigger",
                            ))
                        }
                        _ => {}
                    }
                }
                check_text(expr)?;
            }
            Step::If {
                branches,
                otherwise,
            } => {
                for (cond, body) in branches {
                    check_text(cond)?;
                    check_body(body, event, timing)?;
                }
                check_body(otherwise, event, timing)?;
            }
            Step::While { cond, body } => {
                check_text(cond)?;
                check_body(body, event, timing)?;
            }
            Step::Repeat { body, until } => {
                check_body(body, event, timing)?;
                check_text(until)?;
            }
            Step::Signal { items, .. } => {
                for (_, v) in items {
                    check_text(v)?;
                }
            }
            Step::SelectInto { query, .. } => check_text(query)?,
            Step::Sql(sql) => {
                check_text(sql)?;
                check_statement(sql)?;
            }
        }
    }
    Ok(())
}

/// The `NEW.col` and `OLD.col` a body names anywhere (SET targets included).
fn body_references(steps: &[Step], out: &mut Vec<(String, String)>) {
    for step in steps {
        match step {
            Step::Declare { default, .. } => {
                out.extend(default.iter().flat_map(|d| row_references(d)));
            }
            Step::Set { name, expr } => {
                out.extend(row_references(name));
                out.extend(row_references(expr));
            }
            Step::If {
                branches,
                otherwise,
            } => {
                for (cond, body) in branches {
                    out.extend(row_references(cond));
                    body_references(body, out);
                }
                body_references(otherwise, out);
            }
            Step::While { cond: c, body } | Step::Repeat { body, until: c } => {
                out.extend(row_references(c));
                body_references(body, out);
            }
            Step::Signal { items, .. } => {
                out.extend(items.iter().flat_map(|(_, v)| row_references(v)));
            }
            Step::SelectInto { query, .. } => out.extend(row_references(query)),
            Step::Sql(sql) => out.extend(row_references(sql)),
        }
    }
}

/// A statement a trigger may not hold: one returning rows (1415), or one it may not run at
/// all (see [`check_in_trigger`]).
fn check_statement(sql: &str) -> Result<()> {
    let words = crate::parse::lexer::first_words(sql, 2);
    match words.first().map(String::as_str).unwrap_or("") {
        "SELECT" | "SHOW" | "WITH" | "DESCRIBE" | "DESC" | "EXPLAIN" | "VALUES" | "TABLE"
        | "CHECKSUM" => Err(Error::new(
            code::ER_SP_NO_RETSET,
            "Not allowed to return a result set from a trigger",
        )),
        _ => check_in_trigger(&words, sql),
    }
}

/// A statement that may not run inside a trigger (checked when the trigger is created, and
/// again when a procedure it calls runs one): one that commits (1422), that sets autocommit
/// (1445), dynamic SQL (1336). `first` are its first words, upper-cased.
pub(crate) fn check_in_trigger(first: &[String], sql: &str) -> Result<()> {
    let w = |i: usize| first.get(i).map(String::as_str).unwrap_or("");
    match w(0) {
        "COMMIT" | "ROLLBACK" | "START" | "CREATE" | "DROP" | "ALTER" | "RENAME" | "TRUNCATE"
        | "LOCK" | "UNLOCK" | "GRANT" | "REVOKE" | "ANALYZE" | "OPTIMIZE" | "SAVEPOINT"
        | "RELEASE" | "PURGE" | "KILL" => Err(Error::new(
            code::ER_COMMIT_NOT_ALLOWED_IN_SF_OR_TRG,
            "Explicit or implicit commit is not allowed in stored function or trigger.",
        )),
        "BEGIN" if first.len() == 1 => Err(Error::new(
            code::ER_COMMIT_NOT_ALLOWED_IN_SF_OR_TRG,
            "Explicit or implicit commit is not allowed in stored function or trigger.",
        )),
        "SET" if sets_autocommit(sql) => Err(Error::new(
            code::ER_SP_CANT_SET_AUTOCOMMIT,
            "Not allowed to set autocommit from a stored function or trigger",
        )),
        "PREPARE" | "EXECUTE" | "DEALLOCATE" => Err(Error::new(
            code::ER_STMT_NOT_ALLOWED_IN_SF_OR_TRG,
            "Dynamic SQL is not allowed in stored function or trigger",
        )),
        "LOAD" | "USE" | "FLUSH" => Err(Error::unsupported(format!("{} in triggers", w(0)))),
        _ => Ok(()),
    }
}

/// Whether `SET ...` assigns autocommit (`autocommit`, `@@autocommit`, `SESSION autocommit`,
/// `@@session.autocommit`).
fn sets_autocommit(sql: &str) -> bool {
    let list = sql.trim_start().get(3..).unwrap_or_default();
    crate::parse::lexer::split_top_level_commas(list)
        .iter()
        .any(|a| {
            let target = a
                .split('=')
                .next()
                .unwrap_or_default()
                .trim_end_matches(':');
            target
                .rsplit(['.', ' ', '@'])
                .find(|w| !w.trim().is_empty())
                .is_some_and(|w| {
                    w.trim()
                        .trim_matches('`')
                        .eq_ignore_ascii_case("autocommit")
                })
        })
}

fn triggers_def() -> TableDef {
    let col = |name: &str, ty| plain_column(name, ty, false);
    let big = || ColumnType::Integer {
        width: IntWidth::Big,
        unsigned: false,
    };
    ringrep_engine::ddl::system_table(
        TRIGGERS_TABLE,
        vec![
            col("db", ColumnType::VarChar { len: 64 }),
            col("name", ColumnType::VarChar { len: 64 }),
            col("table_name", ColumnType::VarChar { len: 64 }),
            col("event", ColumnType::VarChar { len: 6 }),
            col("timing", ColumnType::VarChar { len: 6 }),
            col("action_order", big()),
            col(
                "definition",
                ColumnType::Text {
                    size: LobSize::Long,
                },
            ),
            col("definer", ColumnType::VarChar { len: 288 }),
            col("created_us", big()),
        ],
        2,
    )
}

fn text_of(v: &Value) -> String {
    ringrep_engine::types::text_of(v)
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
        _ => 0,
    }
}

impl SqlSession {
    /// Every trigger, in database, table, event, timing and action order.
    pub(crate) fn triggers(&self) -> Result<Vec<StoredTrigger>> {
        let Some(def) = self.engine().table_def(SYSTEM_DB, TRIGGERS_TABLE) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<StoredTrigger> = self
            .session
            .scan(&def, &[])?
            .into_iter()
            .filter_map(|r| {
                Some(StoredTrigger {
                    db: text_of(&r[0]),
                    name: text_of(&r[1]),
                    table: text_of(&r[2]),
                    event: TrgEvent::of(&text_of(&r[3]))?,
                    timing: Timing::of(&text_of(&r[4]))?,
                    order: int(&r[5]),
                    definition: text_of(&r[6]),
                    definer: text_of(&r[7]),
                    created_us: int(&r[8]),
                })
            })
            .collect();
        let rank = |t: &StoredTrigger| {
            (
                t.db.to_lowercase(),
                t.table.to_lowercase(),
                t.event as u8,
                t.timing as u8,
                t.order,
            )
        };
        out.sort_by_key(rank);
        Ok(out)
    }

    fn find_trigger(&self, db: &str, name: &str) -> Result<Option<StoredTrigger>> {
        Ok(self
            .triggers()?
            .into_iter()
            .find(|t| t.db.eq_ignore_ascii_case(db) && t.name.eq_ignore_ascii_case(name)))
    }

    /// CREATE TRIGGER: parsed and checked now (a body ringrep cannot run, or one MySQL
    /// refuses, is refused here, not when it fires), stored as its text.
    pub(crate) fn create_trigger(&mut self, text: &str) -> Result<Outcome> {
        let head = parse_head(text)?;
        let body = parse_body(&head.body)?;
        check_body(&body, head.event, head.timing)?;
        let current = self.session.vars.database.clone();
        let db = head
            .db
            .clone()
            .or_else(|| head.table_db.clone())
            .or(current.clone())
            .ok_or_else(|| Error::new(code::ER_NO_DB_ERROR, "No database selected"))?;
        let table_db = head
            .table_db
            .clone()
            .or(current)
            .unwrap_or_else(|| db.clone());
        if !table_db.eq_ignore_ascii_case(&db) {
            return Err(Error::new(
                code::ER_TRG_IN_WRONG_SCHEMA,
                "Trigger in wrong schema",
            ));
        }
        self.require_table(crate::Privs::TRIGGER, "TRIGGER", Some(&db), &head.table)?;
        let definer = match &head.definer {
            Some(d) if *d != self.definer() => {
                // Another account as definer: MySQL asks SET_USER_ID (or SUPER).
                self.require_any_global(&[crate::Privs::SUPER])?;
                d.clone()
            }
            _ => self.definer(),
        };
        if db.eq_ignore_ascii_case(SYSTEM_DB) {
            return Err(Error::new(
                code::ER_NO_TRIGGERS_ON_SYSTEM_SCHEMA,
                "Triggers can not be created on system tables",
            ));
        }
        let def = match self.session.table_def(Some(&db), &head.table) {
            Ok(def) => def,
            Err(missing) => {
                if self.view(&db, &head.table)?.is_some() {
                    return Err(Error::new(
                        code::ER_TRG_ON_VIEW_OR_TEMP_TABLE,
                        format!("Trigger's '{}' is view or temporary table", head.table),
                    ));
                }
                return Err(missing);
            }
        };
        if self.find_trigger(&db, &head.name)?.is_some() {
            if head.if_not_exists {
                self.session
                    .warn(code::ER_TRG_ALREADY_EXISTS.number, "Trigger already exists");
                return Ok(Outcome::Ok);
            }
            return Err(Error::new(
                code::ER_TRG_ALREADY_EXISTS,
                "Trigger already exists",
            ));
        }
        // Every NEW.col and OLD.col names a column of the table (MySQL checks it here too).
        let mut refs = Vec::new();
        body_references(&body, &mut refs);
        for (row, column) in refs {
            let known = def
                .column_index(&column)
                .is_some_and(|i| def.columns[i].name != ringrep_engine::HIDDEN_ROW_ID);
            if !known {
                return Err(Error::bad_field(&column, &row));
            }
        }
        // Its place among the table's triggers of its event and timing: last, or next to
        // the one FOLLOWS / PRECEDES names (those after it move down one).
        let same: Vec<StoredTrigger> = self
            .triggers()?
            .into_iter()
            .filter(|t| {
                t.db.eq_ignore_ascii_case(&db)
                    && t.table.eq_ignore_ascii_case(&def.name)
                    && t.event == head.event
                    && t.timing == head.timing
            })
            .collect();
        let order = match &head.order {
            None => same.iter().map(|t| t.order).max().unwrap_or(0) + 1,
            Some((follows, other)) => {
                let o = same
                    .iter()
                    .find(|t| t.name.eq_ignore_ascii_case(other))
                    .ok_or_else(|| {
                        Error::new(
                            code::ER_REFERENCED_TRG_DOES_NOT_EXIST,
                            format!("Referenced trigger '{other}' for the given action time and event type does not exist."),
                        )
                    })?;
                o.order + i64::from(*follows)
            }
        };
        if !self.engine().with_state(|st| st.has_database(SYSTEM_DB)) {
            self.session.create_database(SYSTEM_DB, true)?;
        }
        if self.engine().table_def(SYSTEM_DB, TRIGGERS_TABLE).is_none() {
            self.session.create_table(triggers_def(), true)?;
        }
        let tdef = self.session.table_def(Some(SYSTEM_DB), TRIGGERS_TABLE)?;
        let now = self.session.now_us();
        let row = vec![
            Value::Text(db.clone()),
            Value::Text(head.name.clone()),
            Value::Text(def.name.clone()),
            Value::Text(head.event.name().into()),
            Value::Text(head.timing.name().into()),
            Value::Int(order),
            Value::Text(text.trim().to_string()),
            Value::Text(definer),
            Value::Int(now),
        ];
        let moved: Vec<(Vec<Value>, i64)> = same
            .iter()
            .filter(|t| t.order >= order)
            .map(|t| {
                (
                    vec![Value::Text(t.db.clone()), Value::Text(t.name.clone())],
                    t.order + 1,
                )
            })
            .collect();
        self.statement(|s| {
            for (key, order) in moved {
                s.session
                    .update_row(&tdef, &key, &[5], vec![Value::Int(order)], 1)?;
            }
            let cols: Vec<usize> = (0..row.len()).collect();
            s.session
                .insert(&tdef, &cols, vec![row], InsertMode::Insert)
        })?;
        Ok(Outcome::Ok)
    }

    /// `DROP TRIGGER [IF EXISTS] [db.]name`.
    pub(crate) fn drop_trigger(&mut self, text: &str) -> Result<Outcome> {
        let mut c = Cursor { text, pos: 0 };
        if !c.keywords(&["DROP", "TRIGGER"]) {
            return Err(syntax(text));
        }
        let if_exists = c.keywords(&["IF", "EXISTS"]);
        let (db, name) = c.name().ok_or_else(|| syntax(c.rest().trim()))?;
        if !c.rest().trim().trim_end_matches(';').trim().is_empty() {
            return Err(syntax(c.rest().trim()));
        }
        let db = match db {
            Some(d) => d,
            None => self.session.current_db()?,
        };
        let Some(t) = self.find_trigger(&db, &name)? else {
            if if_exists {
                self.session
                    .warn(code::ER_TRG_DOES_NOT_EXIST.number, "Trigger does not exist");
                return Ok(Outcome::Ok);
            }
            return Err(Error::new(
                code::ER_TRG_DOES_NOT_EXIST,
                "Trigger does not exist",
            ));
        };
        self.require_table(crate::Privs::TRIGGER, "TRIGGER", Some(&t.db), &t.table)?;
        self.remove_triggers(|x| {
            x.db.eq_ignore_ascii_case(&t.db) && x.name.eq_ignore_ascii_case(&t.name)
        })?;
        Ok(Outcome::Ok)
    }

    /// Removes the triggers `which` picks, the others of their table, event and timing
    /// keeping their order (one statement).
    fn remove_triggers(&mut self, which: impl Fn(&StoredTrigger) -> bool) -> Result<()> {
        let Some(tdef) = self.engine().table_def(SYSTEM_DB, TRIGGERS_TABLE) else {
            return Ok(());
        };
        let all = self.triggers()?;
        let gone: Vec<&StoredTrigger> = all.iter().filter(|t| which(t)).collect();
        if gone.is_empty() {
            return Ok(());
        }
        let key = |t: &StoredTrigger| vec![Value::Text(t.db.clone()), Value::Text(t.name.clone())];
        let mut renumbered = Vec::new();
        for t in all.iter().filter(|t| !which(t)) {
            let before = gone
                .iter()
                .filter(|g| {
                    g.db.eq_ignore_ascii_case(&t.db)
                        && g.table.eq_ignore_ascii_case(&t.table)
                        && g.event == t.event
                        && g.timing == t.timing
                        && g.order < t.order
                })
                .count() as i64;
            if before > 0 {
                renumbered.push((key(t), t.order - before));
            }
        }
        let keys: Vec<Vec<Value>> = gone.iter().map(|t| key(t)).collect();
        self.statement(|s| {
            for k in &keys {
                s.session.delete_row(&tdef, k)?;
            }
            for (k, order) in renumbered {
                s.session
                    .update_row(&tdef, &k, &[5], vec![Value::Int(order)], 1)?;
            }
            Ok(())
        })
    }

    /// Removes the triggers of table `db.table` (DROP TABLE).
    pub(crate) fn drop_triggers_of_table(&mut self, db: &str, table: &str) -> Result<()> {
        self.remove_triggers(|t| {
            t.db.eq_ignore_ascii_case(db) && t.table.eq_ignore_ascii_case(table)
        })
    }

    /// Whether table `db.table` has triggers.
    pub(crate) fn has_triggers(&self, db: &str, table: &str) -> Result<bool> {
        Ok(self
            .triggers()?
            .iter()
            .any(|t| t.db.eq_ignore_ascii_case(db) && t.table.eq_ignore_ascii_case(table)))
    }

    /// RENAME TABLE within a database: the table's triggers follow it.
    pub(crate) fn rename_triggers_of_table(
        &mut self,
        db: &str,
        from: &str,
        to: &str,
    ) -> Result<()> {
        let Some(tdef) = self.engine().table_def(SYSTEM_DB, TRIGGERS_TABLE) else {
            return Ok(());
        };
        let moved: Vec<(Vec<Value>, String)> = self
            .triggers()?
            .into_iter()
            .filter(|t| t.db.eq_ignore_ascii_case(db) && t.table.eq_ignore_ascii_case(from))
            .map(|t| {
                let definition = with_table(&t.definition, to);
                (vec![Value::Text(t.db), Value::Text(t.name)], definition)
            })
            .collect();
        if moved.is_empty() {
            return Ok(());
        }
        let definition_col = tdef.column_index("definition");
        self.statement(|s| {
            for (k, definition) in &moved {
                // The table's name, and the ON clause of its text (SHOW CREATE TRIGGER).
                let (cols, vals) = match definition_col {
                    Some(c) => (
                        vec![2, c],
                        vec![Value::Text(to.to_string()), Value::Text(definition.clone())],
                    ),
                    None => (vec![2], vec![Value::Text(to.to_string())]),
                };
                s.session.update_row(&tdef, k, &cols, vals, 1)?;
            }
            Ok(())
        })
    }

    /// The triggers this session may see: those on tables it has the TRIGGER privilege on.
    pub(crate) fn visible_triggers(&self) -> Result<Vec<StoredTrigger>> {
        Ok(self
            .triggers()?
            .into_iter()
            .filter(|t| self.may_see_triggers_of(&t.db, &t.table))
            .collect())
    }

    /// `SHOW TRIGGERS [FROM | IN db] [LIKE 'table pattern' | WHERE expr]`.
    pub(crate) fn show_triggers(&self, text: &str) -> Result<Outcome> {
        let mut c = Cursor { text, pos: 0 };
        if !c.keywords(&["SHOW", "TRIGGERS"]) {
            return Err(syntax(text));
        }
        let db = if c.keywords(&["FROM"]) || c.keywords(&["IN"]) {
            Some(c.word().ok_or_else(|| syntax(c.rest().trim()))?)
        } else {
            None
        };
        let db = self.listed_database_of(db.as_deref())?;
        let rest = c.rest().trim().trim_end_matches(';').trim();
        let columns = [
            "Trigger",
            "Event",
            "Table",
            "Statement",
            "Timing",
            "Created",
            "sql_mode",
            "Definer",
            "character_set_client",
            "collation_connection",
            "Database Collation",
        ];
        let rows: Vec<Vec<Value>> = self
            .visible_triggers()?
            .into_iter()
            .filter(|t| t.db.eq_ignore_ascii_case(&db))
            .map(|t| {
                vec![
                    Value::Text(t.name.clone()),
                    Value::Text(t.event.name().into()),
                    Value::Text(t.table.clone()),
                    Value::Text(t.body()),
                    Value::Text(t.timing.name().into()),
                    created(t.created_us),
                    Value::Text(crate::expr::SQL_MODE.into()),
                    Value::Text(t.definer.clone()),
                    Value::Text("utf8mb4".into()),
                    Value::Text("utf8mb4_0900_ai_ci".into()),
                    Value::Text("utf8mb4_0900_ai_ci".into()),
                ]
            })
            .collect();
        let shown = if rest.is_empty() {
            self.show_result(&columns, rows, None)?
        } else if let Some(p) = strip_keyword(rest, "LIKE") {
            // LIKE matches the table, not the trigger (as in MySQL).
            let (pattern, _) = crate::parse::lexer::take_string(p).ok_or_else(|| syntax(rest))?;
            let rows = rows
                .into_iter()
                .filter(|r| crate::expr::like(&text_of(&r[2]), &pattern, '\\'))
                .collect();
            self.show_result(&columns, rows, None)?
        } else if let Some(w) = strip_keyword(rest, "WHERE") {
            let e = sqlparser::parser::Parser::new(&sqlparser::dialect::MySqlDialect {})
                .try_with_sql(w)
                .and_then(|mut p| p.parse_expr())
                .map_err(syntax)?;
            let filter = crate::parse::show::ShowFilter::Where(Box::new(e));
            self.show_result(&columns, rows, Some(&filter))?
        } else {
            return Err(syntax(rest));
        };
        let Outcome::Rows(mut rs) = shown else {
            return Ok(shown);
        };
        rs.types[5] = Some(CREATED_TYPE);
        rs.tz = self.session.vars.tz_offset;
        Ok(Outcome::Rows(rs))
    }

    /// `SHOW CREATE TRIGGER [db.]name`.
    pub(crate) fn show_create_trigger(&self, text: &str) -> Result<Outcome> {
        let mut c = Cursor { text, pos: 0 };
        if !c.keywords(&["SHOW", "CREATE", "TRIGGER"]) {
            return Err(syntax(text));
        }
        let (db, name) = c.name().ok_or_else(|| syntax(c.rest().trim()))?;
        let db = match db {
            Some(d) => d,
            None => self.session.current_db()?,
        };
        let t = self
            .find_trigger(&db, &name)?
            .ok_or_else(|| Error::new(code::ER_TRG_DOES_NOT_EXIST, "Trigger does not exist"))?;
        self.require_table(crate::Privs::TRIGGER, "TRIGGER", Some(&t.db), &t.table)?;
        Ok(Outcome::Rows(crate::ResultSet {
            columns: [
                "Trigger",
                "sql_mode",
                "SQL Original Statement",
                "character_set_client",
                "collation_connection",
                "Database Collation",
                "Created",
            ]
            .iter()
            .map(|c| c.to_string())
            .collect(),
            types: vec![None, None, None, None, None, None, Some(CREATED_TYPE)],
            rows: vec![vec![
                Value::Text(t.name.clone()),
                Value::Text(crate::expr::SQL_MODE.into()),
                Value::Text(t.original_statement()),
                Value::Text("utf8mb4".into()),
                Value::Text("utf8mb4_0900_ai_ci".into()),
                Value::Text("utf8mb4_0900_ai_ci".into()),
                created(t.created_us),
            ]],
            tz: self.session.vars.tz_offset,
        }))
    }

    /// information_schema.TRIGGERS, in MySQL 8's columns.
    pub(crate) fn triggers_rows(&self) -> Result<Vec<Vec<Value>>> {
        let t = |s: &str| Value::Text(s.to_string());
        Ok(self
            .visible_triggers()?
            .into_iter()
            .map(|tr| {
                vec![
                    t("def"),
                    t(&tr.db),
                    t(&tr.name),
                    t(tr.event.name()),
                    t("def"),
                    t(&tr.db),
                    t(&tr.table),
                    Value::UInt(u64::try_from(tr.order).unwrap_or(0)),
                    Value::Null,
                    Value::Text(tr.body()),
                    t("ROW"),
                    t(tr.timing.name()),
                    Value::Null,
                    Value::Null,
                    t("OLD"),
                    t("NEW"),
                    created(tr.created_us),
                    t("STRICT_TRANS_TABLES"),
                    t(&tr.definer),
                    t("utf8mb4"),
                    t("utf8mb4_0900_ai_ci"),
                    t("utf8mb4_0900_ai_ci"),
                ]
            })
            .collect())
    }
}

/// The type of a trigger's creation time (SHOW TRIGGERS, SHOW CREATE TRIGGER).
const CREATED_TYPE: ColumnType = ColumnType::Timestamp { fsp: 2 };

/// A trigger's creation time as MySQL shows it: a TIMESTAMP(2).
fn created(us: i64) -> Value {
    Value::Timestamp(us.div_euclid(10_000) * 10_000)
}

/// `rest` after its leading keyword `kw`, if it starts with it.
fn strip_keyword<'a>(rest: &'a str, kw: &str) -> Option<&'a str> {
    let head = rest.get(..kw.len())?;
    let after = &rest[kw.len()..];
    (head.eq_ignore_ascii_case(kw) && after.starts_with(char::is_whitespace))
        .then(|| after.trim_start())
}

/// The first word of a statement of a trigger's body, for tests.
#[cfg(test)]
fn body_words(body: &str) -> Vec<String> {
    parse_body(body)
        .map(|steps| {
            steps
                .iter()
                .map(|s| match s {
                    Step::Sql(t) => crate::objects::routines::first_word(t),
                    other => format!("{other:?}")
                        .split([' ', '{'])
                        .next()
                        .unwrap_or("")
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_with_and_without_the_optional_clauses() {
        let h = parse_head(
            "CREATE DEFINER=`root`@`localhost` TRIGGER IF NOT EXISTS test.trg BEFORE INSERT ON test.t FOR EACH ROW SET NEW.a = 1",
        )
        .expect("parse");
        assert_eq!(h.definer.as_deref(), Some("root@localhost"));
        assert!(h.if_not_exists);
        assert_eq!((h.db.as_deref(), h.name.as_str()), (Some("test"), "trg"));
        assert_eq!((h.timing, h.event), (Timing::Before, TrgEvent::Insert));
        assert_eq!(
            (h.table_db.as_deref(), h.table.as_str()),
            (Some("test"), "t")
        );
        assert_eq!(h.body, "SET NEW.a = 1");
        assert_eq!(h.order, None);
        let h = parse_head(
            "create trigger `a b` after delete on t for each row follows other begin set @x = 1; end",
        )
        .expect("parse");
        assert_eq!(h.name, "a b");
        assert_eq!(h.order, Some((true, "other".into())));
        assert_eq!(h.body, "begin set @x = 1; end");
        assert!(parse_head("CREATE TRIGGER t BEFORE SELECT ON t FOR EACH ROW SET @x = 1").is_err());
        assert!(parse_head("CREATE TRIGGER t BEFORE INSERT ON t SET @x = 1").is_err());
        assert!(is_create_trigger("CREATE DEFINER = 'u'@'%' TRIGGER x"));
        assert!(!is_create_trigger(
            "CREATE DEFINER=u@h PROCEDURE p() BEGIN END"
        ));
    }

    #[test]
    fn the_original_statement_names_the_definer() {
        let t = StoredTrigger {
            db: "test".into(),
            name: "trg".into(),
            table: "t".into(),
            event: TrgEvent::Insert,
            timing: Timing::Before,
            order: 1,
            definition: "CREATE TRIGGER trg BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1".into(),
            definer: "root@localhost".into(),
            created_us: 0,
        };
        assert_eq!(
            t.original_statement(),
            "CREATE DEFINER=`root`@`localhost` TRIGGER trg BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1"
        );
        assert_eq!(t.body(), "SET NEW.a = 1");
    }

    #[test]
    fn bodies_are_checked_as_mysql_checks_them() {
        let check = |body: &str, event, timing| {
            check_body(&parse_body(body).expect("parse"), event, timing).map_err(|e| e.code)
        };
        use {Timing::*, TrgEvent::*};
        assert_eq!(check("SET NEW.a = OLD.a", Update, Before), Ok(()));
        assert_eq!(check("SET @x = OLD.a", Insert, After), Err(1363));
        assert_eq!(
            check("INSERT INTO log VALUES (NEW.a)", Delete, After),
            Err(1363)
        );
        assert_eq!(check("SET NEW.a = 1", Insert, After), Err(1362));
        assert_eq!(check("SET OLD.a = 1", Update, Before), Err(1362));
        assert_eq!(check("SET NEW.a = 1", Delete, Before), Err(1363));
        assert_eq!(check("SELECT 1", Insert, Before), Err(1415));
        assert_eq!(check("BEGIN COMMIT; END", Insert, Before), Err(1422));
        assert_eq!(check("BEGIN DROP TABLE t; END", Insert, Before), Err(1422));
        assert_eq!(check("SET autocommit = 0", Insert, Before), Err(1445));
        assert_eq!(
            check("SET @@session.autocommit = 0", Insert, Before),
            Err(1445)
        );
        assert!(sets_autocommit("SET SESSION autocommit = 1"));
        assert!(!sets_autocommit("SET @note = 'autocommit', @n = 1"));
        assert_eq!(
            check(
                "IF NEW.a < 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no'; END IF",
                Insert,
                Before
            ),
            Ok(())
        );
        assert_eq!(
            body_words("BEGIN DECLARE n INT; SET n = 1; UPDATE t SET a = n; END"),
            ["Declare", "Set", "UPDATE"]
        );
    }

    #[test]
    fn row_references_are_found_outside_strings() {
        assert_eq!(
            row_references("INSERT INTO log VALUES (NEW.a, 'OLD.b', old.`c`, t.new.d)"),
            vec![
                ("NEW".to_string(), "a".to_string()),
                ("OLD".into(), "c".into())
            ]
        );
    }

    fn code(s: &mut SqlSession, sql: &str) -> u16 {
        match s.execute(sql) {
            Err(e) => e.code,
            Ok(o) => panic!("{sql} succeeded: {o:?}"),
        }
    }

    fn ok(s: &mut SqlSession, sql: &str) {
        s.execute(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    const RING: &str = "CREATE TABLE rb (id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(64), val VARCHAR(20), PRIMARY KEY (id, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'";

    #[test]
    fn the_errors_are_mysqls() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = crate::test_session(
            dir.path(),
            &[
                "CREATE TABLE t (id INT PRIMARY KEY, a INT)",
                "CREATE VIEW v AS SELECT * FROM t",
                "CREATE DATABASE e",
                "CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
            ],
        );
        let trg = |body: &str| format!("CREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW {body}");
        assert_eq!(
            code(
                &mut s,
                "CREATE TRIGGER t_bi AFTER UPDATE ON t FOR EACH ROW SET @a = 1"
            ),
            1359
        );
        assert_eq!(code(&mut s, "DROP TRIGGER nope"), 1360);
        assert_eq!(code(&mut s, "SHOW CREATE TRIGGER nope"), 1360);
        assert_eq!(
            code(
                &mut s,
                "CREATE TRIGGER x BEFORE INSERT ON v FOR EACH ROW SET @a = 1"
            ),
            1361
        );
        assert_eq!(
            code(
                &mut s,
                "CREATE TRIGGER x AFTER INSERT ON t FOR EACH ROW SET NEW.a = 1"
            ),
            1362
        );
        assert_eq!(
            code(
                &mut s,
                "CREATE TRIGGER x BEFORE UPDATE ON t FOR EACH ROW SET OLD.a = 1"
            ),
            1362
        );
        assert_eq!(code(&mut s, &trg("SET @a = OLD.a")), 1363);
        assert_eq!(
            code(
                &mut s,
                "CREATE TRIGGER x AFTER DELETE ON t FOR EACH ROW SET @a = NEW.a"
            ),
            1363
        );
        assert_eq!(code(&mut s, &trg("SELECT 1")), 1415);
        assert_eq!(code(&mut s, &trg("BEGIN COMMIT; END")), 1422);
        assert_eq!(code(&mut s, &trg("PREPARE p FROM 'SELECT 1'")), 1336);
        assert_eq!(
            code(
                &mut s,
                "CREATE TRIGGER e.x BEFORE INSERT ON d.t FOR EACH ROW SET @a = 1"
            ),
            1435
        );
        assert_eq!(
            code(
                &mut s,
                "CREATE TRIGGER x BEFORE INSERT ON nope FOR EACH ROW SET @a = 1"
            ),
            1146
        );
        assert_eq!(
            code(
                &mut s,
                "CREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW FOLLOWS nope SET @a = 1"
            ),
            3011
        );
        assert_eq!(code(&mut s, &trg("SIGNAL SQLSTATE '00000'")), 1407);
        let e = s.execute(&trg("SET NEW.nosuch = 1")).expect_err("1054");
        assert_eq!(
            (e.code, e.message.as_str()),
            (1054, "Unknown column 'nosuch' in 'NEW'")
        );
        assert_eq!(
            code(&mut s, &trg("INSERT INTO t VALUES (NEW.id, NEW.b)")),
            1054
        );
        assert_eq!(
            code(&mut s, "CREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW"),
            1064
        );
        assert_eq!(code(&mut s, "RENAME TABLE t TO e.t"), 1435);
        ok(&mut s, &trg("BEGIN IF NEW.id < 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'negative', MYSQL_ERRNO = 1999; END IF; END"));
        let e = s
            .execute("INSERT INTO t VALUES (-1, 0)")
            .expect_err("signalled");
        assert_eq!(
            (e.code, e.sqlstate, e.message.as_str()),
            (1999, "45000", "negative")
        );
        // A procedure a trigger calls may not commit either (checked as it runs).
        ok(&mut s, "CREATE TABLE w (id INT PRIMARY KEY)");
        ok(&mut s, "INSERT INTO w VALUES (1)");
        ok(
            &mut s,
            "CREATE PROCEDURE mk() BEGIN CREATE TABLE made (id INT PRIMARY KEY); END",
        );
        ok(
            &mut s,
            "CREATE TRIGGER w_au AFTER UPDATE ON w FOR EACH ROW CALL mk()",
        );
        assert_eq!(code(&mut s, "UPDATE w SET id = 2"), 1422);
        assert_eq!(code(&mut s, "SELECT * FROM made"), 1146);
        ok(&mut s, "CREATE PROCEDURE sel() BEGIN SELECT 1; END");
        ok(
            &mut s,
            "CREATE TRIGGER w_bu BEFORE UPDATE ON w FOR EACH ROW CALL sel()",
        );
        assert_eq!(code(&mut s, "UPDATE w SET id = 2"), 1312);
        ok(
            &mut s,
            "CREATE TRIGGER self AFTER INSERT ON t FOR EACH ROW DELETE FROM t WHERE id = NEW.id",
        );
        assert_eq!(code(&mut s, "INSERT INTO t VALUES (1, 0)"), 1442);
        assert_eq!(
            crate::test_rows(&mut s, "SELECT COUNT(*) FROM t"),
            vec![vec![Some("0".into())]]
        );
    }

    #[test]
    fn a_failing_trigger_undoes_its_statement_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = crate::test_session(
            dir.path(),
            &[
                "CREATE TABLE t (id INT PRIMARY KEY)",
                "CREATE TABLE log (id INT PRIMARY KEY)",
                "CREATE TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW INSERT INTO log VALUES (NEW.id)",
                "INSERT INTO log VALUES (3)",
            ],
        );
        ok(&mut s, "BEGIN");
        ok(&mut s, "INSERT INTO t VALUES (1), (2)");
        // Row 3's trigger hits log's key: the whole statement goes, the first one stays.
        assert_eq!(code(&mut s, "INSERT INTO t VALUES (4), (3)"), 1062);
        ok(&mut s, "COMMIT");
        assert_eq!(
            crate::test_rows(&mut s, "SELECT GROUP_CONCAT(id) FROM t"),
            vec![vec![Some("1,2".into())]]
        );
        assert_eq!(
            crate::test_rows(&mut s, "SELECT GROUP_CONCAT(id) FROM log"),
            vec![vec![Some("1,2,3".into())]]
        );
    }

    #[test]
    fn triggers_are_rows_that_survive_a_restart_and_go_with_their_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (_engine, mut s) = crate::test_session(
                dir.path(),
                &[
                    "CREATE TABLE t (id INT PRIMARY KEY, a INT)",
                    "CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW SET NEW.a = NEW.id * 2",
                ],
            );
            assert_eq!(
                crate::test_rows(
                    &mut s,
                    "SELECT name, table_name, event, timing FROM mysql.ringrep_triggers"
                ),
                vec![vec![
                    Some("t_bi".into()),
                    Some("t".into()),
                    Some("INSERT".into()),
                    Some("BEFORE".into())
                ]]
            );
        }
        let (engine, _) =
            ringrep_engine::Engine::open(dir.path(), ringrep_engine::EngineConfig::new(1))
                .expect("reopen");
        let mut s = SqlSession::new(&engine);
        ok(&mut s, "USE d");
        ok(&mut s, "INSERT INTO t (id) VALUES (21)");
        assert_eq!(
            crate::test_rows(&mut s, "SELECT a FROM t"),
            vec![vec![Some("42".into())]]
        );
        ok(&mut s, "DROP TABLE t");
        ok(&mut s, "CREATE TABLE t (id INT PRIMARY KEY, a INT)");
        ok(&mut s, "INSERT INTO t (id) VALUES (21)");
        assert_eq!(
            crate::test_rows(&mut s, "SELECT a FROM t"),
            vec![vec![None]]
        );
        ok(
            &mut s,
            "CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1",
        );
        ok(&mut s, "DROP DATABASE d");
        assert_eq!(
            crate::test_rows(&mut s, "SELECT COUNT(*) FROM information_schema.TRIGGERS"),
            vec![vec![Some("0".into())]]
        );
    }

    #[test]
    fn ring_tables_take_insert_triggers_and_refuse_deletes_with_delete_triggers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = crate::test_session(
            dir.path(),
            &[
                RING,
                "CREATE TRIGGER rb_bi BEFORE INSERT ON rb FOR EACH ROW SET @b = CONCAT(IFNULL(@b, ''), NEW.ring_idx), NEW.val = UPPER(NEW.val)",
                "CREATE TRIGGER rb_ai AFTER INSERT ON rb FOR EACH ROW SET @a = CONCAT(IFNULL(@a, ''), NEW.ring_idx)",
                "INSERT INTO rb (id, val) VALUES (1, 'a'), (1, 'b'), (1, 'c'), (1, 'd')",
            ],
        );
        assert_eq!(
            crate::test_rows(&mut s, "SELECT @b, @a"),
            vec![vec![Some("0000".into()), Some("1231".into())]]
        );
        assert_eq!(
            crate::test_rows(&mut s, "SELECT GROUP_CONCAT(val ORDER BY ring_idx) FROM rb"),
            crate::test_rows(&mut s, "SELECT 'D,B,C'")
        );
        ok(
            &mut s,
            "CREATE TRIGGER rb_bd BEFORE DELETE ON rb FOR EACH ROW SET @d = 1",
        );
        let e = s
            .execute("DELETE FROM rb WHERE id = 1")
            .expect_err("refused");
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                1031,
                "Table storage engine for 'rb' doesn't have this option"
            )
        );
        assert_eq!(
            crate::test_rows(&mut s, "SELECT @d, COUNT(*) FROM rb"),
            vec![vec![None, Some("3".into())]]
        );
        ok(&mut s, "DROP TRIGGER rb_bd");
        ok(&mut s, "DELETE FROM rb WHERE id = 1");
        // Setting the slot or the meta column fails as an INSERT naming it does.
        ok(
            &mut s,
            "CREATE TRIGGER rb_slot BEFORE INSERT ON rb FOR EACH ROW SET NEW.ring_meta = X'00'",
        );
        let named = s
            .execute("INSERT INTO rb (id, ring_meta) VALUES (2, X'00')")
            .expect_err("named");
        let set = s
            .execute("INSERT INTO rb (id) VALUES (2)")
            .expect_err("set");
        assert_eq!((set.code, set.message), (named.code, named.message));
        ok(&mut s, "DROP TRIGGER rb_slot");
        ok(
            &mut s,
            "CREATE TRIGGER rb_key BEFORE UPDATE ON rb FOR EACH ROW SET NEW.id = 9",
        );
        ok(&mut s, "INSERT INTO rb (id) VALUES (2)");
        assert_eq!(code(&mut s, "UPDATE rb SET val = 'x' WHERE id = 2"), 1031);
    }
}
