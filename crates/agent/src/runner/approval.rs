//! Approvals: before a call's intent, the mode in force decides whether a person must allow
//! it. The question is recorded (`approval_request`) and the run stops there; the answer comes
//! back as an `approval` input (from the terminal, `lazarus sessions approve`, the HTTP API or
//! the web view), and the next drive goes on from it. A denied call never starts: it is closed
//! `not_run` with a result saying who denied it and why. Grants (`session` from the ledger,
//! `always` from whoever keeps them) answer without asking, and are recorded as decisions too.

use std::sync::Arc;

use lazarus_session::Call;
use lazarus_session::record::{
    Approval, ApprovalRequest, Decision, OutcomeStatus, Record, Scope, ToolOutcome,
    approval_input_id,
};
use serde_json::Value;

use super::{Observer, RunError, Runner, SharedSession, append, lock};
use crate::model::ToolSpec;

/// When to ask a person before a tool call (Codex's vocabulary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Never ask (the default).
    #[default]
    Never,
    /// Ask before every call that is not read-only.
    Untrusted,
    /// Ask only when the model asks for it (`"escalate": true`, with a `justification`).
    OnRequest,
}

impl ApprovalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Never => "never",
            ApprovalMode::Untrusted => "untrusted",
            ApprovalMode::OnRequest => "on-request",
        }
    }

    /// Parses `never`, `untrusted` or `on-request`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "never" => Ok(ApprovalMode::Never),
            "untrusted" => Ok(ApprovalMode::Untrusted),
            "on-request" => Ok(ApprovalMode::OnRequest),
            other => Err(format!(
                "unknown approval mode {other:?}: use never, untrusted or on-request"
            )),
        }
    }
}

/// The `always` grants, kept by whoever runs the runner (the CLI keeps them in a policy file
/// beside its config). Asked at each call that would need approval, so a grant given or
/// revoked while a run goes on counts from the next call.
pub trait AlwaysGrants: Send + Sync + std::fmt::Debug {
    /// Whether a grant covers every call of `tool` now. `key`: the tool's
    /// [`Tool::grant_key`](crate::tools::Tool::grant_key) (an MCP server's fingerprint),
    /// which the grant must hold too; a grant without one covers only a tool without one.
    fn covers(&self, tool: &str, key: Option<&str>) -> bool;

    /// Keeps a new grant for `tool`, given by `by` answering call `call_id` of `session`
    /// (written durably before the decision is recorded). The error says why it could not.
    /// Whoever answers need not know the tool's key: the runner that goes on with the call
    /// binds it ([`AlwaysGrants::bind`]).
    fn grant(&self, tool: &str, by: &str, session: &str, call_id: &str) -> Result<(), String>;

    /// Binds the grant given by answering call `call_id` of `session` to `key`, the key of
    /// the tool that very call goes to (a grant without a key covers no keyed tool until
    /// then). Called when an allowed `always` decision lets the call go on.
    fn bind(&self, tool: &str, key: &str, session: &str, call_id: &str) -> Result<(), String> {
        let _ = (tool, key, session, call_id);
        Ok(())
    }
}

/// What the runner asks before a call.
#[derive(Debug, Clone, Default)]
pub struct ApprovalPolicy {
    pub mode: ApprovalMode,
    pub always: Option<Arc<dyn AlwaysGrants>>,
}

/// The built-in tools that write the workspace, not offered under the `read-only` sandbox.
pub const WORKSPACE_WRITERS: &[&str] = &["write_file", "edit_file"];

/// The argument a model sets to ask for approval under `on-request`.
pub const ESCALATE_ARG: &str = "escalate";
/// The argument that says why (recorded as the request's reason).
pub const JUSTIFICATION_ARG: &str = "justification";

/// What happens to a call that has not started.
pub(super) enum Gate {
    /// Allowed (or nothing to ask): the call goes on to its intent.
    Proceed,
    /// A person must decide first: the run stops here.
    Wait,
    /// Denied: closed without running (its outcome is recorded).
    Denied,
}

/// The text a denied call returns to the model.
pub fn denied_result(by: &str, reason: Option<&str>) -> String {
    match reason.filter(|r| !r.trim().is_empty()) {
        Some(r) => format!("This tool call was denied by {by} and did not run. Reason: {r}"),
        None => format!("This tool call was denied by {by} and did not run."),
    }
}

impl Runner {
    /// Whether `call` (not started, no intent) may go on, must wait, or was denied. Reads the
    /// live state: a decision drained since the caller's snapshot counts.
    pub(super) fn approval_gate(
        &self,
        session: &SharedSession,
        call_id: &str,
        observer: &mut Observer<'_>,
    ) -> Result<Gate, RunError> {
        let (call, grant_seq) = {
            let s = lock(session);
            let st = s.state();
            let Some(call) = st.call(call_id).cloned() else {
                return Err(RunError::Internal(format!("call {call_id} vanished")));
            };
            let grant = st.session_grants.get(&call.name).copied();
            (call, grant)
        };
        if let Some(request) = &call.approval {
            return match &request.decision {
                None => Ok(Gate::Wait),
                Some(d) if d.decision == Decision::Allow => {
                    if d.scope == Scope::Always {
                        self.bind_grant(session, &call);
                    }
                    Ok(Gate::Proceed)
                }
                Some(d) => {
                    let outcome = ToolOutcome {
                        call_id: call.call_id.clone(),
                        status: OutcomeStatus::NotRun,
                        result: denied_result(&d.by, d.reason.as_deref()),
                        exit_code: None,
                        duration_ms: None,
                    };
                    append(session, Record::ToolOutcome(outcome), observer)?;
                    Ok(Gate::Denied)
                }
            };
        }
        let Some(reason) = self.needs_approval(&call) else {
            return Ok(Gate::Proceed);
        };
        append(
            session,
            Record::ApprovalRequest(ApprovalRequest {
                call_id: call.call_id.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                mode: self.cfg.approval.mode.as_str().to_string(),
                reason,
                requested_at: lazarus_ledger::clock::now_ts(),
            }),
            observer,
        )?;
        // A grant answers at once; the answer is recorded like any decision.
        let granted = match grant_seq {
            Some(seq) => Some((
                Scope::Session,
                "grant:session",
                format!("granted for this session at seq {seq}"),
            )),
            None => self
                .cfg
                .approval
                .always
                .as_ref()
                .filter(|g| g.covers(&call.name, self.grant_key(&call.name).as_deref()))
                .map(|_| {
                    (
                        Scope::Always,
                        "grant:always",
                        "granted always (the approvals policy file)".to_string(),
                    )
                }),
        };
        let Some((scope, by, why)) = granted else {
            return Ok(Gate::Wait);
        };
        append(
            session,
            Record::Approval(Approval {
                input_id: approval_input_id(&call.call_id),
                call_id: call.call_id.clone(),
                decision: Decision::Allow,
                scope,
                reason: Some(why),
                by: by.to_string(),
                decided_at: lazarus_ledger::clock::now_ts(),
            }),
            observer,
        )?;
        Ok(Gate::Proceed)
    }

    /// What an `always` grant of `tool` must hold besides its name (its server's
    /// fingerprint, for an MCP tool).
    pub fn grant_key(&self, tool: &str) -> Option<String> {
        self.toolbox.get(tool).and_then(|t| t.grant_key())
    }

    /// An `always` decision let `call` go on: its grant holds the key of the tool this very
    /// call goes to from now on (a failure to write it leaves the grant covering nothing
    /// keyed, so the next call asks again: logged, not fatal).
    fn bind_grant(&self, session: &SharedSession, call: &Call) {
        let (Some(grants), Some(key)) = (&self.cfg.approval.always, self.grant_key(&call.name))
        else {
            return;
        };
        let id = lock(session).id().to_string();
        if let Err(e) = grants.bind(&call.name, &key, &id, &call.call_id) {
            tracing::warn!(tool = %call.name, error = %e, "an always grant could not be bound to its server; the next call asks again");
        }
    }

    /// Why `call` needs a person's approval under the mode in force (`None`: it does not).
    fn needs_approval(&self, call: &Call) -> Option<String> {
        match self.cfg.approval.mode {
            ApprovalMode::Never => None,
            ApprovalMode::Untrusted => {
                // a tool that is not there does nothing (the call gets an error result)
                let harmless = self.toolbox.get(&call.name).is_none_or(|t| t.read_only())
                    || (!self.cfg.sandbox.workspace_writable()
                        && WORKSPACE_WRITERS.contains(&call.name.as_str()));
                (!harmless).then(|| format!("{} is not read-only", call.name))
            }
            ApprovalMode::OnRequest => {
                let args: Value = serde_json::from_str(&call.arguments).ok()?;
                if args.get(ESCALATE_ARG) != Some(&Value::Bool(true)) {
                    return None;
                }
                Some(
                    args.get(JUSTIFICATION_ARG)
                        .and_then(Value::as_str)
                        .filter(|j| !j.trim().is_empty())
                        .map_or_else(
                            || "the model asked for approval".to_string(),
                            |j| format!("the model asked for approval: {j}"),
                        ),
                )
            }
        }
    }

    /// Why the arguments a tool would be given (the approval arguments taken out:
    /// [`Runner::tool_arguments`]) lie outside its schema (`None`: within it, or no such
    /// tool: that call gets its own error).
    pub(super) fn outside_schema(&self, tool: &str, arguments: &str) -> Option<String> {
        let tool = self.toolbox.get(tool)?;
        crate::tools::outside_schema(tool.spec(), arguments)
    }

    /// The tools offered to the model: under `on-request`, each tool that is not read-only
    /// also takes the two arguments that ask for approval. Under the `read-only` sandbox the
    /// tools that write the workspace (`write_file`, `edit_file`) are not offered (they would
    /// be refused).
    pub(super) fn offered_specs(&self) -> Vec<ToolSpec> {
        let mut specs = self.toolbox.specs();
        if !self.cfg.sandbox.workspace_writable() {
            specs.retain(|s| !WORKSPACE_WRITERS.contains(&s.name.as_str()));
        }
        if self.cfg.approval.mode != ApprovalMode::OnRequest {
            return specs;
        }
        for spec in &mut specs {
            if self.toolbox.get(&spec.name).is_some_and(|t| t.read_only()) {
                continue;
            }
            if let Some(props) = spec
                .parameters
                .get_mut("properties")
                .and_then(Value::as_object_mut)
            {
                props.insert(
                    ESCALATE_ARG.into(),
                    serde_json::json!({"type": "boolean", "description": "Set true to ask the user to approve this call before it runs (say why in justification)."}),
                );
                props.insert(
                    JUSTIFICATION_ARG.into(),
                    serde_json::json!({"type": "string", "description": "Why this call needs the user's approval."}),
                );
            }
        }
        specs
    }

    /// The arguments the tool is given: under `on-request` (now, or when the call was asked
    /// for), without the two approval arguments (the tool does not know them; the ledger
    /// keeps the model's text verbatim).
    pub(super) fn tool_arguments(&self, arguments: &str, asked_on_request: bool) -> String {
        if self.cfg.approval.mode != ApprovalMode::OnRequest && !asked_on_request {
            return arguments.to_string();
        }
        match serde_json::from_str::<Value>(arguments) {
            Ok(Value::Object(mut m))
                if m.contains_key(ESCALATE_ARG) || m.contains_key(JUSTIFICATION_ARG) =>
            {
                m.remove(ESCALATE_ARG);
                m.remove(JUSTIFICATION_ARG);
                Value::Object(m).to_string()
            }
            _ => arguments.to_string(),
        }
    }
}
