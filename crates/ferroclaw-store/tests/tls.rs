//! The managed backend over TLS, against a real PostgreSQL that refuses plain TCP: each
//! `sslmode` does what libpq's does, and a certificate that must not be trusted is not.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

use std::time::Duration;

use ferroclaw_store::{PgSessionStore, SessionStore, Signal};
use ferroclaw_testkit::pg::OwnServer;
use ferroclaw_types::{EntryBody, Message};
use tokio_postgres::NoTls;

async fn refused(dsn: &str) -> String {
    match PgSessionStore::connect(dsn).await {
        Ok(_) => panic!("connected with {dsn}"),
        Err(e) => e.to_string(),
    }
}

/// How many of ferroclaw's connections to the server are (not) encrypted, seen by the
/// server itself.
async fn connections(server: &OwnServer) -> (i64, i64) {
    let (client, conn) = tokio_postgres::connect(&server.socket_dsn(), NoTls)
        .await
        .expect("socket connection");
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) \
             FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'ferroclaw'",
            &[],
        )
        .await
        .expect("pg_stat_ssl");
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn postgres_over_tls_follows_libpq_sslmodes_and_refuses_untrusted_certificates() {
    // The certificate names `localhost` only, not the address 127.0.0.1.
    let (server, files) = OwnServer::start_tls("DNS:localhost").expect("a TLS server");
    let port = server.port();
    let ca = files.ca.display().to_string();
    let url =
        |host: &str, query: &str| format!("postgres://postgres@{host}:{port}/postgres?{query}");

    // verify-full with the CA, to the name the certificate carries: a working store,
    // every connection of it encrypted, signals included.
    let full = url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let a = PgSessionStore::connect(&full).await.expect("verify-full");
    let mut log = a.open("main", "k").await.expect("open");
    log.append(EntryBody::Message {
        message: Message::user("over tls"),
    })
    .await
    .expect("append");
    log.flush().await.expect("flush");
    drop(log);
    let b = PgSessionStore::connect(&format!(
        "host=localhost port={port} user=postgres dbname=postgres sslmode=verify-full sslrootcert='{ca}'"
    ))
    .await
    .expect("verify-full, key=value form");
    assert_eq!(
        b.open("main", "k").await.expect("reopen").entries().len(),
        1
    );
    let mut heard = b.signals().expect("signals").subscribe();
    let bus = a.signals().expect("signals");
    let signal = Signal::DirectoryChanged {
        agent: Some("x".into()),
    };
    // The listener connects in the background: publish until it hears (other signals,
    // such as an instance's hello, may come first).
    let got = async {
        loop {
            bus.publish(&signal).await.expect("publish");
            while let Ok(Ok(s)) =
                tokio::time::timeout(Duration::from_millis(200), heard.recv()).await
            {
                if matches!(s, Signal::DirectoryChanged { .. }) {
                    return s;
                }
            }
        }
    };
    let got = tokio::time::timeout(Duration::from_secs(20), got)
        .await
        .expect("a signal over TLS");
    assert!(matches!(got, Signal::DirectoryChanged { agent: Some(ref x) } if x == "x"));
    let (encrypted, plain) = connections(&server).await;
    assert!(encrypted >= 3, "{encrypted} encrypted connections");
    assert_eq!(plain, 0);

    // Attacks: a plain connection, a certificate from an unknown issuer, a certificate
    // that does not name the host connected to.
    let no_tls = refused(&url("127.0.0.1", "sslmode=disable")).await;
    assert!(no_tls.contains("no encryption"), "{no_tls}");
    let unknown = refused(&url("localhost", "sslmode=verify-full")).await;
    assert!(unknown.contains("UnknownIssuer"), "{unknown}");
    let unknown = refused(&url("localhost", "sslmode=verify-ca&sslrootcert=system")).await;
    assert!(unknown.contains("UnknownIssuer"), "{unknown}");
    let wrong_name = refused(&url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await;
    assert!(wrong_name.contains("not valid for name"), "{wrong_name}");
    // An explicit root makes `require` check the chain (as libpq): public roots only.
    let unknown = refused(&url("localhost", "sslmode=require&sslrootcert=system")).await;
    assert!(unknown.contains("UnknownIssuer"), "{unknown}");

    // Look-alikes that must work: verify-ca does not check the name; require and the
    // default (prefer) encrypt without authenticating the server, as libpq does.
    for dsn in [
        url("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}")),
        url("127.0.0.1", "sslmode=require"),
        url("127.0.0.1", &format!("sslmode=require&sslrootcert={ca}")),
        format!("postgres://postgres@127.0.0.1:{port}/postgres"),
    ] {
        let store = PgSessionStore::connect(&dsn)
            .await
            .unwrap_or_else(|e| panic!("{dsn}: {e}"));
        assert_eq!(
            store.open("main", "k").await.expect("open").entries().len(),
            1,
            "{dsn}"
        );
    }
    let (_, plain) = connections(&server).await;
    assert_eq!(plain, 0);
}
