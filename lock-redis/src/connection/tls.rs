//! TLS to Redis (the `tls` feature): which CA to trust and which client certificate to present.
//!
//! A `rediss://` URL alone verifies the server against the operating system's trust store.
//! Servers with certificates from a private CA (the usual case for Redis) need that CA given
//! with [`RedisLockBuilder::tls_ca_cert`](crate::RedisLockBuilder::tls_ca_cert) — then only
//! it is trusted — so nobody has to reach for `#insecure`. Mutual TLS adds a client
//! certificate and key.

use lock_core::LockError;
use redis::{ClientTlsConfig, ConnectionInfo, TlsCertificates};

/// The TLS settings given to the builder; empty when none were.
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    pub(crate) ca_cert_pem: Option<Vec<u8>>,
    pub(crate) client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsSettings {
    pub(crate) fn is_empty(&self) -> bool {
        self.ca_cert_pem.is_none() && self.client_cert.is_none()
    }

    /// `url` with these settings attached.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when the URL does not parse, is not `rediss://` while TLS
    /// settings were given, or a PEM does not parse.
    pub(crate) fn connection_info(&self, url: &str) -> Result<ConnectionInfo, LockError> {
        if self.is_empty() {
            return redis::IntoConnectionInfo::into_connection_info(url)
                .map_err(|e| LockError::invalid(format!("bad Redis URL: {e}")));
        }
        if let Some(pem) = &self.ca_cert_pem {
            use rustls::pki_types::{CertificateDer, pem::PemObject};
            // An empty trust store would turn every server away at connect time instead.
            if CertificateDer::pem_slice_iter(pem).next().is_none() {
                return Err(LockError::invalid(
                    "the TLS CA certificate PEM holds no certificate",
                ));
            }
        }
        let certificates = TlsCertificates {
            client_tls: self
                .client_cert
                .as_ref()
                .map(|(cert, key)| ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.ca_cert_pem.clone(),
        };
        // redis-rs parses the PEMs here, so a bad certificate is an input error now rather
        // than a connection error on every operation later.
        redis::Client::build_with_tls(url, certificates)
            .map(|client| client.get_connection_info().clone())
            .map_err(|e| LockError::invalid(format!("bad TLS settings for {}: {e}", redact(url))))
    }
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A private key must never reach a log line.
        f.debug_struct("TlsSettings")
            .field("ca_cert_pem", &self.ca_cert_pem.as_ref().map(|_| "<set>"))
            .field("client_cert", &self.client_cert.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// rustls needs a process-wide crypto provider. It picks one by itself when exactly one
/// provider feature is on in the build (ours: ring); installing ring explicitly keeps TLS
/// working when some other crate in the application turns on a second (aws-lc-rs). An
/// application that installed its own provider keeps it.
pub(crate) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err: another thread installed one first, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// `url` without its credentials, for error messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_stay_out_of_messages() {
        assert_eq!(redact("rediss://user:secret@h:1/0"), "rediss://***@h:1/0");
        assert_eq!(redact("rediss://h:1/"), "rediss://h:1/");
    }

    #[test]
    fn tls_settings_need_a_rediss_url_and_parseable_pems() {
        let settings = TlsSettings {
            ca_cert_pem: Some(b"not a certificate".to_vec()),
            client_cert: None,
        };
        assert!(matches!(
            settings.connection_info("rediss://127.0.0.1:1/"),
            Err(LockError::InvalidInput { .. })
        ));
        let settings = TlsSettings {
            ca_cert_pem: Some(Vec::new()),
            client_cert: None,
        };
        let Err(LockError::InvalidInput { reason }) =
            settings.connection_info("redis://u:pw@127.0.0.1:1/")
        else {
            panic!("a plain URL with TLS settings is an input error");
        };
        assert!(!reason.contains("pw"), "{reason}");
        assert!(format!("{settings:?}").contains("<set>"));
    }
}
