//! The fence on the user's side: a write to the user's own object that the store refuses
//! when a newer holder has written it already.
//!
//! The object carries the fencing token of its last writer as user metadata
//! ([`FENCE_METADATA`], `x-amz-meta-distlock-fence` on S3). A fenced write reads it, refuses
//! a token older than it, and writes conditionally on the version it read: a newer holder's
//! write in between changes the version, the condition fails, and the read that follows sees
//! the newer token. So a holder paused past its lease can never overwrite what its successor
//! wrote.

use std::time::Duration;

use lock_core::{Fence, LockError, Op};
use object_store::path::Path;
use object_store::{
    Attribute, Attributes, GetOptions, ObjectStore, PutMode, PutOptions, PutPayload, PutResult,
    UpdateVersion,
};

use crate::error::{timed, to_lock_error};

/// The user-metadata key that holds the fencing token of an object's last fenced write.
pub const FENCE_METADATA: &str = "distlock-fence";

/// Conditional writes tried before a contended object is reported busy.
const TRIES: u32 = 4;

/// Writes `payload` to the object `fence.resource` (a path in `store`, such as
/// `reports/nightly.csv`) with the fencing token `fence.token`, unless the object was already
/// written with a larger token: the contract of every distlock fence ([`Fence`]), the record
/// being the object's own metadata. Equal tokens are accepted (the same holder writing
/// again). Each request is bounded by `timeout`. From a guard:
/// `guard.fence().for_resource("reports/nightly.csv")`.
///
/// # Errors
/// [`LockError::Fenced`] when the object carries a larger token (nothing written);
/// [`LockError::InvalidInput`] when `fence.resource` is not a valid object path (empty, or
/// with an empty or `.`/`..` segment; nothing sent); [`LockError::Busy`] when other writers
/// kept changing the object; timeouts and store errors ([`LockError::Backend`] with op
/// `write`).
///
/// # Cancel safety
/// Cancel safe in the sense that matters: dropped, the write either landed whole (with this
/// token) or not at all.
pub async fn fenced_put(
    store: &dyn ObjectStore,
    fence: &Fence,
    payload: PutPayload,
    timeout: Duration,
) -> Result<PutResult, LockError> {
    let path = &resource_path(&fence.resource)?;
    let fencing_token = fence.token;
    let label = store.to_string();
    let error = |e| to_lock_error(Op::Write, &label, path.as_ref(), e, timeout);
    for _ in 0..TRIES {
        let head = GetOptions {
            head: true,
            ..GetOptions::default()
        };
        let mode = match timed(timeout, store.get_opts(path, head)).await? {
            Ok(got) => {
                let current = got
                    .attributes
                    .get(&Attribute::Metadata(FENCE_METADATA.into()))
                    .and_then(|v| v.as_ref().parse::<u64>().ok())
                    .unwrap_or(0);
                if current > fencing_token {
                    return Err(LockError::Fenced {
                        resource: fence.resource.clone(),
                        token: fencing_token,
                        current,
                    });
                }
                PutMode::Update(UpdateVersion {
                    e_tag: got.meta.e_tag,
                    version: got.meta.version,
                })
            }
            Err(object_store::Error::NotFound { .. }) => PutMode::Create,
            Err(e) => return Err(error(e)),
        };
        let mut attributes = Attributes::new();
        attributes.insert(
            Attribute::Metadata(FENCE_METADATA.into()),
            fencing_token.to_string().into(),
        );
        let options = PutOptions {
            mode,
            attributes,
            ..PutOptions::default()
        };
        match timed(timeout, store.put_opts(path, payload.clone(), options)).await? {
            Ok(done) => return Ok(done),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => {}
            Err(e) => return Err(error(e)),
        }
    }
    Err(LockError::Busy {
        name: path.to_string(),
        holder_ttl: None,
    })
}

/// The object path a fence's resource names.
fn resource_path(resource: &str) -> Result<Path, LockError> {
    match Path::parse(resource) {
        Ok(path) if !path.as_ref().is_empty() => Ok(path),
        Ok(_) => Err(LockError::invalid("the fenced object's path is empty")),
        Err(e) => Err(LockError::invalid(format!(
            "the fenced resource {resource:?} is not an object path: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::resource_path;

    #[test]
    fn a_resource_is_an_object_path() {
        assert_eq!(
            resource_path("reports/nightly.csv")
                .map(|p| p.to_string())
                .ok(),
            Some("reports/nightly.csv".to_owned())
        );
        assert!(resource_path("").is_err());
        assert!(resource_path("a//b").is_err());
        assert!(resource_path("a/../b").is_err());
    }
}
