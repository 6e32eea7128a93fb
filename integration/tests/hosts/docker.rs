//! The Docker engine as these tests reach it: a relay that lets testcontainers speak to an
//! older engine, the docker CLI for what testcontainers has no call for, and the sweep that
//! removes whatever a scenario left.
//!
//! Why a relay: testcontainers 0.28 (through bollard 0.21) asks for Docker API 1.53 in every
//! URL and does not negotiate, and an engine older than that refuses every request ("client
//! version 1.53 is too new"); Debian's Docker 20.10 speaks 1.41. The relay listens on a Unix
//! socket of its own, rewrites the version in each request line down to what the engine
//! says it speaks (same length: `/v1.53/` becomes `/v1.41/`), and copies everything else
//! both ways untouched. What the tests use (create, start, stop, pause, exec, inspect,
//! networks) is the same in both versions.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The engine's socket: DOCKER_HOST when it names a Unix socket, else the usual path.
pub(crate) fn engine_socket() -> Result<PathBuf> {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if !h.is_empty() => match h.strip_prefix("unix://") {
            Some(p) => Ok(PathBuf::from(p)),
            None => bail!("DOCKER_HOST={h}: these tests reach the engine on a Unix socket only"),
        },
        _ => Ok(PathBuf::from("/var/run/docker.sock")),
    }
}

/// The highest API minor version (1.x) the engine speaks, from `GET /version`.
pub(crate) fn engine_api_minor(socket: &Path) -> Result<u32> {
    let mut s = StdUnixStream::connect(socket)
        .with_context(|| format!("connect to the Docker engine at {}", socket.display()))?;
    s.write_all(b"GET /version HTTP/1.0\r\nHost: docker\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    let at = body
        .find("\"ApiVersion\":\"1.")
        .context("no ApiVersion in the engine's /version")?;
    let rest = &body[at + "\"ApiVersion\":\"1.".len()..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().context("the engine's ApiVersion")
}

/// Starts the relay on `dir/docker.sock` on a thread of its own (so that testcontainers'
/// blocking clean-up on drop never waits for a runtime it is blocking) and returns the
/// socket's path.
pub(crate) fn start_relay(engine: PathBuf, max_minor: u32, dir: &Path) -> Result<PathBuf> {
    let path = dir.join("docker.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path)
        .with_context(|| format!("bind {}", path.display()))?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("docker-relay".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the relay's runtime");
            rt.block_on(async move {
                let listener = UnixListener::from_std(listener).expect("the relay's listener");
                while let Ok((client, _)) = listener.accept().await {
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        if let Ok(upstream) = UnixStream::connect(&engine).await {
                            relay(client, upstream, max_minor).await;
                        }
                    });
                }
            });
        })?;
    Ok(path)
}

/// Copies one connection both ways, rewriting API versions in the requests.
async fn relay(client: UnixStream, engine: UnixStream, max_minor: u32) {
    let (mut cr, mut cw) = client.into_split();
    let (mut er, mut ew) = engine.into_split();
    let up = async move {
        let mut buf = vec![0u8; 64 * 1024];
        // Bytes held back because they may be the start of a version split across reads.
        let mut held: Vec<u8> = Vec::new();
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            held.extend_from_slice(&buf[..n]);
            rewrite_versions(&mut held, max_minor);
            let keep = partial_tail(&held);
            let send = held.len() - keep;
            if ew.write_all(&held[..send]).await.is_err() {
                return;
            }
            held.drain(..send);
        }
        let _ = ew.write_all(&held).await;
        let _ = ew.shutdown().await;
    };
    let down = async move {
        let _ = tokio::io::copy(&mut er, &mut cw).await;
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}

/// The pattern a request line's path starts with: ` /v1.` then two digits and `/`.
const PREFIX: &[u8] = b" /v1.";

/// Rewrites every ` /v1.NN/` whose NN is above `max_minor` to `max_minor` (two digits, so
/// lengths and any Content-Length stay right).
fn rewrite_versions(bytes: &mut [u8], max_minor: u32) {
    let want = format!("{max_minor:02}");
    let want = want.as_bytes();
    let mut i = 0;
    while i + PREFIX.len() + 3 <= bytes.len() {
        if &bytes[i..i + PREFIX.len()] == PREFIX {
            let d = i + PREFIX.len();
            let (a, b, slash) = (bytes[d], bytes[d + 1], bytes[d + 2]);
            if a.is_ascii_digit() && b.is_ascii_digit() && slash == b'/' && want.len() == 2 {
                let minor = u32::from(a - b'0') * 10 + u32::from(b - b'0');
                if minor > max_minor {
                    bytes[d] = want[0];
                    bytes[d + 1] = want[1];
                }
            }
            i = d;
        } else {
            i += 1;
        }
    }
}

/// How many bytes at the end could be the start of ` /v1.NN/` (held until more arrive). A
/// request ends in `\r\n` or a JSON body's `}`, neither of which starts the pattern, so a
/// whole request is never held back.
fn partial_tail(bytes: &[u8]) -> usize {
    let full = PREFIX.len() + 3;
    for keep in (1..full.min(bytes.len() + 1)).rev() {
        let tail = &bytes[bytes.len() - keep..];
        let fits = tail.iter().enumerate().all(|(i, &c)| match i {
            i if i < PREFIX.len() => c == PREFIX[i],
            i if i < PREFIX.len() + 2 => c.is_ascii_digit(),
            _ => false,
        });
        if fits {
            return keep;
        }
    }
    0
}

/// Runs `docker ARGS`, failing with its output unless it exits 0; returns its standard
/// output.
pub(crate) fn docker(args: &[&str]) -> Result<String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .with_context(|| format!("run docker {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "docker {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Removes every container labelled `label` (with its anonymous volumes) and the network
/// named `network`, whatever state a scenario left them in. Returns what it removed, so that
/// a run can say that a scenario left something behind.
pub(crate) fn sweep(label: &str, network: &str) -> Vec<String> {
    let mut removed = Vec::new();
    let filter = format!("label={label}");
    if let Ok(ids) = docker(&["ps", "-aq", "--filter", &filter]) {
        for id in ids.split_whitespace() {
            // A paused container must be unpaused before a forced removal can kill it.
            let _ = docker(&["unpause", id]);
            if docker(&["rm", "-f", "-v", id]).is_ok() {
                removed.push(format!("container {id}"));
            }
        }
    }
    if docker(&["network", "inspect", network]).is_ok()
        && docker(&["network", "rm", network]).is_ok()
    {
        removed.push(format!("network {network}"));
    }
    removed
}

/// Checks the rewriting on fixed inputs (this target has its own main, so no `#[test]`s):
/// run before any scenario, so a broken relay fails with a clear message instead of a
/// confusing engine error.
pub(crate) fn self_test() -> Result<()> {
    let mut a = b"GET /v1.53/containers/json HTTP/1.1\r\n".to_vec();
    rewrite_versions(&mut a, 41);
    if a != b"GET /v1.41/containers/json HTTP/1.1\r\n" {
        bail!("relay self-test: {:?}", String::from_utf8_lossy(&a));
    }
    let mut b = b"GET /v1.40/x HTTP/1.1\r\n".to_vec();
    rewrite_versions(&mut b, 41);
    if b != b"GET /v1.40/x HTTP/1.1\r\n" {
        bail!("relay self-test rewrote an older version");
    }
    if partial_tail(b"POST /v1.5") != 6 || partial_tail(b"\r\n\r\n") != 0 || partial_tail(b"}") != 0
    {
        bail!("relay self-test: partial tails");
    }
    Ok(())
}
