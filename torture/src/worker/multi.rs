//! The multi-lock's round: `locker.lock_all` over all but one of the names, the exclusive
//! section once under the whole guard, the fenced writes once per name under that name's
//! token, and every name released at once, each name's records naming it.

use std::time::Duration;

use distlock::Guard;

use super::{Worker, release_outcome};
use crate::history::{Event, Held, nanos, now_ns, wall_ns};

impl Worker {
    /// One round: the names of `names` but one drawn at random, waited for at most `left`.
    pub(super) async fn multi_round(&mut self, names: u32, left: Duration) {
        let skip = self.rng.u32(0..names.max(1));
        let names = self.config.multi_names(names, skip);
        let requested_ns = now_ns();
        let acquired = self
            .locker
            .lock_all(names.iter().map(|(taken, _)| taken.clone()))
            .wait(self.config.wait().min(left))
            .acquire()
            .await;
        let multi = match acquired {
            Ok(multi) => multi,
            Err(error) => return self.acquire_failed(requested_ns, &error).await,
        };
        // Each guard with the name its records give (a rogue worker's guards hold others).
        let held: Vec<(&Guard, &str)> = multi
            .guards()
            .iter()
            .filter_map(|guard| {
                let (_, recorded) = names.iter().find(|(taken, _)| taken == guard.name())?;
                Some((guard, recorded.as_str()))
            })
            .collect();
        for &(guard, lock) in &held {
            self.history.record_on(
                lock,
                Event::Granted {
                    requested_ns,
                    token: guard.fencing_token(),
                    valid_until_ns: wall_ns(guard.valid_until()),
                    lease_ns: nanos(self.config.ttl()),
                    held: Held::Exclusive,
                },
            );
        }
        // One counter update per section (under the first name: the checker's late-write
        // count finds its section there), the fenced writes under every name.
        if let Some(&(first, lock)) = held.first() {
            self.increment(first.fencing_token(), Some(lock)).await;
        }
        for &(guard, lock) in &held {
            self.fenced_writes(guard, Some(lock)).await;
        }
        let released: Vec<(u64, String)> = held
            .iter()
            .map(|&(guard, lock)| {
                self.history.record_on(
                    lock,
                    Event::ReleaseSent {
                        token: guard.fencing_token(),
                        valid_until_ns: wall_ns(guard.valid_until()),
                        held: guard.is_held(),
                    },
                );
                (guard.fencing_token(), lock.to_owned())
            })
            .collect();
        // All at once, as a user's `MultiGuard::release`: one answer for every name.
        let outcome = release_outcome(multi.release().await);
        for (token, lock) in released {
            self.history.record_on(
                &lock,
                Event::Released {
                    token,
                    outcome: outcome.clone(),
                },
            );
        }
    }
}
