//! Crash tests: the replica process (`ringrep-applier serve`) is aborted at failpoints and
//! killed with SIGKILL at random moments, then restarted; it must converge, and its own
//! binlog must hold every primary transaction exactly once (none applied twice or skipped).

use ringrep_testkit::engine as common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use binlog_format::{BinlogReader, ReaderOptions, Record, Value};
use common::*;
use ringrep_applier::verify::{verify, VerifyOptions};
use ringrep_engine::clock::ManualClock;
use ringrep_engine::{Engine, InsertMode};

fn serve(
    replica: &Path,
    source: &Path,
    failpoint: Option<&str>,
    exit_when_caught_up: bool,
) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringrep-applier"));
    cmd.args(["serve", "--replica-dir"])
        .arg(replica)
        .arg("--source-binlog")
        .arg(source);
    if exit_when_caught_up {
        cmd.arg("--exit-when-caught-up");
    }
    match failpoint {
        Some(f) => cmd.env("RINGREP_FAILPOINT", f),
        None => cmd.env_remove("RINGREP_FAILPOINT"),
    };
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ringrep-applier serve")
}

fn wait(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            return (status.code(), err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("ringrep-applier did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn insert_batch(engine: &Engine, from: i64, n: i64) {
    let def = engine.table_def("test", "events").expect("table");
    let mut s = engine.session();
    for i in from..from + n {
        let row = vec![
            Value::Int(i % 7),
            Value::Text(format!("e{i}")),
            Value::Int(i),
        ];
        s.statement(|s| s.insert(&def, &[0, 4, 5], vec![row], InsertMode::Insert))
            .expect("insert");
    }
}

/// The origin sequence numbers in the replica's own binlog, in order.
fn origins(replica: &Path) -> Vec<u64> {
    BinlogReader::open(&replica.join("binlog"), ReaderOptions::default())
        .expect("replica binlog")
        .filter_map(|r| match r.expect("record") {
            (_, Record::Transaction(tx)) => tx.origin.map(|o| o.seq),
            _ => None,
        })
        .collect()
}

fn check_converged(pdir: &Path, rdir: &Path, primary: Engine) {
    let last = primary.last_seq();
    drop(primary);
    let (p, _) = Engine::open_read_only(pdir).expect("primary");
    let (r, _) = Engine::open_read_only(rdir).expect("replica");
    let report = verify(&p, &r, &VerifyOptions::default(), &mut |_| {});
    assert!(report.converged, "{}", report.text());
    assert_eq!(
        origins(rdir),
        (1..=last).collect::<Vec<_>>(),
        "each primary transaction exactly once, in order"
    );
}

#[test]
fn failpoints_then_restart_converge_exactly_once() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = open(pdir.path(), &clock);
    create(&mut primary.session(), ring_table("events", 4, None, true));
    let src = pdir.path().join("binlog");
    let mut next = 0;
    for fp in [
        "apply_before_commit:5",
        "apply_after_commit:7",
        "apply_after_sync:1",
        "apply_after_commit:1",
        "apply_before_commit:15",
    ] {
        // New primary transactions each round, so every failpoint has work to trip on.
        insert_batch(&primary, next, 20);
        next += 20;
        primary.sync().expect("sync");
        let (code, err) = wait(
            serve(rdir.path(), &src, Some(fp), true),
            Duration::from_secs(60),
        );
        assert_ne!(
            code,
            Some(0),
            "{fp}: the failpoint must end the process: {err}"
        );
        assert!(err.contains("failpoint"), "{fp}: {err}");
    }
    let (code, err) = wait(
        serve(rdir.path(), &src, None, true),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}");
    check_converged(pdir.path(), rdir.path(), primary);
}

#[test]
fn sigkill_at_random_moments_under_load_converges_exactly_once() {
    let clock = ManualClock::new(T0);
    let pdir = tempfile::tempdir().expect("tempdir");
    let rdir = tempfile::tempdir().expect("tempdir");
    let primary = open(pdir.path(), &clock);
    create(&mut primary.session(), ring_table("events", 3, None, false));
    let src = pdir.path().join("binlog");
    let mut seed = 0x5eed_u64;
    println!("seed {seed:#x}");
    let mut next = 0;
    for round in 0..6 {
        let child = serve(rdir.path(), &src, None, false);
        // Write while the replica runs, then kill it at a pseudo-random moment.
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = 20 + (seed >> 33) as i64 % 60;
        insert_batch(&primary, next, n);
        primary.sync().expect("sync");
        next += n;
        std::thread::sleep(Duration::from_millis(5 + (seed >> 40) % 40));
        let mut child = child;
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        println!("round {round}: killed after {next} inserts");
    }
    let (code, err) = wait(
        serve(rdir.path(), &src, None, true),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}");
    check_converged(pdir.path(), rdir.path(), primary);
}
