//! The `distlock` command's integration tests in one binary (one to compile and link, not one
//! per file): each module runs the built command (`CARGO_BIN_EXE_distlock`, through `common`)
//! against redis-servers, clusters and sentinel sets started for the test and stopped by PID,
//! and takes locks through the library to give it something to see.

mod common;

mod bad_target;
mod coordination;
mod etcd;
mod etcd_kinds;
mod inspect;
mod ls_many;
mod migrate;
mod mysql;
mod object_store;
mod postgres;
mod redlock;
mod release;
mod release_force;
mod run_backends;
mod run_env;
mod run_killed;
mod run_leader;
mod run_lock_delay;
mod run_lost;
mod run_psql;
mod run_revoke;
mod run_waiting;
mod sentinel;
mod serve;
mod serve_browser;
mod serve_kit;
mod serve_timeline;
mod tls;
mod warnings;
mod watch;
