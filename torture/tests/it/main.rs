//! The torture scenarios' short forms in one binary (one to compile and link, not one per
//! backend): one module per backend, each scenario run one at a time through `common`.

mod common;

mod clock;
mod cluster;
mod etcd;
mod histories;
mod mysql;
mod object_store;
mod postgres;
mod redlock;
mod single_redis;
