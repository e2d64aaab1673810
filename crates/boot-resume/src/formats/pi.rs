//! pi session trees (session-formats.md §1), also OpenClaw's transcript events: the record
//! model and the reader of a whole conversation.
//!
//! A session is a tree: every entry names its parent, and the current branch is the path from
//! the leaf (the last entry in file order, or a trailing `leaf` entry's target) to the root.
//! That branch is the conversation; entries on other branches are counted as dropped, or read
//! as branches of their own when asked. What becomes what: `message` entries of role `user`
//! are user messages, `assistant` answers (`text`, `thinking`, `toolCall` with its arguments),
//! `toolResult` results (text blocks joined by `\n`); `compaction` entries are compaction
//! summaries; `model_change` gives the model. An assistant that ended in `error` or `aborted`
//! with nothing in it is dropped (pi itself drops those on replay).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::stream::Lines;
use super::{Answer, Conversation, Event, Part, ReadError, ReadOptions, Usage, text_content};
use crate::format::Format;

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// One entry (line).
#[derive(Deserialize)]
pub struct Entry<'a> {
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(default)]
    pub id: Option<String>,
    /// Missing (v1 linear file) vs null (root) vs an id.
    #[serde(rename = "parentId", default, deserialize_with = "present")]
    pub parent: Option<Option<String>>,
    #[serde(rename = "customType", default)]
    pub custom_type: Option<String>,
    #[serde(rename = "targetId", default)]
    pub target_id: Option<String>,
    #[serde(borrow, default)]
    pub message: Option<Msg<'a>>,
    #[serde(borrow, default)]
    pub data: Option<&'a RawValue>,
    #[serde(default)]
    pub cwd: Option<String>,
    // header
    #[serde(default)]
    pub version: Option<Value>,
    #[serde(default)]
    pub timestamp: Option<Value>,
    // model_change
    #[serde(rename = "modelId", default)]
    pub model_id: Option<String>,
    // compaction, branch_summary
    #[serde(default)]
    pub summary: Option<String>,
}

/// A `message` entry's message.
#[derive(Deserialize)]
pub struct Msg<'a> {
    #[serde(default)]
    pub role: String,
    #[serde(borrow, default)]
    pub content: Option<&'a RawValue>,
    #[serde(rename = "stopReason", default)]
    pub stop_reason: Option<String>,
    #[serde(rename = "errorMessage", default)]
    pub error_message: Option<String>,
    #[serde(rename = "toolCallId", default)]
    pub tool_call_id: Option<String>,
    #[serde(rename = "isError", default)]
    pub is_error: bool,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub usage: Option<Value>,
}

/// A content block.
#[derive(Deserialize)]
pub struct Block<'a> {
    #[serde(rename = "type", default)]
    pub ty: String,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub thinking: Option<Cow<'a, str>>,
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// Message content: a string or blocks.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum Content<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Blocks(#[serde(borrow)] Vec<Block<'a>>),
}

/// Parses message content.
pub fn content(raw: Option<&RawValue>) -> Option<Content<'_>> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// The text of message content (text blocks joined by `\n`).
pub fn text_of(raw: Option<&RawValue>) -> String {
    match content(raw) {
        Some(Content::Text(t)) => t.into_owned(),
        Some(Content::Blocks(b)) => b
            .iter()
            .filter_map(|b| b.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n"),
        None => String::new(),
    }
}

/// Session format versions this reader knows (4: OpenClaw's).
const KNOWN: &str = "1, 2, 3, 4";

/// Reads a pi session file.
pub fn read(source: &Path, opts: &ReadOptions) -> Result<Conversation, ReadError> {
    let mut conv = Conversation::new(Format::Pi, source);
    let mut lines = Lines::open(source, &opts.limits)?;
    let mut tree = Tree::default();
    while let Some(l) = lines.next_line()? {
        tree.line(&mut conv, l.bytes, l.terminated, l.offset)?;
    }
    conv.finish_lines(&lines);
    tree.finish(&mut conv, opts.branches);
    Ok(conv)
}

/// An entry kept until the branch is known.
struct Node {
    id: Option<String>,
    parent: Option<String>,
    events: Vec<Event>,
    model: Option<String>,
    dropped: Vec<(String, &'static str)>,
}

/// The entries of a session tree, in file order.
#[derive(Default)]
pub(crate) struct Tree {
    nodes: Vec<Node>,
    leaf_target: Option<String>,
    header_seen: bool,
}

impl Tree {
    /// Takes one line (an entry).
    pub(crate) fn line(
        &mut self,
        conv: &mut Conversation,
        bytes: &[u8],
        terminated: bool,
        offset: u64,
    ) -> Result<(), ReadError> {
        let Ok(e) = serde_json::from_slice::<Entry>(bytes) else {
            conv.unparsable(terminated, offset);
            return Ok(());
        };
        if !self.header_seen {
            if e.ty != "session" {
                return Err(ReadError::NotThisFormat {
                    path: conv.source.clone(),
                    why: format!(
                        "the first entry is a {:?}, not a session header: not a pi session",
                        e.ty
                    ),
                });
            }
            self.header_seen = true;
            let v = e.version.as_ref().map(|v| v.to_string());
            if let Some(v) = &v
                && !matches!(v.as_str(), "1" | "2" | "3" | "4")
            {
                return Err(ReadError::UnknownVersion {
                    path: conv.source.clone(),
                    what: "session format",
                    version: v.clone(),
                    known: KNOWN,
                });
            }
            conv.format_version = v;
            conv.session_id = e.id.clone();
            conv.cwd = e.cwd.clone();
            return Ok(());
        }
        if e.ty == "leaf" {
            self.leaf_target = e.target_id.clone();
            return Ok(());
        }
        let mut node = Node {
            id: e.id.clone(),
            parent: e.parent.clone().flatten(),
            events: Vec::new(),
            model: None,
            dropped: Vec::new(),
        };
        entry(&mut node, e);
        self.nodes.push(node);
        Ok(())
    }

    /// Picks the current branch and moves its events into `conv`.
    pub(crate) fn finish(self, conv: &mut Conversation, branches: bool) {
        let index: HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.id.as_deref().map(|id| (id, i)))
            .collect();
        let linear = self.nodes.iter().all(|n| n.id.is_none());
        let path_to = |leaf: usize| -> Vec<usize> {
            let mut path = vec![leaf];
            let mut at = leaf;
            while let Some(p) = self.nodes[at].parent.as_deref().and_then(|p| index.get(p)) {
                if path.contains(p) || path.len() > self.nodes.len() {
                    break; // a cycle: stop rather than loop
                }
                path.push(*p);
                at = *p;
            }
            path.reverse();
            path
        };
        let leaf = self
            .leaf_target
            .as_deref()
            .and_then(|t| index.get(t).copied())
            .or_else(|| self.nodes.len().checked_sub(1));
        let on_path: Vec<usize> = match leaf {
            _ if linear => (0..self.nodes.len()).collect(),
            Some(l) => path_to(l),
            None => Vec::new(),
        };
        let mut on = vec![false; self.nodes.len()];
        for &i in &on_path {
            on[i] = true;
        }
        if branches && !linear {
            // every other leaf (an entry no other entry names as parent) is a branch
            let parents: std::collections::HashSet<&str> = self
                .nodes
                .iter()
                .filter_map(|n| n.parent.as_deref())
                .collect();
            for (i, n) in self.nodes.iter().enumerate() {
                let is_leaf = n.id.as_deref().is_some_and(|id| !parents.contains(id));
                if is_leaf && !on[i] {
                    let events = path_to(i)
                        .into_iter()
                        .flat_map(|j| self.nodes[j].events.clone())
                        .collect();
                    conv.branches.push(events);
                }
            }
        }
        let mut nodes: Vec<Option<Node>> = self.nodes.into_iter().map(Some).collect();
        for (i, slot) in nodes.iter_mut().enumerate() {
            if !on[i] {
                conv.drop_one(
                    "entry on another branch",
                    "not on the current branch of the session tree (--branches imports each branch as a fork)",
                );
                *slot = None;
            }
        }
        for i in on_path {
            let Some(n) = nodes[i].take() else { continue };
            if n.model.is_some() {
                conv.model = n.model;
            }
            for (what, why) in n.dropped {
                conv.drop_one(what, why);
            }
            conv.events.extend(n.events);
        }
    }
}

fn entry(node: &mut Node, e: Entry) {
    let timestamp = e
        .timestamp
        .as_ref()
        .and_then(|t| t.as_str())
        .map(str::to_string);
    match e.ty.as_str() {
        "message" => {
            let Some(m) = e.message else {
                node.dropped
                    .push(("message without message".into(), "no content"));
                return;
            };
            message(node, m, e.id, timestamp)
        }
        "model_change" => node.model = e.model_id,
        "compaction" => node.events.push(Event::Compaction {
            summary: e.summary.unwrap_or_default(),
        }),
        t => node.dropped.push((
            match &e.custom_type {
                Some(c) => format!("{t}/{c}"),
                None => t.to_string(),
            },
            "the agent's own bookkeeping (not conversation)",
        )),
    }
}

fn message(node: &mut Node, m: Msg, id: Option<String>, timestamp: Option<String>) {
    match m.role.as_str() {
        "user" => {
            node.events.push(Event::User {
                id,
                text: text_of(m.content),
                timestamp,
            });
        }
        "assistant" => {
            let mut parts = Vec::new();
            match content(m.content) {
                Some(Content::Text(t)) => parts.push(Part::Text(t.into_owned())),
                Some(Content::Blocks(bs)) => {
                    for b in bs {
                        match b.ty.as_str() {
                            "text" => {
                                parts.push(Part::Text(b.text.unwrap_or_default().into_owned()))
                            }
                            "thinking" => parts
                                .push(Part::Reasoning(b.thinking.unwrap_or_default().into_owned())),
                            "toolCall" => parts.push(Part::Call {
                                id: b.id.unwrap_or_default(),
                                name: b.name.unwrap_or_default(),
                                arguments: b
                                    .arguments
                                    .map(|a| a.to_string())
                                    .unwrap_or_else(|| "{}".into()),
                            }),
                            _ => node.dropped.push((
                                format!("assistant {} block", b.ty),
                                "content that is not text, thinking or a tool call",
                            )),
                        }
                    }
                }
                None => {}
            }
            let failed = matches!(m.stop_reason.as_deref(), Some("error" | "aborted"));
            if failed
                && parts
                    .iter()
                    .all(|p| matches!(p, Part::Text(t) if t.trim().is_empty()))
            {
                node.dropped.push((
                    "failed assistant message".into(),
                    "a model request that failed or was aborted, with nothing in it (pi drops these on replay)",
                ));
                return;
            }
            let n = |k: &str| {
                m.usage
                    .as_ref()
                    .and_then(|u| u.get(k))
                    .and_then(Value::as_u64)
            };
            let usage = m.usage.as_ref().map(|_| Usage {
                input: n("input").map(|i| i + n("cacheRead").unwrap_or(0)),
                output: n("output"),
                cached: n("cacheRead"),
            });
            if m.model.is_some() {
                node.model = m.model.clone();
            }
            node.events.push(Event::Answer(Answer {
                source_id: id,
                parts,
                model: m.model,
                usage,
                stop_reason: m.stop_reason,
                timestamp,
            }));
        }
        "toolResult" => {
            let (text, _) = m
                .content
                .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
                .map(|v| text_content(&v))
                .unwrap_or_default();
            node.events.push(Event::Result {
                call_id: m.tool_call_id.unwrap_or_default(),
                text,
                is_error: m.is_error,
            });
        }
        r => node.dropped.push((
            format!("{r} message"),
            "a message the user ran outside the model (bashExecution) or an extension's",
        )),
    }
}
