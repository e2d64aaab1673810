//! The tools offered to the model: the built-ins and any registered [`Tool`], by name, and
//! the [`ToolSource`]s whose tools are found at run time (an MCP server's, which may change
//! while a run goes on).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{EditFileTool, ListDirTool, ReadFileTool, ShellTool, WriteFileTool};
use super::{Tool, ToolContext, ToolHooks, ToolOutput};
use crate::model::ToolSpec;

/// Tools found at run time (an MCP server's): asked for its tools whenever the model is
/// offered tools or a call names one, so a list that changed (`tools/list_changed`) is
/// offered from the next request on.
pub trait ToolSource: Send + Sync {
    /// The tools as they are now.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
}

/// A source of which only some tools are offered.
struct Filtered {
    inner: Arc<dyn ToolSource>,
    keep: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl ToolSource for Filtered {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut t = self.inner.tools();
        t.retain(|t| (self.keep)(t.name()));
        t
    }
}

/// The tools offered to the model, by name: registered ones, then those of the sources.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Toolbox {
    pub fn empty() -> Self {
        Toolbox::default()
    }

    /// `shell`, `read_file`, `write_file`, `edit_file`, `list_dir`.
    pub fn standard() -> Self {
        let mut t = Toolbox::empty();
        t.register(Arc::new(ShellTool));
        t.register(Arc::new(ReadFileTool));
        t.register(Arc::new(WriteFileTool));
        t.register(Arc::new(EditFileTool));
        t.register(Arc::new(ListDirTool));
        t
    }

    /// The registered tools' names, sorted (not the sources': the built-ins a session's world
    /// records beside its MCP servers).
    pub fn registered_names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// The same toolbox offering only the registered tools named in `keep` and the source
    /// tools whose name `keep_source` accepts: what a session's world allows of a runner's
    /// tools (a gateway serves each session the tools it recorded, never more).
    pub fn restricted(
        &self,
        keep: &[String],
        keep_source: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Toolbox {
        let keep_source: Arc<dyn Fn(&str) -> bool + Send + Sync> = Arc::new(keep_source);
        Toolbox {
            tools: self
                .tools
                .iter()
                .filter(|(name, _)| keep.contains(name))
                .map(|(n, t)| (n.clone(), t.clone()))
                .collect(),
            sources: self
                .sources
                .iter()
                .map(|s| {
                    Arc::new(Filtered {
                        inner: s.clone(),
                        keep: keep_source.clone(),
                    }) as Arc<dyn ToolSource>
                })
                .collect(),
        }
    }

    /// Adds (or replaces) a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name().to_string(), tool);
    }

    /// Adds a source of tools found at run time (a registered tool of the same name wins).
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// Every tool, registered ones first, by name (a source's tool whose name is taken is
    /// left out).
    fn all(&self) -> BTreeMap<String, Arc<dyn Tool>> {
        let mut all = self.tools.clone();
        for source in &self.sources {
            for t in source.tools() {
                all.entry(t.name().to_string()).or_insert(t);
            }
        }
        all
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if let Some(t) = self.tools.get(name) {
            return Some(t.clone());
        }
        self.sources
            .iter()
            .find_map(|s| s.tools().into_iter().find(|t| t.name() == name))
    }

    pub fn names(&self) -> Vec<String> {
        self.all().into_keys().collect()
    }

    /// Specs for the model, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.all().values().map(|t| t.spec().clone()).collect()
    }

    /// Parses the raw argument text and runs the named tool. Unknown tools and invalid JSON
    /// give an error output (no effect) whose text tells the model what went wrong.
    pub async fn run(
        &self,
        ctx: &ToolContext,
        name: &str,
        arguments: &str,
        hooks: &mut dyn ToolHooks,
    ) -> ToolOutput {
        let Some(tool) = self.get(name) else {
            let known = self.names();
            return ToolOutput::rejected(format!(
                "error: unknown tool {name:?}; available tools: {}",
                known.join(", ")
            ));
        };
        let args: Value = if arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str(arguments) {
                Ok(v) => v,
                Err(e) => {
                    return ToolOutput::rejected(format!(
                        "error: the arguments of {name} are not valid JSON ({e}); send a JSON object matching its parameters"
                    ));
                }
            }
        };
        tool.run(ctx, &args, hooks).await
    }
}
