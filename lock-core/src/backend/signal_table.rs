//! The release signals a backend's feed serves: one per name that someone in this process
//! watches, counted, and forgotten when its last watcher goes.
//!
//! A backend learns of releases from one feed per runtime (a pub/sub connection, a `LISTEN`ing
//! connection, a watch stream) and hands each to the signal of the name released. Waiters come
//! and go; the table keeps a name while at least one [`SignalWatcher`] of it lives, so a release of a
//! name nobody here waits for costs one failed look-up, and the feed can subscribe per name
//! (Redis) or not (PostgreSQL, etcd) as it likes.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::signal::{ReleaseSignal, ReleaseWatch};

/// Name → [`ReleaseSignal`], with the number of watchers of each name.
///
/// Cheap to clone: clones share one table (the feed's task keeps one, the backend another).
/// [`watch`](SignalTable::watch) counts a watcher in and returns its [`SignalWatcher`], whose drop
/// counts it out; the last one out removes the name and calls the table's
/// [`on_last`](SignalTable::on_last) function with it (Redis unsubscribes its channel there).
///
/// `K` is the key the feed files names under: `String` for names and channels, `Vec<u8>` for
/// keys that are bytes (etcd).
///
/// ```
/// use lock_core::backend::SignalTable;
///
/// let table = SignalTable::<String>::new();
/// let watcher = table.watch("order:42".to_owned());
/// let before = watcher.signal().generation();
/// assert!(table.notify("order:42")); // what the feed does on a release
/// assert_eq!(watcher.signal().generation(), before + 1);
/// drop(watcher);
/// assert!(!table.notify("order:42")); // nobody watches it any more
/// ```
pub struct SignalTable<K = String> {
    shared: Arc<Shared<K>>,
}

struct Shared<K> {
    names: Mutex<HashMap<K, Entry>>,
    on_last: Option<Box<dyn Fn(K) + Send + Sync>>,
}

struct Entry {
    signal: ReleaseSignal,
    watchers: usize,
}

/// One watcher of a name in a [`SignalTable`]: holds the name's signal, and counts itself out
/// of the table when dropped (the last one out removes the name).
///
/// Usually handed to [`ReleaseWatch::new`] as the value the watch keeps, through
/// [`SignalWatcher::into_release_watch`].
pub struct SignalWatcher<K: Eq + Hash = String> {
    /// `None` only while dropping (the key moves to `on_last`).
    key: Option<K>,
    signal: ReleaseSignal,
    shared: Arc<Shared<K>>,
}

impl<K> Clone for SignalTable<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K: Eq + Hash> Default for SignalTable<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Eq + Hash> SignalTable<K> {
    /// An empty table; a name's last watcher going just removes the name.
    #[must_use]
    pub fn new() -> Self {
        Self::with_shared(None)
    }

    /// An empty table that calls `on_last` with each name whose last watcher went, after
    /// removing it (to unsubscribe from the name's releases).
    ///
    /// `on_last` runs while the table is locked, so that it is ordered with the next
    /// [`watch`](SignalTable::watch) of the same name: an unsubscribe it sends is sent before
    /// the subscribe that follows a new watch. It must not use the table, nor block.
    #[must_use]
    pub fn on_last(on_last: impl Fn(K) + Send + Sync + 'static) -> Self {
        Self::with_shared(Some(Box::new(on_last)))
    }

    fn with_shared(on_last: Option<Box<dyn Fn(K) + Send + Sync>>) -> Self {
        Self {
            shared: Arc::new(Shared {
                names: Mutex::new(HashMap::new()),
                on_last,
            }),
        }
    }

    fn names(&self) -> MutexGuard<'_, HashMap<K, Entry>> {
        self.shared.names()
    }

    /// Counts a watcher of `key` in (adding the name with a fresh signal if it had none) and
    /// returns it; dropping it counts it out.
    #[must_use = "dropping the watcher counts it out at once"]
    pub fn watch(&self, key: K) -> SignalWatcher<K>
    where
        K: Clone,
    {
        let mut names = self.names();
        let entry = names.entry(key.clone()).or_insert_with(|| Entry {
            signal: ReleaseSignal::new(),
            watchers: 0,
        });
        entry.watchers += 1;
        let signal = entry.signal.clone();
        drop(names);
        SignalWatcher {
            key: Some(key),
            signal,
            shared: Arc::clone(&self.shared),
        }
    }

    /// Announces a release of `key` to its watchers; `false` when nobody here watches it.
    pub fn notify<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        match self.names().get(key) {
            Some(entry) => {
                entry.signal.notify();
                true
            }
            None => false,
        }
    }

    /// Announces a release of every name watched: after the feed was away (reconnecting), when
    /// any release may have gone unheard, so every waiter looks again.
    pub fn notify_all(&self) {
        for entry in self.names().values() {
            entry.signal.notify();
        }
    }

    /// The names watched now (to subscribe again after a reconnect).
    #[must_use]
    pub fn keys(&self) -> Vec<K>
    where
        K: Clone,
    {
        self.names().keys().cloned().collect()
    }

    /// How many watchers `key` has now (0 when it is not in the table).
    #[must_use]
    pub fn watchers<Q>(&self, key: &Q) -> usize
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.names().get(key).map_or(0, |entry| entry.watchers)
    }

    /// How many names are watched now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.names().len()
    }

    /// Whether no name is watched now.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K> Shared<K> {
    fn names(&self) -> MutexGuard<'_, HashMap<K, Entry>> {
        self.names.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Eq + Hash> SignalWatcher<K> {
    /// The signal of the watched name's releases.
    #[must_use]
    pub fn signal(&self) -> &ReleaseSignal {
        &self.signal
    }

    /// A [`ReleaseWatch`] on this watcher's signal that keeps the watcher (counted in) until
    /// it is dropped: what a backend's [`Lock::watch`](super::Lock::watch) returns.
    #[must_use]
    pub fn into_release_watch(self) -> ReleaseWatch
    where
        K: Send + Sync + 'static,
    {
        ReleaseWatch::new(self.signal.clone(), self)
    }
}

impl<K: Eq + Hash> Drop for SignalWatcher<K> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let mut names = self.shared.names();
        let Some(entry) = names.get_mut(&key) else {
            return;
        };
        entry.watchers -= 1;
        if entry.watchers == 0 {
            names.remove(&key);
            if let Some(on_last) = &self.shared.on_last {
                on_last(key);
            }
        }
    }
}

impl<K> fmt::Debug for SignalTable<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalTable")
            .field("names", &self.shared.names().len())
            .finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + fmt::Debug> fmt::Debug for SignalWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalWatcher")
            .field("key", &self.key)
            .field("signal", &self.signal)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    #[test]
    fn watchers_are_counted_and_the_last_one_out_removes_the_name() {
        let gone = Arc::new(Mutex::new(Vec::new()));
        let told = Arc::clone(&gone);
        let table =
            SignalTable::on_last(move |key: String| told.lock().expect("not poisoned").push(key));
        let a = table.watch("a".to_owned());
        let a2 = table.watch("a".to_owned());
        let b = table.watch("b".to_owned());
        assert_eq!(
            (table.watchers("a"), table.watchers("b"), table.len()),
            (2, 1, 2)
        );
        let mut keys = table.keys();
        keys.sort();
        assert_eq!(keys, ["a", "b"]);
        drop(a);
        assert_eq!(table.watchers("a"), 1);
        assert!(
            gone.lock().expect("not poisoned").is_empty(),
            "a watcher of `a` is left"
        );
        drop(a2);
        assert_eq!(table.watchers("a"), 0);
        assert_eq!(*gone.lock().expect("not poisoned"), ["a"]);
        // A new watcher of a removed name gets a fresh entry, counted from one.
        let a3 = table.watch("a".to_owned());
        assert_eq!(table.watchers("a"), 1);
        drop((a3, b));
        assert!(table.is_empty());
        assert_eq!(*gone.lock().expect("not poisoned"), ["a", "a", "b"]);
    }

    #[test]
    fn watchers_of_one_name_share_its_signal_and_other_names_stay_quiet() {
        let table = SignalTable::<Vec<u8>>::new();
        let a = table.watch(b"a".to_vec());
        let a2 = table.watch(b"a".to_vec());
        let b = table.watch(b"b".to_vec());
        assert!(table.notify(b"a".as_slice()));
        assert!(!table.notify(b"c".as_slice()));
        assert_eq!((a.signal().generation(), a2.signal().generation()), (1, 1));
        assert_eq!(b.signal().generation(), 0);
        table.notify_all();
        assert_eq!((a.signal().generation(), b.signal().generation()), (2, 1));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_release_watch_wakes_on_notify_and_counts_out_when_dropped() {
        let table = SignalTable::<String>::new();
        let watch = table.watch("n".to_owned()).into_release_watch();
        let seen = watch.signal().generation();
        let feed = table.clone();
        let announce = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            feed.notify("n")
        });
        tokio::time::timeout(Duration::from_secs(5), watch.signal().changed_since(seen))
            .await
            .expect("the release was announced");
        assert!(announce.await.expect("the feed"));
        assert_eq!(table.watchers("n"), 1);
        drop(watch);
        assert_eq!(table.watchers("n"), 0);
        assert!(table.is_empty());
    }
}
