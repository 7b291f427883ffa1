//! What `--postgres` asks for: the driver's settings, and the CA file when TLS is on. The service
//! implements two TLS modes — `verify-full` with `sslrootcert` (the chain and the host name
//! checked), and `disable` (or none) — and picks the driver's connector itself, so any other mode
//! must be refused here: one that reached the driver unseen would be overridden to plaintext. The
//! query is therefore split where the driver splits it (after the credentials, so a `?` in a
//! password is not its start) and parameter names are read percent-decoded as the driver reads
//! them (`ssl%6Dode` is `sslmode`). The key/value form (`host=… sslmode=…`) is not read at all.

use super::StartError;

/// The URL's settings for the driver, and the CA file when TLS is on.
pub(super) struct Settings {
    pub(super) pg: tokio_postgres::Config,
    pub(super) root_cert: Option<String>,
}

/// The prefixes of the URL form; anything else is the key/value form.
const URL_PREFIXES: [&str; 2] = ["postgres://", "postgresql://"];

fn refused(why: impl Into<String>) -> StartError {
    StartError::Settings(why.into())
}

impl Settings {
    /// Takes `sslmode` and `sslrootcert` out of the URL's query (the driver knows neither
    /// `verify-full` nor `sslrootcert`) and hands the rest to the driver.
    pub(super) fn parse(url: &str) -> Result<Settings, StartError> {
        let Some(after_scheme) = URL_PREFIXES.iter().find_map(|p| url.strip_prefix(p)) else {
            return Err(refused(
                "a key/value connection string is not read (nor its sslmode): give a postgres:// URL, with sslmode=verify-full&sslrootcert=PATH or sslmode=disable",
            ));
        };
        // The driver's reading: credentials up to the first `@`, then host, path and, from the
        // first `?` after them, the query.
        let credentials = after_scheme.find('@').map_or(0, |at| at + 1);
        let query_at = after_scheme
            .get(credentials..)
            .and_then(|rest| rest.find('?'))
            .map(|q| url.len() - after_scheme.len() + credentials + q);
        let (base, query) = match query_at {
            Some(at) => (
                url.get(..at).unwrap_or(url),
                url.get(at + 1..).unwrap_or(""),
            ),
            None => (url, ""),
        };
        let mut sslmode = None;
        let mut root_cert = None;
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match percent_decode(name)?.as_str() {
                "sslmode" => &mut sslmode,
                "sslrootcert" => &mut root_cert,
                _ => {
                    rest.push(pair);
                    continue;
                }
            };
            if slot.replace(percent_decode(value)?).is_some() {
                return Err(refused(format!("{} is given twice", percent_decode(name)?)));
            }
        }
        let root_cert = match sslmode.as_deref() {
            None | Some("disable") => {
                if root_cert.is_some() {
                    return Err(refused("sslrootcert needs sslmode=verify-full"));
                }
                None
            }
            Some("verify-full") => match root_cert {
                Some(path) if !path.is_empty() => Some(path),
                _ => {
                    return Err(refused(
                        "sslmode=verify-full needs sslrootcert=PATH (the CA certificates, PEM)",
                    ))
                }
            },
            Some(other) => {
                return Err(refused(format!(
                    "sslmode={other} is not supported (verify-full with sslrootcert, or disable)"
                )))
            }
        };
        let url = if rest.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        let pg = url
            .parse::<tokio_postgres::Config>()
            .map_err(|e| refused(format!("not a usable PostgreSQL URL: {e}")))?;
        if pg.get_hosts().is_empty() {
            return Err(refused("the URL names no host"));
        }
        Ok(Settings { pg, root_cert })
    }
}

fn percent_decode(text: &str) -> Result<String, StartError> {
    let bad = || refused("bad percent-encoding in the URL");
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        match byte {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 3;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::config::SslMode;

    fn settings(url: &str) -> Result<Settings, StartError> {
        Settings::parse(url)
    }

    #[test]
    fn sslmode_and_root_cert_are_taken_out_of_the_url() {
        let s = settings(
            "postgres://u:pw@127.0.0.1:5/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(s.root_cert.as_deref(), Some("/tmp/ca.pem"));
        assert_eq!(s.pg.get_application_name(), Some("x"));
        assert_eq!(s.pg.get_dbname(), Some("db"));
        let s = settings("postgresql://u@h/db").unwrap();
        assert!(s.root_cert.is_none());
        let s = settings("postgres://u@h/db?sslmode=disable").unwrap();
        assert!(s.root_cert.is_none());
        // Encoded names are the names the driver reads.
        let s = settings("postgres://u@h/db?ssl%6Dode=verify-full&%73slrootcert=/ca.pem").unwrap();
        assert_eq!(s.root_cert.as_deref(), Some("/ca.pem"));
    }

    #[test]
    fn a_question_mark_in_the_password_is_not_the_query() {
        let s =
            settings("postgres://u:pa?ss@h/db?sslmode=verify-full&sslrootcert=/ca.pem").unwrap();
        assert_eq!(s.root_cert.as_deref(), Some("/ca.pem"));
        assert_eq!(s.pg.get_password(), Some(&b"pa?ss"[..]));
        assert_eq!(s.pg.get_dbname(), Some("db"));
    }

    #[test]
    fn other_ssl_settings_are_typed_errors() {
        for url in [
            "postgres://u@h/db?sslmode=require",
            "postgres://u@h/db?sslmode=prefer",
            "postgres://u@h/db?sslmode=verify-ca&sslrootcert=/x",
            "postgres://u@h/db?sslmode=verify-full",
            "postgres://u@h/db?sslrootcert=/x",
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=%zz",
            "postgres://u@h/db?ssl%6Dode=require",
            "postgres://u@h/db?%73slmode=prefer",
            "postgres://u:p?w@h/db?sslmode=require",
            "postgres://u@h/db?sslmode=disable&sslmode=verify-full&sslrootcert=/x",
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=/x&sslrootcert=/y",
            "host=h dbname=db sslmode=require",
            "host=h dbname=db sslmode=disable",
        ] {
            assert!(
                matches!(settings(url), Err(StartError::Settings(_))),
                "{url}"
            );
        }
    }

    #[test]
    fn no_mode_reaches_the_driver() {
        // Whatever the service passes on, the driver is left at its default, which the service
        // then replaces with the mode it implements.
        for url in [
            "postgres://u@h/db?application_name=a%3Fb",
            "postgres://u:p%3Fw@h/db?sslmode=disable",
            "postgres://u:p?w@h/db",
        ] {
            let s = settings(url).unwrap();
            assert_eq!(s.pg.get_ssl_mode(), SslMode::Prefer, "{url}");
        }
    }

    #[test]
    fn the_password_is_not_in_the_refusal() {
        let e = settings("postgres://u:hunter2@h/db?nonsense=1")
            .err()
            .unwrap();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        let e = settings("host=h password=hunter2 sslmode=require")
            .err()
            .unwrap();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
