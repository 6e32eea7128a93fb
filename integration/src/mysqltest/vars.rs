//! mysqltest's variables: `$name` replaced in text, `while`/`if` conditions, and argument
//! words.
//!
//! A name that the script never set is looked up in the environment and otherwise reads as
//! empty, as mysqltest reads it (`if (!$MASTER_MYPORT1)` is how scripts test for one); the
//! names read that way are handed back so that the runner can report each with its line.

use std::collections::HashMap;

/// `text` with mysqltest's `$name` variables replaced (`\$` keeps a dollar sign). Names
/// neither set nor in the environment read as empty and are pushed onto `unset`.
pub(crate) fn substitute(
    text: &str,
    vars: &HashMap<String, String>,
    unset: &mut Vec<String>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\\' && text[i + 1..].starts_with('$') {
            out.push('$');
            chars.next();
            continue;
        }
        if c != '$' {
            out.push(c);
            continue;
        }
        let rest = &text[i + 1..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if len == 0 {
            out.push('$');
            continue;
        }
        let name = &rest[..len];
        match vars.get(name) {
            Some(v) => out.push_str(v),
            None => match std::env::var(name) {
                Ok(v) => out.push_str(&v),
                Err(_) => unset.push(name.to_string()),
            },
        }
        for _ in 0..len {
            chars.next();
        }
    }
    out
}

/// Whether `text` is one variable reference, `$name`.
fn is_variable(text: &str) -> bool {
    text.len() > 1
        && text.starts_with('$')
        && text[1..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A `while`/`if` condition: `$a`, `!$a`, or `$a <op> b` with ==, !=, <, <=, >, >=
/// (numbers compare as numbers; quotes around `b` are not part of it). A bare `$a` or `!$a`
/// tests whether the variable holds something, and so does `$a == ''` / `$a != ''` (how
/// mysqltest's own includes ask whether an optional parameter was given), so an unset one
/// there is not pushed onto `unset`.
pub(crate) fn condition(
    cond: &str,
    vars: &HashMap<String, String>,
    unset: &mut Vec<String>,
) -> bool {
    let bare = cond.trim().trim_start_matches('!').trim_start();
    let empty_test = ["==", "!="].iter().any(|op| {
        bare.split_once(op)
            .is_some_and(|(a, b)| is_variable(a.trim()) && matches!(b.trim(), "''" | "\"\""))
    });
    let is_test = is_variable(bare) || empty_test;
    let mut missing = Vec::new();
    let text = substitute(cond, vars, &mut missing);
    if !is_test {
        unset.extend(missing);
    }
    let text = text.trim();
    for op in ["==", "!=", "<=", ">=", "<", ">"] {
        if let Some((a, b)) = text.split_once(op) {
            let b = b.trim();
            let b = b
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .or_else(|| b.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
                .unwrap_or(b);
            let a = a.trim();
            let ord = match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
                _ => a.cmp(b),
            };
            use std::cmp::Ordering::*;
            return match op {
                "==" => ord == Equal,
                "!=" => ord != Equal,
                "<=" => ord != Greater,
                ">=" => ord != Less,
                "<" => ord == Less,
                _ => ord == Greater,
            };
        }
    }
    let (negate, value) = match text.strip_prefix('!') {
        Some(v) => (true, v.trim()),
        None => (false, text),
    };
    let truthy = !value.is_empty() && !value.parse::<f64>().is_ok_and(|n| n == 0.0);
    truthy != negate
}

/// mysqltest's argument words: blanks separate them, quotes group them.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut any = false;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn variables_are_replaced_and_unset_ones_read_empty_and_are_named() {
        let v = vars(&[("i", "3"), ("MYSQLTEST_VARDIR", "/tmp/v")]);
        let mut unset = Vec::new();
        assert_eq!(
            substitute("INSERT INTO t VALUES ($i)", &v, &mut unset),
            "INSERT INTO t VALUES (3)"
        );
        assert_eq!(
            substitute("'$MYSQLTEST_VARDIR/tmp/a.csv' \\$x", &v, &mut unset),
            "'/tmp/v/tmp/a.csv' $x"
        );
        assert!(unset.is_empty());
        assert_eq!(substitute("[$ringrep_never_set_var]", &v, &mut unset), "[]");
        assert_eq!(unset, vec!["ringrep_never_set_var"]);
    }

    #[test]
    fn conditions_compare_numbers_and_test_truth() {
        let v = vars(&[("i", "9"), ("z", "0")]);
        let mut unset = Vec::new();
        assert!(condition("$i <= 50", &v, &mut unset));
        assert!(!condition("$i > 10", &v, &mut unset));
        assert!(condition("$i == 9", &v, &mut unset));
        assert!(!condition("$z", &v, &mut unset));
        assert!(condition("!$z", &v, &mut unset));
        // Testing an unset variable is how scripts ask whether it is set: not reported.
        assert!(condition("!$ringrep_never_set_var", &v, &mut unset));
        assert!(unset.is_empty());
        // So is comparing one with the empty string, in either quotes; quotes are not part
        // of the value compared.
        assert!(condition("$ringrep_never_set_var == ''", &v, &mut unset));
        assert!(!condition("$ringrep_never_set_var != \"\"", &v, &mut unset));
        assert!(condition("$i != ''", &v, &mut unset));
        assert!(condition("$i == '9'", &v, &mut unset));
        assert!(unset.is_empty());
        // Comparing one with anything else is reported.
        assert!(condition("$ringrep_never_set_var != 1", &v, &mut unset));
        assert_eq!(unset, vec!["ringrep_never_set_var"]);
    }

    #[test]
    fn words_group_quotes() {
        assert_eq!(
            words("$X MYSQLTEST_VARDIR \"a b\" ''"),
            vec!["$X", "MYSQLTEST_VARDIR", "a b", ""]
        );
    }
}
