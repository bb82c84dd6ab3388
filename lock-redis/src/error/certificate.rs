//! Whether a connection failure is a certificate refused, either way: an I/O error to redis-rs
//! that trying again cannot mend (feature `tls`).

/// Whether `err` (a connection failure) is the server's certificate being rejected, or the
/// server rejecting ours: trying again cannot help until the configuration changes.
pub(super) fn is_certificate_error(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    // Bounded: error chains are short, but a cyclic `source` must not hang us.
    for _ in 0..MAX_DEPTH {
        let Some(err) = next else { return false };
        if let Some(rustls_error) = rustls_error_in(err, MAX_DEPTH) {
            return matches!(
                rustls_error,
                rustls::Error::InvalidCertificate(_)
                    | rustls::Error::NoCertificatesPresented
                    | rustls::Error::AlertReceived(
                        rustls::AlertDescription::BadCertificate
                            | rustls::AlertDescription::UnknownCA
                            | rustls::AlertDescription::CertificateRequired
                            | rustls::AlertDescription::CertificateUnknown
                            | rustls::AlertDescription::HandshakeFailure
                    )
            );
        }
        next = err.source();
    }
    false
}

const MAX_DEPTH: usize = 16;

/// The rustls error `err` is or wraps. redis-rs keeps the I/O error in an `Arc`, and an
/// `io::Error`'s `source` skips the error it wraps, so `source` alone never reaches it.
fn rustls_error_in<'a>(
    err: &'a (dyn std::error::Error + 'static),
    depth: usize,
) -> Option<&'a rustls::Error> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    if depth == 0 {
        return None;
    }
    if let Some(rustls_error) = err.downcast_ref::<rustls::Error>() {
        return Some(rustls_error);
    }
    if let Some(shared) = err.downcast_ref::<Shared>() {
        return rustls_error_in(&**shared, depth - 1);
    }
    let inner = err.downcast_ref::<std::io::Error>()?.get_ref()?;
    rustls_error_in(inner, depth - 1)
}

#[cfg(test)]
mod tests {
    use super::is_certificate_error;

    #[test]
    fn certificate_rejections_are_recognised_through_io_errors() {
        let rejected = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert!(is_certificate_error(&rejected));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(!is_certificate_error(&reset));
        // As redis-rs hands it over: the I/O error inside a RedisError.
        let wrapped = redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ));
        assert!(is_certificate_error(&wrapped));
        assert!(!is_certificate_error(&redis::RedisError::from(reset)));
    }
}
