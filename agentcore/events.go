package agentcore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// The chain's schema: the event types this package appends and the
// payload each holds (Decode maps one to the other). They live in the
// chain forever and are the format auditors read: never rename a type or
// a JSON field, only add. The store's own events (store.TypeArchive) are
// the store's.
const (
	EvSystemPrompt     = "system_prompt"      // the system prompt the session's next model calls use
	EvUserMessage      = "user_message"       // a person's words
	EvAssistantMessage = "assistant_message"  // one model reply (text, reasoning, tool calls, usage)
	EvGateDecision     = "gate_decision"      // the gate's verdict on a command or path, before anything runs
	EvApprovalAsked    = "approval_requested" // a confirm verdict sent to a human
	EvApprovalDecided  = "approval_decision"  // the human's (or the expiry's) answer, before anything runs
	EvToolResult       = "tool_result"        // what a tool call produced, exactly as the model sees it
	EvProtocolSwitch   = "protocol_switch"    // tool calling -> text protocol
	EvRunStarted       = "run_started"
	EvRunFinished      = "run_finished" // status: answered, done, budget, cancelled, error; cause: StopCause.Kind
	EvClear            = "clear"        // starts a new branch; older events leave the projection
	EvCompacted        = "compacted"    // a summary replacing everything before it in the projection
	EvMemory           = "memory"       // a note the model appended to the workspace memory
	EvSkillFiltered    = "skill_filtered"
	EvSkillOpened      = "skill_opened"      // the skill tool opened a skill: its folder and the SHA-256 of its files
	EvNote             = "note"              // something a front end records (NotePayload: approval posted, message queued, click refused)
	EvChainVerified    = "chain_verified"    // a good full verification of the chain, the checkpoint a restart verifies from (checkpoint.go)
	EvApprovalReminder = "approval_reminder" // an open approval request's reminder or escalation, posted in its thread (ApprovalReminderPayload)
	EvMCPCall          = "mcp_call"          // one call of an MCP server's tool that was let through: what was called, in which tier, how it ended
	EvDatasourceQuery  = "datasource_query"  // a datasource tool's read (tool, source, endpoint, query, window, answer size): datasources.go
)

// Run statuses recorded in EvRunFinished.
const (
	StatusAnswered  = "answered"  // the model gave a final answer
	StatusDone      = "done"      // goal mode: the model called agent_done
	StatusBudget    = "budget"    // a budget ended the run
	StatusCancelled = "cancelled" // the run's context was cancelled (/stop, Ctrl+C, shutdown: run_finished's cause says which)
	StatusError     = "error"     // the model or the store failed
)

// Decode returns the payload of an event of the chain's schema, as a
// pointer to its type: *ToolResultPayload for a tool_result, and so on (a
// run_started and a run_finished both hold a *RunPayload). An event of a
// type it does not know (another package's, a newer thinbot's) gives nil
// and no error, so that readers skip what they cannot read; a payload
// that does not decode is an error.
func Decode(ev store.Event) (any, error) {
	var p any
	switch ev.Type {
	case EvSystemPrompt:
		p = new(SystemPromptPayload)
	case EvUserMessage:
		p = new(UserMessagePayload)
	case EvAssistantMessage:
		p = new(AssistantPayload)
	case EvGateDecision:
		p = new(GatePayload)
	case EvApprovalAsked:
		p = new(ApprovalAskedPayload)
	case EvApprovalDecided:
		p = new(ApprovalDecidedPayload)
	case EvToolResult:
		p = new(ToolResultPayload)
	case EvProtocolSwitch:
		p = new(ProtocolSwitchPayload)
	case EvRunStarted, EvRunFinished:
		p = new(RunPayload)
	case EvClear:
		p = new(ClearPayload)
	case EvCompacted:
		p = new(CompactedPayload)
	case EvMemory:
		p = new(MemoryPayload)
	case EvSkillFiltered:
		p = new(skills.Filtered)
	case EvSkillOpened:
		p = new(SkillOpenedPayload)
	case EvNote:
		p = new(NotePayload)
	case EvChainVerified:
		p = new(ChainVerifiedPayload)
	case EvAlert:
		p = new(AlertPayload)
	case EvAlertAck:
		p = new(AlertAckPayload)
	case EvAlertSilence:
		p = new(AlertSilencePayload)
	case EvAlertCard:
		p = new(AlertCardPayload)
	case EvApprovalReminder:
		p = new(ApprovalReminderPayload)
	case EvConfigReloaded, EvConfigReloadRefused:
		p = new(ConfigReload)
	case EvMCPCall:
		p = new(MCPCallPayload)
	case EvLeaderElected:
		p = new(LeaderElectedPayload)
	case EvClusterMembership:
		p = new(ClusterMembershipPayload)
	case EvDatasourceQuery:
		p = new(DatasourcePayload)
	case EvConsoleLogin:
		p = new(ConsoleLoginPayload)
	case EvConsoleLogout:
		p = new(ConsoleLogoutPayload)
	default:
		return nil, nil
	}
	if err := json.Unmarshal(ev.Payload, p); err != nil {
		return nil, fmt.Errorf("agentcore: decode %s event %d: %w", ev.Type, ev.Seq, err)
	}
	return p, nil
}

// ApprovalReminderPayload is an EvApprovalReminder's: a front end
// reminded the people who may decide an open request, or escalated it to
// others, because nobody decided it in time. The request still expires as
// a deny.
type ApprovalReminderPayload struct {
	RequestID string `json:"request_id"`
	// Stage is "remind" (the request's approvers again) or "escalate"
	// (the configured escalation group).
	Stage string `json:"stage"`
	// Mentioned are the user ids the reminder mentioned.
	Mentioned []string `json:"mentioned,omitempty"`
	// After is how long the request had been open, in seconds.
	After float64 `json:"after_seconds"`
	// Expires is when the request expires.
	Expires time.Time `json:"expires"`
	// PostID is the reminder's post ("" if it could not be posted).
	PostID string `json:"post_id,omitempty"`
}

// SystemPromptPayload is an EvSystemPrompt's: the prompt the session's
// next model calls use.
type SystemPromptPayload struct {
	Text string `json:"text"`
}

// UserMessagePayload is an EvUserMessage's: a person's words.
type UserMessagePayload struct {
	Text string `json:"text"`
	// MessageID is the chat platform's id of the message, for deduplication.
	MessageID string `json:"message_id,omitempty"`
}

// AssistantPayload is an EvAssistantMessage's: one model reply.
type AssistantPayload struct {
	Content      string     `json:"content"`
	Reasoning    string     `json:"reasoning,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	// Usage is what the server reported, zeros when it reported none.
	Usage Usage `json:"usage"`
	// Estimated is the kernel's estimate (EstimateTokens) of a call the
	// server reported no usage for: what the run counted against its
	// budgets, recorded beside the server's zeros (never instead of
	// them) so that the tallies rebuilt from the chain count it too.
	Estimated *Usage `json:"estimated_usage,omitempty"`
	Model     string `json:"model,omitempty"`
	// Protocol is "tools" or "text": how this reply's commands were read.
	Protocol  string `json:"protocol"`
	LatencyMS int64  `json:"latency_ms"`
}

// GatePayload is an EvGateDecision's: the gate's verdict on a command or
// a path, recorded before anything runs.
type GatePayload struct {
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Command string `json:"command,omitempty"`
	// Requested is the command as the model wrote it, when it differs from
	// Command, the program the gate judged and the shell runs.
	Requested string `json:"requested,omitempty"`
	Path      string `json:"path,omitempty"`
	Dir       string `json:"dir,omitempty"`
	Verdict   string `json:"verdict"`
	Reason    string `json:"reason"`
	Rule      string `json:"rule"`
	// Action is what the kernel does with the verdict: run, ask, refuse.
	Action string `json:"action"`
	// Targets are the remote hosts a command with a target runs on.
	Targets     []string `json:"targets,omitempty"`
	TargetCount int      `json:"target_count,omitempty"`
}

// what names what a gate decision was about, as the audit and the
// timeline show it: the command, or "read_file PATH" for a file read.
func (p GatePayload) what() string {
	if p.Tool == ToolReadFile {
		return "read_file " + p.Path
	}
	return p.Command
}

// ApprovalAskedPayload is an EvApprovalAsked's: a confirm verdict put to
// the approvers. SHA256 binds the answer to the command (BindingSHA).
type ApprovalAskedPayload struct {
	CallID    string `json:"call_id"`
	RequestID string `json:"request_id"`
	Command   string `json:"command"`
	SHA256    string `json:"sha256"`
	Reason    string `json:"reason,omitempty"`
	Requester string `json:"requester,omitempty"`
	// Targets, for a remote command, are bound into SHA256 with Command.
	Targets     []string `json:"targets,omitempty"`
	TargetCount int      `json:"target_count,omitempty"`
}

// ApprovalDecidedPayload is an EvApprovalDecided's: the answer (or the
// expiry's), recorded before anything runs.
type ApprovalDecidedPayload struct {
	CallID    string `json:"call_id"`
	RequestID string `json:"request_id"`
	Approved  bool   `json:"approved"`
	By        string `json:"by,omitempty"`
	Why       string `json:"why,omitempty"`
	SHA256    string `json:"sha256"`
}

// ToolResultPayload is an EvToolResult's: what a tool call produced.
type ToolResultPayload struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Content is exactly what the model sees as the tool's result.
	Content    string `json:"content"`
	IsError    bool   `json:"is_error,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	OutputSize int64  `json:"output_size,omitempty"`
	OutputSHA  string `json:"output_sha256,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	// Targets and Hosts are set for a remote command: what each host
	// answered (OutputSize and OutputSHA then cover the summary).
	Targets []string     `json:"targets,omitempty"`
	Hosts   []HostRecord `json:"hosts,omitempty"`
	// Masked counts the secret spans masked in the output, by rule.
	Masked map[string]int `json:"masked,omitempty"`
	// Cause and CauseBy, for a command the run's cancellation ended (or
	// kept from running), are its StopCause's Kind and By.
	Cause   string `json:"cause,omitempty"`
	CauseBy string `json:"cause_by,omitempty"`
}

// MCPCallPayload is an EvMCPCall's: a call of an MCP server's tool that
// its gate decision (and approval) let through, recorded when it ended.
// The tool_result after it holds what the model saw.
type MCPCallPayload struct {
	CallID string `json:"call_id"`
	Server string `json:"server"`
	// Tool is the server's own name of the tool.
	Tool string `json:"tool"`
	// Arguments are the JSON object sent (keys sorted).
	Arguments string `json:"arguments"`
	// Tier is the sandbox tier of the server process that ran it:
	// read-only, approved, or remote (a streamable HTTP server).
	Tier string `json:"tier"`
	// ReadOnly is the config's marking; ReadOnlyHint the server's own
	// claim, recorded but never trusted.
	ReadOnly     bool  `json:"read_only,omitempty"`
	ReadOnlyHint bool  `json:"read_only_hint,omitempty"`
	DurationMS   int64 `json:"duration_ms"`
	// ResultSize and ResultSHA are of the result's text before it was
	// masked and cut for the model; IsError reports that the tool said it
	// failed.
	ResultSize int    `json:"result_size,omitempty"`
	ResultSHA  string `json:"result_sha256,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	// Error says why the call failed: the server did not start, crashed,
	// did not answer in time, answered too much, or refused the call.
	Error string `json:"error,omitempty"`
	// Masked counts the secret spans masked in the result, by rule.
	Masked map[string]int `json:"masked,omitempty"`
}

// HostRecord is one host's outcome of a remote command, in the chain.
type HostRecord struct {
	Host       string `json:"host"`
	User       string `json:"user,omitempty"`
	ExitCode   int    `json:"exit_code"`
	OutputSize int64  `json:"output_size"`
	OutputSHA  string `json:"output_sha256"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	Cancelled  bool   `json:"cancelled,omitempty"`
	// NotStarted: the run was stopped before this host was tried.
	NotStarted bool `json:"not_started,omitempty"`
}

// ProtocolSwitchPayload is an EvProtocolSwitch's: the session moved from
// tool calling to the text protocol.
type ProtocolSwitchPayload struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// RunPayload is an EvRunStarted's (Goal) and an EvRunFinished's: how
// the run ended (a Status* value) and what it used.
type RunPayload struct {
	Status     string `json:"status,omitempty"`
	Goal       bool   `json:"goal,omitempty"`
	Steps      int    `json:"steps,omitempty"`
	ModelCalls int    `json:"model_calls,omitempty"`
	Detail     string `json:"detail,omitempty"`
	// Cause and CauseBy say why a cancelled run (or one its wall time
	// ended) stopped: its StopCause's Kind and By ("shutdown", "SIGTERM";
	// "stop", "user:U1 (alice)"; "budget"). Absent when the run was
	// cancelled without a cause, and in runs recorded before they existed.
	Cause   string `json:"cause,omitempty"`
	CauseBy string `json:"cause_by,omitempty"`
}

// CompactedPayload is an EvCompacted's: the summary that replaces the
// session's events up to UpToSeq in the projection.
type CompactedPayload struct {
	Summary      string `json:"summary"`
	UpToSeq      uint64 `json:"up_to_seq"`
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after"`
}

// MemoryPayload is an EvMemory's: a note the model appended to File.
type MemoryPayload struct {
	Text string `json:"text"`
	File string `json:"file"`
}

// SkillOpenedPayload, an EvSkillOpened's, records which files a session's skill instructions
// came from: the Digest of every file of the skill when it was opened.
type SkillOpenedPayload struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	Dir    string `json:"dir"`
	SHA256 string `json:"sha256"`
	// Pinned is the digest skills.lock pins, when a lock is configured.
	Pinned string `json:"pinned,omitempty"`
}

// ClearPayload is an EvClear's: the branch the session continues on.
type ClearPayload struct {
	Branch int `json:"branch"`
}

// EvLeaderElected is a node of a thinbot cluster taking over as its leader
// (store/replica): from it on, that node alone connects to chat, runs
// commands and commits events, until the next one. It lives in the chain
// forever: never rename it.
const EvLeaderElected = "leader_elected"

// LeaderElectedPayload is an EvLeaderElected's.
type LeaderElectedPayload struct {
	// Node is the new leader's node id, Term its raft term.
	Node string `json:"node"`
	Term uint64 `json:"term"`
	// Interrupted are the sessions whose runs the old leader left open and
	// that were closed as interrupted ("leader lost"); Approvals the
	// approval requests it left open that stay open under this leader
	// (their runs go on once decided), Expired those that were closed.
	Interrupted []string `json:"interrupted"`
	Approvals   []string `json:"approvals"`
	Expired     []string `json:"expired"`
}

// EvClusterMembership is an administrator's change of a cluster's members
// (a node added or removed), applied or refused. It lives in the chain
// forever: never rename it.
const EvClusterMembership = "cluster_membership"

// ClusterMembershipPayload is an EvClusterMembership's.
type ClusterMembershipPayload struct {
	// Op is "add" or "remove"; Node the node's id, RaftAddress its raft
	// address (add).
	Op          string `json:"op"`
	Node        string `json:"node"`
	RaftAddress string `json:"raft_address,omitempty"`
	// By is the administrator (the name of the token they sent).
	By string `json:"by"`
	// Error says why the change was not applied; empty when it was.
	Error string `json:"error,omitempty"`
	// Members are the cluster's members after it: "id=raft_address".
	Members []string `json:"members"`
}

// EvConsoleLogin is a token login to a cluster's web console; it lives in
// the chain forever: never rename it.
const EvConsoleLogin = "console_login"

// EvConsoleLogout is the end of a console login before its expiry: a
// logout, or a reload of the tokens file without its token. It lives in
// the chain forever: never rename it.
const EvConsoleLogout = "console_logout"

// ConsoleLoginPayload is an EvConsoleLogin's. It holds no secret: Key and
// Token are HMACs under the console's login key, which no cookie or token
// can be recovered from.
type ConsoleLoginPayload struct {
	User string `json:"user"`
	// Key is the session's key in the console's session table (an HMAC
	// of the session id in the cookie).
	Key string `json:"key"`
	// Token is an HMAC of the token that logged in.
	Token string `json:"token"`
	// Until is when the login expires.
	Until time.Time `json:"until"`
}

// ConsoleLogoutPayload is an EvConsoleLogout's.
type ConsoleLogoutPayload struct {
	User string `json:"user"`
	Key  string `json:"key"`
	// Why is "logout" or "token removed".
	Why string `json:"why"`
}

// Why a console login ended (ConsoleLogoutPayload.Why).
const (
	LogoutByUser       = "logout"
	LogoutTokenRemoved = "token removed"
)

// DatasourcePayload is an EvDatasourceQuery's: one read of a datasource
// by a datasource tool, after its gate_decision (verdict pass, rule
// datasource) and before its tool_result (the model's summary).
type DatasourcePayload struct {
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Datasource string `json:"datasource"`
	Kind       string `json:"kind"`
	// Endpoint is the API path asked ("/api/v1/query_range").
	Endpoint string `json:"endpoint"`
	Query    string `json:"query,omitempty"`
	Filter   string `json:"filter,omitempty"`
	// Start and End (RFC 3339) are the window of a range query (End alone
	// the time of an instant query); Step its resolution.
	Start string `json:"start,omitempty"`
	End   string `json:"end,omitempty"`
	Step  string `json:"step,omitempty"`
	// Series counts the series, streams, alerts or silences answered.
	Series int `json:"series"`
	// ResultSize and ResultSHA are the answer's data's (JSON) size and
	// SHA-256; Result is that data, cut at 1 MiB (ResultCut), for the
	// console's full view.
	ResultSize int64  `json:"result_size"`
	ResultSHA  string `json:"result_sha256,omitempty"`
	Result     string `json:"result,omitempty"`
	ResultCut  bool   `json:"result_cut,omitempty"`
	// Error is why the query failed: a timeout, an error answer, an
	// answer over the size limit, a bad query.
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}
