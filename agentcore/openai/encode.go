package openai

import (
	"encoding/json"
	"sync"
)

// Each step of a run sends the whole conversation again, and a run's
// history is mostly what the steps before sent already: the system prompt
// and the commands' outputs. encodeRequest keeps the JSON of those long
// messages (msgCache) and encodes only what is new, splicing the pieces
// into the bytes json.Marshal(buildRequest(...)) gives: the same body,
// checked by TestEncodeRequestSameBytes and FuzzEncodeRequest.

// cacheMinLen is the shortest message content worth keeping: shorter ones
// cost less to encode than to look up and keep.
const cacheMinLen = 512

// cacheBudget bounds the encodings kept, in bytes; past it the cache starts
// again empty (each key also holds its content, already held by the runs
// that sent it).
const cacheBudget = 4 << 20

// msgCache maps a message without tool calls to its JSON encoding.
type msgCache struct {
	mu   sync.Mutex
	m    map[msgKey][]byte
	size int
}

// msgKey is a wireMessage without tool calls: all of it, as a map key.
type msgKey struct {
	role, content, reasoning, toolCallID, name string
}

// cacheKey is w's key, if it is worth caching: no tool calls, long enough.
func cacheKey(w *wireMessage) (msgKey, bool) {
	if len(w.ToolCalls) > 0 || len(w.Content) < cacheMinLen {
		return msgKey{}, false
	}
	return msgKey{w.Role, w.Content, w.ReasoningContent, w.ToolCallID, w.Name}, true
}

func (c *msgCache) get(k msgKey) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *msgCache) put(k msgKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.size+len(b) > cacheBudget {
		c.m, c.size = map[msgKey][]byte{}, 0
	}
	if _, ok := c.m[k]; !ok && len(b) <= cacheBudget {
		c.m[k] = b
		c.size += len(b)
	}
}

// wireTail is wireRequest after its messages, in the same order.
type wireTail struct {
	Tools         []wireTool     `json:"tools,omitempty"`
	ToolChoice    string         `json:"tool_choice,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
}

// encodeRequest is json.Marshal(w), with the long messages' encodings
// taken from (and added to) the client's cache.
func (c *Client) encodeRequest(w wireRequest) ([]byte, error) {
	model, err := json.Marshal(w.Model)
	if err != nil {
		return nil, err
	}
	// Stream is never omitted: the tail is never "{}".
	tail, err := json.Marshal(wireTail{Tools: w.Tools, ToolChoice: w.ToolChoice, Stream: w.Stream,
		StreamOptions: w.StreamOptions, MaxTokens: w.MaxTokens, Temperature: w.Temperature})
	if err != nil {
		return nil, err
	}
	msgs := make([][]byte, len(w.Messages))
	size := len(model) + len(tail) + 32
	for i := range w.Messages {
		k, ok := cacheKey(&w.Messages[i])
		if ok {
			msgs[i] = c.msgs.get(k)
		}
		if msgs[i] == nil {
			if msgs[i], err = json.Marshal(&w.Messages[i]); err != nil {
				return nil, err
			}
			if ok {
				c.msgs.put(k, msgs[i])
			}
		}
		size += len(msgs[i]) + 1
	}
	body := make([]byte, 0, size)
	body = append(body, `{"model":`...)
	body = append(body, model...)
	body = append(body, `,"messages":`...)
	if w.Messages == nil {
		body = append(body, "null"...)
	} else {
		body = append(body, '[')
		for i, m := range msgs {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, m...)
		}
		body = append(body, ']')
	}
	body = append(body, ',')
	body = append(body, tail[1:]...)
	return body, nil
}
