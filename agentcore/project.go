package agentcore

import (
	"encoding/json"
	"fmt"

	"github.com/thinbot/thinbot/store"
)

// summaryPrefix introduces a compaction summary in the projection.
const summaryPrefix = "Summary of the conversation so far (older messages were compacted):\n\n"

// interruptedResult is what the model sees for a tool call whose result was
// never recorded (the process died or the run was cancelled mid-call).
const interruptedResult = "(no result: the run was interrupted before this call finished)"

// Project turns a session's events into the messages the model sees. It is a
// pure function: the same events always give the same messages. Events of
// other sessions must not be passed in.
func Project(events []store.Event) []Message {
	var p Projector
	for _, e := range events {
		p.Apply(e)
	}
	return p.Messages()
}

// Projector is the incremental form of Project: Apply each event once, in
// chain order, and Messages gives what Project would give for all of them.
// The cost of Apply does not grow with the session's length. The zero value
// is ready to use. A Projector is not safe for concurrent use.
type Projector struct {
	system string
	// msgs starts with a slot for the system prompt, then the history.
	// Messages hands out views of it without copying: appends only write
	// past the end of every view handed out, and anything that replaces
	// earlier messages builds a new array.
	msgs   []Message
	seqs   []uint64 // the sequence number of the event behind each of msgs (0 for the slot)
	bytes  int      // msgBytes summed over msgs, for Tokens
	branch int
	text   bool // the session switched to the text protocol
	// first is the session's first user message (any branch), which the
	// skill index is ranked against.
	first string
	// open holds tool calls of the last assistant message still waiting for a result.
	open []ToolCall
}

// Branch is the branch of the newest event applied.
func (p *Projector) Branch() int { return p.branch }

// TextProtocol reports whether the session switched to the text protocol.
func (p *Projector) TextProtocol() bool { return p.text }

// FirstUser is the text of the session's first user message, in any
// branch, not counting the kernel's own (actor "system"); "" before one.
func (p *Projector) FirstUser() string { return p.first }

// System is the newest system prompt applied.
func (p *Projector) System() string { return p.system }

// Apply adds one event to the projection.
func (p *Projector) Apply(e store.Event) {
	if e.Branch > p.branch {
		// A new branch leaves everything before it out of the projection.
		p.branch, p.open = e.Branch, nil
		p.reset(nil, nil)
	}
	if e.Type == EvUserMessage && p.first == "" && e.Actor != "system" {
		var v UserMessagePayload
		if decode(e, &v) {
			p.first = v.Text
		}
	}
	if e.Branch < p.branch {
		return
	}
	switch e.Type {
	case EvSystemPrompt:
		var v SystemPromptPayload
		if decode(e, &v) {
			p.system = v.Text
			p.reset(p.history())
		}
	case EvProtocolSwitch:
		p.text = true
	case EvClear:
		p.open = nil
		p.reset(nil, nil)
	case EvCompacted:
		var v CompactedPayload
		if !decode(e, &v) {
			return
		}
		// The summary replaces every message up to UpToSeq; later ones
		// (the question being worked on) stay after it.
		msgs, seqs := p.history()
		keep := len(seqs)
		for i, sq := range seqs {
			if sq > v.UpToSeq {
				keep = i
				break
			}
		}
		if keep == len(seqs) {
			p.open = nil
		}
		p.reset(append([]Message{{Role: RoleUser, Content: summaryPrefix + v.Summary}}, msgs[keep:]...),
			append([]uint64{e.Seq}, seqs[keep:]...))
	case EvUserMessage:
		var v UserMessagePayload
		if decode(e, &v) {
			p.closeOpen(e.Seq)
			p.add(e.Seq, Message{Role: RoleUser, Content: v.Text})
		}
	case EvAssistantMessage:
		var v AssistantPayload
		if !decode(e, &v) {
			return
		}
		p.closeOpen(e.Seq)
		m := Message{Role: RoleAssistant, Content: v.Content, Reasoning: v.Reasoning}
		if v.Protocol != "text" && len(v.ToolCalls) > 0 {
			m.ToolCalls = v.ToolCalls
			p.open = append(p.open[:0], v.ToolCalls...)
		}
		p.add(e.Seq, m)
	case EvToolResult:
		var v ToolResultPayload
		if !decode(e, &v) {
			return
		}
		i := p.openIndex(v.CallID)
		if i < 0 {
			// Text protocol (or a result without a structured call): the
			// output goes back as a user message.
			p.add(e.Seq, Message{Role: RoleUser, Content: v.Content})
			return
		}
		p.open = append(p.open[:i], p.open[i+1:]...)
		p.add(e.Seq, Message{Role: RoleTool, ToolCallID: v.CallID, Name: v.Tool, Content: v.Content})
	}
}

func (p *Projector) openIndex(id string) int {
	for i, c := range p.open {
		if c.ID == id {
			return i
		}
	}
	return -1
}

// closeOpen answers tool calls left without a result, so that the message
// list stays valid for the API (every tool call needs an answer).
func (p *Projector) closeOpen(seq uint64) {
	for _, c := range p.open {
		p.add(seq, Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: interruptedResult})
	}
	p.open = p.open[:0]
}

func (p *Projector) add(seq uint64, m Message) {
	if p.msgs == nil {
		p.reset(nil, nil)
	}
	p.msgs = append(p.msgs, m)
	p.seqs = append(p.seqs, seq)
	p.bytes += msgBytes(m)
}

// history returns the messages after the system slot (shared, not copied).
func (p *Projector) history() ([]Message, []uint64) {
	if len(p.msgs) == 0 {
		return nil, nil
	}
	return p.msgs[1:], p.seqs[1:]
}

// reset rebuilds msgs in a new array: the system slot, then history.
func (p *Projector) reset(history []Message, seqs []uint64) {
	msgs := make([]Message, 0, len(history)+16)
	msgs = append(msgs, Message{Role: RoleSystem, Content: p.system})
	msgs = append(msgs, history...)
	p.msgs = msgs
	p.seqs = append(append(make([]uint64, 0, len(seqs)+16), 0), seqs...)
	p.bytes = 0
	for _, m := range p.msgs {
		p.bytes += msgBytes(m)
	}
}

// lastUser returns the index in Messages() of the newest user message that
// came from an event, and that event's sequence number; ok is false when
// there is none.
func (p *Projector) lastUser() (idx int, seq uint64, ok bool) {
	off := 0
	if p.system == "" {
		off = 1
	}
	for i := len(p.msgs) - 1; i >= 1; i-- {
		if p.msgs[i].Role == RoleUser {
			return i - off, p.seqs[i], true
		}
	}
	return 0, 0, false
}

// Messages returns the system prompt followed by the projected messages.
// The slice shares memory with the Projector: callers must not change its
// elements, but may append to it (its capacity ends at its length, so an
// append copies). It costs nothing however long the session is.
func (p *Projector) Messages() []Message {
	if p.msgs == nil {
		p.reset(nil, nil)
	}
	out := p.msgs
	if p.system == "" {
		out = out[1:]
	}
	out = out[:len(out):len(out)]
	for _, c := range p.open {
		out = append(out, Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: interruptedResult})
	}
	return out
}

// Tokens is EstimateTokens(p.Messages()), kept up to date as events apply.
func (p *Projector) Tokens() int {
	n := p.bytes
	if p.system == "" && len(p.msgs) > 0 {
		n -= msgBytes(p.msgs[0])
	}
	for _, c := range p.open {
		n += msgBytes(Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: interruptedResult})
	}
	return (n + 3) / 4
}

// decode reads an event's payload; an undecodable payload (which verify
// would flag anyway) is left out of the projection rather than crashing it.
func decode(e store.Event, v any) bool {
	return json.Unmarshal(e.Payload, v) == nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Payload structs contain only strings, numbers and slices of them.
		panic(fmt.Sprintf("agentcore: encode payload: %v", err))
	}
	return b
}
