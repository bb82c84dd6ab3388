//! Moving one hash slot between masters: [`SlotMigration`].

use std::io;
use std::time::{Duration, Instant};

use super::{POLL_INTERVAL, PROBE_TIMEOUT, RedisCluster, check_slot};
use crate::servers::role::Role;
use crate::servers::{client, poll};

/// Keys asked for (`CLUSTER GETKEYSINSLOT`) and moved (`MIGRATE`) at once.
const BATCH: usize = 100;
/// Upper bound on batches per [`RedisCluster::migrate_keys`] call.
const MAX_BATCHES: usize = 10_000;
/// `MIGRATE`'s own timeout, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 5_000;
/// Client-side timeout of one `MIGRATE`.
const MIGRATE_CLIENT_TIMEOUT: Duration = Duration::from_secs(15);
/// `CLUSTER SETSLOT ... NODE` attempts on the source, which refuses while it
/// still holds keys of the slot (written during the migration).
const SETSLOT_ATTEMPTS: usize = 3;

/// A slot left half-migrated by [`RedisCluster::begin_migration`]: `MIGRATING`
/// on its source, `IMPORTING` on its target.
///
/// While it lasts, the source still serves the keys it holds and answers
/// `-ASK` for the others, which the target accepts after `ASKING`. Finish it
/// with [`RedisCluster::finish_migration`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "the slot stays MIGRATING/IMPORTING until `finish_migration` is called"]
pub struct SlotMigration {
    slot: u16,
    from: usize,
    to: usize,
    to_id: String,
}

impl SlotMigration {
    /// The slot being moved.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// Index of the source master.
    pub fn from(&self) -> usize {
        self.from
    }

    /// Index of the target master.
    pub fn to(&self) -> usize {
        self.to
    }
}

impl RedisCluster {
    /// Moves `slot` and its keys from master `from` to master `to`: the
    /// whole resharding sequence of [`begin_migration`](Self::begin_migration)
    /// then [`finish_migration`](Self::finish_migration). Returns the number
    /// of keys handed to `MIGRATE`.
    ///
    /// # Errors
    ///
    /// As for those two methods.
    ///
    /// # Panics
    ///
    /// If `from` or `to` is out of range.
    pub fn migrate_slot(&self, slot: u16, from: usize, to: usize) -> io::Result<usize> {
        let migration = self.begin_migration(slot, from, to)?;
        self.finish_migration(migration)
    }

    /// Starts moving `slot` from master `from` to master `to`: `CLUSTER
    /// SETSLOT slot IMPORTING from-id` on the target, then `MIGRATING to-id`
    /// on the source. No key is moved yet (see
    /// [`migrate_keys`](Self::migrate_keys)).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidInput`] if the slot is out of range, `from ==
    /// to`, a node is not live, `to` is not a master or `from` does not own
    /// the slot; otherwise a failing command.
    ///
    /// # Panics
    ///
    /// If `from` or `to` is out of range.
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) -> io::Result<SlotMigration> {
        check_slot(slot)?;
        let (source, target) = (&self.nodes[from], &self.nodes[to]);
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
        if from == to {
            return Err(invalid(format!(
                "cannot migrate slot {slot} to its own node {from}"
            )));
        }
        for (i, node) in [(from, source), (to, target)] {
            if !node.is_live() {
                return Err(invalid(format!(
                    "node {i} (port {}) is not live",
                    node.port()
                )));
            }
        }
        if target.role()? != Role::Master {
            return Err(invalid(format!("target node {to} is not a master")));
        }
        let me = source.myself_within(PROBE_TIMEOUT)?;
        if !me.is_master() || !me.owns(slot) {
            return Err(invalid(format!(
                "source node {from} does not own slot {slot}"
            )));
        }
        let slot_arg = slot.to_string();
        target.command(&["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &source.id])?;
        source.command(&["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &target.id])?;
        Ok(SlotMigration {
            slot,
            from,
            to,
            to_id: target.id.clone(),
        })
    }

    /// Moves every key currently in the migrating slot from the source to
    /// the target (`CLUSTER GETKEYSINSLOT` then `MIGRATE ... KEYS`, in
    /// batches of 100), leaving the slot `MIGRATING`/`IMPORTING`. Returns
    /// the number of keys handed to `MIGRATE`. Can be called any number of
    /// times, e.g. to move a lock's key mid-migration.
    ///
    /// # Errors
    ///
    /// If a command fails (e.g. `BUSYKEY`: the key also exists on the
    /// target), or the keys are not all moved within the wait timeout.
    pub fn migrate_keys(&self, migration: &SlotMigration) -> io::Result<usize> {
        let source = &self.nodes[migration.from];
        let target_port = self.nodes[migration.to].port().to_string();
        let slot = migration.slot.to_string();
        let batch = BATCH.to_string();
        let timeout = MIGRATE_TIMEOUT_MS.to_string();
        let started = Instant::now();
        let mut moved = 0;
        for _ in 0..MAX_BATCHES {
            let reply = source
                .server
                .query(&["CLUSTER", "GETKEYSINSLOT", &slot, &batch], PROBE_TIMEOUT)?;
            let keys = client::byte_strings(&reply);
            if keys.is_empty() {
                return Ok(moved);
            }
            if started.elapsed() > self.config.wait_timeout {
                break;
            }
            let mut args: Vec<&[u8]> = vec![
                b"MIGRATE",
                b"127.0.0.1",
                target_port.as_bytes(),
                b"",
                b"0",
                timeout.as_bytes(),
                b"KEYS",
            ];
            args.extend(keys.iter().map(Vec::as_slice));
            source
                .server
                .query_bytes(&args, MIGRATE_CLIENT_TIMEOUT)
                .map_err(|e| {
                    io::Error::new(e.kind(), format!("MIGRATE of slot {slot} keys: {e}"))
                })?;
            moved += keys.len();
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "slot {slot} still has keys on node {} after {moved} were moved",
                migration.from
            ),
        ))
    }

    /// Completes a migration: moves the remaining keys, assigns the slot to
    /// the target (`CLUSTER SETSLOT slot NODE to-id` on the target, then the
    /// source, then the other live masters), and waits until every live
    /// node agrees and the cluster is healthy. Returns the number of keys
    /// handed to `MIGRATE` by this call.
    ///
    /// # Errors
    ///
    /// If a command fails, or the cluster does not settle within the wait
    /// timeout.
    pub fn finish_migration(&self, migration: SlotMigration) -> io::Result<usize> {
        let mut moved = self.migrate_keys(&migration)?;
        let slot = migration.slot.to_string();
        let assign = ["CLUSTER", "SETSLOT", &slot, "NODE", &migration.to_id];
        self.nodes[migration.to].command(&assign)?;
        let source = &self.nodes[migration.from];
        for attempt in 1..=SETSLOT_ATTEMPTS {
            match source.command(&assign) {
                Ok(_) => break,
                Err(_) if attempt < SETSLOT_ATTEMPTS => {
                    moved += self.migrate_keys(&migration)?;
                }
                Err(err) => return Err(err),
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if i != migration.from && i != migration.to && node.is_live() {
                // Gossip would spread the change anyway; this only speeds it up.
                if node.role().ok() == Some(Role::Master) {
                    let _ = node.command(&assign);
                }
            }
        }
        poll::until(
            &format!("slot {slot} to belong to node {} everywhere", migration.to),
            self.config.wait_timeout,
            POLL_INTERVAL,
            || {
                for (i, node) in self.nodes.iter().enumerate() {
                    if !node.is_live() {
                        continue;
                    }
                    let view = node
                        .view(PROBE_TIMEOUT)
                        .map_err(|e| format!("node {i}: CLUSTER NODES: {e}"))?;
                    let owner = view
                        .iter()
                        .find(|l| l.is_master() && l.owns(migration.slot))
                        .map(|l| l.id.as_str());
                    if owner != Some(migration.to_id.as_str()) {
                        return Err(format!("node {i} sees slot {slot} owned by {owner:?}"));
                    }
                    if view
                        .iter()
                        .any(|l| l.is_myself() && l.open_slots.contains(&migration.slot))
                    {
                        return Err(format!("node {i} still has slot {slot} open"));
                    }
                }
                self.health()
            },
        )?;
        Ok(moved)
    }
}
