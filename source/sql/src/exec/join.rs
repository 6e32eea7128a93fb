//! FROM clauses naming several tables: comma and CROSS joins, `INNER JOIN` and
//! `LEFT` / `RIGHT [OUTER] JOIN` with ON, USING or NATURAL, evaluated as nested loops over
//! each table's visible rows, or through a hash index when ON (for comma and CROSS joins, a
//! term of the WHERE) equates integer columns of the two sides. Conditions filter as each
//! table is added, so only matching combinations are kept.

use binlog_format::schema::ColumnType;
use binlog_format::Value;
use std::collections::HashMap;

use sqlparser::ast::{
    BinaryOperator, Expr, Ident, JoinConstraint, JoinOperator, TableFactor, TableWithJoins,
};

use crate::expr::predicate::conjuncts;
use crate::expr::{eval, resolve, truthy, Scope};
use crate::parse::statement::split_name;
use crate::table::columns::{table_columns, ColumnRef, FromTable, StarCol};
use crate::SqlSession;
use ringrep_engine::error::{code, Error, Result};

/// The tables, scope columns and combined rows of a FROM clause (WHERE not yet applied).
pub(crate) struct Joined {
    /// The FROM clause's tables, in order.
    pub(crate) tables: Vec<FromTable>,
    /// The scope columns of a combined row: every table's columns, in order.
    pub(crate) columns: Vec<ColumnRef>,
    /// What `*` stands for: (slot, name, type).
    pub(crate) star: Vec<StarCol>,
    /// The combined rows: each table's values side by side.
    pub(crate) rows: Vec<Vec<Value>>,
}

/// Which rows without a partner survive, padded with NULLs.
#[derive(Clone, Copy, PartialEq)]
enum Outer {
    No,
    /// Every row of the tables so far.
    Left,
    /// Every row of the new table.
    Right,
}

enum Cond {
    None,
    On(Box<Expr>),
    /// Equal values in these columns of both sides, which are then one column.
    Using(Vec<String>),
    /// USING every column name both sides have.
    Natural,
}

fn spec(op: &JoinOperator) -> Result<(Outer, Cond)> {
    let (outer, c) = match op {
        JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => {
            (Outer::No, c)
        }
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (Outer::Left, c),
        JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (Outer::Right, c),
        other => return Err(Error::unsupported(format!("join {other:?}"))),
    };
    let cond = match c {
        JoinConstraint::On(e) => Cond::On(Box::new(e.clone())),
        JoinConstraint::Using(names) => Cond::Using(
            names
                .iter()
                .map(|n| split_name(n).map(|(_, c)| c))
                .collect::<Result<_>>()?,
        ),
        JoinConstraint::UsingAlias(..) => return Err(Error::unsupported("JOIN ... USING ... AS")),
        JoinConstraint::Natural => Cond::Natural,
        JoinConstraint::None if outer != Outer::No => {
            return Err(Error::syntax(
                "You have an error in your SQL syntax; an outer join needs ON or USING",
            ))
        }
        JoinConstraint::None => Cond::None,
    };
    Ok((outer, cond))
}

/// For `ON x = y` between an integer column of the tables so far and an integer column of
/// the new table: their slots (the new table's counted from its first column).
fn integer_equi_join(
    on: &Expr,
    columns: &[ColumnRef],
    left_width: usize,
) -> Option<(usize, usize)> {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    } = on
    else {
        return None;
    };
    let scope = Scope {
        columns,
        row: &[],
        aggregates: None,
        place: "on clause",
    };
    let slot = |e: &Expr| -> Option<usize> {
        let i = match e {
            Expr::Identifier(i) => resolve(&scope, None, &i.value).ok()?,
            Expr::CompoundIdentifier(p) if p.len() == 2 => {
                resolve(&scope, Some(&p[0].value), &p[1].value).ok()?
            }
            _ => return None,
        };
        matches!(columns[i].ty, Some(ColumnType::Integer { .. })).then_some(i)
    };
    let (a, b) = (slot(left)?, slot(right)?);
    match (a < left_width, b < left_width) {
        (true, false) => Some((a, b - left_width)),
        (false, true) => Some((b, a - left_width)),
        _ => None,
    }
}

/// An integer value as a hash key (signed and unsigned alike); NULL matches nothing.
fn int_key(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(i128::from(*i)),
        Value::UInt(u) => Some(i128::from(*u)),
        _ => None,
    }
}

impl SqlSession {
    /// The joined rows of `from`. `selection` (the WHERE, still applied afterwards by the
    /// caller) lends its `x = y` conjuncts to comma and CROSS joins, so `FROM a, b WHERE
    /// a.id = b.aid` does not build the whole product first.
    pub(crate) fn joined_rows(
        &self,
        from: &[TableWithJoins],
        selection: Option<&Expr>,
    ) -> Result<Joined> {
        let mut conj = Vec::new();
        if let Some(w) = selection {
            conjuncts(w, &mut conj);
        }
        let mut j = Joined {
            tables: Vec::new(),
            columns: Vec::new(),
            star: Vec::new(),
            rows: vec![Vec::new()],
        };
        for twj in from {
            // A comma between tables is a cross join.
            self.join_table(&mut j, &twj.relation, (Outer::No, Cond::None), &conj)?;
            for join in &twj.joins {
                self.join_table(&mut j, &join.relation, spec(&join.join_operator)?, &conj)?;
            }
        }
        Ok(j)
    }

    fn join_table(
        &self,
        j: &mut Joined,
        relation: &TableFactor,
        (outer, cond): (Outer, Cond),
        where_conjuncts: &[&Expr],
    ) -> Result<()> {
        let (shown, right, table) = match relation {
            TableFactor::Table { name, alias, .. } => {
                let (db, t) = split_name(name)?;
                let (def, rows) = match self.computed_table(db.as_deref(), &t) {
                    Some(computed) => computed?,
                    None => {
                        let def = self.session.table_def(db.as_deref(), &t)?;
                        let rows = self.session.scan(&def, &[])?;
                        (def, rows)
                    }
                };
                let shown = alias.as_ref().map_or(t, |a| a.name.value.clone());
                let alias_l = shown.to_lowercase();
                let cols = table_columns(&def, Some(&alias_l));
                let table = FromTable::of_def(alias_l, &def, j.columns.len());
                (shown, rows, (table, cols))
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                let Some(alias) = alias else {
                    return Err(Error::new(
                        code::ER_DERIVED_MUST_HAVE_ALIAS,
                        "Every derived table must have its own alias",
                    ));
                };
                let shown = alias.name.value.clone();
                let alias_l = shown.to_lowercase();
                let rows = self.run_query(subquery, &subquery.to_string())?;
                let cols = rows
                    .columns
                    .iter()
                    .zip(&rows.types)
                    .map(|(c, ty)| ColumnRef {
                        table: alias_l.clone(),
                        name: c.to_lowercase(),
                        ty: ty.clone(),
                        qualified_only: false,
                    })
                    .collect();
                let table = FromTable {
                    alias: alias_l,
                    name: shown.clone(),
                    offset: j.columns.len(),
                    star: rows
                        .columns
                        .iter()
                        .zip(&rows.types)
                        .enumerate()
                        .map(|(i, (c, ty))| (i, c.clone(), ty.clone()))
                        .collect(),
                };
                (shown, rows.rows, (table, cols))
            }
            other => return Err(Error::unsupported(format!("FROM {other}"))),
        };
        let (table, cols) = table;
        if j.tables.iter().any(|x| x.alias == table.alias) {
            return Err(Error::new(
                code::ER_NONUNIQ_TABLE,
                format!("Not unique table/alias: '{shown}'"),
            ));
        }
        let width = cols.len();
        let left_width = j.columns.len();
        let new_star: Vec<StarCol> = table
            .star
            .iter()
            .map(|(i, n, t)| (table.offset + i, n.clone(), t.clone()))
            .collect();
        j.columns.extend(cols);
        let right_alias = table.alias.clone();
        j.tables.push(table);

        let names = match &cond {
            Cond::Using(names) => names.clone(),
            Cond::Natural => j
                .star
                .iter()
                .filter(|(s, ..)| !j.columns[*s].qualified_only)
                .map(|(_, n, _)| n.clone())
                .filter(|n| new_star.iter().any(|(_, m, _)| m.eq_ignore_ascii_case(n)))
                .collect(),
            _ => Vec::new(),
        };
        // USING pairs: (slot on the left, slot in the new table), and the equivalent ON.
        let mut pairs = Vec::new();
        let mut using_on: Option<Expr> = None;
        for name in &names {
            let left_scope = Scope {
                columns: &j.columns[..left_width],
                row: &[],
                aggregates: None,
                place: "from clause",
            };
            let ls = resolve(&left_scope, None, name)?;
            let rs = j.columns[left_width..]
                .iter()
                .position(|c| !c.name.is_empty() && c.name == name.to_lowercase())
                .ok_or_else(|| Error::bad_field(name, "from clause"))?;
            let col = |table: &str| {
                Expr::CompoundIdentifier(vec![Ident::new(table), Ident::new(name.clone())])
            };
            let eq = Expr::BinaryOp {
                left: Box::new(col(&j.columns[ls].table)),
                op: BinaryOperator::Eq,
                right: Box::new(col(&right_alias)),
            };
            using_on = Some(match using_on {
                None => eq,
                Some(prev) => Expr::BinaryOp {
                    left: Box::new(prev),
                    op: BinaryOperator::And,
                    right: Box::new(eq),
                },
            });
            pairs.push((ls, left_width + rs));
        }
        let on: Option<Expr> = match cond {
            Cond::On(e) => Some(*e),
            Cond::Using(_) | Cond::Natural => using_on,
            // Filtering an inner join early by a WHERE equality gives the same result: the
            // rows it drops would fail the WHERE anyway, and an equality is never true on
            // the NULLs a later outer join pads with.
            Cond::None => where_conjuncts
                .iter()
                .find(|e| integer_equi_join(e, &j.columns, left_width).is_some())
                .map(|e| (*e).clone()),
        };
        // The joined column is the side whose rows all survive: the left one, except in a
        // RIGHT JOIN. The other copy is only reachable qualified, and `*` shows the joined
        // columns first, then the rest of each side.
        let mut star: Vec<StarCol> = Vec::new();
        let mut dropped = Vec::new();
        for &(ls, rs) in &pairs {
            let (keep, drop) = if outer == Outer::Right {
                (rs, ls)
            } else {
                (ls, rs)
            };
            j.columns[drop].qualified_only = true;
            dropped.extend([ls, rs]);
            if let Some(c) = j.star.iter().chain(&new_star).find(|(s, ..)| *s == keep) {
                star.push(c.clone());
            }
        }
        let left_rest = j
            .star
            .iter()
            .filter(|(s, ..)| !dropped.contains(s))
            .cloned();
        let right_rest = new_star
            .iter()
            .filter(|(s, ..)| !dropped.contains(s))
            .cloned();
        if outer == Outer::Right && !pairs.is_empty() {
            star.extend(right_rest.chain(left_rest));
        } else {
            star.extend(left_rest.chain(right_rest));
        }
        j.star = star;

        let ctx = self.ctx();
        let mut out = Vec::new();
        let mut right_matched = vec![false; right.len()];
        // `ON a.x = b.y` on integer columns: only rows with equal keys can match, so look
        // them up instead of trying every pair. The full condition is still evaluated.
        let equi = on
            .as_ref()
            .and_then(|e| integer_equi_join(e, &j.columns, left_width));
        let mut index: HashMap<i128, Vec<usize>> = HashMap::new();
        if let Some((_, rs)) = equi {
            for (ri, r) in right.iter().enumerate() {
                if let Some(k) = int_key(&r[rs]) {
                    index.entry(k).or_default().push(ri);
                }
            }
        }
        let every: Vec<usize> = if equi.is_some() {
            Vec::new()
        } else {
            (0..right.len()).collect()
        };
        for left in std::mem::take(&mut j.rows) {
            let mut matched = false;
            let candidates = match equi {
                Some((ls, _)) => int_key(&left[ls])
                    .and_then(|k| index.get(&k))
                    .map_or(&[][..], Vec::as_slice),
                None => &every,
            };
            for &ri in candidates {
                let r = &right[ri];
                let mut row = Vec::with_capacity(left.len() + width);
                row.extend_from_slice(&left);
                row.extend_from_slice(r);
                let keep = match &on {
                    None => true,
                    Some(on) => {
                        let scope = Scope {
                            columns: &j.columns,
                            row: &row,
                            aggregates: None,
                            place: "on clause",
                        };
                        truthy(&eval(on, &scope, &ctx)?) == Some(true)
                    }
                };
                if keep {
                    matched = true;
                    right_matched[ri] = true;
                    out.push(row);
                }
            }
            if !matched && outer == Outer::Left {
                let mut row = left;
                row.resize(row.len() + width, Value::Null);
                out.push(row);
            }
        }
        if outer == Outer::Right {
            for (r, _) in right.into_iter().zip(right_matched).filter(|(_, m)| !m) {
                let mut row = vec![Value::Null; left_width];
                row.extend(r);
                out.push(row);
            }
        }
        j.rows = out;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::test_rows as rows;

    /// The hash path must give exactly what the nested loop gives (`+ 0` turns the column
    /// into an expression, which forces the loop): duplicates, NULLs, unmatched rows on
    /// either side, signed against unsigned.
    #[test]
    fn hashed_equi_joins_match_the_nested_loop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_engine, mut s) = crate::test_session(
            dir.path(),
            &[
                "CREATE TABLE a (id INT PRIMARY KEY, k INT)",
                "CREATE TABLE b (id INT PRIMARY KEY, k BIGINT UNSIGNED)",
            ],
        );
        // A small linear congruential sequence: keys repeat, some are NULL, some only on
        // one side.
        let mut x: u64 = 7;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for (t, n) in [("a", 60), ("b", 45)] {
            for id in 0..n {
                let k = match next(9) {
                    0 => "NULL".to_string(),
                    v => (v + if t == "a" { 0 } else { 2 }).to_string(),
                };
                s.execute(&format!("INSERT INTO {t} VALUES ({id}, {k})"))
                    .expect("insert");
            }
        }
        for join in ["JOIN", "LEFT JOIN", "RIGHT JOIN"] {
            for on in ["a.k = b.k", "b.k = a.k AND a.id > 5"] {
                let hashed =
                    format!("SELECT a.id, b.id FROM a {join} b ON {on} ORDER BY a.id, b.id");
                let looped = hashed
                    .replace("a.k =", "a.k + 0 =")
                    .replace("= a.k", "= a.k + 0");
                assert_ne!(hashed, looped);
                let h = rows(&mut s, &hashed);
                assert!(!h.is_empty(), "{hashed}");
                assert_eq!(h, rows(&mut s, &looped), "{hashed}");
            }
        }
        // A comma join borrows the WHERE equality; a later RIGHT JOIN's NULL padding must
        // still be filtered by it.
        for (hashed, looped) in [
            (
                "SELECT a.id, b.id FROM a, b WHERE a.id > 3 AND (b.k = a.k) ORDER BY a.id, b.id",
                "SELECT a.id, b.id FROM a, b WHERE a.id > 3 AND (b.k = a.k + 0) ORDER BY a.id, b.id",
            ),
            (
                "SELECT a.id, b.id, c.id FROM a CROSS JOIN b RIGHT JOIN a c ON c.id = b.id \
                 WHERE a.k = b.k ORDER BY 1, 2, 3",
                "SELECT a.id, b.id, c.id FROM a CROSS JOIN b RIGHT JOIN a c ON c.id = b.id \
                 WHERE a.k + 0 = b.k ORDER BY 1, 2, 3",
            ),
        ] {
            let h = rows(&mut s, hashed);
            assert!(!h.is_empty(), "{hashed}");
            assert_eq!(h, rows(&mut s, looped), "{hashed}");
        }
    }
}
