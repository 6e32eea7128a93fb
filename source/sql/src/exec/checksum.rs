//! `CHECKSUM TABLE t [, t2 ...] [QUICK | EXTENDED]`: MySQL's statement, one row per table
//! with its `Table` (`db.t`) and `Checksum` (NULL, with note 1146, for a table that does not
//! exist). ringrep's checksum is a CRC32C over the rows' stored encodings in key order
//! ([`ringrep_engine::Session::checksum`]): equal on two nodes holding the same rows, not the
//! number MySQL would print for them. With `ringrep_checksum_rows = ON` a third column, `Rows`,
//! counts the rows checksummed: what `ringrep-applier verify` compares two servers by before it
//! reads any row (docs/operations.md, "Verifying").

use ringrep_engine::error::{code, Error, Result};

use crate::parse::lexer;
use crate::{Outcome, SqlSession};

impl SqlSession {
    /// CHECKSUM TABLE; `text` is the whole statement.
    pub(crate) fn checksum_table(&mut self, text: &str) -> Result<Outcome> {
        let names = table_names(text)?;
        let with_rows = self.checksum_rows;
        let mut rows = Vec::with_capacity(names.len());
        for (db, name) in names {
            let shown = format!(
                "{}.{name}",
                db.as_deref()
                    .or(self.session.vars.database.as_deref())
                    .unwrap_or_default()
            );
            let sums = match self.session.table_def(db.as_deref(), &name) {
                Ok(def) => Some(self.session.checksum(&def)?),
                Err(e) if e.code == code::ER_NO_SUCH_TABLE.number => {
                    self.session.warn(e.code, e.message);
                    None
                }
                Err(e) => return Err(e),
            };
            let mut row = vec![Some(shown), sums.map(|(_, crc)| crc.to_string())];
            if with_rows {
                row.push(sums.map(|(n, _)| n.to_string()));
            }
            rows.push(row);
        }
        Ok(if with_rows {
            Outcome::text_with_integers(&["Table", "Checksum", "Rows"], rows, &["Checksum", "Rows"])
        } else {
            Outcome::text_with_integers(&["Table", "Checksum"], rows, &["Checksum"])
        })
    }
}

/// The tables a CHECKSUM TABLE names, as (database, table), backquotes taken off.
pub(crate) fn table_names(text: &str) -> Result<Vec<(Option<String>, String)>> {
    let upper = text.to_ascii_uppercase();
    let list = upper
        .find("TABLE")
        .map(|i| &text[i + 5..])
        .unwrap_or_default()
        .trim()
        .trim_end_matches(';');
    let mut names = Vec::new();
    let parts = lexer::split_top_level_commas(list);
    let count = parts.len();
    for (i, part) in parts.into_iter().enumerate() {
        let mut part = part.trim();
        if i + 1 == count {
            // The option MySQL takes after the last name: both read every row here.
            for option in ["QUICK", "EXTENDED"] {
                let t = part.to_ascii_uppercase();
                if let Some(head) = t.strip_suffix(option) {
                    if head.ends_with(char::is_whitespace) {
                        part = part[..head.len()].trim_end();
                    }
                }
            }
        }
        if part.is_empty() || part.contains(char::is_whitespace) {
            return Err(Error::syntax(format!(
                "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '{}'",
                part
            )));
        }
        let bare = part.replace('`', "");
        names.push(match bare.split_once('.') {
            Some((d, t)) => (Some(d.to_string()), t.to_string()),
            None => (None, bare),
        });
    }
    if names.is_empty() {
        return Err(Error::syntax(
            "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near ''",
        ));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_databases_backquotes_and_the_option() {
        assert_eq!(
            table_names("CHECKSUM TABLE `d`.`t`, u EXTENDED").expect("names"),
            vec![
                (Some("d".to_string()), "t".to_string()),
                (None, "u".to_string())
            ]
        );
        assert_eq!(
            table_names("checksum table quick quick").expect("names"),
            vec![(None, "quick".to_string())]
        );
        assert!(table_names("CHECKSUM TABLE").is_err());
        assert!(table_names("CHECKSUM TABLE t u").is_err());
    }
}
