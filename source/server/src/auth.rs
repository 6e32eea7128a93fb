//! Accounts and `mysql_native_password`.
//!
//! The server keeps only SHA1(SHA1(password)) of each account, as MySQL does. A client proves
//! it knows the password by sending SHA1(password) XOR SHA1(salt + SHA1(SHA1(password))); the
//! salt is new for every connection, so a recorded answer is worth nothing on the next one.

use std::collections::HashMap;

use sha1_smol::Sha1;

fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut h = Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.digest().bytes()
}

/// The accounts a server accepts: user name to stored hash (`None`: no password).
#[derive(Debug, Clone, Default)]
pub struct Accounts {
    users: HashMap<String, Option<[u8; 20]>>,
    /// SHA256(SHA256(password)) of each, for `caching_sha2_password` (`None`: no password).
    sha2: HashMap<String, Option<[u8; 32]>>,
}

impl Accounts {
    /// Adds or replaces an account; an empty password means none.
    pub fn add(&mut self, user: &str, password: &str) {
        let stored = (!password.is_empty()).then(|| sha1(&[&sha1(&[password.as_bytes()])]));
        self.users.insert(user.to_string(), stored);
        let sha2 = (!password.is_empty()).then(|| ringrep_protocol::sha2_stored(password));
        self.sha2.insert(user.to_string(), sha2);
    }

    /// Whether `user` has an account without a password.
    pub fn passwordless(&self, user: &str) -> bool {
        matches!(self.users.get(user), Some(None))
    }

    /// Whether `user` is one of these accounts (which then hides any of `mysql.user` with
    /// the same name).
    pub fn has(&self, user: &str) -> bool {
        self.users.contains_key(user)
    }

    /// Checks a `caching_sha2_password` answer to `salt`.
    pub fn check_sha2(&self, user: &str, salt: &[u8], answer: &[u8]) -> bool {
        match self.sha2.get(user) {
            None => false,
            Some(stored) => ringrep_protocol::check_sha2(stored.as_ref(), salt, answer),
        }
    }

    /// Checks a `mysql_native_password` answer to `salt`.
    pub fn check(&self, user: &str, salt: &[u8], answer: &[u8]) -> bool {
        match self.users.get(user) {
            None => false,
            Some(stored) => check_answer(stored.as_ref(), salt, answer),
        }
    }
}

/// Whether `answer` proves the password whose SHA1(SHA1()) is `stored` (`None`: no password,
/// and only an empty answer passes).
pub(crate) fn check_answer(stored: Option<&[u8; 20]>, salt: &[u8], answer: &[u8]) -> bool {
    let Some(stored) = stored else {
        return answer.is_empty();
    };
    if answer.len() != 20 {
        return false;
    }
    let mask = sha1(&[salt, stored]);
    let mut stage1 = [0u8; 20];
    for i in 0..20 {
        stage1[i] = answer[i] ^ mask[i];
    }
    // Compare all 20 bytes whatever the first difference, so timing tells nothing.
    sha1(&[&stage1])
        .iter()
        .zip(stored)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// A fresh 20-byte salt of printable characters (MySQL clients expect no NUL and no `$`).
pub(crate) fn new_salt() -> std::io::Result<[u8; 20]> {
    let mut raw = [0u8; 20];
    getrandom::fill(&mut raw).map_err(|e| std::io::Error::other(format!("no randomness: {e}")))?;
    let mut salt = [0u8; 20];
    for (s, r) in salt.iter_mut().zip(raw) {
        // 0x21..=0x7e without '$': 93 characters.
        let c = 0x21 + r % 93;
        *s = if c == b'$' { b'~' } else { c };
    }
    Ok(salt)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client computes (see the module comment).
    fn answer(password: &str, salt: &[u8]) -> Vec<u8> {
        let stage1 = sha1(&[password.as_bytes()]);
        let mask = sha1(&[salt, &sha1(&[&stage1])]);
        stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
    }

    #[test]
    fn right_password_accepted_wrong_refused() {
        let mut a = Accounts::default();
        a.add("root", "secret");
        let salt = new_salt().expect("salt");
        assert!(a.check("root", &salt, &answer("secret", &salt)));
        assert!(!a.check("root", &salt, &answer("Secret", &salt)));
        assert!(!a.check("root", &salt, &[]));
        assert!(!a.check("nobody", &salt, &answer("secret", &salt)));
        // An answer to one salt does not open another connection.
        let other = new_salt().expect("salt");
        assert_ne!(salt, other);
        assert!(!a.check("root", &other, &answer("secret", &salt)));
    }

    #[test]
    fn no_password_accepts_only_an_empty_answer() {
        let mut a = Accounts::default();
        a.add("root", "");
        assert!(a.passwordless("root"));
        let salt = new_salt().expect("salt");
        assert!(a.check("root", &salt, &[]));
        assert!(!a.check("root", &salt, &answer("x", &salt)));
    }

    #[test]
    fn salts_are_printable_and_never_dollar() {
        for _ in 0..100 {
            let s = new_salt().expect("salt");
            assert!(s.iter().all(|&c| (0x21..=0x7e).contains(&c) && c != b'$'));
        }
    }
}
