//! Notifications on MCP 2026-07-28: a server sends `notifications/tools/list_changed` only
//! on a `subscriptions/listen` stream the client opened (on older versions it sends them at
//! any time, and the handler in [`crate::server`] takes them).

use std::sync::atomic::Ordering;

use crate::server::{Listener, McpServer};

impl McpServer {
    /// On 2026-07-28 a server sends `notifications/tools/list_changed` only on a
    /// `subscriptions/listen` stream: opened here when it says its list may change (not
    /// opened: the list stays as listed at start, said in the log).
    pub(crate) async fn listen_for_tool_changes(&self) -> Option<Listener> {
        let peer = self.client.peer();
        let info = peer.peer_info()?;
        let may_change = info
            .capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed)
            == Some(true);
        if info.protocol_version.has_initialize() || !may_change {
            return None;
        }
        let filter = rmcp::model::SubscriptionFilter::builder()
            .tools_list_changed()
            .build();
        let listened = tokio::time::timeout(self.config.startup_timeout, peer.listen(filter));
        let mut subscription = match listened.await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!(server = %self.config.name, error = %e, "subscriptions/listen refused: a changed tool list will not be seen");
                return None;
            }
            Err(_) => {
                tracing::warn!(server = %self.config.name, "subscriptions/listen unanswered: a changed tool list will not be seen");
                return None;
            }
        };
        let notes = self.notes.clone();
        Some(Listener(tokio::spawn(async move {
            while let Ok(Some(n)) = subscription.next().await {
                if matches!(
                    n,
                    rmcp::model::ServerNotification::ToolListChangedNotification(_)
                ) {
                    notes.tools_changed.store(true, Ordering::SeqCst);
                }
            }
        })))
    }
}
