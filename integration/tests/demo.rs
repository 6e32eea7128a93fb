//! The README's main job, run as a user would: the `ringrep-demo` binary with a small
//! workload (TTL included) sent through the primary's MySQL protocol must report convergence,
//! show the replica serving the same rows to a client, and exit 0.

use std::process::Command;

#[test]
fn demo_runs_the_pipeline_and_reports_convergence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_ringrep-demo"))
        .args([
            "--users",
            "40",
            "--events-per-user",
            "12",
            "--ring-size",
            "4",
            "--ttl",
            "1",
            "--rate",
            "400",
            "--writers",
            "3",
            "--sync",
            "never",
            "--data-dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run ringrep-demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{stderr}",
        out.status.code()
    );
    assert!(stdout.contains("verification:   CONVERGED"), "{stdout}");
    assert!(stdout.contains("inserts:        480"), "{stdout}");
    let figure = |label: &str| -> u64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {label} line in\n{stdout}"))
    };
    // 40 rings of 4 slots: an insert fills one of the 160 first slots, refills a slot the
    // TTL purge emptied, or overwrites. So overwrites >= 480 - 160 - purges.
    let (overwrites, purges) = (figure("overwrites:"), figure("TTL purges:"));
    assert!(overwrites + purges >= 320, "{stdout}");
    assert!(overwrites > 0, "{stdout}");
    assert!(stderr.contains("inserts ("), "progress is shown: {stderr}");
    assert!(
        stdout.contains("primary serving MySQL on 127.0.0.1:"),
        "{stdout}"
    );
    // Clients of the primary and of the replica count the same rows.
    let seen = stdout
        .lines()
        .find_map(|l| l.strip_prefix("clients see:"))
        .unwrap_or_else(|| panic!("no clients line in\n{stdout}"));
    let counts: Vec<u64> = seen
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(counts.len(), 2, "{seen}");
    assert_eq!(counts[0], counts[1], "{seen}");
    assert_eq!(counts[0], figure("rows on primary:"), "{stdout}");
    // --data-dir keeps both data directories.
    assert!(dir.path().join("primary/binlog/binlog.000001").exists());
    assert!(dir.path().join("replica/binlog/binlog.000001").exists());
}
