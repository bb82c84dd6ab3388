//! The checks the backends' tests share: the conformance suite every backend runs, the
//! checks across OS processes (exclusion, fair order, leader election, latches and barriers) and of holder
//! descriptions that several backends run, each panicking with the rule that broke, and the
//! history checker (`history`) that the torture suite and the process tests judge their
//! recorded histories with.

pub mod conformance;
pub mod coordination_processes;
pub mod election_processes;
pub mod exclusion;
pub mod fair_order;
pub mod history;
pub mod holders;
