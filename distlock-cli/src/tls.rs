//! TLS settings (`--tls-ca`, `--tls-cert`, `--tls-key`), applied alike to the reading
//! connections and to the `RedisLock`; without the `tls` feature, nothing to apply.

use lock_redis::RedisLockBuilder;
use redis::ConnectionInfo;

use crate::cli::TargetArgs;
use crate::exit::Failure;

/// The PEM files' contents.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tls {
    #[cfg(feature = "tls")]
    ca: Option<Vec<u8>>,
    #[cfg(feature = "tls")]
    client: Option<(Vec<u8>, Vec<u8>)>,
}

impl Tls {
    /// Reads the files named on the command line.
    ///
    /// # Errors
    /// A usage failure naming a file that cannot be read.
    #[cfg_attr(not(feature = "tls"), allow(clippy::unnecessary_wraps))]
    pub(crate) fn load(args: &TargetArgs) -> Result<Self, Failure> {
        #[cfg(feature = "tls")]
        {
            // rustls needs one process-wide crypto provider; an error means one is installed.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let read = |path: &std::path::PathBuf| {
                std::fs::read(path).map_err(|e| {
                    Failure::new(
                        crate::exit::USAGE,
                        format!("cannot read {}: {e}", path.display()),
                    )
                })
            };
            let ca = args.tls_ca.as_ref().map(read).transpose()?;
            let client = match (&args.tls_cert, &args.tls_key) {
                (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
                _ => None,
            };
            Ok(Self { ca, client })
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = args;
            Ok(Self::default())
        }
    }

    /// A client for `info`, with these settings when the URL is `rediss://`.
    pub(crate) fn client(&self, info: ConnectionInfo) -> redis::RedisResult<redis::Client> {
        #[cfg(feature = "tls")]
        if matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
            && (self.ca.is_some() || self.client.is_some())
        {
            let certificates = redis::TlsCertificates {
                client_tls: self.client.clone().map(|(client_cert, client_key)| {
                    redis::ClientTlsConfig {
                        client_cert,
                        client_key,
                    }
                }),
                root_cert: self.ca.clone(),
            };
            return redis::Client::build_with_tls(info, certificates);
        }
        redis::Client::open(info)
    }

    /// `builder` with these settings.
    pub(crate) fn apply(&self, builder: RedisLockBuilder) -> RedisLockBuilder {
        #[cfg(feature = "tls")]
        {
            let mut builder = builder;
            if let Some(ca) = &self.ca {
                builder = builder.tls_ca_cert(ca.clone());
            }
            if let Some((cert, key)) = &self.client {
                builder = builder.tls_client_cert(cert.clone(), key.clone());
            }
            builder
        }
        #[cfg(not(feature = "tls"))]
        builder
    }
}
