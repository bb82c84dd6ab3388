//! What distlock's load tool (`cargo run --release -p distlock-bench --bin loadtool`) and its
//! criterion benches share: the hand-written baseline locks they measure distlock against.
//!
//! See `benches/README.md` for the scenarios, the baselines and how to read the results.
#![forbid(unsafe_code)]

pub mod handwritten;
pub mod handwritten_fenced;
pub mod handwritten_mysql;
pub mod handwritten_s3;

pub use handwritten::HandLock;
pub use handwritten_fenced::HandFencedLock;
pub use handwritten_mysql::HandMysqlLock;
pub use handwritten_s3::{BareS3Updates, HandS3Lock};
