//! Walks over parsed statements: the text a node was written as, the stored tables a
//! statement reads (past its common table expressions), subqueries and placeholders.

use std::ops::ControlFlow;

use binlog_format::Value;
use sqlparser::ast::*;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use crate::parse::lexer;
use ringrep_engine::error::{Error, Result};

/// The text of an AST node as the user wrote it (MySQL names result columns so).
pub(crate) fn source_text(text: &str, node: &impl Spanned) -> Option<String> {
    let span = node.span();
    if span.start.line == 0 {
        return None;
    }
    let offset = |line: u64, col: u64| -> Option<usize> {
        let mut off = 0;
        for (i, l) in text.split('\n').enumerate() {
            if i as u64 + 1 == line {
                let chars: usize = l
                    .chars()
                    .take(col.saturating_sub(1) as usize)
                    .map(char::len_utf8)
                    .sum();
                return Some(off + chars);
            }
            off += l.len() + 1;
        }
        None
    };
    let (a, mut b) = (
        offset(span.start.line, span.start.column)?,
        offset(span.end.line, span.end.column)?,
    );
    // Function spans stop before their closing parenthesis (and `COUNT(*)` covers only the
    // name): extend to where the parentheses balance.
    let bytes = text.as_bytes();
    let mut depth: i32 = text
        .get(a..b)?
        .bytes()
        .map(|c| i32::from(c == b'(') - i32::from(c == b')'))
        .sum();
    let mut probe = b;
    while probe < bytes.len() && bytes[probe] == b' ' {
        probe += 1;
    }
    if depth == 0
        && probe < bytes.len()
        && bytes[probe] == b'('
        && text
            .get(a..b)?
            .ends_with(|c: char| c.is_alphanumeric() || c == '_')
    {
        b = probe;
    }
    let mut quote = None;
    while b < bytes.len()
        && (depth > 0 || (b < bytes.len() && bytes[b] == b'(' && depth == 0 && b == probe))
    {
        let c = bytes[b];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'\'' || c == b'"' => quote = Some(c),
            None if c == b'(' => depth += 1,
            None if c == b')' => depth -= 1,
            None => {}
        }
        b += 1;
        if depth == 0 {
            break;
        }
    }
    text.get(a..b)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `q` as written in `text`, when `text` is what `q` was parsed from (a subquery's text is
/// the subquery written back, where the positions the parser gave do not point).
pub(crate) fn written(text: &str, q: &Query) -> Option<String> {
    let squeeze = |s: &str| {
        s.chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_uppercase()
    };
    crate::parse::tree::source_text(text, q).filter(|s| squeeze(s) == squeeze(&q.to_string()))
}

pub(crate) fn single_name(n: &ObjectName) -> Option<&str> {
    match n.0.as_slice() {
        [ObjectNamePart::Identifier(Ident { value, .. })] => Some(value),
        _ => None,
    }
}

/// Calls `f` for every table name in `node` that reaches a stored table or view: every one
/// but the names of common table expressions where they are in scope.
pub(crate) fn visit_stored_relations<V: Visit>(
    node: &V,
    f: impl FnMut(&ObjectName) -> ControlFlow<()>,
) -> ControlFlow<()> {
    node.visit(&mut Scoped {
        frames: Vec::new(),
        f,
    })
}

/// Qualifies with `db` every unqualified name in `stmt` that reaches a stored table or view
/// (a view's query is stored so), leaving the names of its common table expressions alone.
pub(crate) fn qualify_stored_relations(stmt: &mut Statement, db: &str) {
    let mut stored: Vec<*const ObjectName> = Vec::new();
    let _ = visit_stored_relations(&*stmt, |n| {
        stored.push(n as *const ObjectName);
        ControlFlow::Continue(())
    });
    // The same tree, walked in the same order: a name's address is the one seen above.
    let _ = visit_relations_mut(stmt, |n| {
        if n.0.len() == 1 && stored.contains(&(n as *const ObjectName)) {
            n.0.insert(
                0,
                ObjectNamePart::Identifier(Ident::with_quote('`', db.to_string())),
            );
        }
        ControlFlow::<()>::Continue(())
    });
}

/// One query's common table expressions while its parts are walked.
struct Frame {
    names: Vec<String>,
    /// Each expression's own query.
    bodies: Vec<*const Query>,
    /// How many of `names` are in scope: all of them in the query's body; those before it
    /// (and itself, with RECURSIVE) in an expression's own query.
    visible: usize,
    recursive: bool,
}

/// A walk of a statement that knows which names are common table expressions where they are
/// read, and calls `f` for the others.
struct Scoped<F> {
    frames: Vec<Frame>,
    f: F,
}

impl<F: FnMut(&ObjectName) -> ControlFlow<()>> Visitor for Scoped<F> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        let me = q as *const Query;
        if let Some(top) = self.frames.last_mut() {
            if let Some(i) = top.bodies.iter().position(|b| *b == me) {
                top.visible = if top.recursive { i + 1 } else { i };
            }
        }
        let frame = match &q.with {
            Some(w) => Frame {
                names: w
                    .cte_tables
                    .iter()
                    .map(|c| c.alias.name.value.clone())
                    .collect(),
                bodies: w
                    .cte_tables
                    .iter()
                    .map(|c| &*c.query as *const Query)
                    .collect(),
                visible: w.cte_tables.len(),
                recursive: w.recursive,
            },
            None => Frame {
                names: Vec::new(),
                bodies: Vec::new(),
                visible: 0,
                recursive: false,
            },
        };
        self.frames.push(frame);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        self.frames.pop();
        let me = q as *const Query;
        if let Some(top) = self.frames.last_mut() {
            if top.bodies.contains(&me) {
                top.visible = top.names.len();
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, name: &ObjectName) -> ControlFlow<()> {
        if let Some(n) = single_name(name) {
            let is_cte = self.frames.iter().any(|f| {
                f.names[..f.visible]
                    .iter()
                    .any(|c| c.eq_ignore_ascii_case(n))
            });
            if is_cte {
                return ControlFlow::Continue(());
            }
        }
        (self.f)(name)
    }
}

/// A table a statement names (after FROM or JOIN, or as UPDATE's or DELETE's target), for
/// column privileges: the name, the alias it goes by, and whether a `*` or `alias.*` of a
/// SELECT over it reads all its columns.
#[derive(Debug, Clone)]
pub(crate) struct TableUse {
    /// The name as written.
    pub(crate) name: ObjectName,
    /// `AS alias`, if any: the name its columns are qualified with then.
    pub(crate) alias: Option<String>,
    /// Whether a wildcard reads every column.
    pub(crate) all_columns: bool,
}

/// The tables `node` names, each time it names one (a name may come back with another
/// alias), with what reads all their columns.
pub(crate) fn table_uses<V: Visit>(node: &V) -> Vec<TableUse> {
    struct Uses(Vec<TableUse>);
    impl Visitor for Uses {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
            wildcards(&q.body, &mut self.0);
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, alias, .. } = t {
                self.0.push(TableUse {
                    name: name.clone(),
                    alias: alias.as_ref().map(|a| a.name.value.clone()),
                    all_columns: false,
                });
            }
            ControlFlow::Continue(())
        }
    }
    let mut uses = Uses(Vec::new());
    let _ = node.visit(&mut uses);
    uses.0
}

/// The tables a `*` or `x.*` of `body`'s SELECTs reads wholly (not its subqueries': those
/// are queries of their own, walked apart).
fn wildcards(body: &SetExpr, out: &mut Vec<TableUse>) {
    match body {
        SetExpr::Select(s) => {
            let mut tables = Vec::new();
            for twj in &s.from {
                factor_tables(&twj.relation, &mut tables);
                for j in &twj.joins {
                    factor_tables(&j.relation, &mut tables);
                }
            }
            for item in &s.projection {
                let qualifier = match item {
                    SelectItem::Wildcard(_) => None,
                    SelectItem::QualifiedWildcard(
                        SelectItemQualifiedWildcardKind::ObjectName(n),
                        _,
                    ) => Some(object_parts(n)),
                    _ => continue,
                };
                for (name, alias) in &tables {
                    let hit = match &qualifier {
                        None => true,
                        Some(q) => names_table(q, name, alias.as_deref()),
                    };
                    if hit {
                        out.push(TableUse {
                            name: (*name).clone(),
                            alias: alias.clone(),
                            all_columns: true,
                        });
                    }
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            wildcards(left, out);
            wildcards(right, out);
        }
        _ => {}
    }
}

/// The stored tables of a FROM item (joins nested in parentheses included).
fn factor_tables<'a>(t: &'a TableFactor, out: &mut Vec<(&'a ObjectName, Option<String>)>) {
    match t {
        TableFactor::Table { name, alias, .. } => {
            out.push((name, alias.as_ref().map(|a| a.name.value.clone())));
        }
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => {
            factor_tables(&table_with_joins.relation, out);
            for j in &table_with_joins.joins {
                factor_tables(&j.relation, out);
            }
        }
        _ => {}
    }
}

/// A name's parts, as written.
pub(crate) fn object_parts(n: &ObjectName) -> Vec<String> {
    n.0.iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => i.value.clone(),
            ObjectNamePart::Function(f) => f.name.value.clone(),
        })
        .collect()
}

/// Whether qualifier `q` (`t` or `db.t`) names table `name` going by `alias`: the alias
/// where there is one, else the table's name (with its database, if both are written).
pub(crate) fn names_table(q: &[String], name: &ObjectName, alias: Option<&str>) -> bool {
    let own = object_parts(name);
    match (q, alias) {
        ([x], Some(a)) => x.eq_ignore_ascii_case(a),
        ([x], None) => own.last().is_some_and(|t| t.eq_ignore_ascii_case(x)),
        ([d, x], None) => {
            own.last().is_some_and(|t| t.eq_ignore_ascii_case(x))
                && own.len() == 2
                && own[0].eq_ignore_ascii_case(d)
        }
        _ => false,
    }
}

/// Every column name `node` reads, its qualifier's parts first (`t.c` is `["t", "c"]`), in
/// the order written.
pub(crate) fn column_refs<V: Visit>(node: &V) -> Vec<Vec<String>> {
    let mut refs = Vec::new();
    let _ = visit_expressions(node, |e| {
        match e {
            Expr::Identifier(i) => refs.push(vec![i.value.clone()]),
            Expr::CompoundIdentifier(parts) => {
                refs.push(parts.iter().map(|i| i.value.clone()).collect());
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    // JOIN ... USING (c) reads `c` of both sides.
    let _ = visit_table_factors(node, |t| {
        if let TableFactor::NestedJoin {
            table_with_joins, ..
        } = t
        {
            using_columns(&table_with_joins.joins, &mut refs);
        }
        ControlFlow::<()>::Continue(())
    });
    let _ = visit_queries(node, |q| {
        if let SetExpr::Select(s) = &*q.body {
            for twj in &s.from {
                using_columns(&twj.joins, &mut refs);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    refs
}

fn using_columns(joins: &[Join], refs: &mut Vec<Vec<String>>) {
    for j in joins {
        let constraint = match &j.join_operator {
            JoinOperator::Join(c)
            | JoinOperator::Inner(c)
            | JoinOperator::Left(c)
            | JoinOperator::LeftOuter(c)
            | JoinOperator::Right(c)
            | JoinOperator::RightOuter(c) => c,
            _ => continue,
        };
        if let JoinConstraint::Using(names) = constraint {
            for n in names {
                if let Some(last) = object_parts(n).pop() {
                    refs.push(vec![last]);
                }
            }
        }
    }
}

/// The queries of `node`, outermost first.
fn visit_queries<V: Visit>(node: &V, f: impl FnMut(&Query) -> ControlFlow<()>) -> ControlFlow<()> {
    struct Q<F>(F);
    impl<F: FnMut(&Query) -> ControlFlow<()>> Visitor for Q<F> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
            (self.0)(q)
        }
    }
    node.visit(&mut Q(f))
}

/// The FROM items of `node`.
fn visit_table_factors<V: Visit>(
    node: &V,
    f: impl FnMut(&TableFactor) -> ControlFlow<()>,
) -> ControlFlow<()> {
    struct T<F>(F);
    impl<F: FnMut(&TableFactor) -> ControlFlow<()>> Visitor for T<F> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, t: &TableFactor) -> ControlFlow<()> {
            (self.0)(t)
        }
    }
    node.visit(&mut T(f))
}

/// Whether `e` holds a subquery anywhere.
pub(crate) fn has_subquery(e: &Expr) -> bool {
    visit_expressions(e, |x| match x {
        Expr::Subquery(_)
        | Expr::Exists { .. }
        | Expr::In {
            target: sqlparser::ast::InTarget::Subquery(_) | sqlparser::ast::InTarget::Table { .. },
            ..
        } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

pub(crate) fn is_placeholder(e: &Expr) -> bool {
    matches!(e, Expr::Value(v) if matches!(v.value, sqlparser::ast::Value::Placeholder(_)))
}

/// The expression the text path would have parsed for `v`. NULL, non-negative integers and
/// strings are built directly (parsing each value's text was most of the cost of binding);
/// the rest goes through the parser. `literals_match_the_parser` checks both agree.
pub(crate) fn literal_expr(v: &Value) -> Result<Expr> {
    use sqlparser::ast::Value as Literal;
    let literal = match v {
        Value::Null => Literal::Null,
        Value::Int(i) if *i >= 0 => Literal::Number(i.to_string(), false),
        Value::UInt(u) => Literal::Number(u.to_string(), false),
        Value::Text(s) => Literal::SingleQuotedString(s.clone()),
        other => return parsed_literal_expr(other),
    };
    Ok(Expr::Value(literal.into()))
}

/// The expression the parser makes of `v`'s literal text.
pub(crate) fn parsed_literal_expr(v: &Value) -> Result<Expr> {
    let text = lexer::normalize_quotes(&lexer::literal_text(v));
    Parser::new(&MySqlDialect {})
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| Error::syntax(format!("parameter {text}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(sql: &str) -> Vec<String> {
        let stmt = crate::parse::statement::parse_one(sql).expect("parse");
        let mut names = Vec::new();
        let _ = visit_stored_relations(&stmt, |n| {
            names.push(n.to_string());
            ControlFlow::Continue(())
        });
        names
    }

    /// An expression's name is a table only outside its scope: its own (non-recursive)
    /// definition and the expressions before it read the stored table of that name.
    #[test]
    fn names_in_scope_are_expressions_the_rest_stored_tables() {
        assert_eq!(
            stored("WITH t AS (SELECT * FROM t) SELECT * FROM t JOIN u"),
            ["t", "u"]
        );
        assert_eq!(
            stored("WITH a AS (SELECT * FROM b), b AS (SELECT * FROM a) SELECT * FROM a, b"),
            ["b"]
        );
        assert_eq!(
            stored("WITH RECURSIVE r AS (SELECT 1 UNION ALL SELECT * FROM r) SELECT * FROM r"),
            Vec::<String>::new()
        );
        assert_eq!(
            stored("SELECT (WITH c AS (SELECT 1) SELECT * FROM c), (SELECT * FROM c) FROM d"),
            ["c", "d"]
        );
        assert_eq!(
            stored("WITH c AS (SELECT 1) SELECT * FROM db.c WHERE x IN (SELECT * FROM c)"),
            ["db.c"]
        );
    }

    #[test]
    fn views_qualify_stored_tables_only() {
        let mut stmt =
            crate::parse::statement::parse_one("WITH c AS (SELECT * FROM c) SELECT * FROM c, t")
                .expect("parse");
        qualify_stored_relations(&mut stmt, "d");
        assert_eq!(
            stmt.to_string(),
            "WITH c AS (SELECT * FROM `d`.c) SELECT * FROM c, `d`.t"
        );
    }
}
