//! How a connection is carried: plain TCP, or TLS (rustls, feature `tls`)
//! where the URL asks for it with `sslmode=require`. `sslmode=prefer`
//! (tokio-postgres's default) stays plain: it would take an unchecked
//! certificate, which is no better.

use tokio_postgres::Config;
use tokio_postgres::config::SslMode;

use crate::error::{Refusal, StoreError};

/// The transport of every connection of a backend.
#[derive(Clone)]
pub(super) enum Transport {
    Plain,
    #[cfg(feature = "tls")]
    Tls(tokio_postgres_rustls::MakeRustlsConnect),
}

impl Transport {
    /// The transport `config` asks for, trusting the PEM certificates
    /// `roots`, else the system's.
    pub(super) fn of(config: &Config, roots: Option<&[u8]>) -> Result<Self, StoreError> {
        if config.get_ssl_mode() != SslMode::Require {
            return Ok(Transport::Plain);
        }
        #[cfg(feature = "tls")]
        {
            Ok(Transport::Tls(tls::connector(roots)?))
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = roots;
            Err(StoreError::refused(
                Refusal::UnsupportedScheme("postgres (sslmode=require)".to_owned()),
                "build lock-core with its `tls` feature to reach PostgreSQL over TLS",
            ))
        }
    }
}

#[cfg(feature = "tls")]
mod tls {
    use std::sync::Arc;

    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    use tokio_postgres_rustls::MakeRustlsConnect;

    use super::{Refusal, StoreError};

    /// A connector that checks the server's certificate against `roots`
    /// (PEM), else the system's roots.
    pub(super) fn connector(roots: Option<&[u8]>) -> Result<MakeRustlsConnect, StoreError> {
        let invalid = |what: String| StoreError::refused(Refusal::InvalidUrl, what);
        let mut store = rustls::RootCertStore::empty();
        match roots {
            Some(pem) => {
                for certificate in CertificateDer::pem_slice_iter(pem) {
                    let certificate = certificate
                        .map_err(|err| invalid(format!("the root certificates: {err}")))?;
                    store
                        .add(certificate)
                        .map_err(|err| invalid(format!("a root certificate: {err}")))?;
                }
            }
            None => {
                // Certificates the system holds that rustls cannot read are
                // skipped, as every rustls client does.
                let found = rustls_native_certs::load_native_certs();
                store.add_parsable_certificates(found.certs);
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(StoreError::permanent)?
            .with_root_certificates(store)
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }
}
