#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod checker;
pub mod history;
mod lab;
pub mod report;
pub mod resource;
pub mod runner;
pub mod scenario;
pub mod schedule;
pub mod worker;

pub use checker::{Report, check};
pub use lab::Server;
pub use runner::{Options, Outcome, run};
pub use scenario::{Bound, Expected, Scenario, Topology};
