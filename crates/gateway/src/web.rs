//! The web view (`lazarus-web`) mounted on the gateway's router: the same token, the hub's
//! live statuses; its pages call this gateway's `/v1` API for the live tail and the actions.

use std::sync::Arc;

use axum::Router;
use lazarus_session::{SessionId, Status};
use lazarus_web::{Auth, Mode, WebConfig};
use tokio_util::sync::CancellationToken;

use crate::hub::Hub;

struct HubView(Arc<Hub>);

impl lazarus_web::Gateway for HubView {
    fn live_status(&self, id: &SessionId) -> Option<Status> {
        self.0.live_status(id.as_str())
    }
}

/// `app` with the web view's routes (`/`, `/sessions/…`, `/assets/…`) added.
pub fn mount(app: Router, hub: Arc<Hub>, token: Arc<str>, stop: CancellationToken) -> Router {
    let mut cfg = WebConfig::new(
        hub.store.clone(),
        Auth::Token(token),
        Mode::Gateway(Arc::new(HubView(hub))),
    );
    cfg.stop = stop;
    app.merge(lazarus_web::router(cfg))
}
