#!/usr/bin/env bash
# Mutation testing of the code that holds the guarantees: cargo-mutants changes the code on
# purpose (a `>` becomes `>=`, a function returns a default, a call is dropped) and runs the
# tests; a mutant the tests do not catch is a guarantee without a proof. See docs/testing.md.
#
#   scripts/mutants.sh [GROUP...] [-- EXTRA CARGO-MUTANTS ARGS]
#
# GROUP: ledger (writer, scan, frame, repair), session (state, store, local), runner (the
# resume path of agent::runner, with the turn loop its drive runs: compaction requests, steering,
# max turns), mcp (the MCP re-run rule), foreign (the Gemini CLI and OpenCode classifiers,
# against boot-resume's tests and the real captures), or all (the default). Slow on 2 cores (hours for `all`):
# it is opt-in, never part of the test suite.
#
# It runs in a throwaway git worktree of HEAD (your working tree is never touched), with a
# build directory kept under target/mutants so later runs build incrementally. Results go to
# target/mutants/GROUP/mutants.out (caught.txt, missed.txt, timeout.txt, unviable.txt) and a
# summary line per group is printed at the end. Needs `cargo install --locked cargo-mutants`
# and cargo-nextest.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

groups=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; extra=("$@"); break ;;
    ledger|session|runner|mcp|foreign) groups+=("$1") ;;
    all) groups+=(ledger session runner mcp foreign) ;;
    *) echo "mutants.sh: unknown group '$1' (ledger, session, runner, mcp, foreign, all)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#groups[@]} -gt 0 ] || groups=(ledger session runner mcp foreign)

command -v cargo-mutants >/dev/null || { echo "mutants.sh: cargo-mutants is not installed: cargo install --locked cargo-mutants" >&2; exit 2; }
command -v cargo-nextest >/dev/null || { echo "mutants.sh: cargo-nextest is not installed: cargo install --locked cargo-nextest" >&2; exit 2; }

out="$repo/target/mutants"
mkdir -p "$out"
tree=$(mktemp -d "${TMPDIR:-/tmp}/lazarus-mutants.XXXXXX")
cleanup() { git -C "$repo" worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"; }
trap cleanup EXIT
git -C "$repo" worktree add --detach --quiet "$tree" HEAD
echo "mutants: testing $(git -C "$repo" rev-parse --short HEAD) in $tree"
export CARGO_TARGET_DIR="$out/build"
# Faster builds (no debug info), and the heavy tests at a size that still catches what they
# catch at full size (a survivor is re-checked at full size before it is called a survivor).
export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0
export LAZARUS_POWER_TRIALS=${LAZARUS_POWER_TRIALS:-2000}
export LAZARUS_GROUPED_TRIALS=${LAZARUS_GROUPED_TRIALS:-400}
export LAZARUS_CRASH_CYCLES=${LAZARUS_CRASH_CYCLES:-100}

# Builds the test targets a group names (its --cargo-test-arg values, the filter left out)
# before cargo-mutants starts: its --timeout bounds every cargo command, the baseline's test
# run included, and that run would otherwise compile the CLI's test binaries from nothing.
warm_build() {
  local args=() skip=""
  for a in "$@"; do
    case "$a" in
      --cargo-test-arg=-E) skip=1 ;;
      --cargo-test-arg=*) if [ -n "$skip" ]; then skip=""; else args+=("${a#--cargo-test-arg=}"); fi ;;
    esac
  done
  [ ${#args[@]} -gt 0 ] || return 0
  echo "mutants: building the test targets first (${args[*]})"
  (cd "$tree" && nice cargo nextest run --no-run "${args[@]}" >/dev/null)
}

run_group() {
  local group=$1; shift
  echo "== $group"
  warm_build "$@"
  (cd "$tree" && nice cargo mutants --in-place --test-tool nextest --no-shuffle \
      --timeout 300 --build-timeout 900 --output "$out/$group" "$@" "${extra[@]}") || true
  local o="$out/$group/mutants.out"
  local caught missed timeout unviable
  caught=$(wc -l < "$o/caught.txt" 2>/dev/null || echo 0)
  missed=$(wc -l < "$o/missed.txt" 2>/dev/null || echo 0)
  timeout=$(wc -l < "$o/timeout.txt" 2>/dev/null || echo 0)
  unviable=$(wc -l < "$o/unviable.txt" 2>/dev/null || echo 0)
  summary+=("$group: caught $caught, missed $missed, timeout $timeout, unviable $unviable ($o)")
}

# Only the test targets a group's filter runs are built (the CLI has ~40 test binaries, and
# relinking all of them per mutant is most of a mutant's time on two cores).
runner_targets=(--cargo-test-arg=--workspace --cargo-test-arg=--lib --cargo-test-arg=--test=rerun_basis
  --cargo-test-arg=--test=provider_scripted --cargo-test-arg=--test=run_resume
  --cargo-test-arg=--test=run_crash --cargo-test-arg=--test=run_mcp --cargo-test-arg=--test=runner_edges
  --cargo-test-arg=--test=run_compaction --cargo-test-arg=--test=steering)

summary=()
for g in "${groups[@]}"; do
  case "$g" in
    ledger)
      run_group ledger -p lazarus-ledger \
        -f crates/ledger/src/writer/mod.rs -f crates/ledger/src/writer/options.rs \
        -f crates/ledger/src/writer/create.rs -f crates/ledger/src/writer/append.rs \
        -f crates/ledger/src/writer/sync.rs -f crates/ledger/src/writer/aside.rs \
        -f crates/ledger/src/scan.rs \
        -f crates/ledger/src/frame.rs -f crates/ledger/src/repair.rs ;;
    session)
      run_group session -p lazarus-session --test-package lazarus-session \
        -f crates/session/src/state/mod.rs -f crates/session/src/state/call.rs \
        -f crates/session/src/state/check.rs -f crates/session/src/state/apply.rs \
        -f crates/session/src/state/compaction.rs -f crates/session/src/state/status.rs \
        -f crates/session/src/store.rs \
        -f crates/session/src/local.rs ;;
    runner)
      # The resume path: what resume decides and does. Its tests are the agent's own and
      # the CLI's resume and crash tests (real processes, real HTTP). `--workspace` with
      # the targets named: cargo-mutants 27.1 passes --package=<mutated crate> to the tests
      # whatever --test-package or --test-workspace say, and the CLI's tests are where the
      # resume path is proven (a later --workspace wins over --package).
      run_group runner -p lazarus-agent \
        -f crates/agent/src/runner/resume.rs -f crates/agent/src/runner/dispatch.rs \
        -f crates/agent/src/runner/turns.rs -f crates/agent/src/runner/transcript.rs \
        --re 'resume_if_needed|owes_turn|clean_calls|execute_call|Runner::drive' \
        "${runner_targets[@]}" \
        --cargo-test-arg=-E \
        --cargo-test-arg='package(lazarus-agent) | binary(run_resume) | binary(run_crash) | binary(run_mcp) | binary(run_compaction) | binary(steering)' ;;
    mcp)
      # The MCP re-run rule: what an interrupted MCP call may do at resume.
      run_group mcp -p lazarus-mcp \
        -f crates/mcp/src/tool.rs \
        --cargo-test-arg=--workspace --cargo-test-arg=--lib \
        --cargo-test-arg=--test=real_servers --cargo-test-arg=--test=run_mcp \
        --cargo-test-arg=--test=mcp_cli \
        --cargo-test-arg=-E --cargo-test-arg='package(lazarus-mcp) | binary(run_mcp) | binary(mcp_cli)' ;;
    foreign)
      # What boot-resume concludes from another program's files: each verdict must be
      # forced by a real capture or a test.
      run_group foreign -p lazarus-boot-resume --test-package lazarus-boot-resume \
        -f crates/boot-resume/src/classify/gemini_cli.rs \
        -f crates/boot-resume/src/classify/opencode.rs ;;
  esac
done

echo
printf '%s\n' "${summary[@]}"
