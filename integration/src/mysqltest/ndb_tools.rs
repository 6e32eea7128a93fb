//! The NDB tools RonDB's tests run through `--exec`, done with what ringrep has:
//! `ndb_mgm -e "START BACKUP"` and `ndb_restore` with its backup and restore, `ndb_mgm -e "N
//! RESTART"` / `"ALL RESTART"` by closing the node and opening it again from its data
//! directory (the runner does that, `runner.rs`), and `ndb_waiter`, which has nothing to wait
//! for then.
//!
//! RonDB takes a backup of the whole cluster (every NDB table, data rows and ring meta rows)
//! into `BACKUP/BACKUP-<id>` under a data node's file system, and `ndb_restore` writes such a
//! backup back into a running cluster: `-m` creates the tables, `-r` loads their rows, once per
//! data node (`-n`), each loading its own share. ringrep's backup ([`Engine::backup`]) is a
//! snapshot of one node with its rings' meta rows; here `START BACKUP` writes one into
//! `BACKUP/BACKUP-<id>`, and `ndb_restore` reads it back into a fresh data directory
//! ([`Engine::restore`]), then creates the tables it holds on the live node (as `SHOW CREATE
//! TABLE` prints them) and writes every row, meta rows included, through the privileged path
//! the applier uses. The rows are written as upserts, so running `-r` once per data node, as
//! the tests do, loads the same rows again and changes nothing: a ringrep node is one data
//! node holding every share. What the restore writes goes into the node's binlog like any
//! write, so a replica receives it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use binlog_format::SyncPolicy;
use ringrep_engine::{is_node_local_table, Engine, EngineConfig};
use ringrep_sql::{Outcome, SqlSession};

/// The name `$NDB_MGM` holds: a command `--exec` runs with it is run by the runner.
pub(crate) const NDB_MGM: &str = "ndb_mgm";

/// The name `$NDB_RESTORE` holds, likewise.
pub(crate) const NDB_RESTORE: &str = "ndb_restore";

/// The name `$NDB_WAITER` holds, likewise: the nodes are always in the state it waits for
/// (a restart here is over when its command returns), so it returns at once.
pub(crate) const NDB_WAITER: &str = "ndb_waiter";

/// The schema ringrep keeps its accounts in: not part of an NDB backup's tables.
const SYSTEM_DB: &str = "mysql";

/// What an `ndb_mgm -e` command asks for, of the ones the runner does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MgmCommand {
    /// `START BACKUP ...`: the words after START BACKUP.
    Backup(Vec<String>),
    /// `<node> RESTART [-n] [-N] [-i] [-I] [-a] [-f]` or `ALL RESTART ...`: a data node (or
    /// every one) goes down and comes back from what it keeps on disk.
    Restart {
        /// The node id, or `None` for ALL.
        node: Option<u32>,
        /// Whether it was one of the "stay down until START" options (`-n`, `-N`).
        no_start: bool,
    },
    /// `<node> START` / `ALL START`: a node restarted with `-n` starts.
    Start,
}

/// Reads the command of an `ndb_mgm` command line. A command the runner does not do (STOP,
/// SHUTDOWN, DUMP, REPORT, CLUSTERLOG, ...) is an error that names it.
pub(crate) fn mgm_command(args: &[String]) -> anyhow::Result<MgmCommand> {
    let command = ndb_mgm_command(args)?;
    let words: Vec<String> = command
        .split_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    let target = words.first().map(String::as_str);
    let verb = words.get(1).map(String::as_str);
    let node = |t: &str| -> anyhow::Result<Option<u32>> {
        if t == "ALL" {
            return Ok(None);
        }
        t.parse::<u32>()
            .map(Some)
            .with_context(|| format!("ndb_mgm: {command:?}: {t} is no node id"))
    };
    match (target, verb) {
        (Some("START"), Some("BACKUP")) => Ok(MgmCommand::Backup(words[2..].to_vec())),
        (Some(t), Some("RESTART")) => {
            let options = &words[2..];
            if let Some(o) = options
                .iter()
                .find(|o| !["-N", "-I", "-A", "-F"].contains(&o.as_str()))
            {
                bail!("ndb_mgm: {command:?}: RESTART option {o} is not one ndb_mgm has");
            }
            Ok(MgmCommand::Restart {
                node: node(t)?,
                no_start: options.iter().any(|o| o == "-N"),
            })
        }
        (Some(t), Some("START")) if words.len() == 2 => {
            node(t)?;
            Ok(MgmCommand::Start)
        }
        _ => bail!(
            "ndb_mgm: {command:?} is not supported by ringrep-mysqltest: it runs START BACKUP, \
             RESTART and START (ringrep has no management server)"
        ),
    }
}

/// `ndb_mgm ... -e "START BACKUP [id] [NOWAIT | WAIT STARTED | WAIT COMPLETED]"` (`words`: what
/// follows START BACKUP): writes a backup of `engine` into `backups/BACKUP-<id>` and returns
/// ndb_mgm's report of it. Without an id the next one after the highest taken is used, as the
/// management server does.
pub(crate) fn start_backup(
    engine: &Engine,
    backups: &Path,
    words: &[String],
) -> anyhow::Result<String> {
    let id = match words.first().map(|w| w.parse::<u32>()) {
        Some(Ok(id)) => id,
        _ => next_backup_id(backups)?,
    };
    let dir = backups.join(format!("BACKUP-{id}"));
    if dir.exists() {
        bail!(
            "Backup failed\n*  3001: Could not start backup\n*        Backup {id} already exists"
        );
    }
    std::fs::create_dir_all(backups)?;
    let seq = engine
        .backup(&dir)
        .with_context(|| format!("START BACKUP into {}", dir.display()))?;
    let rows: usize = engine.with_state(|st| st.tables.values().map(|t| t.len()).sum());
    Ok(format!(
        "Waiting for completed, this may take several minutes\n\
         Node 1: Backup {id} started from node 1\n\
         Node 1: Backup {id} started from node 1 completed\n \
         StartGCP: {seq} StopGCP: {seq}\n \
         #Records: {rows} #LogRecords: 0\n"
    ))
}

/// The command an `ndb_mgm` command line runs: `-e CMD`, `--execute=CMD` or `-eCMD`.
fn ndb_mgm_command(args: &[String]) -> anyhow::Result<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-e" || a == "--execute" {
            return it.next().cloned().context("ndb_mgm: -e needs a command");
        }
        if let Some(c) = a.strip_prefix("--execute=") {
            return Ok(c.to_string());
        }
        if let Some(c) = a.strip_prefix("-e").filter(|c| !c.is_empty()) {
            return Ok(c.to_string());
        }
    }
    bail!("ndb_mgm: no -e command: ringrep-mysqltest runs no interactive management client")
}

fn next_backup_id(backups: &Path) -> anyhow::Result<u32> {
    let mut highest = 0;
    if backups.is_dir() {
        for e in std::fs::read_dir(backups)? {
            let name = e?.file_name().to_string_lossy().into_owned();
            if let Some(id) = name
                .strip_prefix("BACKUP-")
                .and_then(|n| n.parse::<u32>().ok())
            {
                highest = highest.max(id);
            }
        }
    }
    Ok(highest + 1)
}

/// What an `ndb_restore` command line asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RestoreArgs {
    /// `-b`: the backup's id.
    pub(crate) backup_id: Option<u32>,
    /// `-n`: the data node whose share is restored (every share is node 1's here).
    pub(crate) node_id: Option<u32>,
    /// `-m`: create the backup's tables.
    pub(crate) meta: bool,
    /// `-r`: load the backup's rows.
    pub(crate) data: bool,
    /// The backup's folder (the last argument, or `--backup-path`).
    pub(crate) path: Option<PathBuf>,
}

/// Reads `ndb_restore`'s options. The ones that tune how NDB loads (parallelism, printing,
/// index handling, epochs) change nothing here and are taken without effect; an option
/// ringrep does not know is an error, as ndb_restore's own.
pub(crate) fn restore_args(args: &[String]) -> anyhow::Result<RestoreArgs> {
    let mut out = RestoreArgs::default();
    let mut it = args.iter().peekable();
    let number = |flag: &str, v: Option<&String>| -> anyhow::Result<u32> {
        v.and_then(|v| v.parse().ok())
            .with_context(|| format!("ndb_restore: {flag} needs a number"))
    };
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.replace('_', "-"), Some(v.to_string())),
            _ => (a.replace('_', "-"), None),
        };
        let value = |it: &mut std::iter::Peekable<std::slice::Iter<'_, String>>| {
            inline.clone().or_else(|| it.next().cloned())
        };
        match flag.as_str() {
            "-b" | "--backupid" => out.backup_id = Some(number("-b", value(&mut it).as_ref())?),
            "-n" | "--nodeid" => out.node_id = Some(number("-n", value(&mut it).as_ref())?),
            "-m" | "--restore-meta" => out.meta = true,
            "-r" | "--restore-data" => out.data = true,
            "--backup-path" => out.path = value(&mut it).map(PathBuf::from),
            "-p" | "--parallelism" | "-c" | "--ndb-connectstring" | "--connectstring" => {
                value(&mut it);
            }
            "--no-defaults"
            | "--print"
            | "--print-meta"
            | "--print-data"
            | "--print-log"
            | "--print-sql-log"
            | "--allow-unique-indexes"
            | "--disable-indexes"
            | "--rebuild-indexes"
            | "-e"
            | "--restore-epoch"
            | "--no-binlog"
            | "--no-restore-disk-objects"
            | "--skip-table-check"
            | "--skip-unknown-objects"
            | "--promote-attributes"
            | "--lossy-conversions"
            | "--show-part-id" => {}
            f if f.starts_with('-') => bail!("ndb_restore: unknown option '{a}'"),
            _ => out.path = Some(PathBuf::from(a)),
        }
    }
    Ok(out)
}

/// `ndb_restore`: creates (`-m`) the tables of the backup at `backup` on `engine` and loads
/// (`-r`) their rows, data rows and meta rows, through the privileged path. Returns what the
/// tool prints.
pub(crate) fn restore(
    engine: &Engine,
    backup: &Path,
    args: &RestoreArgs,
) -> anyhow::Result<String> {
    if !backup.is_dir() {
        bail!(
            "ndb_restore: Failed to read {}: no such backup",
            backup.display()
        );
    }
    let scratch = tempfile::tempdir()?;
    let dir = scratch.path().join("data");
    Engine::restore(backup, &dir).with_context(|| format!("reading {}", backup.display()))?;
    let mut cfg = EngineConfig::new(1);
    cfg.sync = SyncPolicy::Never;
    let (source, _) = Engine::open(&dir, cfg)?;
    let tables: Vec<_> = source
        .tables()
        .into_iter()
        .filter(|d| {
            !d.database.eq_ignore_ascii_case(SYSTEM_DB)
                && !is_node_local_table(&d.database, &d.name)
        })
        .collect();
    let mut out = format!(
        "Nodeid = {}\nBackup Id = {}\nbackup path = {}\n",
        args.node_id.unwrap_or(1),
        args.backup_id.map_or_else(|| "?".into(), |b| b.to_string()),
        backup.display()
    );
    if args.meta {
        let mut from = SqlSession::new(&source);
        let mut to = SqlSession::new(engine);
        for def in &tables {
            if engine.table_def(&def.database, &def.name).is_some() {
                bail!(
                    "ndb_restore: Failed to create table `{}`.`{}`: 721: Schema object with \
                     given name already exists",
                    def.database,
                    def.name
                );
            }
            let create = match from.execute(&format!(
                "SHOW CREATE TABLE `{}`.`{}`",
                def.database, def.name
            )) {
                Ok(Outcome::Rows(rs)) => rs
                    .text_rows()
                    .first()
                    .and_then(|r| r.get(1).cloned().flatten())
                    .context("SHOW CREATE TABLE printed no statement")?,
                Ok(_) => bail!("SHOW CREATE TABLE printed no statement"),
                Err(e) => bail!(
                    "SHOW CREATE TABLE `{}`.`{}`: {}",
                    def.database,
                    def.name,
                    e.message
                ),
            };
            for sql in [
                format!("CREATE DATABASE IF NOT EXISTS `{}`", def.database),
                format!("USE `{}`", def.database),
                create,
            ] {
                to.execute(&sql).map_err(|e| {
                    anyhow::anyhow!("ndb_restore: {}: {}: {}", def.name, e.code, e.message)
                })?;
            }
            out.push_str(&format!(
                "Successfully restored table `{}/def/{}`\n",
                def.database, def.name
            ));
        }
    }
    if args.data {
        let mut session = engine.session();
        // The backup holds the meta rows as the ring left them: only the applier's path
        // may write those (error 940 for anyone else).
        session.vars.applier = true;
        let mut rows_total = 0usize;
        for def in &tables {
            let target = engine
                .table_def(&def.database, &def.name)
                .with_context(|| {
                    format!(
                    "ndb_restore: table `{}`.`{}` does not exist: restore the metadata (-m) first",
                    def.database, def.name
                )
                })?;
            let rows: Vec<_> = source.with_state(|st| {
                st.table(&def.database, &def.name)
                    .map(|t| t.iter().map(|(_, r)| r).collect())
                    .unwrap_or_default()
            });
            rows_total += rows.len();
            for row in rows {
                session
                    .raw_write(&target, row)
                    .map_err(|e| anyhow::anyhow!("ndb_restore: {}: {}", def.name, e.message))?;
            }
        }
        session
            .commit()
            .map_err(|e| anyhow::anyhow!("ndb_restore: {}: {}", e.code, e.message))?;
        out.push_str(&format!("_____________________________________________________\nProcessing data in table(s): {rows_total} rows restored\n"));
    }
    out.push_str("\nNDBT_ProgramExit: 0 - OK\n\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        super::super::vars::words(s)
    }

    #[test]
    fn restore_options_are_read_as_ndb_restore_reads_them() {
        let a = restore_args(&args(
            "--no-defaults -p 8 -b 3 -n 2 -m -r --allow-unique-indexes --print --print_meta /x/BACKUP-3",
        ))
        .expect("options");
        assert_eq!(
            a,
            RestoreArgs {
                backup_id: Some(3),
                node_id: Some(2),
                meta: true,
                data: true,
                path: Some(PathBuf::from("/x/BACKUP-3")),
            }
        );
        assert!(restore_args(&args("--no-such-option")).is_err());
        assert!(restore_args(&args("-b x")).is_err());
    }

    #[test]
    fn ndb_mgm_takes_backup_restart_and_start_and_names_anything_else() {
        assert_eq!(
            ndb_mgm_command(&args(
                "--no-defaults --ndb-connectstring=\"x\" -e \"start backup\""
            ))
            .expect("command"),
            "start backup"
        );
        assert!(ndb_mgm_command(&args("--no-defaults")).is_err());
        let cmd = |s: &str| mgm_command(&args(s));
        assert_eq!(
            cmd("-e \"START BACKUP 7 WAIT COMPLETED\"").expect("backup"),
            MgmCommand::Backup(vec!["7".into(), "WAIT".into(), "COMPLETED".into()])
        );
        assert_eq!(
            cmd("-e \"1 RESTART -n\"").expect("restart"),
            MgmCommand::Restart {
                node: Some(1),
                no_start: true
            }
        );
        assert_eq!(
            cmd("-e \"all restart\"").expect("restart"),
            MgmCommand::Restart {
                node: None,
                no_start: false
            }
        );
        assert_eq!(
            cmd("-e \"ALL RESTART -N -i\"").expect("restart"),
            MgmCommand::Restart {
                node: None,
                no_start: true
            }
        );
        assert_eq!(cmd("-e \"2 START\"").expect("start"), MgmCommand::Start);
        for other in [
            "ALL STOP",
            "SHUTDOWN",
            "ALL REPORT MEMORY",
            "1 RESTART -x",
            "x RESTART",
        ] {
            let e = cmd(&format!("-e \"{other}\"")).expect_err(other);
            assert!(format!("{e:#}").contains(other), "{other}: {e:#}");
        }
    }

    #[test]
    fn a_backup_restored_after_a_drop_brings_rows_and_rings_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = EngineConfig::new(1);
        cfg.sync = SyncPolicy::Never;
        let (engine, _) = Engine::open(&dir.path().join("node"), cfg).expect("engine");
        let mut s = SqlSession::new(&engine);
        for sql in [
            "USE test",
            "CREATE TABLE rb (id INT NOT NULL, ring_idx INT NOT NULL DEFAULT 0, \
             ring_meta VARBINARY(64), v INT NOT NULL, PRIMARY KEY (id, ring_idx), \
             UNIQUE INDEX uv (v)) ENGINE=NDB COMMENT=\"NDB_TABLE=MAX_ROWS_PER_PK=2@ring_idx@ring_meta\"",
            "INSERT INTO rb (id, v) VALUES (1, 10)",
            "INSERT INTO rb (id, v) VALUES (1, 20)",
            "INSERT INTO rb (id, v) VALUES (1, 30)",
            "INSERT INTO rb (id, v) VALUES (2, 40)",
        ] {
            s.execute(sql).expect(sql);
        }
        let backups = dir.path().join("BACKUP");
        let report = start_backup(&engine, &backups, &[]).expect("backup");
        assert!(
            report.contains("Backup 1 started from node 1 completed"),
            "{report}"
        );
        let again = start_backup(&engine, &backups, &["1".to_string()]);
        assert!(again.is_err(), "a backup id is taken once");
        s.execute("DROP TABLE rb").expect("drop");
        let a = restore_args(&args("-b 1 -n 1 -m -r")).expect("args");
        restore(&engine, &backups.join("BACKUP-1"), &a).expect("restore node 1");
        // The second data node's share: the same rows again, nothing changes.
        let a = restore_args(&args("-b 1 -n 2 -r")).expect("args");
        restore(&engine, &backups.join("BACKUP-1"), &a).expect("restore node 2");
        let rows = |s: &mut SqlSession, sql: &str| match s.execute(sql).expect(sql) {
            Outcome::Rows(rs) => rs.text_rows(),
            _ => panic!("no rows"),
        };
        let got = rows(
            &mut s,
            "SELECT id, ring_idx, v FROM rb ORDER BY id, ring_idx",
        );
        let want: Vec<Vec<Option<String>>> = [["1", "1", "30"], ["1", "2", "20"], ["2", "1", "40"]]
            .iter()
            .map(|r| r.iter().map(|v| Some(v.to_string())).collect())
            .collect();
        assert_eq!(got, want);
        // The ring goes on where it was: the next insert overwrites the oldest slot (2).
        s.execute("INSERT INTO rb (id, v) VALUES (1, 50)")
            .expect("insert");
        let got = rows(
            &mut s,
            "SELECT ring_idx, v FROM rb WHERE id = 1 ORDER BY ring_idx",
        );
        assert_eq!(got[1], vec![Some("2".to_string()), Some("50".to_string())]);
        // Restoring the metadata over a table that exists fails, as in ndb_restore.
        let a = restore_args(&args("-b 1 -n 1 -m")).expect("args");
        assert!(restore(&engine, &backups.join("BACKUP-1"), &a).is_err());
    }
}
