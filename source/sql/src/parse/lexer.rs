//! Small, quote-aware text helpers for the statements sqlparser does not take as MySQL writes
//! them.

/// Splits a script into statements at `;` outside quotes and comments.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == '\\' && q != '`' {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    for n in chars.by_ref() {
                        if n == '\n' {
                            break;
                        }
                    }
                    cur.push('\n');
                }
                '#' => {
                    for n in chars.by_ref() {
                        if n == '\n' {
                            break;
                        }
                    }
                    cur.push('\n');
                }
                ';' => {
                    if !cur.trim().is_empty() {
                        out.push(cur.trim().to_string());
                    }
                    cur.clear();
                }
                _ => cur.push(c),
            },
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Rewrites double-quoted strings as single-quoted ones (MySQL reads both as strings unless
/// ANSI_QUOTES is set; sqlparser wants single quotes in places such as COMMENT=).
pub(crate) fn normalize_quotes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut quote: Option<char> = None;
    // Inside MySQL's executable comment `/*!50100 ... */`, whose text MySQL runs as SQL (SHOW
    // CREATE TABLE prints PARTITION BY so, and dumps are full of them).
    let mut executable = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            None if c == '/' && chars.peek() == Some(&'*') && !executable => {
                chars.next();
                if chars.peek() == Some(&'!') {
                    chars.next();
                    while chars.peek().is_some_and(char::is_ascii_digit) {
                        chars.next();
                    }
                    executable = true;
                    out.push(' ');
                } else {
                    out.push_str("/*");
                }
            }
            None if c == '*' && executable && chars.peek() == Some(&'/') => {
                chars.next();
                executable = false;
                out.push(' ');
            }
            None => {
                if c == '"' {
                    quote = Some('"');
                    out.push('\'');
                } else {
                    if c == '\'' || c == '`' {
                        quote = Some(c);
                    }
                    out.push(c);
                }
            }
            Some('"') => match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    out.push('"');
                }
                '"' => {
                    quote = None;
                    out.push('\'');
                }
                '\'' => out.push_str("''"),
                '\\' => {
                    out.push(c);
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                }
                _ => out.push(c),
            },
            Some(q) => {
                out.push(c);
                if c == '\\' && q == '\'' {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                } else if c == q {
                    quote = None;
                }
            }
        }
    }
    out
}

/// The first `n` words, upper-cased.
pub(crate) fn first_words(s: &str, n: usize) -> Vec<String> {
    s.split(|c: char| c.is_whitespace() || c == '(' || c == ';')
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

/// Whether `s` holds `word` anywhere, ignoring ASCII case (a cheap test before a closer look).
pub(crate) fn mentions(s: &str, word: &str) -> bool {
    s.as_bytes()
        .windows(word.len())
        .any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
}

/// Byte offset of `needle` (case-insensitive, whole words) outside quotes and parentheses.
pub(crate) fn find_top_level(s: &str, needle: &str) -> Option<usize> {
    let upper = s.to_ascii_uppercase();
    let bytes = upper.as_bytes();
    let n = needle.as_bytes();
    let mut depth = 0i32;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == b'\\' && q == b'\'' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
        } else {
            match c {
                b'\'' | b'"' | b'`' => quote = Some(c),
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ if depth == 0 && bytes[i..].starts_with(n) => {
                    let before_ok =
                        i == 0 || !bytes[i - 1].is_ascii_alphanumeric() && bytes[i - 1] != b'_';
                    let after = i + n.len();
                    let after_ok = after >= bytes.len()
                        || !bytes[after].is_ascii_alphanumeric() && bytes[after] != b'_';
                    if before_ok && after_ok {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// `s` with each MySQL `MOD` operator (`a MOD b`) written as `%`, or `None` when it has
/// none. `MOD` is the operator when it follows an operand (a number, a string, a name that is
/// not a keyword opening an expression, or a closing parenthesis); else it is the function
/// `MOD(a, b)` or a name.
pub(crate) fn mod_operators(s: &str) -> Option<String> {
    const OPENERS: &[&str] = &[
        "SELECT", "WHERE", "AND", "OR", "NOT", "XOR", "ON", "BY", "HAVING", "WHEN", "THEN", "ELSE",
        "SET", "VALUES", "VALUE", "IN", "RETURN", "DISTINCT", "AS", "CASE", "IS", "LIKE",
        "BETWEEN", "INTERVAL", "DIV", "MOD", "ALL", "ANY", "SOME", "EXISTS", "IF",
    ];
    if !mentions(s, "MOD") {
        return None;
    }
    let bytes = s.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
    let mut operators = Vec::new();
    let mut quote: Option<u8> = None;
    // The previous token outside quotes: a word, or its one character.
    let mut prev: &str = "";
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == b'\\' && q == b'\'' {
                i += 1;
            } else if c == q {
                quote = None;
                prev = &s[i..=i];
            }
            i += 1;
        } else if matches!(c, b'\'' | b'"' | b'`') {
            quote = Some(c);
            i += 1;
        } else if word(c) {
            let start = i;
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
            }
            let w = &s[start..i];
            let after_operand = match prev.as_bytes().first() {
                Some(b'\'' | b'"' | b'`' | b')') => true,
                Some(&b) if word(b) => !OPENERS.iter().any(|k| prev.eq_ignore_ascii_case(k)),
                _ => false,
            };
            if after_operand && w.eq_ignore_ascii_case("MOD") {
                operators.push(start..i);
            }
            prev = w;
        } else {
            let len = s[i..].chars().next().map_or(1, char::len_utf8);
            if !c.is_ascii_whitespace() {
                prev = &s[i..i + len];
            }
            i += len;
        }
    }
    if operators.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    for r in operators {
        out.push_str(&s[at..r.start]);
        out.push('%');
        at = r.end;
    }
    out.push_str(&s[at..]);
    Some(out)
}

/// `s` with each bit-value literal `0b101` outside quotes and names written `b'101'`, or
/// `None` when it has none: MySQL reads both alike, the parser takes `0b101` for a name.
pub(crate) fn bit_literals(s: &str) -> Option<String> {
    if !s.contains("0b") {
        return None;
    }
    let bytes = s.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
    let mut out = String::with_capacity(s.len() + 8);
    let mut quote: Option<u8> = None;
    let (mut i, mut copied, mut changed) = (0, 0, false);
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == b'\\' && q != b'`' {
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
        } else if matches!(c, b'\'' | b'"' | b'`') {
            quote = Some(c);
            i += 1;
        } else if word(c) {
            let start = i;
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
            }
            let w = &s[start..i];
            let qualified = start > 0 && bytes[start - 1] == b'.';
            if let Some(bits) = w.strip_prefix("0b") {
                if !bits.is_empty() && !qualified && bits.bytes().all(|b| b == b'0' || b == b'1') {
                    out.push_str(&s[copied..start]);
                    out.push_str("b'");
                    out.push_str(bits);
                    out.push('\'');
                    copied = i;
                    changed = true;
                }
            }
        } else {
            i += s[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    if !changed {
        return None;
    }
    out.push_str(&s[copied..]);
    Some(out)
}

/// `s` with each `||` outside quotes written as ` OR `, or `None` when it has none: MySQL
/// reads `||` as OR unless sql_mode has PIPES_AS_CONCAT (which ringrep's has not), with OR's
/// precedence, which the parser would not give a concatenation.
pub(crate) fn pipes_as_or(s: &str) -> Option<String> {
    if !s.contains("||") {
        return None;
    }
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len() + 8);
    let mut quote: Option<u8> = None;
    let mut at = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) => {
                if c == b'\\' && q != b'`' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None if matches!(c, b'\'' | b'"' | b'`') => quote = Some(c),
            // Comments are skipped whole: a quote in one would open a string that is not one.
            None if c == b'/' && bytes.get(i + 1) == Some(&b'*') => {
                i = s[i + 2..].find("*/").map_or(bytes.len(), |e| i + 2 + e + 2);
                continue;
            }
            None if c == b'#'
                || (c == b'-'
                    && bytes.get(i + 1) == Some(&b'-')
                    && bytes.get(i + 2).is_none_or(|b| b.is_ascii_whitespace())) =>
            {
                i = s[i..].find('\n').map_or(bytes.len(), |e| i + e + 1);
                continue;
            }
            None if c == b'|' && bytes.get(i + 1) == Some(&b'|') => {
                out.push_str(&s[at..i]);
                out.push_str(" OR ");
                i += 2;
                at = i;
                continue;
            }
            None => {}
        }
        i += 1;
    }
    (at > 0).then(|| {
        out.push_str(&s[at..]);
        out
    })
}

/// Splits at commas outside quotes and parentheses.
pub(crate) fn split_top_level_commas(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            cur.push(c);
            if c == '\\' && q == '\'' {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => {
                quote = Some(c);
                cur.push(c);
            }
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

#[cfg(test)]
mod bit_literal_tests {
    #[test]
    fn bit_literals_outside_quotes_and_names() {
        assert_eq!(
            super::bit_literals("SELECT 0b101, '0b1', `0b1`, t.0b1, x0b1, 0b102").as_deref(),
            Some("SELECT b'101', '0b1', `0b1`, t.0b1, x0b1, 0b102")
        );
        assert_eq!(super::bit_literals("SELECT 'no'"), None);
    }
}

/// A value as SQL literal text.
pub(crate) fn literal_text(v: &binlog_format::Value) -> String {
    use binlog_format::Value;
    match v {
        Value::Null => "NULL".into(),
        Value::Int(_)
        | Value::UInt(_)
        | Value::Decimal(_)
        | Value::Double(_)
        | Value::Float(_)
        | Value::Bit(_) => v.to_string(),
        Value::Bytes(b) => format!(
            "X'{}'",
            b.iter().map(|x| format!("{x:02X}")).collect::<String>()
        ),
        other => format!(
            "'{}'",
            ringrep_engine::types::text_of(other)
                .replace('\\', "\\\\")
                .replace('\'', "''")
        ),
    }
}

/// Byte offsets of the `?` placeholders outside quotes.
fn placeholders(sql: &str) -> Vec<usize> {
    let mut at = Vec::new();
    let mut quote: Option<char> = None;
    let mut chars = sql.char_indices();
    while let Some((i, c)) = chars.next() {
        match quote {
            Some(q) => {
                if c == '\\' {
                    chars.next();
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => quote = Some(c),
                '?' => at.push(i),
                _ => {}
            },
        }
    }
    at
}

/// How many `?` placeholders a statement has.
pub fn count_placeholders(sql: &str) -> usize {
    placeholders(sql).len()
}

/// Replaces each `?` outside quotes with the next value as a literal (NULL when values run
/// out).
pub fn bind_placeholders(sql: &str, values: &[binlog_format::Value]) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut last = 0;
    let mut next = values.iter();
    for at in placeholders(sql) {
        out.push_str(&sql[last..at]);
        out.push_str(
            &next
                .next()
                .map(literal_text)
                .unwrap_or_else(|| "NULL".into()),
        );
        last = at + 1;
    }
    out.push_str(&sql[last..]);
    out
}

/// Reads a quoted string literal at the start of `s`: (content, rest).
pub(crate) fn take_string(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start();
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let mut out = String::new();
    let mut chars = s[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            if let Some((_, n)) = chars.next() {
                out.push(match n {
                    'n' => '\n',
                    't' => '\t',
                    '0' => '\0',
                    other => other,
                });
            }
        } else if c == q {
            if s[1 + i + 1..].starts_with(q) {
                out.push(q);
                chars.next();
            } else {
                return Some((out, &s[1 + i + 1..]));
            }
        } else {
            out.push(c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_outside_quotes() {
        assert_eq!(
            split_statements("SELECT 'a;b'; SELECT 2;"),
            vec!["SELECT 'a;b'", "SELECT 2"]
        );
        assert_eq!(split_statements("-- c\nSELECT 1"), vec!["SELECT 1"]);
    }

    #[test]
    fn mod_after_an_operand_is_the_operator() {
        let m = |s: &str| mod_operators(s);
        assert_eq!(m("SELECT 10 mod 3").as_deref(), Some("SELECT 10 % 3"));
        assert_eq!(
            m("SELECT a MOD 2, (b) Mod (c) FROM t WHERE 'x' mod 2 = 0").as_deref(),
            Some("SELECT a % 2, (b) % (c) FROM t WHERE 'x' % 2 = 0")
        );
        // The function, a name, a quoted word: left alone.
        assert_eq!(
            m("SELECT MOD(10, 3), x AS mod FROM t WHERE NOT mod(1,2)"),
            None
        );
        assert_eq!(m("SELECT 'a mod b', `mod` FROM modes"), None);
        assert_eq!(m("SELECT 'é' mod 2").as_deref(), Some("SELECT 'é' % 2"));
    }

    #[test]
    fn pipes_outside_quotes_are_or() {
        assert_eq!(
            pipes_as_or("SELECT 1 || 0, 'a||b', `x||y` FROM t WHERE a = 1||b = 2").as_deref(),
            Some("SELECT 1  OR  0, 'a||b', `x||y` FROM t WHERE a = 1 OR b = 2")
        );
        assert_eq!(pipes_as_or("SELECT 'it\\'s ||'"), None);
        assert_eq!(pipes_as_or("SELECT a | b"), None);
        // A quote inside a comment opens no string.
        assert_eq!(
            pipes_as_or("INSERT INTO t VALUES (/* don't */ 'a||b')"),
            None
        );
        assert_eq!(
            pipes_as_or("SELECT 1 -- it's\n|| 0 # it's\n, 'x||y'").as_deref(),
            Some("SELECT 1 -- it's\n OR  0 # it's\n, 'x||y'")
        );
    }

    #[test]
    fn double_quotes_become_single() {
        assert_eq!(normalize_quotes(r#"COMMENT="it's""#), "COMMENT='it''s'");
        assert_eq!(normalize_quotes(r#"'say "hi"'"#), r#"'say "hi"'"#);
    }

    #[test]
    fn executable_comments_are_sql_and_plain_comments_stay() {
        assert_eq!(
            normalize_quotes("CREATE TABLE t (a INT)\n/*!50100 PARTITION BY KEY (a) */"),
            "CREATE TABLE t (a INT)\n  PARTITION BY KEY (a)  "
        );
        assert_eq!(normalize_quotes("SELECT /* x */ 1"), "SELECT /* x */ 1");
        assert_eq!(normalize_quotes("SELECT '/*!1 */'"), "SELECT '/*!1 */'");
    }

    #[test]
    fn top_level_search_skips_parens_and_quotes() {
        let s = "CREATE TABLE t (a INT COMMENT 'PARTITION BY') PARTITION BY KEY(a)";
        assert_eq!(find_top_level(s, "PARTITION BY"), Some(46));
        assert_eq!(
            split_top_level_commas("a, b(1,2), 'c,d'"),
            vec!["a", "b(1,2)", "'c,d'"]
        );
    }
}
