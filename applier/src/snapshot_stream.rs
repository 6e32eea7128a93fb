//! A primary's snapshot as it arrives: the network stream's reading task hands its pieces
//! over a bounded channel, and whoever loads the snapshot reads them as bytes
//! ([`std::io::Read`]) on a thread that may block, while the rest is still on its way. The
//! channel's bound holds the primary back when loading is slower than the link, so a replica
//! never keeps more than a few pieces of a snapshot in memory.

use std::collections::VecDeque;
use std::io::{self, Read};

use tokio::sync::mpsc;

/// Pieces of a snapshot received and not yet read: beyond these the stream's reader waits
/// (and with it the link and the primary's copy).
pub(crate) const PIECES_IN_FLIGHT: usize = 16;

/// What the stream's reader hands over.
#[derive(Debug)]
pub(crate) enum Piece {
    /// The next bytes of the snapshot.
    Bytes(Vec<u8>),
    /// The snapshot is whole: the sequence number it stands at and the last one whose rows
    /// it may hold.
    End { seq: u64, covered: u64 },
    /// The stream failed before the snapshot ended (why).
    Failed(String),
}

/// A snapshot's bytes, read as they arrive ([`Read`]): EOF once the primary said the snapshot
/// is whole, an error when the stream failed before. Reading blocks the thread for the next
/// piece, so it is read where blocking is allowed (`tokio::task::block_in_place`,
/// `spawn_blocking`), or received whole first with [`SnapshotStream::receive_all`].
pub struct SnapshotStream {
    pieces: mpsc::Receiver<Piece>,
    /// Pieces taken off the channel and not yet read (by `receive_all`).
    kept: VecDeque<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
    received: u64,
    end: Option<(u64, u64)>,
    failure: Option<String>,
}

impl std::fmt::Debug for SnapshotStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotStream")
            .field("received", &self.received)
            .field("end", &self.end)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl SnapshotStream {
    /// A stream and the sender its pieces come through.
    pub(crate) fn channel() -> (mpsc::Sender<Piece>, SnapshotStream) {
        let (tx, rx) = mpsc::channel(PIECES_IN_FLIGHT);
        (tx, SnapshotStream::from_receiver(rx))
    }

    fn from_receiver(pieces: mpsc::Receiver<Piece>) -> SnapshotStream {
        SnapshotStream {
            pieces,
            kept: VecDeque::new(),
            current: Vec::new(),
            at: 0,
            received: 0,
            end: None,
            failure: None,
        }
    }

    /// A snapshot whose bytes are all here (a file, a test), standing at `seq` with rows of
    /// transactions up to `covered`.
    pub fn whole(bytes: Vec<u8>, seq: u64, covered: u64) -> SnapshotStream {
        let (_, rx) = mpsc::channel(1);
        let mut s = SnapshotStream::from_receiver(rx);
        s.received = bytes.len() as u64;
        s.current = bytes;
        s.end = Some((seq, covered));
        s
    }

    /// Takes every piece until the snapshot ends or fails, without blocking the thread: for
    /// a reader on a runtime where it may not block.
    pub async fn receive_all(&mut self) {
        while self.end.is_none() && self.failure.is_none() {
            let piece = self.pieces.recv().await;
            if let Some(bytes) = self.take(piece) {
                self.kept.push_back(bytes);
            }
        }
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Once the snapshot is whole: the sequence number it stands at and the last one whose
    /// rows it may hold (applied up to there, it is the primary's state exactly).
    pub fn end(&self) -> Option<(u64, u64)> {
        self.end
    }

    /// Why the bytes stopped before the snapshot ended, once they did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Records a piece taken off the channel (`None`: the stream's reader is gone); the bytes
    /// it carries, if any.
    fn take(&mut self, piece: Option<Piece>) -> Option<Vec<u8>> {
        match piece {
            Some(Piece::Bytes(b)) => {
                self.received += b.len() as u64;
                return Some(b);
            }
            Some(Piece::End { seq, covered }) => self.end = Some((seq, covered)),
            Some(Piece::Failed(why)) => self.failure = Some(why),
            None => {
                self.failure = Some("the replication stream ended before the snapshot did".into())
            }
        }
        None
    }
}

impl Read for SnapshotStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.at < self.current.len() {
                let n = buf.len().min(self.current.len() - self.at);
                buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            if let Some(next) = self.kept.pop_front() {
                (self.current, self.at) = (next, 0);
                continue;
            }
            if self.end.is_some() {
                return Ok(0);
            }
            if let Some(why) = &self.failure {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    why.clone(),
                ));
            }
            let piece = self.pieces.blocking_recv();
            if let Some(next) = self.take(piece) {
                (self.current, self.at) = (next, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces read back as one run of bytes, then EOF with the end known.
    #[test]
    fn pieces_read_as_bytes_then_the_end() {
        let (tx, mut s) = SnapshotStream::channel();
        let feeder = std::thread::spawn(move || {
            for i in 0..40u8 {
                tx.blocking_send(Piece::Bytes(vec![i; usize::from(i) + 1]))
                    .expect("send");
            }
            tx.blocking_send(Piece::End {
                seq: 9,
                covered: 12,
            })
            .expect("send");
        });
        let mut got = Vec::new();
        s.read_to_end(&mut got).expect("read");
        feeder.join().expect("feeder");
        let want: Vec<u8> = (0..40u8)
            .flat_map(|i| std::iter::repeat_n(i, usize::from(i) + 1))
            .collect();
        assert_eq!(got, want);
        assert_eq!(s.received(), want.len() as u64);
        assert_eq!(s.end(), Some((9, 12)));
        assert_eq!(s.failure(), None);
    }

    /// A stream that fails, or whose reader goes away, before the end is an error after the
    /// bytes that came, never an EOF that would pass for a whole snapshot.
    #[test]
    fn a_stream_cut_short_is_an_error() {
        let (tx, mut s) = SnapshotStream::channel();
        tx.try_send(Piece::Bytes(vec![1, 2, 3])).expect("send");
        tx.try_send(Piece::Failed("the primary closed the connection".into()))
            .expect("send");
        let mut got = Vec::new();
        let e = s.read_to_end(&mut got).expect_err("cut");
        assert_eq!(got, vec![1, 2, 3]);
        assert!(e.to_string().contains("closed the connection"), "{e}");
        assert_eq!(s.end(), None);

        let (tx, mut s) = SnapshotStream::channel();
        tx.try_send(Piece::Bytes(vec![7])).expect("send");
        drop(tx);
        let mut got = Vec::new();
        let e = s.read_to_end(&mut got).expect_err("gone");
        assert_eq!(got, vec![7]);
        assert!(
            s.failure().is_some_and(|f| f.contains("ended before")),
            "{e}"
        );
    }

    /// `receive_all` takes every piece on a runtime thread; reading afterwards never waits.
    #[test]
    fn received_whole_first_reads_without_waiting() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let (tx, mut s) = SnapshotStream::channel();
        rt.block_on(async {
            let feeder = tokio::spawn(async move {
                for i in 0..(PIECES_IN_FLIGHT as u8 * 3) {
                    tx.send(Piece::Bytes(vec![i])).await.expect("send");
                }
                tx.send(Piece::End { seq: 1, covered: 1 })
                    .await
                    .expect("send");
            });
            s.receive_all().await;
            feeder.await.expect("feeder");
        });
        let mut got = Vec::new();
        s.read_to_end(&mut got).expect("read");
        assert_eq!(got.len(), PIECES_IN_FLIGHT * 3);
        let mut whole = SnapshotStream::whole(vec![4, 5], 3, 4);
        let mut got = Vec::new();
        whole.read_to_end(&mut got).expect("read");
        assert_eq!((got, whole.end()), (vec![4, 5], Some((3, 4))));
    }
}
