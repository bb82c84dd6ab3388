//! What keeps grants safe when a server may have lost them: the store grace period after a
//! restart or failover (`grace`; per master on a Cluster, `cluster_grace`), from what each server
//! says about itself (`facts`).

#[cfg(feature = "cluster")]
pub(crate) mod cluster_grace;
pub(crate) mod facts;
pub(crate) mod grace;
