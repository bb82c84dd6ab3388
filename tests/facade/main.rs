//! Checks that keep the facade from drifting from the crates behind it: every public name of a
//! backend crate in its `distlock::<backend>` module and every lock-core name at the root
//! (`exports`), every metric series in `distlock::metrics` (`metrics`), every feature in the
//! docs.rs front page's table (`features`), and the declared `rust-version` against every
//! dependency's (`rust_version`), and every backend in every document that lists the backends
//! (`backends`). They read the sources at test time, so a name, series or
//! feature added anywhere fails here until the facade and its docs say it.

mod alerts;
mod backends;
mod exports;
mod features;
mod metrics;
mod rust_version;
mod source;
