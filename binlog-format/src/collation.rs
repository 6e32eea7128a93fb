//! How text compares: the one collation of ringrep's text columns (CHAR, VARCHAR, TEXT), MySQL's
//! default `utf8mb4_0900_ai_ci` at its primary level, so without case and without accents.
//!
//! Keys, unique indexes, ring prefixes, WHERE, GROUP BY, DISTINCT and ORDER BY all compare text
//! by its *folded* form (see [`fold`]): two strings are equal when their folded forms are, and
//! order as their folded forms do, code point by code point. Everything that compares text
//! goes through this module, so a key that a WHERE finds is the key that the store files the
//! row under, and a second row whose key differs from the first only in case is a duplicate.
//!
//! The folded form approximates the Unicode Collation Algorithm's primary weights (DUCET, as
//! MySQL's 0900 collations use them) without their tables: each character is decomposed
//! (NFKD, so `é` is `e` and an accent, `ﬁ` is `fi`, a full-width `Ａ` is `A`), its marks dropped,
//! and the rest lowercased; a few letters that DUCET expands or treats as a letter with a
//! diacritic but that Unicode does not decompose are mapped by hand (`ß` and `ss`, `æ` and
//! `ae`, `œ` and `oe`, `ø` and `o`, `đ` and `d`, `ł` and `l`, `ħ` and `h`, `ŧ` and `t`).
//! Equality matches MySQL for the Latin, Greek and Cyrillic alphabets; the order differs from
//! MySQL's for punctuation and symbols (MySQL puts them before digits and letters, here they
//! sort by code point) and across scripts. Like the 0900 collations this is NO PAD: trailing
//! spaces count (`'a' = 'a '` is false).

use std::cmp::Ordering;
use std::hash::Hasher;

use unicode_normalization::char::{decompose_compatible, is_combining_mark};

/// The collation's name as MySQL reports it.
pub const NAME: &str = "utf8mb4_0900_ai_ci";

/// Calls `f` with each character of `s`'s folded form, in order.
#[inline]
pub fn fold(s: &str, mut f: impl FnMut(char)) {
    for c in s.chars() {
        if c.is_ascii() {
            f(c.to_ascii_lowercase());
        } else {
            fold_char(c, &mut f);
        }
    }
}

/// The folded form of `s` as a string.
pub fn folded(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    fold(s, |c| out.push(c));
    out
}

/// Letters DUCET gives the primary weights of other letters but Unicode does not decompose.
fn expansion(c: char) -> Option<&'static str> {
    Some(match c {
        'ß' | 'ẞ' => "ss",
        'æ' | 'Æ' => "ae",
        'œ' | 'Œ' => "oe",
        'ø' | 'Ø' => "o",
        'đ' | 'Đ' => "d",
        'ł' | 'Ł' => "l",
        'ħ' | 'Ħ' => "h",
        'ŧ' | 'Ŧ' => "t",
        'ς' => "σ",
        _ => return None,
    })
}

#[cold]
fn fold_char(c: char, f: &mut impl FnMut(char)) {
    if let Some(e) = expansion(c) {
        e.chars().for_each(f);
        return;
    }
    decompose_compatible(c, |d| {
        if is_combining_mark(d) {
            return;
        }
        if let Some(e) = expansion(d) {
            e.chars().for_each(&mut *f);
            return;
        }
        for l in d.to_lowercase() {
            if !is_combining_mark(l) {
                f(l);
            }
        }
    });
}

/// The collation's order of two strings.
pub fn cmp(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        // Most text is ASCII: compare without building the folded forms.
        let x = a.bytes().map(|c| c.to_ascii_lowercase());
        let y = b.bytes().map(|c| c.to_ascii_lowercase());
        return x.cmp(y);
    }
    let (mut x, mut y) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    fold(a, |c| x.push(c));
    fold(b, |c| y.push(c));
    x.cmp(&y)
}

/// Whether two strings are equal under the collation.
pub fn eq(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    cmp(a, b) == Ordering::Equal
}

/// Feeds the folded form of `s` to a hasher: strings that [`eq`] calls equal hash alike.
pub fn hash<H: Hasher>(s: &str, h: &mut H) {
    let mut n = 0u32;
    fold(s, |c| {
        h.write_u32(c as u32);
        n += 1;
    });
    // The count ends the string, so ("ab", "c") and ("a", "bc") hash apart in a tuple.
    h.write_u32(n);
}

/// Appends the folded form of `s` as UTF-8 (its bytes sort as [`cmp`] orders the strings),
/// handing each byte to `push`.
pub fn weight_bytes(s: &str, mut push: impl FnMut(u8)) {
    if s.is_ascii() {
        s.bytes().for_each(|b| push(b.to_ascii_lowercase()));
        return;
    }
    fold(s, |c| {
        let mut buf = [0u8; 4];
        c.encode_utf8(&mut buf).bytes().for_each(&mut push);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::hash::{BuildHasher, RandomState};

    #[test]
    fn case_and_accents_do_not_count() {
        for (a, b) in [
            ("Bob", "bob"),
            ("BOB", "bob"),
            ("e", "é"),
            ("Ünïcödé", "unicode"),
            ("straße", "STRASSE"),
            ("Æsir", "aesir"),
            ("Øre", "ore"),
            ("ﬁne", "fine"),
            ("Ａ", "a"),
            ("Łódź", "lodz"),
            ("ΣΟΦΟΣ", "σοφος"),
            ("İstanbul", "istanbul"),
        ] {
            assert!(eq(a, b), "{a} = {b}");
            assert_eq!(cmp(a, b), Ordering::Equal, "{a} = {b}");
            assert_eq!(folded(a), folded(b), "{a} = {b}");
        }
    }

    #[test]
    fn other_letters_spaces_and_order_count() {
        for (a, b) in [("a", "a "), ("a", "b"), ("bob", "bobby"), ("a b", "ab")] {
            assert!(!eq(a, b), "{a} <> {b}");
            assert_eq!(cmp(a, b), Ordering::Less, "{a} < {b}");
            assert_eq!(cmp(b, a), Ordering::Greater, "{b} > {a}");
        }
        // Case-insensitive order, not byte order: 'B' (0x42) is after 'a' (0x61).
        assert_eq!(cmp("a", "B"), Ordering::Less);
        assert_eq!(cmp("é", "f"), Ordering::Less);
    }

    fn text() -> impl Strategy<Value = String> {
        // Few letters, both cases, accents and expansions, so that equal pairs are common.
        proptest::collection::vec(
            proptest::sample::select(vec![
                'a', 'A', 'á', 'Á', 'b', 'B', 's', 'S', 'ß', 'e', 'é', 'æ', 'Æ', ' ', '\0', 'ﬁ',
                'f', 'i', 'z', '~',
            ]),
            0..6,
        )
        .prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        #[test]
        fn the_fast_and_the_folded_paths_agree(a in text(), b in text()) {
            let folded_order = folded(&a).cmp(&folded(&b));
            prop_assert_eq!(cmp(&a, &b), folded_order);
            prop_assert_eq!(eq(&a, &b), folded_order == Ordering::Equal);
            let (mut x, mut y) = (Vec::new(), Vec::new());
            weight_bytes(&a, |c| x.push(c));
            weight_bytes(&b, |c| y.push(c));
            prop_assert_eq!(x.cmp(&y), folded_order);
            if folded_order == Ordering::Equal {
                let s = RandomState::new();
                let (mut h1, mut h2) = (s.build_hasher(), s.build_hasher());
                hash(&a, &mut h1);
                hash(&b, &mut h2);
                prop_assert_eq!(h1.finish(), h2.finish());
            }
        }

        #[test]
        fn folding_is_idempotent(a in text()) {
            prop_assert_eq!(folded(&folded(&a)), folded(&a));
        }
    }
}
