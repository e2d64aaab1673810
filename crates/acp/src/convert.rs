//! What the editor sends, in Lazarus's terms: a prompt's content blocks as the text of one
//! input, and the MCP servers of `session/new` as configured servers (checked like a
//! `.mcp.json`'s: a mistake names the server and what to fix).

use std::collections::BTreeMap;

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource, McpServer};
use lazarus_mcp::config::{Server, ServerConfig};

/// Where a server configured by the editor comes from, in a session's world.
pub const MCP_SOURCE: &str = "the ACP client (session/new)";

/// A prompt's blocks as the text of one input: text as it is, a resource link named, an
/// embedded text resource with its URI. Images, audio and binary resources are refused (the
/// agent does not advertise them).
pub fn prompt_text(blocks: &[ContentBlock]) -> Result<String, String> {
    let mut out = String::new();
    for b in blocks {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        match b {
            ContentBlock::Text(t) => out.push_str(&t.text),
            ContentBlock::ResourceLink(l) => {
                out.push_str(&format!("[resource {}: {}]", l.name, l.uri))
            }
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    out.push_str(&format!("[{}]\n{}", t.uri, t.text));
                }
                _ => return Err("binary resources are not supported in prompts".into()),
            },
            ContentBlock::Image(_) => return Err("images are not supported in prompts".into()),
            ContentBlock::Audio(_) => return Err("audio is not supported in prompts".into()),
            _ => return Err("a content block of a kind this agent does not read".into()),
        }
    }
    if out.trim().is_empty() {
        return Err("the prompt is empty".into());
    }
    Ok(out)
}

/// A server name as Lazarus takes it (`[A-Za-z0-9_-]`, no `__`, at most 32 bytes): an
/// editor's label, changed visibly where it must be.
fn server_name(name: &str) -> String {
    let mut n: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while n.contains("__") {
        n = n.replace("__", "_");
    }
    let n = n.trim_matches('_');
    let n: String = n.chars().take(32).collect();
    if n.is_empty() { "server".into() } else { n }
}

/// The editor's MCP servers as configured servers (untrusted: their annotations are claims).
pub fn mcp_servers(servers: &[McpServer]) -> Result<Vec<Server>, String> {
    let mut out: Vec<Server> = Vec::new();
    for s in servers {
        let (name, cfg) = match s {
            McpServer::Stdio(s) => (
                server_name(&s.name),
                ServerConfig {
                    command: Some(s.command.to_string_lossy().into_owned()),
                    args: s.args.clone(),
                    env: s
                        .env
                        .iter()
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect::<BTreeMap<_, _>>(),
                    enabled: true,
                    ..ServerConfig::default()
                },
            ),
            McpServer::Http(h) => (
                server_name(&h.name),
                ServerConfig {
                    url: Some(h.url.clone()),
                    http_headers: h
                        .headers
                        .iter()
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect(),
                    enabled: true,
                    ..ServerConfig::default()
                },
            ),
            McpServer::Sse(s) => {
                return Err(format!(
                    "MCP server {:?}: the SSE transport is not supported (use Streamable HTTP)",
                    s.name
                ));
            }
            _ => return Err("an MCP server of a transport this agent does not speak".into()),
        };
        if out.iter().any(|o| o.name == name) {
            return Err(format!("two MCP servers are named {name:?}"));
        }
        out.push(cfg.resolve(&name, MCP_SOURCE).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_editors_server_label_becomes_a_name_lazarus_takes() {
        assert_eq!(server_name("my files"), "my_files");
        assert_eq!(server_name("a__b"), "a_b");
        assert_eq!(server_name("___"), "server");
        assert_eq!(server_name(&"x".repeat(50)).len(), 32);
    }
}
