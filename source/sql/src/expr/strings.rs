//! Searching and editing strings: REPLACE, REVERSE, LTRIM, RTRIM, TRIM, SPACE, LOCATE,
//! INSTR, POSITION, FIELD, ELT, FIND_IN_SET, STRCMP, ASCII and ORD.
//!
//! Comparisons follow the text collation (`binlog_format::collation`, utf8mb4_0900_ai_ci):
//! FIELD, FIND_IN_SET and STRCMP ignore case and accents as `=` does; LOCATE, INSTR and
//! POSITION too, character by character (a position counts the characters as written);
//! REPLACE matches case, as MySQL's does.

use std::cmp::Ordering;

use binlog_format::value::Value;
use sqlparser::ast::TrimWhereField;

use ringrep_engine::error::Result;
use ringrep_engine::types::text_of;

use super::context::Ctx;
use super::value::{compare, to_f64};

/// The string functions of this module by name; `None` when `name` is none of them.
pub(super) fn search_and_edit(name: &str, args: &[Value], ctx: &Ctx<'_>) -> Result<Option<Value>> {
    let (min, max) = match name {
        "FIELD" | "ELT" => (2, usize::MAX),
        "REPLACE" => (3, 3),
        "LOCATE" => (2, 3),
        "INSTR" | "FIND_IN_SET" | "STRCMP" => (2, 2),
        "REVERSE" | "LTRIM" | "RTRIM" | "SPACE" | "ASCII" | "ORD" => (1, 1),
        _ => return Ok(None),
    };
    super::value::arity(name, args.len(), min, max)?;
    let text = |i: usize| args.get(i).map(text_of).unwrap_or_default();
    let any_null = args.iter().any(Value::is_null);
    Ok(Some(match name {
        "FIELD" => {
            // NULL is found nowhere; the others compare as `=` does.
            let found = match args.first() {
                None | Some(Value::Null) => None,
                Some(needle) => args[1..]
                    .iter()
                    .position(|v| compare(needle, v, ctx.tz) == Some(Ordering::Equal)),
            };
            Value::Int(found.map_or(0, |i| i as i64 + 1))
        }
        // The index is rounded, as MySQL converts it to an integer.
        "ELT" => match args.first().and_then(to_f64).map(f64::round) {
            Some(n) if n >= 1.0 && (n as usize) < args.len() => args[n as usize].clone(),
            _ => Value::Null,
        },
        // Every other function of the module is NULL for a NULL argument.
        _ if any_null => Value::Null,
        "REPLACE" => {
            let from = text(1);
            if from.is_empty() {
                Value::Text(text(0))
            } else {
                Value::Text(text(0).replace(&from, &text(2)))
            }
        }
        "REVERSE" => Value::Text(text(0).chars().rev().collect()),
        "LTRIM" => Value::Text(text(0).trim_start_matches(' ').to_string()),
        "RTRIM" => Value::Text(text(0).trim_end_matches(' ').to_string()),
        "SPACE" => {
            let n = args.first().and_then(to_f64).unwrap_or(0.0).max(0.0);
            if n > MAX_SPACE as f64 {
                Value::Null
            } else {
                Value::Text(" ".repeat(n as usize))
            }
        }
        "LOCATE" => {
            let from = match args.get(2) {
                Some(v) => to_f64(v).unwrap_or(0.0) as i64,
                None => 1,
            };
            Value::Int(locate(&text(0), &text(1), from))
        }
        "INSTR" => Value::Int(locate(&text(1), &text(0), 1)),
        "FIND_IN_SET" => {
            let needle = text(0);
            let list = text(1);
            let found = if list.is_empty() || needle.contains(',') {
                None
            } else {
                list.split(',')
                    .position(|s| binlog_format::collation::eq(s, &needle))
            };
            Value::Int(found.map_or(0, |i| i as i64 + 1))
        }
        // As `<`, `=` and ORDER BY compare the two strings (bytewise when one is binary).
        "STRCMP" => Value::Int(
            match compare(&as_string(&args[0]), &as_string(&args[1]), ctx.tz) {
                Some(Ordering::Less) => -1,
                Some(Ordering::Equal) => 0,
                _ => 1,
            },
        ),
        "ASCII" => Value::Int(text(0).bytes().next().map_or(0, i64::from)),
        // A multibyte character's code is its bytes as one big-endian number, as MySQL's.
        "ORD" => Value::Int(text(0).chars().next().map_or(0, |c| {
            let mut buf = [0u8; 4];
            c.encode_utf8(&mut buf)
                .bytes()
                .fold(0i64, |n, b| n * 256 + i64::from(b))
        })),
        _ => return Ok(None),
    }))
}

/// The longest string SPACE makes; a longer one is NULL (MySQL's bound is
/// `max_allowed_packet`, 64 MiB by default).
const MAX_SPACE: usize = 64 << 20;

/// The position (from 1, in characters) of `needle` in `hay` at or after `from`, ignoring
/// case; 0 when it is not there or `from` is out of range.
pub(super) fn locate(needle: &str, hay: &str, from: i64) -> i64 {
    // Compared character by character under the collation, as `=` compares ('e' finds 'é');
    // positions count the characters as written.
    let hay_len = hay.chars().count();
    if from < 1 || from as usize > hay_len + 1 {
        return 0;
    }
    let needle: Vec<u64> = needle
        .chars()
        .filter_map(super::value::collation_unit)
        .collect();
    if needle.is_empty() {
        return from;
    }
    let start = from as usize - 1;
    let hay: Vec<(usize, u64)> = hay
        .chars()
        .enumerate()
        .skip(start)
        .filter_map(|(i, c)| super::value::collation_unit(c).map(|u| (i, u)))
        .collect();
    hay.windows(needle.len())
        .find(|w| w.iter().map(|(_, u)| *u).eq(needle.iter().copied()))
        .map_or(0, |w| (w[0].0 + 1) as i64)
}

/// `TRIM([[BOTH | LEADING | TRAILING] [what] FROM] s)`: `what` (a space by default) taken off
/// `s`'s ends as many times as it is there.
pub(super) fn trim(s: &Value, what: Option<&Value>, side: Option<&TrimWhereField>) -> Value {
    if s.is_null() || what.is_some_and(Value::is_null) {
        return Value::Null;
    }
    let what = what.map_or_else(|| " ".to_string(), text_of);
    let s = text_of(s);
    if what.is_empty() {
        return Value::Text(s);
    }
    let (leading, trailing) = match side {
        Some(TrimWhereField::Leading) => (true, false),
        Some(TrimWhereField::Trailing) => (false, true),
        _ => (true, true),
    };
    // Bounds into `s`, moved past each copy of `what` (never copying the rest).
    let (mut start, mut end) = (0, s.len());
    if leading {
        while s[start..end].starts_with(what.as_str()) {
            start += what.len();
        }
    }
    if trailing {
        while end - start >= what.len() && s[start..end].ends_with(what.as_str()) {
            end -= what.len();
        }
    }
    Value::Text(s[start..end].to_string())
}

/// A value as the string a string function compares: binary strings stay bytes, which compare
/// bytewise; anything else is its text.
fn as_string(v: &Value) -> Value {
    match v {
        Value::Bytes(b) => Value::Bytes(b.clone()),
        other => Value::Text(text_of(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_counts_characters_from_one_and_ignores_case() {
        assert_eq!(locate("bar", "foobarbar", 1), 4);
        assert_eq!(locate("bar", "foobarbar", 5), 7);
        assert_eq!(locate("BAR", "foobar", 1), 4);
        assert_eq!(locate("xbar", "foobar", 1), 0);
        assert_eq!(locate("é", "aé", 1), 2);
        assert_eq!(locate("", "abc", 2), 2);
        assert_eq!(locate("a", "abc", 0), 0);
        // Accents do not count either, as in `=`; positions count the characters as written.
        assert_eq!(locate("e", "café", 1), 4);
        assert_eq!(locate("CAFE", "xcafé", 1), 2);
        assert_eq!(locate("b", "İab", 1), 3);
        assert_eq!(locate("ß", "strasse", 1), 0);
        assert_eq!(locate("ẞ", "großes", 1), 4);
    }

    #[test]
    fn trim_takes_repeated_affixes_off_the_chosen_side() {
        let t = |s: &str| Value::Text(s.into());
        assert_eq!(trim(&t("  bar  "), None, None), t("bar"));
        assert_eq!(
            trim(&t("xxbarxx"), Some(&t("x")), Some(&TrimWhereField::Leading)),
            t("barxx")
        );
        assert_eq!(
            trim(
                &t("barxyzxyz"),
                Some(&t("xyz")),
                Some(&TrimWhereField::Trailing)
            ),
            t("bar")
        );
        assert_eq!(trim(&Value::Null, None, None), Value::Null);
    }
}
