//! The statements that steer a replica's replication, as MySQL 8 spells them (and the older
//! `MASTER`/`SLAVE` names): `CHANGE REPLICATION SOURCE TO ...`, `START REPLICA`, `STOP
//! REPLICA`, `RESET REPLICA [ALL]`. The replica binary carries them out
//! ([`crate::ReplicaControl`]); a primary refuses them.

use ringrep_engine::error::{code, Error};

/// One option of CHANGE REPLICATION SOURCE TO.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceOption {
    /// `SOURCE_HOST`.
    Host(String),
    /// `SOURCE_PORT`.
    Port(u16),
    /// `SOURCE_USER`.
    User(String),
    /// `SOURCE_PASSWORD`.
    Password(String),
    /// `SOURCE_SSL`: TLS to the source.
    Ssl(bool),
    /// `SOURCE_SSL_CA`: the CA (PEM file) the source's certificate is verified against.
    SslCa(String),
    /// `SOURCE_HEARTBEAT_PERIOD`, in milliseconds (given in seconds, fractions allowed).
    HeartbeatMs(u64),
    /// `SOURCE_CONNECT_RETRY`, in seconds.
    ConnectRetry(u64),
    /// `SOURCE_AUTO_POSITION = 1`: what a ringrep replica always does (it resumes from the
    /// sequence it applied per origin), accepted for scripts that set it.
    AutoPosition,
}

/// A replication statement, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicaCommand {
    /// `CHANGE REPLICATION SOURCE TO` (or `CHANGE MASTER TO`): the options given; the others
    /// keep their values.
    ChangeSource(Vec<SourceOption>),
    /// `START REPLICA` (`START SLAVE`).
    Start,
    /// `STOP REPLICA` (`STOP SLAVE`).
    Stop,
    /// `RESET REPLICA [ALL]` (`RESET SLAVE`): clears the channel's errors; with ALL, forgets
    /// the source too.
    Reset {
        /// `ALL`.
        all: bool,
    },
}

fn syntax(near: &str) -> Error {
    Error::syntax(format!(
        "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '{near}'"
    ))
}

/// The replication statement `text` is, if it is one: `None` for any other statement.
pub fn parse(text: &str) -> Option<Result<ReplicaCommand, Error>> {
    let t = text.trim().trim_end_matches(';').trim();
    let upper = t.to_ascii_uppercase();
    let words: Vec<&str> = upper.split_whitespace().collect();
    let is = |ws: &[&str]| words.len() >= ws.len() && words[..ws.len()] == *ws;
    if is(&["START", "REPLICA"]) || is(&["START", "SLAVE"]) {
        return Some(only(&words, 2, ReplicaCommand::Start));
    }
    if is(&["STOP", "REPLICA"]) || is(&["STOP", "SLAVE"]) {
        return Some(only(&words, 2, ReplicaCommand::Stop));
    }
    if is(&["RESET", "REPLICA"]) || is(&["RESET", "SLAVE"]) {
        return Some(match words.get(2) {
            None => Ok(ReplicaCommand::Reset { all: false }),
            Some(&"ALL") if words.len() == 3 => Ok(ReplicaCommand::Reset { all: true }),
            Some(w) => Err(syntax(w)),
        });
    }
    let (skip, prefix) = if is(&["CHANGE", "REPLICATION", "SOURCE", "TO"]) {
        (4, "SOURCE_")
    } else if is(&["CHANGE", "MASTER", "TO"]) {
        (3, "MASTER_")
    } else {
        return None;
    };
    // The options start after the skipped words.
    let mut rest = t;
    for _ in 0..skip {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    Some(options(rest, prefix).map(ReplicaCommand::ChangeSource))
}

fn only(words: &[&str], n: usize, cmd: ReplicaCommand) -> Result<ReplicaCommand, Error> {
    match words.get(n) {
        None => Ok(cmd),
        Some(w) => Err(Error::unsupported(format!(
            "{} ... {w}: ringrep has one replication channel, started and stopped whole",
            words[..n].join(" ")
        ))),
    }
}

/// A value: a quoted string or a bare number.
enum Literal {
    Text(String),
    Number(String),
}

fn options(mut s: &str, prefix: &str) -> Result<Vec<SourceOption>, Error> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start();
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        let name = s[..end].to_ascii_uppercase();
        if name.is_empty() {
            return Err(syntax(s));
        }
        s = s[end..].trim_start();
        s = s.strip_prefix('=').ok_or_else(|| syntax(s))?.trim_start();
        let (value, after) = literal(s)?;
        s = after.trim_start();
        out.push(option(&name, prefix, value)?);
        if s.is_empty() {
            return Ok(out);
        }
        s = s.strip_prefix(',').ok_or_else(|| syntax(s))?;
    }
}

fn literal(s: &str) -> Result<(Literal, &str), Error> {
    if let Some(q) = s.chars().next().filter(|c| *c == '\'' || *c == '"') {
        let body = &s[1..];
        let mut out = String::new();
        let mut chars = body.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '\\' {
                if let Some((_, n)) = chars.next() {
                    out.push(n);
                }
            } else if c == q {
                // A doubled quote is one quote character.
                if chars.peek().is_some_and(|(_, n)| *n == q) {
                    chars.next();
                    out.push(q);
                } else {
                    return Ok((Literal::Text(out), &body[i + 1..]));
                }
            } else {
                out.push(c);
            }
        }
        return Err(syntax(s));
    }
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .unwrap_or(s.len());
    if end == 0 {
        return Err(syntax(s));
    }
    Ok((Literal::Number(s[..end].to_string()), &s[end..]))
}

fn option(name: &str, prefix: &str, value: Literal) -> Result<SourceOption, Error> {
    let Some(key) = name.strip_prefix(prefix) else {
        return Err(syntax(name));
    };
    let text = |v: Literal| match v {
        Literal::Text(t) => Ok(t),
        Literal::Number(n) => Err(syntax(&n)),
    };
    let number = |v: &Literal| -> Result<String, Error> {
        match v {
            Literal::Number(n) => Ok(n.clone()),
            Literal::Text(t) => Err(syntax(t)),
        }
    };
    let wrong = |what: &str, v: &str| {
        Error::new(
            code::ER_WRONG_ARGUMENTS,
            format!("Incorrect arguments to CHANGE REPLICATION SOURCE: {name} = {v} ({what})"),
        )
    };
    Ok(match key {
        "HOST" => SourceOption::Host(text(value)?),
        "USER" => SourceOption::User(text(value)?),
        "PASSWORD" => SourceOption::Password(text(value)?),
        "SSL_CA" => SourceOption::SslCa(text(value)?),
        "PORT" => {
            let n = number(&value)?;
            SourceOption::Port(
                n.parse()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| wrong("a port, 1 to 65535", &n))?,
            )
        }
        "SSL" | "SSL_VERIFY_SERVER_CERT" => {
            let n = number(&value)?;
            let on = match n.as_str() {
                "0" => false,
                "1" => true,
                _ => return Err(wrong("0 or 1", &n)),
            };
            if key == "SSL" {
                SourceOption::Ssl(on)
            } else if on {
                // ringrep always verifies the source's certificate when TLS is on.
                SourceOption::Ssl(true)
            } else {
                return Err(Error::unsupported(format!(
                    "{name} = 0: ringrep always verifies the source's certificate (give {prefix}SSL_CA)"
                )));
            }
        }
        "HEARTBEAT_PERIOD" => {
            let n = number(&value)?;
            let secs: f64 = n.parse().map_err(|_| wrong("seconds", &n))?;
            if !(0.001..=4_294_967.0).contains(&secs) {
                return Err(wrong("seconds, at least 0.001", &n));
            }
            SourceOption::HeartbeatMs((secs * 1000.0).round() as u64)
        }
        "CONNECT_RETRY" => {
            let n = number(&value)?;
            let secs: u64 = n.parse().map_err(|_| wrong("whole seconds", &n))?;
            SourceOption::ConnectRetry(secs.max(1))
        }
        "AUTO_POSITION" => {
            // ringrep always resumes from the sequence it applied per origin (GTID-like).
            let n = number(&value)?;
            if n != "1" {
                return Err(Error::unsupported(format!(
                    "{name} = {n}: a ringrep replica always positions itself by the sequence numbers it applied"
                )));
            }
            SourceOption::AutoPosition
        }
        "LOG_FILE" | "LOG_POS" => {
            return Err(Error::unsupported(format!(
                "{name}: a ringrep replica resumes from the sequence numbers it applied, not from a file position"
            )))
        }
        _ => return Err(syntax(name)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_parse_with_both_vocabularies() {
        assert_eq!(parse("SELECT 1"), None);
        assert_eq!(
            parse("start replica").map(|r| r.ok()),
            Some(Some(ReplicaCommand::Start))
        );
        assert_eq!(
            parse("STOP SLAVE;").map(|r| r.ok()),
            Some(Some(ReplicaCommand::Stop))
        );
        assert_eq!(
            parse("RESET REPLICA ALL").map(|r| r.ok()),
            Some(Some(ReplicaCommand::Reset { all: true }))
        );
        let cmd = parse(
            "CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT=3306, SOURCE_USER = 'repl', SOURCE_PASSWORD='it''s', SOURCE_HEARTBEAT_PERIOD=0.5, SOURCE_CONNECT_RETRY=5, SOURCE_SSL=0",
        )
        .expect("a replication statement")
        .expect("parses");
        assert_eq!(
            cmd,
            ReplicaCommand::ChangeSource(vec![
                SourceOption::Host("127.0.0.1".into()),
                SourceOption::Port(3306),
                SourceOption::User("repl".into()),
                SourceOption::Password("it's".into()),
                SourceOption::HeartbeatMs(500),
                SourceOption::ConnectRetry(5),
                SourceOption::Ssl(false),
            ])
        );
        let old = parse("CHANGE MASTER TO MASTER_HOST='h', MASTER_PORT=1")
            .expect("a replication statement")
            .expect("parses");
        assert_eq!(
            old,
            ReplicaCommand::ChangeSource(vec![
                SourceOption::Host("h".into()),
                SourceOption::Port(1)
            ])
        );
    }

    #[test]
    fn bad_options_are_mysqls_errors() {
        let err = |s: &str| parse(s).expect("replication").expect_err("refused");
        assert_eq!(
            err("CHANGE REPLICATION SOURCE TO SOURCE_HOSTS='x'").code,
            1064
        );
        assert_eq!(
            err("CHANGE REPLICATION SOURCE TO SOURCE_PORT=99999").code,
            1210
        );
        assert_eq!(
            err("CHANGE REPLICATION SOURCE TO SOURCE_PORT='1'").code,
            1064
        );
        assert_eq!(
            err("CHANGE REPLICATION SOURCE TO MASTER_HOST='x'").code,
            1064
        );
        assert_eq!(
            err("CHANGE REPLICATION SOURCE TO SOURCE_LOG_POS=4").code,
            1235
        );
        assert_eq!(
            err("CHANGE REPLICATION SOURCE TO SOURCE_HOST='x' SOURCE_PORT=1").code,
            1064
        );
        assert_eq!(err("START REPLICA IO_THREAD").code, 1235);
    }
}
