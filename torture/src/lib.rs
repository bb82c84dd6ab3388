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
pub use runner::{Options, Outcome, Server, run};
pub use scenario::{Bound, Expected, Scenario, Topology};
