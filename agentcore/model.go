package agentcore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Roles of a Message, as the OpenAI chat format spells them.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat message sent to the model. It is what Project builds
// from the event chain.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Reasoning is the model's reasoning text for an assistant message. It is
	// sent back only when the model's settings ask for it (see
	// openai.Config.FeedReasoning); otherwise clients drop it.
	Reasoning  string     `json:"reasoning,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool-result message.
	Name string `json:"name,omitempty"`
}

// ToolCall is one tool invocation requested by the model.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text of the arguments exactly as the model sent it
	// (clients turn an object sent by servers such as Ollama into its text).
	// It may be invalid JSON; the loop reports that to the model.
	Arguments string `json:"arguments"`
	// text is set on a call the text protocol read from a reply
	// (textModel): how the call is named and its result worded.
	text *textCall
}

// Tool describes a function the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema object
}

// Request is one chat-completion call.
type Request struct {
	// Messages may share memory with the session's projection: a Model
	// reads them and must not change them.
	Messages []Message
	// Tools offered to the model. Nil means the text protocol: no tools are
	// sent and the model answers in plain text.
	Tools []Tool
	// OnText, if set, receives content text as it streams in. It is called
	// from the goroutine running Complete and must not block for long.
	OnText func(delta string)
	// MaxTokens limits the completion; 0 leaves it to the server.
	MaxTokens int
}

// Response is the model's answer to a Request.
type Response struct {
	// Content is the visible answer text, with <think> blocks and text-form
	// tool calls removed.
	Content string
	// Reasoning is reasoning_content, reasoning, or <think> text.
	Reasoning string
	// ToolCalls are in the order the model sent them, including tool calls
	// the model wrote as text (<tool_call>{...}</tool_call>).
	ToolCalls []ToolCall
	// FinishReason is the server's finish_reason ("stop", "tool_calls",
	// "length", ...), or "" if the stream ended without one.
	FinishReason string
	Usage        Usage
	Model        string
	// text is set on a reply read by the text protocol (textModel); its
	// tool calls are then in Content, and ToolCalls holds what was read.
	text *textReply
	// estimate is the run's estimate of a reply without usage (run.count).
	estimate *Usage
}

// Usage is the token accounting the server reported for one call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens,omitempty"`
}

// Model answers chat-completion requests. agentcore/openai implements it over
// HTTP. Complete blocks until the answer is complete, ctx is done, or the
// call fails; it may be called concurrently for different sessions.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Errors a Model returns (wrapped) so that the loop can react to them.
var (
	// ErrToolsUnsupported is returned when the server rejects tool calling
	// (an HTTP 400 about tools or tool_choice). The loop then switches the
	// session to the text protocol and records the switch.
	ErrToolsUnsupported = errors.New("model server does not support tool calling")
	// ErrContextLength is returned when the prompt and the completion budget
	// exceed the model's context window, often as a *ContextLengthError
	// carrying the server's numbers. The loop then lowers max_tokens,
	// compacts, or stops with a clear error; it never resends the same
	// request.
	ErrContextLength = errors.New("prompt exceeds the model's context window")
)

// ContextLengthError is a context-length error with the numbers the server
// gave (vLLM, llama.cpp, SGLang and OpenAI say them; Ollama does not). A
// zero field means the server did not say. It unwraps to ErrContextLength.
type ContextLengthError struct {
	// Window is the model's context window in tokens.
	Window int
	// Prompt is the prompt's size in tokens as the server counted it (for
	// some servers a lower bound).
	Prompt int
	// Completion is the completion budget the request asked for: max_tokens,
	// or the server's own default when the request sent none.
	Completion int
}

// Error describes the overflow with whatever numbers are known.
func (e *ContextLengthError) Error() string {
	var det []string
	if e.Window > 0 {
		det = append(det, fmt.Sprintf("window %d", e.Window))
	}
	if e.Prompt > 0 {
		det = append(det, fmt.Sprintf("prompt %d", e.Prompt))
	}
	if e.Completion > 0 {
		det = append(det, fmt.Sprintf("completion %d", e.Completion))
	}
	if len(det) == 0 {
		return ErrContextLength.Error()
	}
	return ErrContextLength.Error() + " (" + strings.Join(det, ", ") + " tokens)"
}

// Unwrap returns ErrContextLength.
func (e *ContextLengthError) Unwrap() error { return ErrContextLength }
