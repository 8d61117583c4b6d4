// Package agentcore is thinbot's kernel: the loop that turns a person's
// words into model calls, gated commands and answers, and the one package
// that appends session events to the store.
//
// The types to know: Agent runs turns (New, Agent.Run); a Turn is one
// run's input and a Result its outcome; a Model is the model client
// (agentcore/openai speaks the OpenAI wire format); an Approver answers
// the gate's confirm verdicts (the chat front ends, or a terminal prompt).
// ExampleAgent_Run shows one turn and the events it commits, in order.
//
// # The loop
//
// Agent.Run records the user's message, then repeats: project the session's
// events into messages, call the Model, record its reply, and for each tool
// call (run, read_file, skill, memory, agent_done) judge it with the gate,
// record the decision, ask the Approver for confirm verdicts and record the
// answer, run it and record the result. It ends at a final answer,
// agent_done (goal mode), an exhausted budget, cancellation, or a failure.
//
// # Fail closed
//
// Nothing acts before it is committed: a command runs only after its gate
// decision (and approval, if any) is in the store. If the store cannot
// append, the run ends with the error and nothing more runs. Deny is never
// overridden; confirm without an Approver is refused unless the turn allows
// all. Commands run in their own process group with an allowlisted
// environment (ChildEnv) and a timeout; cancellation kills the group.
//
// # One commit per step
//
// A step is one durable commit, made just before its command runs: the
// model reply that asked for the command and its gate decision go to the
// store together (run.record with the run's pending reply), and the
// journal is synced. The command's result is appended buffered as soon as
// it is known (store.DB.AppendBuffered: in the chain and readable at once,
// synced by the next commit). The invariants: (1) a command runs only after
// its decision, and everything the run did before it, is durable; (2) a
// model reply is never in the chain without the results it read, which come
// before it. A crash of the process keeps a buffered result; a crash of the
// machine before the next commit loses it together with everything after
// it, and the chain then shows the decision without a result (the
// projection closes the call as interrupted, as for a crash while the
// command ran). Steps without a gate decision record their reply before
// the next request: buffered for a malformed call, durably with
// skill_opened for a skill; the run's end
// commits whatever is left. The run's start (a changed system prompt,
// run_started, the user's message) is buffered too: the first decision, or
// the run's end before the answer is posted, syncs it, so an answer without
// commands costs one sync. Streamed text (Hooks.Text, which the bot shows in
// the chat while the model writes) is an answer posted too: the first delta
// after a buffered append syncs the chain (store.DB.Sync) before it is
// shown, so a streamed answer costs that sync as well.
//
// # Projection
//
// Project (and its incremental form, Projector) is a pure function of the
// session's events: the same events give the same messages, and what the
// model saw is what the chain recorded. Within a run the system prompt does
// not change, so consecutive requests share their prefix byte for byte. A
// clear event starts a new branch; a compacted event replaces the messages
// before it with a summary; reasoning is recorded but sent back only when the
// model client is configured to.
//
// # Reading the chain
//
// The package reads what it wrote, for the front ends and the auditor:
// Projector turns a session's events into the model's messages; Sessions,
// OpenSessions, SeenMessages, KnownSession, IndexedTopic and
// IndexedApprovals answer from the chain's state index (stateindex.go);
// AlertGroups rebuilds the alert threads; WriteTimeline renders a
// session's timeline; Verify checks the store, the checkpoints recorded
// in it, its journal, an export and archive files, in that order.
//
// # Concurrency
//
// One Agent serves many sessions; Run may be called concurrently for
// different sessions, and calls for one session are serialised.
package agentcore
