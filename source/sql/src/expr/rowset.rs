//! Row equality for DISTINCT and the set operations. Rows are equal when every value
//! compares equal as MySQL compares (NULL equal to NULL here). When each column holds one
//! kind of value (integers, text or bytes, with NULLs), that equality is equality of a
//! normalised key, so rows are matched through a hash map; otherwise (mixed kinds, where `1`
//! equals `'1'`, or floats and times) every pair is compared.

use std::cmp::Ordering;
use std::collections::HashMap;

use binlog_format::Value;

use super::value::compare;

/// Whether two result rows are the same for DISTINCT and set operations.
pub(crate) fn same_row(a: &[Value], b: &[Value], tz: i64) -> bool {
    a.iter()
        .zip(b)
        .all(|(a, b)| compare(a, b, tz) == Some(Ordering::Equal) || (a.is_null() && b.is_null()))
}

#[derive(Debug, Hash, PartialEq, Eq)]
enum Norm {
    Null,
    Int(i128),
    /// As `compare` sees text: its collation's folded form.
    Text(String),
    Bytes(Vec<u8>),
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Text,
    Bytes,
}

fn kind(v: &Value) -> Option<Option<Kind>> {
    match v {
        Value::Null => Some(None),
        Value::Int(_) | Value::UInt(_) => Some(Some(Kind::Int)),
        Value::Text(_) => Some(Some(Kind::Text)),
        Value::Bytes(_) => Some(Some(Kind::Bytes)),
        _ => None,
    }
}

fn norm(v: &Value) -> Norm {
    match v {
        Value::Int(i) => Norm::Int(i128::from(*i)),
        Value::UInt(u) => Norm::Int(i128::from(*u)),
        Value::Text(s) => Norm::Text(binlog_format::collation::folded(s)),
        Value::Bytes(b) => Norm::Bytes(b.clone()),
        _ => Norm::Null,
    }
}

fn norm_row(r: &[Value]) -> Vec<Norm> {
    r.iter().map(norm).collect()
}

/// Whether every column of all these rows holds one kind of value that `norm` captures.
fn hashable<'a>(rows: impl Iterator<Item = &'a [Value]>) -> bool {
    let mut kinds: Vec<Option<Kind>> = Vec::new();
    for r in rows {
        if kinds.len() < r.len() {
            kinds.resize(r.len(), None);
        }
        for (i, v) in r.iter().enumerate() {
            match (kind(v), kinds[i]) {
                (None, _) => return false,
                (Some(None), _) => {}
                (Some(Some(k)), None) => kinds[i] = Some(k),
                (Some(Some(k)), Some(seen)) if k == seen => {}
                _ => return false,
            }
        }
    }
    true
}

/// Keeps the first of each set of equal rows, in order.
pub(crate) fn dedupe<T>(rows: &mut Vec<T>, row: impl Fn(&T) -> &[Value], tz: i64) {
    if hashable(rows.iter().map(&row)) {
        let mut seen = std::collections::HashSet::new();
        rows.retain(|t| seen.insert(norm_row(row(t))));
        return;
    }
    let mut seen: Vec<Vec<Value>> = Vec::new();
    rows.retain(|t| {
        let v = row(t);
        if seen.iter().any(|s| same_row(s, v, tz)) {
            false
        } else {
            seen.push(v.to_vec());
            true
        }
    });
}

/// EXCEPT (`keep_found` false) and INTERSECT (true): each row of `right` cancels or admits
/// one equal row of `left` (with `all`), or every equal row (without).
pub(crate) fn filter_by(
    left: &mut Vec<Vec<Value>>,
    right: Vec<Vec<Value>>,
    keep_found: bool,
    all: bool,
    tz: i64,
) {
    if hashable(left.iter().chain(&right).map(Vec::as_slice)) {
        let mut counts: HashMap<Vec<Norm>, usize> = HashMap::new();
        for r in &right {
            *counts.entry(norm_row(r)).or_default() += 1;
        }
        left.retain(|row| match counts.get_mut(&norm_row(row)) {
            Some(c) if *c > 0 => {
                if all {
                    *c -= 1;
                }
                keep_found
            }
            _ => !keep_found,
        });
        return;
    }
    let mut unused: Vec<Option<Vec<Value>>> = right.into_iter().map(Some).collect();
    left.retain(|row| {
        let found = unused
            .iter_mut()
            .find(|u| u.as_ref().is_some_and(|u| same_row(u, row, tz)));
        match found {
            Some(slot) => {
                if all {
                    *slot = None;
                }
                keep_found
            }
            None => !keep_found,
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Value {
        Value::Text(s.into())
    }

    /// Hashing must agree with pairwise comparison: text case and accents, trailing spaces
    /// (which count), signed and unsigned integers, NULLs.
    #[test]
    fn hashed_and_pairwise_dedupe_agree() {
        let rows = vec![
            vec![Value::Int(1), t("Ann")],
            vec![Value::UInt(1), t("ánn")],
            vec![Value::UInt(1), t("ann  ")],
            vec![Value::Null, t("bob")],
            vec![Value::Null, t("BOB")],
            vec![Value::Int(2), Value::Null],
            vec![Value::Int(2), Value::Null],
            vec![Value::Int(2), t("x")],
        ];
        assert!(hashable(rows.iter().map(Vec::as_slice)));
        let mut hashed = rows.clone();
        dedupe(&mut hashed, |r| r.as_slice(), 0);
        let mut pairwise: Vec<Vec<Value>> = Vec::new();
        for r in &rows {
            if !pairwise.iter().any(|s| same_row(s, r, 0)) {
                pairwise.push(r.clone());
            }
        }
        assert_eq!(hashed, pairwise);
        assert_eq!(hashed.len(), 5);
    }

    /// A column mixing integers and text falls back to comparison, where `1` equals `'1'`.
    #[test]
    fn mixed_kinds_compare_as_mysql_does() {
        let mut rows = vec![vec![Value::Int(1)], vec![t("1")], vec![t("2")]];
        assert!(!hashable(rows.iter().map(Vec::as_slice)));
        dedupe(&mut rows, |r| r.as_slice(), 0);
        assert_eq!(rows, vec![vec![Value::Int(1)], vec![t("2")]]);
    }

    #[test]
    fn except_and_intersect_all_count_duplicates() {
        let l = || vec![vec![t("a")], vec![t("a")], vec![t("b")], vec![t("c")]];
        let r = || vec![vec![t("A")], vec![t("c")], vec![t("d")]];
        let mut except_all = l();
        filter_by(&mut except_all, r(), false, true, 0);
        assert_eq!(except_all, vec![vec![t("a")], vec![t("b")]]);
        let mut intersect_all = l();
        filter_by(&mut intersect_all, r(), true, true, 0);
        assert_eq!(intersect_all, vec![vec![t("a")], vec![t("c")]]);
        let mut except = l();
        filter_by(&mut except, r(), false, false, 0);
        assert_eq!(except, vec![vec![t("b")]]);
    }
}
