//! Models of distlock's lock policy, checked with the stateright model checker:
//! every interleaving of a few clients, a store that may restart and messages that may be lost,
//! within small bounds. See the README for what each model covers, how it maps to the code and
//! what it leaves out.

pub mod check;
pub mod client;
pub mod fair;
pub mod grace;
pub mod line;
pub mod read_write;
