//! What the server tells a lock without being asked: releases announced to waiters
//! (`subscriber`, pub/sub) and keys lost by their holders (`tracker`, key tracking).

pub(crate) mod subscriber;
pub(crate) mod tracker;
