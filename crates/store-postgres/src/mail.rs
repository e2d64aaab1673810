//! Mail signals through LISTEN/NOTIFY: a delivery to a session's inbox sends
//! `pg_notify(channel, session id)` in its own transaction (so only a committed delivery
//! rings), and a store that serves sessions listens on one dedicated connection and calls
//! its `wake` for each. A gateway then drains the session at once instead of at its next
//! inbox poll, which stays as the fallback: a lost notification (a listener that
//! reconnects, a notification queue that overflows) costs only latency, never a message.
//!
//! The listening connection is outside the pool (it must stay on the one backend that ran
//! LISTEN). When it drops it is opened again, with a doubling pause up to
//! [`RECONNECT_MAX`], and every (re)connect calls `wake(None)`: whatever rang meanwhile is
//! found by a full pass.

use std::time::Duration;

use tokio_postgres::AsyncMessage;

use lazarus_session::MailWake as Wake;

/// Longest pause between two attempts to listen again.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The notification channel of a schema. Longer names are cut to PostgreSQL's 63-byte
/// identifier limit: two long schemas sharing a prefix then share a channel, which costs
/// only a spurious wake (the pass it starts finds no mail of the other).
pub(crate) fn channel(schema: &str) -> String {
    let mut c = format!("lazarus_mail_{schema}");
    c.truncate(63);
    c
}

/// What a listener needs to open its own connection.
#[derive(Clone)]
pub(crate) struct ListenTo {
    pub config: tokio_postgres::Config,
    pub connector: tokio_postgres_rustls::MakeRustlsConnect,
    pub channel: String,
    pub location: String,
}

/// Listens until `alive` reports the store gone, reconnecting as needed.
pub(crate) async fn listen(to: ListenTo, wake: Wake, alive: impl Fn() -> bool + Send + 'static) {
    let mut pause = Duration::from_millis(100);
    while alive() {
        match listen_once(&to, &wake).await {
            Ok(()) => pause = Duration::from_millis(100),
            Err(e) => {
                tracing::warn!(store = %to.location, error = %e, "cannot listen for inbox mail (the inbox poll still finds it); trying again");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RECONNECT_MAX);
    }
}

/// One connection: LISTEN, then wake for each notification until the connection ends.
async fn listen_once(to: &ListenTo, wake: &Wake) -> Result<(), String> {
    let (client, mut conn) = to
        .config
        .connect(to.connector.clone())
        .await
        .map_err(|e| crate::error::describe(&e))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Option<String>>();
    // The connection future yields notifications; it must be polled for the client's
    // queries to complete too, so it runs on its own task.
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(Some(n.payload().to_string())).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    });
    let listen = format!("LISTEN \"{}\"", to.channel);
    if let Err(e) = client.batch_execute(&listen).await {
        driver.abort();
        return Err(crate::error::describe(&e));
    }
    tracing::debug!(store = %to.location, channel = %to.channel, "listening for inbox mail");
    wake(None);
    while let Some(Some(id)) = rx.recv().await {
        wake(Some(&id));
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}
