//! The node's own accounts (root and the config file's) and the salts of logins.
//!
//! The server keeps only digests of each password, as MySQL does: SHA1(SHA1(password)) for
//! `mysql_native_password`, SHA256(SHA256(password)) for `caching_sha2_password`. A client
//! proves it knows the password by answering a salt that is new for every connection, so a
//! recorded answer is worth nothing on the next one (the checks: `ringrep_protocol`).

use std::collections::HashMap;

use ringrep_protocol::{check_native, check_sha2};
use ringrep_sql::store::{password_hash, sha2_hash};

/// What is kept of one account's password: the digest each method checks (`None`: no
/// password).
#[derive(Debug, Clone, Copy)]
struct Stored {
    native: Option<[u8; 20]>,
    sha2: Option<[u8; 32]>,
}

/// The accounts a server accepts, by user name.
#[derive(Debug, Clone, Default)]
pub struct Accounts {
    users: HashMap<String, Stored>,
}

impl Accounts {
    /// Adds or replaces an account; an empty password means none.
    pub fn add(&mut self, user: &str, password: &str) {
        let stored = Stored {
            native: password_hash(password),
            sha2: sha2_hash(password),
        };
        self.users.insert(user.to_string(), stored);
    }

    /// Whether `user` has an account without a password.
    pub fn passwordless(&self, user: &str) -> bool {
        self.users.get(user).is_some_and(|s| s.native.is_none())
    }

    /// Whether `user` is one of these accounts (which then hides any of `mysql.user` with
    /// the same name).
    pub fn has(&self, user: &str) -> bool {
        self.users.contains_key(user)
    }

    /// Checks a `caching_sha2_password` answer to `salt`.
    pub fn check_sha2(&self, user: &str, salt: &[u8], answer: &[u8]) -> bool {
        self.users
            .get(user)
            .is_some_and(|s| check_sha2(s.sha2.as_ref(), salt, answer))
    }

    /// Checks a `mysql_native_password` answer to `salt`.
    pub fn check(&self, user: &str, salt: &[u8], answer: &[u8]) -> bool {
        self.users
            .get(user)
            .is_some_and(|s| check_native(s.native.as_ref(), salt, answer))
    }
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
        ringrep_protocol::native_answer(password, salt)
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
