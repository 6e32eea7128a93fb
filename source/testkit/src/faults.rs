//! Faults for process tests: a small filesystem that fills up.

use std::path::PathBuf;
use std::process::Command;

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
