//! Error injection for fault tests, behind the `failpoints` feature (TiKV's `fail` crate).
//!
//! Every file operation whose failure the node must survive (a write, an fsync, a rename, a
//! directory sync, a truncation) passes through one named point here. Without the feature a
//! point is an empty inline function. With it, a test arms a point with `fail::cfg(name,
//! actions)` (or the `FAILPOINTS` environment variable, read by [`setup_from_env`]) and the
//! operation fails as the action's argument says:
//!
//! - `return(enospc)`: the disk is full (`ENOSPC`, MySQL's 1021 higher up);
//! - `return(eio)` or `return`: an I/O error (`EIO`);
//! - `return(short)` on a write point: half of the bytes are written, then `ENOSPC` (a short
//!   write, as a filling disk gives);
//! - any of these with `@N`, as `return(eio@500)`: the operation first takes N ms (a slow
//!   disk that then fails), so that a test can act while it hangs.
//!
//! `fail`'s counts and chains work as documented there: `3*off->1*return(eio)` fails the
//! fourth operation only.
//!
//! The points: `binlog::write`, `binlog::fsync`, `binlog::segment_create`,
//! `binlog::segment_rename`, `binlog::index_write`, `binlog::dir_sync`, `binlog::truncate`,
//! `binlog::remove`, `binlog::durable_write` (the write of `binlog.durable`); the engine adds
//! `snapshot::write`, `snapshot::rename` and the applier's own (see the engine crate).

use std::io;
use std::path::{Path, PathBuf};

/// Fails with the armed action's error if the point `name` is armed; `Ok` otherwise.
#[inline]
pub fn check(name: &str) -> io::Result<()> {
    match action(name) {
        None => Ok(()),
        Some(Injected::Short) => Err(enospc(name)),
        Some(Injected::Error(e)) => Err(e),
    }
}

/// Writes `buf` to `out` through the point `name`: all of it, or (armed) an error, or with
/// `return(short)` the first half and then `ENOSPC`.
pub fn write_all(name: &str, out: &mut impl io::Write, buf: &[u8]) -> io::Result<()> {
    match action(name) {
        None => out.write_all(buf),
        Some(Injected::Short) => {
            out.write_all(&buf[..buf.len() / 2])?;
            Err(enospc(name))
        }
        Some(Injected::Error(e)) => Err(e),
    }
}

/// Writes `buf` to `file` at `offset` through the point `name`, as [`write_all`] does.
pub fn write_all_at(name: &str, file: &std::fs::File, buf: &[u8], offset: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    match action(name) {
        None => file.write_all_at(buf, offset),
        Some(Injected::Short) => {
            file.write_all_at(&buf[..buf.len() / 2], offset)?;
            Err(enospc(name))
        }
        Some(Injected::Error(e)) => Err(e),
    }
}

/// Configures the points named in the `FAILPOINTS` environment variable, for a test that runs
/// a node as a process (`FAILPOINTS='binlog::fsync=5*off->1*return(eio)'`). Without the
/// feature, or without the variable, it does nothing.
pub fn setup_from_env() {
    if let Ok(spec) = std::env::var("FAILPOINTS") {
        if let Err(e) = configure(&spec) {
            eprintln!("FAILPOINTS: {e}");
        }
    }
}

/// Arms (or, with the action `off`, disarms) points from `name=actions;name=actions`: what
/// `FAILPOINTS` holds, and what a node built with failpoints takes from `SET GLOBAL debug`
/// (MySQL's own debug builds take their injection points there too). Without the feature,
/// an error saying so.
pub fn configure(spec: &str) -> Result<(), String> {
    if !ENABLED {
        return Err("this build has no failpoints (build with the `failpoints` feature)".into());
    }
    for point in spec.split(';').filter(|p| !p.trim().is_empty()) {
        let (name, actions) = point
            .split_once('=')
            .ok_or_else(|| format!("{point:?}: expected name=actions"))?;
        let (name, actions) = (name.trim(), actions.trim());
        #[cfg(feature = "failpoints")]
        if actions == "off" {
            fail::remove(name);
        } else {
            fail::cfg(name, actions).map_err(|e| format!("{point:?}: {e}"))?;
        }
        #[cfg(not(feature = "failpoints"))]
        let _ = (name, actions);
    }
    Ok(())
}

/// Every point a file operation passes, for a test that freezes all of them at once (the
/// `pause` action on each: the moment of a simulated power loss, see [`synced_lengths`]).
/// `binlog::durable_write` is not among them: `binlog.durable` is written only after an
/// fsync, which the freeze already stops, and a power loss needs nothing of it.
pub const POINTS: &[&str] = &[
    "binlog::write",
    "binlog::fsync",
    "binlog::segment_create",
    "binlog::segment_rename",
    "binlog::index_write",
    "binlog::dir_sync",
    "binlog::truncate",
    "binlog::remove",
    "snapshot::write",
    "snapshot::rename",
];

#[cfg(feature = "failpoints")]
static SYNCED: std::sync::Mutex<Option<std::collections::HashMap<PathBuf, u64>>> =
    std::sync::Mutex::new(None);

/// Records that `path` is on disk up to `len` bytes at least (an fsync of it returned): what
/// a power loss would leave of an append-only file. (Fsyncs that end out of order do not move
/// it back.) Kept only in a build with failpoints.
#[inline]
#[allow(unused_variables)]
pub fn synced(path: &Path, len: u64) {
    #[cfg(feature = "failpoints")]
    {
        let mut map = SYNCED.lock().unwrap_or_else(|p| p.into_inner());
        let at = map
            .get_or_insert_with(Default::default)
            .entry(path.to_path_buf())
            .or_insert(0);
        *at = (*at).max(len);
    }
}

/// Records that `path` was cut to `len` bytes and synced (see [`synced`]).
#[inline]
#[allow(unused_variables)]
pub fn synced_cut(path: &Path, len: u64) {
    #[cfg(feature = "failpoints")]
    SYNCED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(Default::default)
        .insert(path.to_path_buf(), len);
}

/// The length of every binlog segment as of its last fsync (see [`synced`]), for a test
/// that simulates a power loss: with every point paused, it copies the directory and cuts
/// each segment back to this (empty without failpoints).
pub fn synced_lengths() -> std::collections::HashMap<PathBuf, u64> {
    #[cfg(feature = "failpoints")]
    {
        SYNCED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default()
    }
    #[cfg(not(feature = "failpoints"))]
    {
        Default::default()
    }
}

/// Whether this build has failpoints (the `failpoints` feature).
pub const ENABLED: bool = cfg!(feature = "failpoints");

#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
enum Injected {
    Short,
    Error(io::Error),
}

#[inline]
#[allow(unused_variables)]
fn action(name: &str) -> Option<Injected> {
    #[cfg(feature = "failpoints")]
    {
        fail::eval(name, |arg| {
            let arg = arg.unwrap_or_default();
            let (what, delay) = match arg.split_once('@') {
                Some((what, ms)) => (what.to_string(), ms.parse().unwrap_or(0)),
                None => (arg, 0),
            };
            std::thread::sleep(std::time::Duration::from_millis(delay));
            match what.as_str() {
                "short" => Injected::Short,
                "enospc" => Injected::Error(enospc(name)),
                _ => Injected::Error(eio(name)),
            }
        })
    }
    #[cfg(not(feature = "failpoints"))]
    {
        None
    }
}

#[cold]
fn enospc(name: &str) -> io::Error {
    let os = io::Error::from_raw_os_error(28);
    io::Error::new(os.kind(), format!("{os} (injected at {name})"))
}

#[cold]
#[allow(dead_code)]
fn eio(name: &str) -> io::Error {
    let os = io::Error::from_raw_os_error(5);
    io::Error::new(os.kind(), format!("{os} (injected at {name})"))
}
