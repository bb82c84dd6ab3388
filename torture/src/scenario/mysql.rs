//! The MySQL / MariaDB scenarios: `MysqlLock` on its lease table, the fenced log on a MariaDB
//! of its own behind MySQL's `distlock_fence` (the fence users get).

use std::time::Duration;

use super::{Expected, Scenario, TTL, Topology, base, holder_pause, ms};
use crate::schedule::Step;

fn mysql(mut scenario: Scenario) -> Scenario {
    scenario.topology = Topology::Mysql;
    scenario
}

/// MariaDB killed (`SIGKILL`, a crash; InnoDB recovers what was committed) and started again
/// with its data while workers hold and wait for the lock.
pub fn mysql_restart() -> Scenario {
    Scenario {
        hold: (ms(300), ms(900)),
        short: Duration::from_secs(10),
        ..mysql(base(
            "mysql-restart",
            "MariaDB SIGKILLed (a crash), started again 300 ms later",
            vec![
                Step::StopMysql,
                Step::Sleep(ms(300)),
                Step::StartMysql,
                Step::Sleep(ms(2_000)),
            ],
            Expected::exclusion(
                TTL,
                "a committed lease row survives the crash (InnoDB's redo log), so the name stays \
                 held until its expiry on the server's clock; a holder that cannot renew \
                 meanwhile stops at its own valid_until, which is never later, and the fencing \
                 counter in the row keeps growing",
            ),
        ))
    }
}

/// Kleppmann's GC pause on the MySQL lease table.
pub fn mysql_holder_pause() -> Scenario {
    let mut scenario = holder_pause();
    scenario.name = "mysql-holder-pause";
    mysql(scenario)
}
