//! The message box of the session page (gateway only).

use lazarus_session::SessionId;
use maud::{Markup, html};

/// The message box (gateway only): the script sends it with a message id chosen when the
/// text was typed, so sending twice (a double click, a retry after an error) records it once.
pub(super) fn composer(id: &SessionId) -> Markup {
    html! {
        form #composer .composer data-session=(id) {
            label for="composer-text" { "Send a message" }
            textarea #composer-text name="text" rows="3" required placeholder="Message to the agent" {}
            div.composer-row {
                button type="submit" { "Send" }
                span.muted.msgid-note { "message id " code #composer-id {} }
                span #composer-status {}
            }
            noscript { p.muted { "Sending needs JavaScript (the request carries the token in a header)." } }
        }
    }
}
