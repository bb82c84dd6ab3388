//! The advisory mode's lease is its server session: a session killed (`KILL CONNECTION`) or
//! closed at its `wait_timeout` is a lost lease, reported as such (`lost()` fires; extend and
//! release say "not ours"), never as a silent success; and a server `wait_timeout` shorter
//! than the TTL does not end a renewed session (the trap of Combodo/iTop PR #209).

use std::time::Duration;

use lock_core::Locker;
use lock_core::backend::{Attempt, Lock};
use lock_testkit::MariadbServer;

use crate::common::{advisory, token};

/// The id of the session that holds the `GET_LOCK` lock `name`, asked as root.
fn holder_session(server: &MariadbServer, name: &str) -> u64 {
    let out = server
        .sql_as_root(&format!("SELECT IS_USED_LOCK('{name}')"))
        .expect("IS_USED_LOCK");
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not held: {out:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_session_is_a_lost_lease() {
    let db = crate::common::shared().await;
    let locker = Locker::new(advisory(&db.server.url()));
    let name = "advisory-killed";
    let guard = locker
        .lock(name)
        .lease(Duration::from_secs(1))
        .acquire()
        .await
        .expect("acquire");
    let session = holder_session(&db.server, name);
    db.server
        .sql_as_root(&format!("KILL CONNECTION {session}"))
        .expect("kill");
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fires after the session was killed");
    assert!(!guard.is_held());
    // The name is free on the server: another lock takes it at once.
    let other = advisory(&db.server.url());
    assert!(matches!(
        other
            .try_acquire(name, token(), Duration::from_secs(5))
            .await
            .expect("try"),
        Attempt::Acquired(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_timeout_ends_a_stalled_session_and_spares_a_renewed_one() {
    // The server closes sessions idle for 1 s, unless a session says otherwise.
    let server = MariadbServer::builder()
        .setting("wait-timeout", "1")
        .start()
        .expect("start mariadb");
    let url = server.url();
    let stalled = async {
        // A holder that makes no call: its session's wait_timeout is TTL + statement timeout
        // (1 s + 2 s), after which the server closes it and the lock goes with it.
        let lock = advisory(&url);
        let Attempt::Acquired(lease) = lock
            .try_acquire("stalled", token(), Duration::from_secs(1))
            .await
            .expect("try")
        else {
            panic!("busy");
        };
        tokio::time::sleep(Duration::from_millis(4500)).await;
        assert_eq!(
            lock.extend(&lease, Duration::from_secs(1))
                .await
                .expect("extend"),
            None
        );
        assert!(!lock.release(&lease).await.expect("release"));
        let other = advisory(&url);
        assert!(matches!(
            other
                .try_acquire("stalled", token(), Duration::from_secs(5))
                .await
                .expect("try"),
            Attempt::Acquired(_)
        ));
    };
    let renewed = async {
        // Renewed every third of 3 s: idle at most ~1 s between heartbeats, but its session's
        // own wait_timeout (5 s) spares it the server's 1 s.
        let locker = Locker::new(advisory(&url));
        let guard = locker
            .lock("renewed")
            .lease(Duration::from_secs(3))
            .acquire()
            .await
            .expect("acquire");
        let lost = tokio::time::timeout(Duration::from_millis(4500), guard.lost()).await;
        assert!(lost.is_err(), "the renewed lease was lost");
        assert!(guard.is_held());
        guard.release().await.expect("release");
    };
    tokio::join!(stalled, renewed);
}
