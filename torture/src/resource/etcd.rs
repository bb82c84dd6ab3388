//! The fenced log of the etcd scenarios: keys on the lock's own etcd cluster, each put by
//! `EtcdLock::held_commit`, which commits only while the guard's grant is etcd's current
//! holder of the name (the lock key's revision is the token): stronger than a fence's order.

use distlock::etcd::EtcdLock;
use distlock::etcd::etcd_client::{Client, GetOptions, TxnOp};
use distlock::{Guard, LockError};

/// The log's keys: `PREFIX<worker>/<n>`, one per accepted write, valued `"TOKEN WORKER"`;
/// their creation revisions order them.
const PREFIX: &str = "torture/accepted/";

/// A worker's fenced log on etcd.
pub(super) struct EtcdLog {
    lock: EtcdLock,
    /// The worker's writes so far: each one's key is new, so a holder's repeated writes with
    /// one token are each logged.
    written: u64,
}

impl EtcdLog {
    /// A log written through `lock`, the worker's own `EtcdLock`.
    pub(super) fn new(lock: EtcdLock) -> EtcdLog {
        EtcdLog { lock, written: 0 }
    }

    /// Puts `entry` under a new key, committed only while `guard` holds the lock; a refusal is
    /// `LockError::Fenced`.
    pub(super) async fn append(&mut self, guard: &Guard, entry: &str) -> Result<(), LockError> {
        self.written += 1;
        let worker = entry.split_whitespace().nth(1).unwrap_or("?");
        let key = format!("{PREFIX}{worker}/{:010}", self.written);
        self.lock
            .held_commit(guard, [TxnOp::put(key, entry, None)])
            .await
            .map(drop)
    }
}

/// The log's entries in the order etcd accepted them (creation revision), read at the end of
/// a run.
pub(super) async fn entries(endpoints: &[String]) -> Result<Vec<String>, String> {
    let mut client = Client::connect(endpoints, None)
        .await
        .map_err(|e| format!("the etcd cluster: {e}"))?;
    let answer = client
        .get(PREFIX, Some(GetOptions::new().with_prefix()))
        .await
        .map_err(|e| e.to_string())?;
    let mut kvs: Vec<_> = answer.kvs().iter().collect();
    kvs.sort_by_key(|kv| kv.create_revision());
    kvs.iter()
        .map(|kv| kv.value_str().map(str::to_owned).map_err(|e| e.to_string()))
        .collect()
}
