//! The client comes back on its own: the `Locker` a caller made before a fault acquires again
//! after it, with nothing recreated. Bounds are generous correctness bounds (far above what a
//! recovery takes), never speed targets; the torture scenarios measure the speed.

use std::time::Duration;

use lock_core::Locker;
use lock_etcd::EtcdLock;
use lock_testkit::EtcdCluster;

/// What a caller waits for a lock, fault or not: generous, so a loaded machine passes.
const WAIT: Duration = Duration::from_secs(15);

fn locker_on(cluster: &EtcdCluster) -> Locker {
    let lock = EtcdLock::builder()
        .endpoints(cluster.endpoints())
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("valid endpoints");
    Locker::builder(lock)
        .wait(WAIT)
        .retry_errors_for(WAIT)
        .build()
}

/// The first endpoint a lock is given is the member its requests go to first: cut off (both
/// ways) while the client uses it, the client goes on through the others, and comes back
/// after the heal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locker_goes_on_through_the_others_while_its_member_is_cut_off() {
    let cluster = EtcdCluster::builder().members(3).start().expect("start");
    let locker = locker_on(&cluster);
    let guard = locker
        .lock("recovery")
        .await
        .expect("a grant before the fault");
    let before = guard.fencing_token();
    guard.release().await.expect("released");

    cluster.partition(0).expect("partition the first member");
    let during = locker
        .lock("recovery")
        .await
        .expect("a grant through the other members while the first is cut off");
    assert!(
        during.fencing_token() > before,
        "tokens grow across the fault"
    );
    let during_token = during.fencing_token();
    during
        .release()
        .await
        .expect("released during the partition");

    cluster.heal(0).expect("heal");
    let after = locker
        .lock("recovery")
        .await
        .expect("a grant after the heal, on the same locker");
    assert!(after.fencing_token() > during_token, "tokens grow");
    after.release().await.expect("released after the heal");
}

/// Every member killed while a lock is held: its release fails, and once the cluster is back
/// the same locker acquires the lock long before the holder's lease (30 s, restarted by the
/// new leader) would have run out: the failed release's lease is revoked as soon as the
/// cluster answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_whole_cluster_restart_the_same_locker_acquires_again() {
    let mut cluster = EtcdCluster::builder().members(3).start().expect("start");
    let locker = locker_on(&cluster);
    let held = locker
        .lock("restart")
        .lease(Duration::from_secs(30))
        .await
        .expect("a grant before the restart");
    let before = held.fencing_token();

    for member in 0..cluster.len() {
        cluster.kill(member);
    }
    assert!(
        held.release().await.is_err(),
        "a release with every member down cannot succeed"
    );
    cluster
        .restart_all(Duration::from_secs(30))
        .expect("every member back and healthy");

    let after = locker
        .lock("restart")
        .lease(Duration::from_secs(30))
        .await
        .expect("the lock free again well within the old lease, on the same locker");
    assert!(
        after.fencing_token() > before,
        "revisions continue from the log"
    );
    after.release().await.expect("released after the restart");
}
