//! A history checker: what clients were told against what each node holds.
//!
//! A test under faults records every insert its clients sent into a ring table, and how it
//! ended: acknowledged (the commit returned OK), failed (a server error: nothing was written),
//! or unknown (the connection broke or timed out: it may or may not have been committed).
//! After the faults, [`check`] reads one node's rings ([`NodeRings`]) against that
//! [`History`] and proves, per ring prefix:
//!
//! - every acknowledged insert is there: as a row while it is among the ring's last N
//!   inserts, and counted by the meta row's total once a later insert overwrote it;
//! - no row holds a write that no client sent, or one the server refused;
//! - each ring's meta row matches its rows: occupied count, next slot, total inserts, and
//!   every retained insert in the slot the ring protocol gives it.
//!
//! Rings overwrite, so "every acknowledged write" cannot mean "every row": the checker
//! rebuilds the exact ring each history allows and compares it with the node's, row by row.
//! That needs the applied order of a prefix's inserts, which the clients keep simple: one
//! client per prefix, each insert answered before the next is sent, and no more inserts to a
//! prefix after one whose outcome is unknown (within an epoch; see below).
//!
//! Epochs cover failover. Writes before it (epoch 0, to the old primary) may be lost by
//! asynchronous replication: with [`CheckOptions::lossy_epoch`], the node may hold any
//! prefix of that epoch's inserts per ring, and the report counts the acknowledged ones it
//! lacks ([`Report::lost`]) and how many it holds ([`Report::held`]). Every other epoch
//! must be there whole.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use ringrep_engine::ring::Meta;

/// How an insert ended, as its client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The commit returned OK: the insert must be on every node.
    Acked,
    /// The server answered with an error: nothing was written.
    Failed,
    /// No answer (a broken connection, a timeout): it may or may not have been committed.
    Unknown,
}

/// One insert a client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The ring prefix (`user_id`).
    pub user: u32,
    /// The epoch it was sent in (0 before a failover, 1 after it).
    pub epoch: u32,
    /// The payload, unique across the history.
    pub payload: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// Every insert the clients sent, per ring prefix in the order each prefix's client sent
/// them.
#[derive(Debug, Clone, Default)]
pub struct History {
    users: BTreeMap<u32, Vec<Write>>,
}

impl History {
    /// Adds `writes`, each prefix's in the order its client sent them (clients own disjoint
    /// prefixes, so merging several clients' lists keeps each prefix's order).
    pub fn extend(&mut self, writes: impl IntoIterator<Item = Write>) {
        for w in writes {
            self.users.entry(w.user).or_default().push(w);
        }
    }

    /// Every insert, prefix by prefix, each prefix's in the order sent.
    pub fn writes(&self) -> impl Iterator<Item = &Write> {
        self.users.values().flatten()
    }

    /// How many inserts ended with `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.users
            .values()
            .flatten()
            .filter(|w| w.outcome == outcome)
            .count()
    }

    /// How many inserts ended with `outcome` in `epoch`.
    pub fn count_in(&self, epoch: u32, outcome: Outcome) -> usize {
        self.users
            .values()
            .flatten()
            .filter(|w| w.epoch == epoch && w.outcome == outcome)
            .count()
    }
}

/// One ring as a node holds it: its meta row (decoded) and its data rows by slot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ring {
    /// The meta row (slot 0), if there is one.
    pub meta: Option<Meta>,
    /// Payloads by slot (`ring_idx` 1..=N).
    pub rows: BTreeMap<u32, String>,
}

/// One row as a client reads it with `ndb_ring_buffer_show_meta = ON`: `user_id`,
/// `ring_idx` (0 for the meta row), `ring_meta`, `payload`.
pub type RingRow = (u32, u32, Option<Vec<u8>>, Option<String>);

/// The rings of one node's table, by prefix.
#[derive(Debug, Clone, Default)]
pub struct NodeRings {
    /// The node's name, for the report.
    pub node: String,
    /// Rings by prefix (`user_id`).
    pub rings: BTreeMap<u32, Ring>,
}

impl NodeRings {
    /// Builds the rings from rows of `(user_id, ring_idx, ring_meta, payload)` as a client
    /// reads them with `ndb_ring_buffer_show_meta = ON`: slot 0 is the meta row.
    pub fn from_rows(
        node: impl Into<String>,
        rows: impl IntoIterator<Item = RingRow>,
    ) -> Result<NodeRings, String> {
        let mut out = NodeRings {
            node: node.into(),
            rings: BTreeMap::new(),
        };
        for (user, slot, meta, payload) in rows {
            let ring = out.rings.entry(user).or_default();
            if slot == 0 {
                let bytes = meta.ok_or_else(|| format!("user {user}: meta row without meta"))?;
                let m = Meta::decode(&bytes)
                    .ok_or_else(|| format!("user {user}: meta row that does not decode"))?;
                ring.meta = Some(m);
            } else {
                ring.rows.insert(slot, payload.unwrap_or_default());
            }
        }
        Ok(out)
    }
}

/// What [`check`] allows.
#[derive(Debug, Clone, Copy)]
pub struct CheckOptions {
    /// Rows per prefix (`MAX_ROWS_PER_PK`).
    pub ring_size: u32,
    /// The epoch whose inserts may be lost (the one before a failover): the node may hold
    /// any prefix of it per ring.
    pub lossy_epoch: Option<u32>,
}

/// One node's result.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The node's name.
    pub node: String,
    /// Rings compared.
    pub rings: usize,
    /// Acknowledged inserts the node holds (as rows or counted by its meta rows).
    pub acked_held: usize,
    /// Inserts of unknown outcome the node holds.
    pub unknown_held: usize,
    /// Inserts of unknown outcome the node does not hold.
    pub unknown_absent: usize,
    /// Acknowledged inserts of the lossy epoch the node does not hold: the loss window.
    pub lost: usize,
    /// Per prefix, how many inserts of the lossy epoch the node holds.
    pub held: BTreeMap<u32, usize>,
    /// Everything that is wrong; empty when the node passes.
    pub problems: Vec<String>,
}

impl Report {
    /// Whether the node passed.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "history {}: {} rings, {} acknowledged inserts held, unknown outcome {} held / {} absent, {} lost: {}",
            self.node,
            self.rings,
            self.acked_held,
            self.unknown_held,
            self.unknown_absent,
            self.lost,
            if self.ok() { "OK" } else { "FAILED" }
        )?;
        for p in &self.problems {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}

/// Problems beyond this many per node are counted, not listed.
const MAX_PROBLEMS: usize = 40;

/// Checks one node's rings against the history.
pub fn check(history: &History, node: &NodeRings, opts: CheckOptions) -> Report {
    let mut report = Report {
        node: node.node.clone(),
        ..Report::default()
    };
    let mut problems = Vec::new();
    let sent: BTreeSet<&str> = history
        .users
        .values()
        .flatten()
        .map(|w| w.payload.as_str())
        .collect();
    for (user, ring) in &node.rings {
        if !history.users.contains_key(user) {
            problems.push(format!(
                "user {user}: a ring no client wrote ({} rows)",
                ring.rows.len()
            ));
        }
    }
    let empty = Ring::default();
    for (user, writes) in &history.users {
        let ring = node.rings.get(user).unwrap_or(&empty);
        report.rings += 1;
        for payload in ring.rows.values() {
            if !sent.contains(payload.as_str()) {
                problems.push(format!("user {user}: row {payload:?} that no client sent"));
            }
        }
        match candidates(*user, writes, opts.lossy_epoch) {
            Err(p) => problems.push(p),
            Ok(options) => {
                let found = options
                    .iter()
                    .find(|applied| expected_ring(applied, opts.ring_size) == *ring);
                match found {
                    Some(applied) => {
                        let in_applied: BTreeSet<&str> =
                            applied.iter().map(|w| w.payload.as_str()).collect();
                        for w in writes {
                            let held = in_applied.contains(w.payload.as_str());
                            match (w.outcome, held) {
                                (Outcome::Acked, true) => report.acked_held += 1,
                                (Outcome::Acked, false) => report.lost += 1,
                                (Outcome::Unknown, true) => report.unknown_held += 1,
                                (Outcome::Unknown, false) => report.unknown_absent += 1,
                                (Outcome::Failed, _) => {}
                            }
                        }
                        if let Some(e) = opts.lossy_epoch {
                            let held = applied.iter().filter(|w| w.epoch == e).count();
                            report.held.insert(*user, held);
                        }
                    }
                    None => problems.push(describe_mismatch(*user, writes, ring, &options, opts)),
                }
            }
        }
    }
    if problems.len() > MAX_PROBLEMS {
        let more = problems.len() - MAX_PROBLEMS;
        problems.truncate(MAX_PROBLEMS);
        problems.push(format!("... and {more} more"));
    }
    report.problems = problems;
    report
}

/// Every applied sequence of one prefix's inserts the history allows, in applied order.
fn candidates(
    user: u32,
    writes: &[Write],
    lossy_epoch: Option<u32>,
) -> Result<Vec<Vec<&Write>>, String> {
    let epochs: BTreeSet<u32> = writes.iter().map(|w| w.epoch).collect();
    let mut options: Vec<Vec<&Write>> = vec![Vec::new()];
    for epoch in epochs {
        let sent: Vec<&Write> = writes
            .iter()
            .filter(|w| w.epoch == epoch && w.outcome != Outcome::Failed)
            .collect();
        let mut next = Vec::new();
        if Some(epoch) == lossy_epoch {
            // Asynchronous replication keeps some prefix of what the old primary took.
            for o in &options {
                for held in 0..=sent.len() {
                    let mut v = o.clone();
                    v.extend_from_slice(&sent[..held]);
                    next.push(v);
                }
            }
        } else {
            let unknown: Vec<usize> = sent
                .iter()
                .enumerate()
                .filter(|(_, w)| w.outcome == Outcome::Unknown)
                .map(|(i, _)| i)
                .collect();
            match unknown.as_slice() {
                [] => {
                    for o in &options {
                        let mut v = o.clone();
                        v.extend_from_slice(&sent);
                        next.push(v);
                    }
                }
                [i] if *i + 1 == sent.len() => {
                    // The last insert's outcome is unknown: committed or not.
                    for o in &options {
                        let mut with = o.clone();
                        with.extend_from_slice(&sent);
                        let mut without = o.clone();
                        without.extend_from_slice(&sent[..*i]);
                        next.push(with);
                        next.push(without);
                    }
                }
                _ => {
                    return Err(format!(
                        "user {user}: epoch {epoch} has inserts sent after one of unknown outcome; \
                         the history cannot be checked (a client bug)"
                    ))
                }
            }
        }
        options = next;
    }
    Ok(options)
}

/// The ring that `applied` inserts leave: the last N of them, insert k (from 0) in slot
/// k mod N + 1, and the meta row counting them all.
fn expected_ring(applied: &[&Write], size: u32) -> Ring {
    let total = applied.len() as u64;
    if total == 0 {
        return Ring::default();
    }
    let n = u64::from(size);
    let mut rows = BTreeMap::new();
    for (k, w) in applied
        .iter()
        .enumerate()
        .skip(total.saturating_sub(n) as usize)
    {
        rows.insert((k as u64 % n) as u32 + 1, w.payload.clone());
    }
    Ring {
        meta: Some(Meta {
            next_slot: (total % n) as u32 + 1,
            count: total.min(n) as u32,
            total,
        }),
        rows,
    }
}

/// Why no allowed history matches, against the one closest to what the node counts.
fn describe_mismatch(
    user: u32,
    writes: &[Write],
    ring: &Ring,
    options: &[Vec<&Write>],
    opts: CheckOptions,
) -> String {
    let total = ring.meta.map(|m| m.total).unwrap_or(0);
    let acked = writes
        .iter()
        .filter(|w| w.outcome == Outcome::Acked)
        .count();
    let closest = options
        .iter()
        .find(|o| o.len() as u64 == total)
        .or_else(|| options.iter().max_by_key(|o| o.len()));
    let Some(closest) = closest else {
        return format!("user {user}: no history allowed (a checker bug)");
    };
    let want = expected_ring(closest, opts.ring_size);
    let mut diffs = Vec::new();
    if want.meta != ring.meta {
        diffs.push(format!("meta {:?}, expected {:?}", ring.meta, want.meta));
    }
    let slots: BTreeSet<u32> = want.rows.keys().chain(ring.rows.keys()).copied().collect();
    for s in slots {
        let (w, g) = (want.rows.get(&s), ring.rows.get(&s));
        if w != g {
            diffs.push(format!("slot {s}: {g:?}, expected {w:?}"));
        }
    }
    format!(
        "user {user}: {acked} acknowledged inserts, the node's ring does not match any history \
         they allow (total {total}): {}",
        diffs.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(user: u32, epoch: u32, n: u32, outcome: Outcome) -> Write {
        Write {
            user,
            epoch,
            payload: format!("u{user}e{epoch}n{n}"),
            outcome,
        }
    }

    fn node(history_applied: &[&Write], size: u32) -> NodeRings {
        let mut rings = BTreeMap::new();
        rings.insert(
            history_applied[0].user,
            expected_ring(history_applied, size),
        );
        NodeRings {
            node: "n".into(),
            rings,
        }
    }

    const OPTS: CheckOptions = CheckOptions {
        ring_size: 3,
        lossy_epoch: None,
    };

    #[test]
    fn a_ring_holding_every_acknowledged_insert_passes() {
        let writes: Vec<Write> = (0..7).map(|n| w(1, 0, n, Outcome::Acked)).collect();
        let mut h = History::default();
        h.extend(writes.clone());
        let applied: Vec<&Write> = writes.iter().collect();
        let r = check(&h, &node(&applied, 3), OPTS);
        assert!(r.ok(), "{r}");
        assert_eq!(r.acked_held, 7);
        // Slots: inserts 5, 6, 7 (from 1) in slots 2, 3, 1.
        let n = node(&applied, 3);
        let ring = &n.rings[&1];
        assert_eq!(ring.rows[&1], "u1e0n6");
        assert_eq!(ring.rows[&2], "u1e0n4");
        assert_eq!(ring.meta.expect("a meta row").next_slot, 2);
    }

    #[test]
    fn a_missing_acknowledged_insert_fails() {
        let writes: Vec<Write> = (0..5).map(|n| w(1, 0, n, Outcome::Acked)).collect();
        let mut h = History::default();
        h.extend(writes.clone());
        let applied: Vec<&Write> = writes.iter().take(4).collect();
        let r = check(&h, &node(&applied, 3), OPTS);
        assert_eq!(r.problems.len(), 1, "{r}");
    }

    #[test]
    fn an_unknown_last_insert_may_be_there_or_not() {
        let mut writes: Vec<Write> = (0..4).map(|n| w(1, 0, n, Outcome::Acked)).collect();
        writes.push(w(1, 0, 4, Outcome::Unknown));
        let mut h = History::default();
        h.extend(writes.clone());
        for take in [4, 5] {
            let applied: Vec<&Write> = writes.iter().take(take).collect();
            let r = check(&h, &node(&applied, 3), OPTS);
            assert!(r.ok(), "{r}");
            assert_eq!(r.unknown_held, take - 4);
        }
    }

    #[test]
    fn a_refused_insert_found_on_a_node_fails() {
        let writes = vec![
            w(1, 0, 0, Outcome::Acked),
            w(1, 0, 1, Outcome::Failed),
            w(1, 0, 2, Outcome::Acked),
        ];
        let mut h = History::default();
        h.extend(writes.clone());
        let applied: Vec<&Write> = writes.iter().collect();
        let r = check(&h, &node(&applied, 3), OPTS);
        assert!(!r.ok());
    }

    #[test]
    fn a_row_no_client_sent_fails() {
        let writes: Vec<Write> = (0..2).map(|n| w(1, 0, n, Outcome::Acked)).collect();
        let mut h = History::default();
        h.extend(writes.clone());
        let applied: Vec<&Write> = writes.iter().collect();
        let mut n = node(&applied, 3);
        n.rings
            .get_mut(&1)
            .expect("ring 1")
            .rows
            .insert(2, "stranger".into());
        let r = check(&h, &n, OPTS);
        assert_eq!(r.problems.len(), 2, "{r}"); // the stranger, and the ring that differs
    }

    #[test]
    fn a_lossy_epoch_counts_the_loss_window() {
        let mut writes: Vec<Write> = (0..6).map(|n| w(1, 0, n, Outcome::Acked)).collect();
        writes.extend((0..2).map(|n| w(1, 1, n, Outcome::Acked)));
        let mut h = History::default();
        h.extend(writes.clone());
        // The promoted node had 4 of the old primary's 6 inserts.
        let applied: Vec<&Write> = writes[..4].iter().chain(&writes[6..]).collect();
        let opts = CheckOptions {
            ring_size: 3,
            lossy_epoch: Some(0),
        };
        let r = check(&h, &node(&applied, 3), opts);
        assert!(r.ok(), "{r}");
        assert_eq!(r.lost, 2);
        assert_eq!(r.held[&1], 4);
        // Without the allowance the same node fails.
        assert!(!check(&h, &node(&applied, 3), OPTS).ok());
    }
}
