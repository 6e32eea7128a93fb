//! Faults for process tests: a small filesystem that fills up, and the waits a test needs
//! around a replica that has to catch up.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;

/// A size-limited tmpfs mounted for one test (Linux, as root); unmounted when dropped.
#[derive(Debug)]
pub struct SmallFs {
    /// Where it is mounted.
    pub path: PathBuf,
    _parent: tempfile::TempDir,
}

impl SmallFs {
    /// Mounts a tmpfs of `mib` MiB on a new directory, or says why it cannot (not root, no
    /// `mount`): the caller skips with that message.
    pub fn mount(mib: u64) -> Result<SmallFs, String> {
        let parent = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = parent.path().join("fs");
        std::fs::create_dir(&path).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&path)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cannot mount a {mib} MiB tmpfs (needs root): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallFs {
            path,
            _parent: parent,
        })
    }

    /// Fills `mib` MiB with a file named `name` (ballast to delete later).
    pub fn ballast(&self, name: &str, mib: usize) -> PathBuf {
        let p = self.path.join(name);
        std::fs::write(&p, vec![0xA5u8; mib << 20]).expect("ballast");
        p
    }

    /// Bytes free on it.
    pub fn free_bytes(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.path)
            .output()
            .expect("df");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // Lazily: a node killed a moment ago may still hold files open.
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// `ringrep-applier`, built by `cargo test --workspace` next to `source_bin` (another
/// package's binary has no `CARGO_BIN_EXE_` variable); `None` when it is not there.
pub fn applier_next_to(source_bin: &Path) -> Option<PathBuf> {
    let p = source_bin.with_file_name("ringrep-applier");
    p.exists().then_some(p)
}

/// One number from `sql` at `addr`, or `None` when the node is unreachable or has none.
pub async fn query_u64(addr: SocketAddr, sql: &str) -> Option<u64> {
    let mut c = mysql_async::Conn::new(crate::node::opts(addr, "root", None, None))
        .await
        .ok()?;
    c.query_first(sql).await.ok().flatten()
}

/// Waits up to `within` until the replica at `replica` has applied `seq` of server 1; fails
/// the test if it is ever ahead of that.
pub fn wait_applied(
    rt: &tokio::runtime::Runtime,
    replica: SocketAddr,
    seq: u64,
    within: Duration,
    what: &str,
) {
    let deadline = Instant::now() + within;
    loop {
        let got = rt.block_on(query_u64(
            replica,
            "SELECT last_seq FROM mysql.ringrep_apply_status WHERE server_id = 1",
        ));
        if got == Some(seq) {
            return;
        }
        assert!(
            got.unwrap_or(0) <= seq,
            "{what}: replica ahead of the primary: {got:?} > {seq}"
        );
        assert!(
            Instant::now() < deadline,
            "{what}: replica at {got:?}, never reached seq {seq}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `ringrep-applier verify` of two running nodes: its exit code and report.
pub fn verify(applier: &Path, primary: SocketAddr, replica: SocketAddr) -> (Option<i32>, String) {
    let out = Command::new(applier)
        .args(["verify", "--primary", &format!("mysql://root@{primary}")])
        .args(["--replica", &format!("mysql://root@{replica}")])
        .output()
        .expect("verify");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}
