//! `--replace_regex /pattern/replacement/[i] ...`: regular-expression replacements of the next
//! statement's output, as mysqltest makes them.
//!
//! mysqltest's rules: each replacement is written `<d>pattern<d>replacement<d>` with any
//! delimiter `<d>` (the first character after the blanks that precede the triple), optionally
//! followed by `i` for case-insensitive matching; a backslash before the delimiter puts the
//! delimiter itself into the pattern or replacement, other backslashes stay as they are;
//! `\1`..`\9` in a replacement name the pattern's groups. Several triples may follow one
//! another on the line, each applied to what the one before left, every match replaced.
//! The whole argument may be one `$variable` holding the list.

use anyhow::{bail, Context};
use regex::{Regex, RegexBuilder};

/// One `/pattern/replacement/` of a `--replace_regex` line.
#[derive(Debug, Clone)]
pub(crate) struct RegexReplace {
    pattern: Regex,
    /// The replacement in the `regex` crate's syntax (`${1}` for mysqltest's `\1`, `$$` for a
    /// literal dollar sign).
    replacement: String,
}

/// Parses a `--replace_regex` argument into its replacements, in order.
pub(crate) fn parse(arg: &str) -> anyhow::Result<Vec<RegexReplace>> {
    let mut out = Vec::new();
    let mut rest = arg.trim_start();
    while !rest.is_empty() {
        let delim = rest.chars().next().expect("not empty");
        if delim.is_alphanumeric() || delim == '\\' {
            bail!("replace_regex: {rest:?} does not start with a delimiter such as /");
        }
        let after = &rest[delim.len_utf8()..];
        let (pattern, after) = part(after, delim).with_context(|| {
            format!("replace_regex: the pattern of {rest:?} does not end with {delim}")
        })?;
        let (replacement, after) = part(after, delim).with_context(|| {
            format!("replace_regex: the replacement of {rest:?} does not end with {delim}")
        })?;
        let (insensitive, after) = match after.strip_prefix('i') {
            Some(a) => (true, a),
            None => (false, after),
        };
        if !after.is_empty() && !after.starts_with(char::is_whitespace) {
            bail!("replace_regex: {after:?} follows a replacement; blanks separate them");
        }
        let pattern = RegexBuilder::new(&pattern)
            .case_insensitive(insensitive)
            .build()
            .with_context(|| format!("replace_regex: the pattern {pattern:?}"))?;
        out.push(RegexReplace {
            pattern,
            replacement: replacement_syntax(&replacement),
        });
        rest = after.trim_start();
    }
    if out.is_empty() {
        bail!("replace_regex needs at least one /pattern/replacement/");
    }
    Ok(out)
}

/// The text up to the next `delim` that no backslash escapes (`\<delim>` gives `delim`), and
/// what follows that delimiter; `None` when no delimiter ends it.
fn part(text: &str, delim: char) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            if let Some(&(_, n)) = chars.peek() {
                if n == delim {
                    out.push(n);
                    chars.next();
                    continue;
                }
            }
            out.push(c);
        } else if c == delim {
            return Some((out, &text[i + c.len_utf8()..]));
        } else {
            out.push(c);
        }
    }
    None
}

/// mysqltest's replacement text in the `regex` crate's syntax: `\N` names group N, `$` is
/// literal.
fn replacement_syntax(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(char::is_ascii_digit) => {
                let d = chars.next().expect("peeked");
                out.push_str(&format!("${{{d}}}"));
            }
            '$' => out.push_str("$$"),
            _ => out.push(c),
        }
    }
    out
}

/// `text` after every replacement of `list`, each applied to what the previous left.
pub(crate) fn apply(list: &[RegexReplace], text: &str) -> String {
    let mut s = text.to_string();
    for r in list {
        s = r
            .pattern
            .replace_all(&s, r.replacement.as_str())
            .into_owned();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(arg: &str, text: &str) -> String {
        apply(&parse(arg).expect("parses"), text)
    }

    #[test]
    fn replacements_apply_in_order_to_every_match() {
        assert_eq!(run("/a/b/", "banana"), "bbnbnb");
        // The second sees what the first left.
        assert_eq!(run("/a/b/ /bb/X/", "aab"), "Xb");
        assert_eq!(run("/[0-9]+/#/", "id 12 at 345"), "id # at #");
    }

    #[test]
    fn any_delimiter_and_escaped_delimiters() {
        assert_eq!(run("#/tmp/[a-z]+#DIR#", "/tmp/abc/x"), "DIR/x");
        assert_eq!(run("/a\\/b/c/", "xa/by"), "xcy");
        assert_eq!(run("|x|a\\|b|", "x"), "a|b");
        // A backslash before anything else stays: it is the pattern's own escape.
        assert_eq!(run("/\\d+/N/", "v42"), "vN");
    }

    #[test]
    fn groups_case_and_dollars() {
        assert_eq!(run("/(\\w+)@(\\w+)/\\2 at \\1/", "me@host"), "host at me");
        assert_eq!(run("/ERROR/error/i", "Error, ERROR"), "error, error");
        assert_eq!(run("/ERROR/error/", "Error, ERROR"), "Error, error");
        assert_eq!(run("/cost/$5/", "cost"), "$5");
        assert_eq!(run("/x$/END/", "xax"), "xaEND");
    }

    #[test]
    fn malformed_lists_are_errors() {
        assert!(parse("").is_err());
        assert!(parse("/a/b").is_err());
        assert!(parse("abc").is_err());
        assert!(parse("/a/b/x").is_err());
        assert!(parse("/(/b/").is_err());
    }
}
