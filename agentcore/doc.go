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
// A step is one durable commit, made just before its command runs; its
// command's result is appended buffered and synced by the next commit.
// run.record says what is durable when, and why.
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
// AlertGroups rebuilds the alert threads; ReadTimeline reads a session's
// timeline rows, which WriteTimeline renders as a postmortem and a
// verified appendix; Verify checks the store, the checkpoints recorded
// in it, its journal, an export and archive files, in that order.
//
// # Concurrency
//
// One Agent serves many sessions; Run may be called concurrently for
// different sessions, and calls for one session are serialised.
package agentcore
