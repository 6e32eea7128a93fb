//! The mysqltest language of `.test` files, parsed into steps.
//!
//! What mysqltest reads: a line starting with `--` is one command (`--echo text`,
//! `--error ER_DUP_ENTRY`, `--connection con1`, ...) ending at the line's end; anything else
//! runs to the current delimiter (`;` until a `delimiter` command changes it) and is either a
//! command, when its first word is one (`let $i = 1;`, `connect (con1,...);`, `eval ...;`), or
//! an SQL statement. `#` starts a comment line. `while (cond) { ... }` and `if (cond) { ... }`
//! hold blocks; `--write_file path` takes the lines up to `EOF` as the file's content.

use anyhow::{bail, Context};

/// One step of a script, with the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Line of the script the step starts on.
    pub line: usize,
    /// What the step does.
    pub kind: StepKind,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepKind {
    /// An SQL statement; `eval` statements have their `$variables` replaced first.
    Query {
        /// The statement's text, its lines without their leading blanks (as mysqltest echoes
        /// them), without the delimiter.
        sql: String,
        /// Whether `$variables` are replaced before it runs.
        eval: bool,
        /// The delimiter it ended with (echoed after it).
        delimiter: String,
    },
    /// A mysqltest command other than the block and file commands, by lower-case name.
    Command {
        /// The command's name, lower case (`echo`, `error`, `connection`, `let`, ...).
        name: String,
        /// Everything after the name, trimmed (for `connect`: what is inside the parentheses).
        arg: String,
    },
    /// `--write_file` / `--append_file`: the file's path and the lines up to the terminator.
    WriteFile {
        /// The path as written (variables are replaced when it runs).
        path: String,
        /// The content, each line ending with a newline.
        content: String,
        /// `append_file` rather than `write_file`.
        append: bool,
    },
    /// `--perl [terminator]`: a Perl program, the lines up to the terminator (`EOF`).
    Perl {
        /// The program, each line ending with a newline.
        content: String,
    },
    /// `while (cond) { ... }`: repeated while the condition holds.
    While {
        /// The condition inside the parentheses.
        cond: String,
        /// The block's steps.
        body: Vec<Step>,
    },
    /// `if (cond) { ... }`: run once when the condition holds.
    If {
        /// The condition inside the parentheses.
        cond: String,
        /// The block's steps.
        body: Vec<Step>,
    },
}

/// mysqltest's commands that can also be written without `--`, terminated by the delimiter.
/// A statement whose first word is not among them is SQL.
const COMMANDS: &[&str] = &[
    "append_file",
    "cat_file",
    "character_set",
    "connect",
    "connection",
    "copy_file",
    "dec",
    "delimiter",
    "die",
    "disable_abort_on_error",
    "disable_info",
    "disable_query_log",
    "disable_result_log",
    "disable_warnings",
    "disconnect",
    "echo",
    "enable_abort_on_error",
    "enable_info",
    "enable_query_log",
    "enable_result_log",
    "enable_warnings",
    "end",
    "error",
    "eval",
    "exec",
    "exit",
    "file_exists",
    "perl",
    "horizontal_results",
    "inc",
    "let",
    "mkdir",
    "query",
    "query_vertical",
    "real_sleep",
    "reap",
    "remove_file",
    "replace_column",
    "replace_regex",
    "replace_result",
    "rmdir",
    "save_master_pos",
    "send",
    "skip",
    "sleep",
    "sorted_result",
    "source",
    "sync_slave_with_master",
    "sync_with_master",
    "vertical_results",
    "write_file",
];

/// Parses a whole script.
pub fn parse(text: &str) -> anyhow::Result<Vec<Step>> {
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut parser = Parser {
        numbers: (1..=lines.len()).collect(),
        lines,
        at: 0,
        delimiter: ";".into(),
    };
    parser.steps(false)
}

struct Parser {
    /// The lines still to read (what follows a delimiter on its line is put back as a line).
    lines: Vec<String>,
    /// The script line each of `lines` comes from.
    numbers: Vec<usize>,
    at: usize,
    delimiter: String,
}

/// Where `delimiter` first occurs in `line` outside quotes and backquotes.
fn find_delimiter(line: &str, delimiter: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q != '`' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
            None if line[i..].starts_with(delimiter) => return Some(i),
            None => {}
        }
    }
    None
}

/// The first word of `text` (letters, digits, `_`) and the rest, trimmed.
fn split_word(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (&text[..end], text[end..].trim())
}

/// The text inside the parentheses that open `text` (nested ones kept), and what follows.
fn parenthesised(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    if !text.starts_with('(') {
        return None;
    }
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&text[1..i], &text[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

impl Parser {
    fn steps(&mut self, nested: bool) -> anyhow::Result<Vec<Step>> {
        let mut steps = Vec::new();
        while self.at < self.lines.len() {
            let line = self.numbers[self.at];
            let t = self.lines[self.at].trim().to_string();
            let t = t.as_str();
            if t.is_empty() || t.starts_with('#') {
                self.at += 1;
                continue;
            }
            if t.starts_with('}') {
                self.at += 1;
                if nested {
                    return Ok(steps);
                }
                bail!("line {line}: '}}' closes no block");
            }
            if let Some(rest) = t.strip_prefix("--") {
                self.at += 1;
                let (name, arg) = split_word(rest.trim_start());
                let name = name.to_ascii_lowercase();
                if let Some(step) = self.command(line, &name, arg)? {
                    steps.push(step);
                }
                continue;
            }
            let (word, rest) = split_word(t);
            let word = word.to_ascii_lowercase();
            if word == "while" || word == "if" {
                self.at += 1;
                let (cond, after) = parenthesised(rest)
                    .with_context(|| format!("line {line}: {word} needs (condition)"))?;
                let cond = cond.trim().to_string();
                if after.trim() != "{" {
                    // The brace may stand on the next line.
                    while self.at < self.lines.len() && self.lines[self.at].trim().is_empty() {
                        self.at += 1;
                    }
                    if self.lines.get(self.at).map(|l| l.trim()) != Some("{") {
                        bail!("line {line}: {word} (...) must be followed by {{");
                    }
                    self.at += 1;
                }
                let body = self.steps(true)?;
                steps.push(Step {
                    line,
                    kind: if word == "while" {
                        StepKind::While { cond, body }
                    } else {
                        StepKind::If { cond, body }
                    },
                });
                continue;
            }
            let text = self.until_delimiter(line)?;
            let (word, rest) = split_word(&text);
            let name = word.to_ascii_lowercase();
            if COMMANDS.contains(&name.as_str()) {
                let arg = match name.as_str() {
                    "connect" => parenthesised(rest).map_or(rest, |(inside, _)| inside),
                    _ => rest,
                };
                if let Some(step) = self.command(line, &name, arg)? {
                    steps.push(step);
                }
            } else {
                steps.push(Step {
                    line,
                    kind: StepKind::Query {
                        sql: text,
                        eval: false,
                        delimiter: self.delimiter.clone(),
                    },
                });
            }
        }
        if nested {
            bail!("the script ends inside a block that was never closed");
        }
        Ok(steps)
    }

    /// The text from the current line to the delimiter, each line's leading blanks dropped.
    /// What follows the delimiter on its line (another statement, a `#` comment) is read
    /// next, as mysqltest reads it.
    fn until_delimiter(&mut self, line: usize) -> anyhow::Result<String> {
        let mut text = String::new();
        loop {
            let Some(l) = self.lines.get(self.at).cloned() else {
                bail!(
                    "line {line}: the statement does not end with the delimiter {:?}",
                    self.delimiter
                );
            };
            let number = self.numbers[self.at];
            self.at += 1;
            let l = l.trim_start();
            if let Some(k) = find_delimiter(l, &self.delimiter) {
                text.push_str(&l[..k]);
                let rest = l[k + self.delimiter.len()..].trim();
                if !rest.is_empty() {
                    self.lines.insert(self.at, rest.to_string());
                    self.numbers.insert(self.at, number);
                }
                return Ok(text);
            }
            text.push_str(l);
            text.push('\n');
        }
    }

    /// The lines up to `end`, which ends a `write_file` or `perl` block.
    fn block(&mut self, line: usize, name: &str, end: &str) -> anyhow::Result<String> {
        let mut content = String::new();
        loop {
            let Some(l) = self.lines.get(self.at) else {
                bail!("line {line}: {name} block does not end with {end}");
            };
            self.at += 1;
            if l.trim() == end {
                return Ok(content);
            }
            content.push_str(l);
            content.push('\n');
        }
    }

    fn command(&mut self, line: usize, name: &str, arg: &str) -> anyhow::Result<Option<Step>> {
        let kind = match name {
            "delimiter" => {
                let d = arg.trim();
                if d.is_empty() {
                    bail!("line {line}: delimiter needs a value");
                }
                self.delimiter = d.to_string();
                return Ok(None);
            }
            "write_file" | "append_file" => {
                let mut words = arg.split_whitespace();
                let path = words
                    .next()
                    .with_context(|| format!("line {line}: {name} needs a file name"))?
                    .trim_end_matches(';')
                    .to_string();
                let end = words.next().unwrap_or("EOF").trim_end_matches(';');
                let content = self.block(line, name, end)?;
                StepKind::WriteFile {
                    path,
                    content,
                    append: name == "append_file",
                }
            }
            "perl" => {
                let end = arg.split_whitespace().next().unwrap_or("EOF");
                let content = self.block(line, name, end.trim_end_matches(';'))?;
                StepKind::Perl { content }
            }
            "eval" | "query" => StepKind::Query {
                sql: arg.to_string(),
                eval: name == "eval",
                delimiter: self.delimiter.clone(),
            },
            _ => StepKind::Command {
                name: name.to_string(),
                arg: arg.to_string(),
            },
        };
        Ok(Some(Step { line, kind }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<StepKind> {
        parse(text)
            .expect("parses")
            .into_iter()
            .map(|s| s.kind)
            .collect()
    }

    fn cmd(name: &str, arg: &str) -> StepKind {
        StepKind::Command {
            name: name.into(),
            arg: arg.into(),
        }
    }

    fn query(sql: &str, eval: bool, delimiter: &str) -> StepKind {
        StepKind::Query {
            sql: sql.into(),
            eval,
            delimiter: delimiter.into(),
        }
    }

    #[test]
    fn commands_statements_and_comments() {
        let t = "# a comment\n--echo # Case 1\n--error ER_DUP_ENTRY\nINSERT INTO t\n    VALUES (1);\nconnect (con1, localhost, root,,test);\nlet $i = 1;\n--eval SELECT $i\nSET @a = 1;\n";
        assert_eq!(
            kinds(t),
            vec![
                cmd("echo", "# Case 1"),
                cmd("error", "ER_DUP_ENTRY"),
                query("INSERT INTO t\nVALUES (1)", false, ";"),
                cmd("connect", "con1, localhost, root,,test"),
                cmd("let", "$i = 1"),
                query("SELECT $i", true, ";"),
                query("SET @a = 1", false, ";"),
            ]
        );
    }

    #[test]
    fn delimiters_change_where_statements_end() {
        let t = "DELIMITER //;\nCREATE PROCEDURE p()\nBEGIN\n  SELECT 1;\nEND//\nDELIMITER ;//\nCALL p();\n";
        assert_eq!(
            kinds(t),
            vec![
                query("CREATE PROCEDURE p()\nBEGIN\nSELECT 1;\nEND", false, "//"),
                query("CALL p()", false, ";"),
            ]
        );
    }

    #[test]
    fn blocks_and_files() {
        let t = "let $i = 1;\nwhile ($i <= 3)\n{\n  eval INSERT INTO t VALUES ($i);\n  inc $i;\n}\n--write_file $MYSQLTEST_VARDIR/tmp/a.csv\n1\tx\nEOF\n";
        let steps = kinds(t);
        assert_eq!(steps.len(), 3);
        assert_eq!(
            steps[1],
            StepKind::While {
                cond: "$i <= 3".into(),
                body: vec![
                    Step {
                        line: 4,
                        kind: query("INSERT INTO t VALUES ($i)", true, ";")
                    },
                    Step {
                        line: 5,
                        kind: cmd("inc", "$i")
                    },
                ],
            }
        );
        assert_eq!(
            steps[2],
            StepKind::WriteFile {
                path: "$MYSQLTEST_VARDIR/tmp/a.csv".into(),
                content: "1\tx\n".into(),
                append: false
            }
        );
    }

    #[test]
    fn perl_blocks_run_to_their_terminator() {
        assert_eq!(
            kinds("--perl\nprint \"a;\\n\";\nEOF\n--echo done\n"),
            vec![
                StepKind::Perl {
                    content: "print \"a;\\n\";\n".into()
                },
                cmd("echo", "done"),
            ]
        );
    }

    #[test]
    fn a_delimiter_inside_a_line_ends_the_statement_there() {
        assert_eq!(
            kinds("SELECT 'a;b'; # a comment\nSELECT 2; SELECT 3;\n"),
            vec![
                query("SELECT 'a;b'", false, ";"),
                query("SELECT 2", false, ";"),
                query("SELECT 3", false, ";"),
            ]
        );
    }

    #[test]
    fn unclosed_blocks_and_statements_are_errors() {
        assert!(parse("while (1) {\n--echo x\n").is_err());
        assert!(parse("SELECT 1\n").is_err());
        assert!(parse("}\n").is_err());
    }
}
