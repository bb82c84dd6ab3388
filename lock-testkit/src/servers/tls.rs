//! Throwaway certificates for TLS servers ([`RedisServerBuilder::tls`](crate::RedisServerBuilder::tls)).
//!
//! Each TLS server gets its own certificate authority, so a test can show that a client which
//! trusts another CA (say, another server's, or a fresh [`TestCertificates::generate`]) is
//! turned away. The keys are ECDSA P-256 (rcgen's default), which both redis-server's OpenSSL
//! and rustls accept.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA, a server certificate for `127.0.0.1` and `localhost`, and a client certificate (for
/// mutual TLS), the last two signed by the CA. Everything is PEM.
#[derive(Clone)]
pub struct TestCertificates {
    ca_cert_pem: String,
    server_cert_pem: String,
    server_key_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

impl TestCertificates {
    /// Generates a fresh CA and the certificates it signs.
    ///
    /// # Errors
    ///
    /// If key generation or signing fails (it does not, short of a broken RNG).
    pub fn generate() -> io::Result<Self> {
        let ca_key = KeyPair::generate().map_err(to_io)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(to_io)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "lock-testkit throwaway CA");
        let ca_cert = ca_params.self_signed(&ca_key).map_err(to_io)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let leaf = |name: &str, purpose: ExtendedKeyUsagePurpose| -> io::Result<(String, String)> {
            let key = KeyPair::generate().map_err(to_io)?;
            let mut params =
                CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                    .map_err(to_io)?;
            params.distinguished_name.push(DnType::CommonName, name);
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![purpose];
            let cert = params.signed_by(&key, &issuer).map_err(to_io)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        let (server_cert_pem, server_key_pem) =
            leaf("lock-testkit server", ExtendedKeyUsagePurpose::ServerAuth)?;
        let (client_cert_pem, client_key_pem) =
            leaf("lock-testkit client", ExtendedKeyUsagePurpose::ClientAuth)?;
        Ok(Self {
            ca_cert_pem: ca_cert.pem(),
            server_cert_pem,
            server_key_pem,
            client_cert_pem,
            client_key_pem,
        })
    }

    /// The CA certificate: what a client must trust.
    pub fn ca_cert_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// The server's certificate (valid for `127.0.0.1` and `localhost`).
    pub fn server_cert_pem(&self) -> &str {
        &self.server_cert_pem
    }

    /// The server's private key (PKCS#8).
    pub fn server_key_pem(&self) -> &str {
        &self.server_key_pem
    }

    /// A client certificate the CA signed, for servers that require one.
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert_pem
    }

    /// The client certificate's private key (PKCS#8).
    pub fn client_key_pem(&self) -> &str {
        &self.client_key_pem
    }

    /// The certificates in the form redis-rs takes: trust our CA and, when `client_auth`,
    /// present our client certificate.
    pub fn for_redis(&self, client_auth: bool) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: client_auth.then(|| redis::ClientTlsConfig {
                client_cert: self.client_cert_pem.clone().into_bytes(),
                client_key: self.client_key_pem.clone().into_bytes(),
            }),
            root_cert: Some(self.ca_cert_pem.clone().into_bytes()),
        }
    }
}

impl std::fmt::Debug for TestCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys stay out of logs even in tests: a habit worth keeping.
        f.debug_struct("TestCertificates").finish_non_exhaustive()
    }
}

/// The TLS side of one [`RedisServer`](crate::RedisServer): its certificates, written into
/// its directory, and whether it demands a client certificate.
#[derive(Debug, Clone)]
pub(crate) struct ServerTls {
    pub(crate) certs: TestCertificates,
    pub(crate) client_auth: bool,
}

const CA_FILE: &str = "ca.crt";
const CERT_FILE: &str = "server.crt";
const KEY_FILE: &str = "server.key";

impl ServerTls {
    /// Fresh certificates, written into `dir` where redis-server reads them.
    pub(crate) fn create(dir: &Path, client_auth: bool) -> io::Result<Self> {
        let certs = TestCertificates::generate()?;
        fs::write(dir.join(CA_FILE), certs.ca_cert_pem())?;
        fs::write(dir.join(CERT_FILE), certs.server_cert_pem())?;
        fs::write(dir.join(KEY_FILE), certs.server_key_pem())?;
        Ok(Self { certs, client_auth })
    }

    /// The listening arguments: TLS only, on `port`; the plain port is closed (`--port 0`) so
    /// that nothing can reach the data without TLS.
    pub(crate) fn args(&self, dir: &Path, port: u16) -> Vec<(&'static str, OsString)> {
        let file = |name: &str| -> OsString { dir.join(name).into() };
        vec![
            ("--port", "0".into()),
            ("--tls-port", port.to_string().into()),
            ("--tls-cert-file", file(CERT_FILE)),
            ("--tls-key-file", file(KEY_FILE)),
            ("--tls-ca-cert-file", file(CA_FILE)),
            (
                "--tls-auth-clients",
                if self.client_auth { "yes" } else { "no" }.into(),
            ),
        ]
    }

    /// Where the kit's own client connects: `url` (a `rediss://` one), trusting our CA and
    /// presenting our client certificate when the server asks for one.
    pub(crate) fn connection_info(&self, url: &str) -> io::Result<redis::ConnectionInfo> {
        ensure_crypto_provider();
        let client = redis::Client::build_with_tls(url, self.certs.for_redis(self.client_auth))
            .map_err(crate::servers::client::to_io)?;
        Ok(client.get_connection_info().clone())
    }

    /// The CA certificate's file in `dir`.
    pub(crate) fn ca_path(dir: &Path) -> PathBuf {
        dir.join(CA_FILE)
    }
}

/// Makes sure rustls has a process-wide crypto provider (ring). rustls picks one by itself when
/// exactly one provider feature is on in the build; installing it explicitly keeps working when
/// some other crate in the tree turns on a second one.
pub(crate) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err means another thread installed one first: just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

fn to_io(err: rcgen::Error) -> io::Error {
    io::Error::other(format!("generating a test certificate: {err}"))
}

#[cfg(test)]
mod tests {
    use super::TestCertificates;

    #[test]
    fn certificates_are_pem_and_distinct_per_call() {
        let a = TestCertificates::generate().expect("generate");
        let b = TestCertificates::generate().expect("generate");
        for pem in [a.ca_cert_pem(), a.server_cert_pem(), a.client_cert_pem()] {
            assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        }
        for pem in [a.server_key_pem(), a.client_key_pem()] {
            assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        }
        assert_ne!(a.ca_cert_pem(), b.ca_cert_pem(), "a fresh CA per call");
        assert!(
            !format!("{a:?}").contains("PRIVATE"),
            "keys are not printed"
        );
    }
}
