//! The managed backend's [`SignalBus`]: `NOTIFY` on a channel every instance `LISTEN`s
//! to, on a connection of its own that is re-established when it drops.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Pool;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;
use tracing::{debug, warn};

use super::db_error;
use super::tls::MakeTls;
use crate::signals::{Signal, SignalBus};
use crate::StoreError;

const CHANNEL: &str = "ferroclaw_signals";

#[derive(Serialize, Deserialize)]
struct Envelope {
    /// The publishing instance: it does not act on its own signals twice.
    from: String,
    signal: Signal,
}

pub(crate) struct PgSignals {
    pool: Pool,
    instance: String,
    tx: broadcast::Sender<Signal>,
}

impl PgSignals {
    /// Starts listening (on the current tokio runtime) and returns the bus.
    pub(crate) fn start(pool: Pool, config: tokio_postgres::Config, tls: MakeTls) -> Arc<Self> {
        let (tx, _) = broadcast::channel(4096);
        let bus = Arc::new(PgSignals {
            pool,
            instance: uuid::Uuid::new_v4().to_string(),
            tx,
        });
        let (me, tx) = (bus.instance.clone(), bus.tx.clone());
        let alive = Arc::downgrade(&bus);
        tokio::spawn(async move {
            let mut delay = Duration::from_millis(500);
            loop {
                match listen(&config, &tls, &me, &tx).await {
                    Ok(()) => delay = Duration::from_millis(500),
                    Err(e) => {
                        warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "signal listener lost its connection; reconnecting");
                        delay = (delay * 2).min(Duration::from_secs(30));
                    }
                }
                // The bus is gone (its store with it): nobody left to tell.
                if alive.strong_count() == 0 {
                    return;
                }
                tokio::time::sleep(delay).await;
            }
        });
        bus
    }
}

/// One listening connection, until it fails.
async fn listen(
    config: &tokio_postgres::Config,
    tls: &MakeTls,
    me: &str,
    tx: &broadcast::Sender<Signal>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut conn) = config.connect(tls.clone()).await?;
    let sql = format!("LISTEN {CHANNEL}");
    let subscribe = client.batch_execute(&sql);
    tokio::pin!(subscribe);
    // The connection must be driven for the LISTEN to complete.
    loop {
        tokio::select! {
            r = &mut subscribe => { r?; break; }
            m = poll_fn(|cx| conn.poll_message(cx)) => match m {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
        }
    }
    debug!("listening for signals of other instances");
    let _ = tx.send(Signal::Resumed);
    let hello = serde_json::to_string(&Envelope {
        from: me.to_string(),
        signal: Signal::Hello,
    })
    .unwrap_or_default();
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&CHANNEL, &hello];
    let greet = client.execute("SELECT pg_notify($1, $2)", &params);
    tokio::pin!(greet);
    loop {
        tokio::select! {
            r = &mut greet => { r?; break; }
            m = poll_fn(|cx| conn.poll_message(cx)) => match m {
                Some(Ok(AsyncMessage::Notification(n))) => deliver(n.payload(), me, tx),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
        }
    }
    loop {
        match poll_fn(|cx| conn.poll_message(cx)).await {
            Some(Ok(AsyncMessage::Notification(n))) => deliver(n.payload(), me, tx),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e),
            None => return Ok(()),
        }
    }
}

fn deliver(payload: &str, me: &str, tx: &broadcast::Sender<Signal>) {
    match serde_json::from_str::<Envelope>(payload) {
        // `Resumed` is this instance's own business: one from outside is forged.
        Ok(env) if env.from != me && !matches!(env.signal, Signal::Resumed) => {
            // No receiver yet is fine: nothing runs here to act on it.
            let _ = tx.send(env.signal);
        }
        Ok(_) => {}
        Err(e) => warn!(error = %e, "ignoring a malformed signal"),
    }
}

#[async_trait]
impl SignalBus for PgSignals {
    async fn publish(&self, signal: &Signal) -> Result<(), StoreError> {
        let payload = serde_json::to_string(&Envelope {
            from: self.instance.clone(),
            signal: signal.clone(),
        })
        .map_err(db_error)?;
        let client = self.pool.get().await.map_err(db_error)?;
        client
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
            .await
            .map_err(db_error)?;
        Ok(())
    }

    fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.tx.subscribe()
    }
}
