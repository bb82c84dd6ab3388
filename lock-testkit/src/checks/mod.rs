//! The checks the backends' tests share: the conformance suite every backend runs, and the
//! checks across OS processes (exclusion, fair order, leader election) and of holder
//! descriptions that several backends run. Each panics with the rule that broke.

pub mod conformance;
pub mod election_processes;
pub mod exclusion;
pub mod fair_order;
pub mod holders;
