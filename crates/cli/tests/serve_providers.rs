//! `lazarus serve --api responses|anthropic`: the gateway runs sessions on the chosen wire
//! protocol, with the API's key variable, and sends provider reasoning back verbatim.

mod serve_common;

use std::time::Duration;

use lazarus_testkit::{Protocol, Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;
use serve_common::*;

#[test]
fn the_gateway_speaks_the_api_it_is_given() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (api, protocol, key_header) in [
        ("anthropic", Protocol::Anthropic, ("x-api-key", "ak")),
        (
            "responses",
            Protocol::Responses,
            ("authorization", "Bearer ok"),
        ),
    ] {
        let server = rt
            .block_on(ScriptedServer::start(Script::new([
                Step::reply(
                    ScriptedResponse::tool_call("toolu_1", "list_dir", json!({"path": "."}))
                        .with_reasoning("Look first.")
                        .with_opaque("SIG-1+/="),
                )
                .when(When::LastUserContains { text: "go".into() }),
                Step::after_tool_result("toolu_1", ScriptedResponse::text("Empty.")),
            ])))
            .unwrap();
        let dir = tempdir();
        let g = Gateway::start(
            serve_cmd(
                dir.path(),
                &server.base_url(),
                &["--api", api, "--model", "m"],
            )
            .env("ANTHROPIC_API_KEY", "ak")
            .env("OPENAI_API_KEY", "ok"),
        );
        let url = g.url.as_str();
        let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": "p"})));
        assert_eq!(st, 201, "{api}: {v}");
        let (st, v) = call(
            url,
            "POST",
            "/v1/sessions/p/messages",
            Some(json!({"message_id": "m1", "text": "go"})),
        );
        assert_eq!(st, 202, "{api}: {v}");
        wait_session(url, "p", Duration::from_secs(20), |v| {
            v["status"] == "idle" && v["turns"] == 2
        });
        let protocols = rt.block_on(async { server.protocols() });
        assert_eq!(protocols, [protocol, protocol], "{api}");
        let headers = rt.block_on(async { server.request_headers() });
        assert!(
            headers[0]
                .iter()
                .any(|(k, v)| k == key_header.0 && v == key_header.1),
            "{api}: {:?}",
            headers[0]
        );
        let trips = rt.block_on(async { server.opaque_round_trips() });
        assert_eq!(trips[0].value, "SIG-1+/=");
        assert_eq!(trips[0].echoed_in, [2], "{api}: sent back byte-identical");
    }
}
