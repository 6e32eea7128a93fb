//! Prepared statements run with their parameters. INSERT, UPDATE, DELETE and SELECT are parsed
//! once per distinct text and the values bound into a copy of the parsed statement; writing the
//! values into the text and parsing it again on every execution was an eighth of a single
//! client's CPU (BENCHMARKS.md), and most of a replica's point read. A SELECT's result columns
//! are named from the text as prepared, so a parameter's column is `?`, as in MySQL. Anything
//! else runs as the text with the values written into it.

use std::ops::ControlFlow;
use std::sync::Arc;

use binlog_format::Value;
use sqlparser::ast::{visit_expressions, visit_expressions_mut, Expr, Statement};

use crate::parse::prepared::{BriefRead, InsertPlan, Parsed, Template};
use crate::parse::statement::{normalized, parse_one};
use crate::parse::tree::{is_placeholder, literal_expr};
use crate::{parse::lexer, Outcome, SqlSession};
use ringrep_engine::error::Result;

/// Distinct statement texts kept parsed per session; more than this starts the cache afresh.
const CACHED_TEXTS: usize = 256;

impl SqlSession {
    /// Runs `sql`, whose `?` placeholders take `values` in order (a missing value is NULL).
    pub fn execute_bound(&mut self, sql: &str, values: &[Value]) -> Result<Outcome> {
        self.with_diagnostics(sql, |s| {
            s.retrying_taken_back(|s| s.execute_bound_once(sql, values))
        })
    }

    /// Whether `sql` (a prepared statement's text when `bound`, else a query's) runs in a
    /// short, bounded time unless it must wait for a row lock or read many rows: an INSERT or
    /// REPLACE of listed rows (no SELECT in it), a transaction's BEGIN, COMMIT or ROLLBACK,
    /// or a prepared SELECT of one stored table with nothing in it that may run long
    /// (`bound::brief_read`). The server runs such a statement on its connection's task, with
    /// [`Session::lock_wait`] off and a [`Session::read_budget`], and any other (or one that
    /// fails for either) on a thread of its own (docs/architecture.md, "The statement path").
    ///
    /// [`Session::lock_wait`]: ringrep_engine::Session::lock_wait
    /// [`Session::read_budget`]: ringrep_engine::Session::read_budget
    pub fn runs_briefly(&mut self, sql: &str, bound: bool) -> bool {
        if bound {
            let parsed = self.parsed_text(sql);
            if parsed.template.as_ref().is_some_and(|t| t.lists_its_rows) {
                return true;
            }
            return parsed.read.is_some_and(|read| {
                // A view or a table of information_schema is no stored table: its rows are
                // made by a query or from the catalog, outside any read budget.
                self.session
                    .shared_table_def(read.db.as_deref(), &read.table)
                    .is_ok()
            });
        }
        let text = sql.trim_start();
        let first = text
            .split(|c: char| c.is_whitespace() || c == ';')
            .next()
            .unwrap_or("");
        let is = |w: &str| first.eq_ignore_ascii_case(w);
        if is("INSERT") || is("REPLACE") {
            // A SELECT anywhere (a source query, a subquery) may read without bound.
            return !text
                .as_bytes()
                .windows(6)
                .any(|w| w.eq_ignore_ascii_case(b"SELECT"));
        }
        is("BEGIN") || is("COMMIT") || is("ROLLBACK")
    }

    /// What prepared text `sql` is ([`Parsed`]), parsed now if this session has not yet.
    fn parsed_text(&mut self, sql: &str) -> Parsed {
        if let Some(p) = self.parsed.get(sql) {
            return p.clone();
        }
        let p = parsed(sql);
        if self.parsed.len() >= CACHED_TEXTS {
            self.parsed.clear();
        }
        self.parsed.insert(sql.to_string(), p.clone());
        p
    }

    /// [`SqlSession::execute_bound`] inside a statement's diagnostics (SQL's EXECUTE).
    pub(crate) fn execute_bound_once(&mut self, sql: &str, values: &[Value]) -> Result<Outcome> {
        let Some(template) = self.parsed_text(sql).template else {
            return self.execute(&lexer::bind_placeholders(sql, values));
        };
        self.forget_subqueries();
        let planned = match &template.insert {
            Some(plan) => {
                self.authorize(&template.stmt)?;
                self.check_table_locks(&template.stmt)?;
                self.insert_planned(plan, values)
            }
            None => None,
        };
        let r = match planned {
            Some(r) => r,
            None => self.dispatch(bind(&template, values)?, &template.text),
        };
        self.note_generated_id(&r);
        r
    }
}

/// Whether `stmt` is an INSERT or REPLACE whose rows are listed in it (VALUES with no
/// subquery).
fn lists_its_rows(stmt: &Statement) -> bool {
    let Statement::Insert(insert) = stmt else {
        return false;
    };
    let Some(source) = &insert.source else {
        return false;
    };
    if !matches!(*source.body, sqlparser::ast::SetExpr::Values(_)) {
        return false;
    }
    // The VALUES list is the statement's one query; any other is a subquery.
    queries_in(stmt) == 1
}

/// Functions a brief SELECT may call: aggregates and a few cheap ones of a row's values. Any
/// other may sleep, take a lock, build a huge value or be a stored function (which may run
/// anything), so a SELECT that calls one is not brief.
const BRIEF_FUNCTIONS: &[&str] = &[
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "COALESCE",
    "IFNULL",
    "LENGTH",
    "CHAR_LENGTH",
];

/// The table `stmt` (the text `sql`) reads when it is a SELECT that runs briefly, given that
/// the table is a stored one and each read of it is held to a row budget: one SELECT (no
/// UNION, WITH or subquery) of one table (no join, no table function), no locking clause and
/// no INTO, no user variable assigned, no pattern match (LIKE, REGEXP), and no function but
/// [`BRIEF_FUNCTIONS`].
fn brief_read(stmt: &Statement, sql: &str) -> Option<BriefRead> {
    use sqlparser::ast::{SetExpr, TableFactor};
    let Statement::Query(q) = stmt else {
        return None;
    };
    let SetExpr::Select(select) = &*q.body else {
        return None;
    };
    if q.with.is_some()
        || !q.locks.is_empty()
        || q.for_clause.is_some()
        || select.into.is_some()
        || select.from.len() != 1
        || !select.from[0].joins.is_empty()
        || sql.contains(":=")
        || queries_in(stmt) != 1
    {
        return None;
    }
    let TableFactor::Table {
        name, args: None, ..
    } = &select.from[0].relation
    else {
        return None;
    };
    let mut long = false;
    let _ = visit_expressions(stmt, |e| {
        long = match e {
            Expr::Function(f) => {
                f.name.0.len() != 1
                    || !BRIEF_FUNCTIONS
                        .iter()
                        .any(|b| f.name.to_string().eq_ignore_ascii_case(b))
            }
            // A pattern match may take time exponential in the pattern on one row.
            Expr::Like { .. }
            | Expr::ILike { .. }
            | Expr::SimilarTo { .. }
            | Expr::RLike { .. } => true,
            _ => false,
        };
        if long {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    if long {
        return None;
    }
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(|i| i.value.clone()))
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [table] => Some(BriefRead {
            db: None,
            table: table.clone(),
        }),
        [db, table] => Some(BriefRead {
            db: Some(db.clone()),
            table: table.clone(),
        }),
        _ => None,
    }
}

/// How many queries `stmt` holds (itself included, when it is one).
fn queries_in(stmt: &Statement) -> usize {
    struct Queries(usize);
    impl sqlparser::ast::Visitor for Queries {
        type Break = ();
        fn pre_visit_query(&mut self, _: &sqlparser::ast::Query) -> ControlFlow<()> {
            self.0 += 1;
            ControlFlow::Continue(())
        }
    }
    let mut queries = Queries(0);
    let _ = sqlparser::ast::Visit::visit(stmt, &mut queries);
    queries.0
}

/// [`Parsed`] of `sql`, from one parse.
fn parsed(sql: &str) -> Parsed {
    let text = normalized(sql);
    let Ok(stmt) = parse_one(&text) else {
        return Parsed::default();
    };
    Parsed {
        read: brief_read(&stmt, sql).map(Arc::new),
        template: template_of(stmt, &text),
    }
}

/// The template of `sql` (tests).
#[cfg(test)]
pub(crate) fn template(sql: &str) -> Option<Arc<Template>> {
    parsed(sql).template
}

/// The template of `stmt` (parsed from `text`) when it is an INSERT, UPDATE, DELETE or
/// SELECT whose every placeholder is a value in the parsed statement; `None` sends it down
/// the text path.
fn template_of(stmt: Statement, text: &str) -> Option<Arc<Template>> {
    if !matches!(
        stmt,
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Query(_)
    ) {
        return None;
    }
    let positions = placeholder_positions(&stmt);
    if positions.len() != lexer::count_placeholders(text) {
        return None;
    }
    let mut by_text: Vec<usize> = (0..positions.len()).collect();
    by_text.sort_by_key(|&i| positions[i]);
    let mut parameter = vec![0; positions.len()];
    for (r, &i) in by_text.iter().enumerate() {
        parameter[i] = r;
    }
    let insert = InsertPlan::of(&stmt, &parameter);
    Some(Arc::new(Template {
        lists_its_rows: lists_its_rows(&stmt),
        text: text.to_string(),
        stmt,
        parameter,
        insert,
    }))
}

/// (line, column) of each placeholder, in the order the visitor meets them.
fn placeholder_positions(stmt: &Statement) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let _ = visit_expressions(stmt, |e| {
        if let Expr::Value(v) = e {
            if is_placeholder(e) {
                out.push((v.span.start.line, v.span.start.column));
            }
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// The template's statement with its placeholders replaced by `values`.
fn bind(template: &Template, values: &[Value]) -> Result<Statement> {
    let mut stmt = template.stmt.clone();
    let mut visited = 0;
    let mut failed = None;
    let _ = visit_expressions_mut(&mut stmt, |e| {
        if is_placeholder(e) {
            let value = template
                .parameter
                .get(visited)
                .and_then(|&r| values.get(r))
                .unwrap_or(&Value::Null);
            visited += 1;
            let at = match e {
                Expr::Value(v) => v.span,
                _ => sqlparser::tokenizer::Span::empty(),
            };
            match literal_expr(value) {
                Ok(mut x) => {
                    // The value stands where the placeholder was written: a column named
                    // from the text is named `?`, as MySQL names it.
                    let _ = visit_expressions_mut(&mut x, |inner| {
                        if let Expr::Value(v) = inner {
                            v.span = at;
                        }
                        ControlFlow::<()>::Continue(())
                    });
                    *e = x;
                }
                Err(err) => {
                    failed = Some(err);
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(stmt),
    }
}

/// Parameter values of every kind, for the tests that compare a fast path with the parser's.
#[cfg(test)]
pub(crate) fn sample_parameters() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Int(0),
        Value::Int(42),
        Value::Int(i64::MAX),
        Value::Int(-7),
        Value::UInt(5),
        Value::UInt(u64::MAX),
        Value::Double(2.5),
        Value::Bytes(vec![0, 1, 0xff]),
        Value::Text(String::new()),
        Value::Text("plain".into()),
        Value::Text("it's a \\ back\\slash and \"quotes\"".into()),
        Value::Text("ünïcödé ✓".into()),
        Value::Text("line\nbreak\ttab %_".into()),
        Value::Text("x".repeat(150)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::tree::parsed_literal_expr;

    #[test]
    fn literals_match_the_parser() {
        for v in sample_parameters() {
            assert_eq!(
                literal_expr(&v).expect("fast"),
                parsed_literal_expr(&v).expect("parsed"),
                "{v:?}"
            );
        }
    }
    use ringrep_engine::{Engine, EngineConfig};

    fn engine(dir: &std::path::Path) -> Engine {
        let mut cfg = EngineConfig::new(1);
        cfg.sync = binlog_format::SyncPolicy::Never;
        Engine::open(dir, cfg).expect("open").0
    }

    fn rows(s: &mut SqlSession, sql: &str) -> Vec<Vec<Option<String>>> {
        match s.execute(sql).expect("select") {
            Outcome::Rows(r) => r.text_rows(),
            other => panic!("not rows: {other:?}"),
        }
    }

    /// Bound execution and the text path give the same rows for the same statements, values
    /// of every kind included, and placeholders take values in text order.
    #[test]
    fn bound_and_text_paths_agree() {
        let (a, b) = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        let (ea, eb) = (engine(a.path()), engine(b.path()));
        let (mut bound, mut text) = (SqlSession::new(&ea), SqlSession::new(&eb));
        let create = "CREATE TABLE test.t (k INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, ring_meta VARBINARY(32), s VARCHAR(40), d DOUBLE, b VARBINARY(8), PRIMARY KEY (k, ring_idx)) COMMENT='NDB_TABLE=MAX_ROWS_PER_PK=3'";
        bound.execute(create).expect("create");
        text.execute(create).expect("create");
        let steps: Vec<(&str, Vec<Value>)> = vec![
            (
                "INSERT INTO test.t (k, s, d, b) VALUES (?, ?, ?, ?)",
                vec![
                    Value::Int(-7),
                    Value::Text("it's \"quoted\" \\ here".into()),
                    Value::Double(2.5),
                    Value::Bytes(vec![0, 1, 0xff]),
                ],
            ),
            (
                "INSERT INTO test.t (k, s) VALUES (?, ?), (?, ?)",
                vec![
                    Value::Int(1),
                    Value::Null,
                    Value::Int(1),
                    Value::Text("x".into()),
                ],
            ),
            (
                "UPDATE test.t SET s = ? WHERE k = ? AND d IS NULL",
                vec![Value::Text("set".into()), Value::Int(1)],
            ),
            (
                "SELECT k, s, d, HEX(b) FROM test.t WHERE k = ? AND s = ? AND b = ?",
                vec![
                    Value::Int(-7),
                    Value::Text("it's \"quoted\" \\ here".into()),
                    Value::Bytes(vec![0, 1, 0xff]),
                ],
            ),
            (
                "SELECT COUNT(*) FROM test.t WHERE k = ? AND d = ?",
                vec![Value::Int(-7), Value::Double(2.5)],
            ),
            (
                "SELECT k, s FROM test.t WHERE k IN (?, ?) ORDER BY k, ring_idx LIMIT ?",
                vec![Value::Int(1), Value::Int(-7), Value::Int(2)],
            ),
            (
                "SELECT k FROM test.t WHERE s IS NULL AND k = ?",
                vec![Value::Null],
            ),
            ("DELETE FROM test.t WHERE k = ?", vec![Value::Int(-7)]),
            (
                "INSERT INTO test.t (k, s) VALUES (?, ?)",
                vec![Value::Int(2)],
            ),
        ];
        for (sql, values) in &steps {
            assert!(template(sql).is_some(), "{sql} takes the bound path");
            let got = bound.execute_bound(sql, values).map_err(|e| e.to_string());
            let want = text
                .execute(&lexer::bind_placeholders(sql, values))
                .map_err(|e| e.to_string());
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{sql}");
        }
        let all = "SELECT k, ring_idx, s, d, HEX(b) FROM test.t ORDER BY k, ring_idx";
        assert_eq!(rows(&mut bound, all), rows(&mut text, all));
        assert_eq!(
            rows(
                &mut bound,
                "SELECT s FROM test.t WHERE k = 1 ORDER BY ring_idx"
            ),
            vec![vec![Some("set".to_string())], vec![Some("set".to_string())]]
        );
    }

    /// A prepared SELECT names a parameter's column as written, `?` (MySQL's name), whatever
    /// its value; strings written in the statement still name theirs.
    #[test]
    fn prepared_selects_name_parameter_columns_as_written() {
        let dir = tempfile::tempdir().expect("dir");
        let e = engine(dir.path());
        let mut s = SqlSession::new(&e);
        let sql = "SELECT ?, ? + 1, 'x', ? AS named";
        assert!(template(sql).is_some(), "a SELECT takes the bound path");
        let values = [Value::Text("abc".into()), Value::Int(5), Value::Null];
        match s.execute_bound(sql, &values).expect("select") {
            Outcome::Rows(r) => {
                assert_eq!(r.columns, ["?", "? + 1", "x", "named"]);
                assert_eq!(
                    r.text_rows(),
                    vec![vec![
                        Some("abc".into()),
                        Some("6".into()),
                        Some("x".into()),
                        None
                    ]]
                );
            }
            other => panic!("not rows: {other:?}"),
        }
        // Where the select list cannot be told from the text (in parentheses), the
        // names come from where the placeholder stood; MariaDB names these so too.
        for (sql, values, want) in [
            ("(SELECT ? + 1)", vec![Value::Int(5)], "? + 1"),
            ("(SELECT ?)", vec![Value::Double(2.5)], "?"),
            (
                "SELECT ? FROM DUAL WHERE ? > 0",
                vec![Value::Int(-3), Value::Int(1)],
                "?",
            ),
        ] {
            match s.execute_bound(sql, &values).expect(sql) {
                Outcome::Rows(r) => assert_eq!(r.columns, [want], "{sql}"),
                other => panic!("{sql}: not rows: {other:?}"),
            }
        }
        // SQL's EXECUTE names them as COM_STMT_EXECUTE does.
        s.execute("PREPARE p FROM 'SELECT ?, ? + 1'")
            .expect("prepare");
        s.execute("SET @a = 'abc', @b = 5").expect("set");
        match s.execute("EXECUTE p USING @a, @b").expect("execute") {
            Outcome::Rows(r) => assert_eq!(r.columns, ["?", "? + 1"]),
            other => panic!("not rows: {other:?}"),
        }
    }

    /// Prepared INSERTs that run from their plan (`insert_plan.rs`) and the text path give the
    /// same outcomes, errors, LAST_INSERT_ID() and rows, also after an ALTER TABLE between
    /// executions and on a table with a trigger (which the plan leaves to the general INSERT).
    #[test]
    fn planned_inserts_agree_with_the_text_path() {
        let (a, b) = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        let (ea, eb) = (engine(a.path()), engine(b.path()));
        let (mut bound, mut text) = (SqlSession::new(&ea), SqlSession::new(&eb));
        for s in [&mut bound, &mut text] {
            for sql in [
                "CREATE TABLE test.p (id INT AUTO_INCREMENT PRIMARY KEY, s VARCHAR(20) DEFAULT 'dflt', n INT, twice INT AS (n * 2) STORED, UNIQUE KEY (s))",
                "CREATE TABLE test.log (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(40))",
                "CREATE TABLE test.tr (k INT PRIMARY KEY, v INT)",
                "CREATE TRIGGER test.tr_ai AFTER INSERT ON test.tr FOR EACH ROW INSERT INTO test.log (what) VALUES (CONCAT('k=', NEW.k))",
            ] {
                s.execute(sql).expect(sql);
            }
        }
        let int = Value::Int;
        let txt = |t: &str| Value::Text(t.into());
        let steps: Vec<(&str, Vec<Value>)> = vec![
            (
                "INSERT INTO test.p (s, n) VALUES (?, ?)",
                vec![txt("a"), int(1)],
            ),
            (
                "INSERT INTO test.p (s, n) VALUES (?, ?), (DEFAULT, ?)",
                vec![txt("b"), int(2), int(3)],
            ),
            (
                "INSERT INTO test.p VALUES (?, ?, ?, DEFAULT)",
                vec![int(10), txt("c"), int(4)],
            ),
            (
                "INSERT INTO test.p (n, s) VALUES (?, CONCAT('x', 'y'))",
                vec![Value::UInt(5)],
            ),
            (
                "INSERT INTO test.p (s, n) VALUES (?, ?)",
                vec![txt("a"), int(6)],
            ),
            (
                "INSERT IGNORE INTO test.p (s, n) VALUES (?, ?), (?, ?)",
                vec![txt("a"), int(7), txt("d"), int(8)],
            ),
            (
                "INSERT INTO test.p (s, n) VALUES (?, ?, ?)",
                vec![txt("e"), int(9), int(9)],
            ),
            (
                "INSERT INTO test.p (s, s) VALUES (?, ?)",
                vec![txt("e"), txt("f")],
            ),
            ("INSERT INTO test.p (nope) VALUES (?)", vec![int(1)]),
            (
                "INSERT INTO test.p (s, twice) VALUES (?, ?)",
                vec![txt("g"), int(1)],
            ),
            ("INSERT INTO test.missing (a) VALUES (?)", vec![int(1)]),
            (
                "INSERT INTO test.p (s, n) VALUES (?, ?)",
                vec![Value::Double(1.5), Value::Bytes(b"9".to_vec())],
            ),
            (
                "ALTER TABLE test.p ADD COLUMN extra INT DEFAULT 7 FIRST",
                vec![],
            ),
            (
                "INSERT INTO test.p (s, n) VALUES (?, ?)",
                vec![txt("h"), int(11)],
            ),
            (
                "INSERT INTO test.p VALUES (?, ?, ?, ?, DEFAULT)",
                vec![int(1), int(20), txt("i"), int(12)],
            ),
            (
                "INSERT INTO test.tr (k, v) VALUES (?, ?)",
                vec![int(1), int(1)],
            ),
            (
                "INSERT INTO test.tr (k, v) VALUES (?, ?), (?, ?)",
                vec![int(2), int(2), int(3), int(3)],
            ),
        ];
        for (sql, values) in &steps {
            let (got, want) = if values.is_empty() {
                (bound.execute(sql), text.execute(sql))
            } else {
                (
                    bound.execute_bound(sql, values),
                    text.execute(&lexer::bind_placeholders(sql, values)),
                )
            };
            let (got, want) = (
                got.map_err(|e| e.to_string()),
                want.map_err(|e| e.to_string()),
            );
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{sql}");
            let last = "SELECT LAST_INSERT_ID()";
            assert_eq!(rows(&mut bound, last), rows(&mut text, last), "after {sql}");
        }
        assert!(
            template("INSERT INTO test.p (s, n) VALUES (?, ?)").is_some_and(|t| t.insert.is_some()),
            "the INSERTs above ran from their plan"
        );
        for all in [
            "SELECT * FROM test.p ORDER BY id",
            "SELECT * FROM test.tr ORDER BY k",
            "SELECT * FROM test.log ORDER BY id",
        ] {
            assert_eq!(rows(&mut bound, all), rows(&mut text, all), "{all}");
        }
        assert_eq!(
            rows(&mut bound, "SELECT COUNT(*) FROM test.log"),
            vec![vec![Some("3".to_string())]]
        );
    }

    #[test]
    fn only_selects_of_one_table_with_nothing_that_may_run_long_are_brief() {
        let read = |sql: &str| parsed(sql).read;
        let of = |db: Option<&str>, table: &str| {
            Some(Arc::new(BriefRead {
                db: db.map(str::to_string),
                table: table.to_string(),
            }))
        };
        for (sql, want) in [
            (
                "SELECT COUNT(*) FROM rb WHERE prefix = ? AND payload = ?",
                of(None, "rb"),
            ),
            (
                "SELECT a, MAX(b) FROM test.t WHERE k = ? GROUP BY a ORDER BY a LIMIT ?",
                of(Some("test"), "t"),
            ),
            (
                "SELECT * FROM `my db`.`t` AS x WHERE x.k = ?",
                of(Some("my db"), "t"),
            ),
            ("SELECT COALESCE(a, ?) FROM t", of(None, "t")),
        ] {
            assert_eq!(read(sql), want, "{sql}");
        }
        for sql in [
            "SELECT SLEEP(?)",
            "SELECT SLEEP(1) FROM t",
            "SELECT my_function(a) FROM t",
            "SELECT REPEAT(a, ?) FROM t",
            "SELECT * FROM t WHERE k IN (SELECT k FROM u)",
            "SELECT * FROM t JOIN u ON t.k = u.k",
            "SELECT * FROM t, u",
            "SELECT * FROM t UNION SELECT * FROM u",
            "WITH c AS (SELECT 1) SELECT * FROM t",
            "SELECT * FROM t WHERE k = ? FOR UPDATE",
            "SELECT * FROM t LOCK IN SHARE MODE",
            "SELECT @x := a FROM t",
            "SELECT * FROM t WHERE k = ? AND name LIKE ?",
            "SELECT * FROM t WHERE name NOT LIKE '%a%a%'",
            "SELECT * FROM t WHERE name REGEXP ?",
            "SELECT a INTO @v FROM t",
            "SELECT 1",
            "INSERT INTO t VALUES (?)",
            "SELECT * FROM (SELECT * FROM t) AS d",
        ] {
            assert_eq!(read(sql), None, "{sql}");
        }
    }

    #[test]
    fn other_statements_take_the_text_path() {
        assert!(template("SHOW TABLES LIKE ?").is_none());
        assert!(template("INSERT INTO t VALUES (").is_none());
    }
}
