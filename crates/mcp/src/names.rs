//! The names the model sees: `mcp__<server>__<tool>`, made of what every provider accepts
//! (OpenAI's and Anthropic's tool names are `^[a-zA-Z0-9_-]{1,64}$`). A tool name that has
//! to be changed to fit is changed visibly (other characters become `_`, a long name is cut
//! and given a short hash of the original); two tools that would get the same name are
//! refused, naming both.

use std::collections::BTreeMap;

/// Longest tool name the providers accept.
pub const TOOL_NAME_BYTES_MAX: usize = 64;

/// The prefix of every MCP tool's name.
pub const PREFIX: &str = "mcp__";

/// The name offered to the model for tool `tool` of server `server`.
pub fn model_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("{PREFIX}{server}__{clean}");
    if full.len() <= TOOL_NAME_BYTES_MAX && clean == tool {
        return full;
    }
    if full.len() <= TOOL_NAME_BYTES_MAX {
        return full;
    }
    // cut, keeping a stable hash of the original tool name so two long names stay apart
    let hash = fnv1a(tool.as_bytes());
    let tag = format!("_{:08x}", hash as u32);
    let keep = TOOL_NAME_BYTES_MAX - tag.len();
    let mut cut = full;
    cut.truncate(keep);
    cut.push_str(&tag);
    cut
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The model names of `tools` (server, tool) pairs; two that collide are an error naming
/// both.
pub fn assign(tools: &[(String, String)]) -> Result<BTreeMap<String, (String, String)>, String> {
    let mut out: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (server, tool) in tools {
        let name = model_name(server, tool);
        if let Some((s2, t2)) = out.get(&name) {
            return Err(format!(
                "MCP tools {tool:?} of server {server:?} and {t2:?} of server {s2:?} would both be offered as {name:?}; disable one (`disabled_tools`) or rename a server"
            ));
        }
        out.insert(name, (server.clone(), tool.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_every_provider_and_collisions_are_refused() {
        assert_eq!(model_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(model_name("gh", "issues.create"), "mcp__gh__issues_create");
        let long = "x".repeat(100);
        let n = model_name("srv", &long);
        assert_eq!(n.len(), TOOL_NAME_BYTES_MAX);
        assert!(n.starts_with("mcp__srv__xxx"));
        assert_ne!(n, model_name("srv", &format!("{long}y")));
        for name in [n, model_name("a-b", "ü/ä"), model_name("s", "")] {
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "{name}"
            );
        }
        let err = assign(&[("s".into(), "a.b".into()), ("s".into(), "a_b".into())]).unwrap_err();
        assert!(err.contains("\"a.b\"") && err.contains("\"a_b\""), "{err}");
    }
}
