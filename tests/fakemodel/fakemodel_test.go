package fakemodel

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, string(b) + "<read error: " + err.Error() + ">"
	}
	return resp, string(b)
}

const toolsReq = `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"run","parameters":{}}}],"stream":false}`
const plainReq = `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"out"}],"stream":false}`

func TestScriptInOrderAndRecorded(t *testing.T) {
	srv := New(Reply{Content: "one"}, Reply{ToolCalls: []Call{{Name: "run", Args: `{"command":"ls"}`}, {Name: "run", Args: `{"a":1}`, ArgsObject: true}}})
	defer srv.Close()
	_, body := post(t, srv.URL, plainReq)
	if !strings.Contains(body, `"content":"one"`) || !strings.Contains(body, `"finish_reason":"stop"`) {
		t.Errorf("first answer %s", body)
	}
	_, body = post(t, srv.URL, toolsReq)
	var ans struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &ans); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	m := ans.Choices[0].Message
	if m.Content != nil || len(m.ToolCalls) != 2 || m.ToolCalls[0].ID != "call_1" || m.ToolCalls[1].ID != "call_2" ||
		string(m.ToolCalls[0].Function.Arguments) != `"{\"command\":\"ls\"}"` || string(m.ToolCalls[1].Function.Arguments) != `{"a":1}` ||
		ans.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("tool-call answer %s", body)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].N != 1 || reqs[1].N != 2 || !reqs[1].HasTools() || reqs[0].HasTools() {
		t.Fatalf("recorded %+v", reqs)
	}
	if msg := reqs[0].Messages[1]; !msg.ContentNull || len(msg.ToolCalls) != 1 || reqs[0].Messages[2].ToolCallID != "c1" {
		t.Errorf("recorded messages %+v", reqs[0].Messages)
	}
	if string(reqs[1].Raw) != toolsReq {
		t.Errorf("raw body %s", reqs[1].Raw)
	}
	if srv.Remaining() != 0 || srv.Err() != nil {
		t.Errorf("remaining %d, err %v", srv.Remaining(), srv.Err())
	}
}

func TestExtraRequestFails(t *testing.T) {
	srv := New()
	defer srv.Close()
	resp, body := post(t, srv.URL, plainReq)
	if resp.StatusCode != 500 || !strings.Contains(body, "script exhausted") {
		t.Errorf("extra request: %d %s", resp.StatusCode, body)
	}
	if err := srv.Err(); err == nil || !strings.Contains(err.Error(), "request 1: script exhausted") {
		t.Errorf("Err = %v", err)
	}
	r, err := http.Get(srv.URL + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 404 || !strings.Contains(srv.Err().Error(), "unexpected GET /v1/nothing") {
		t.Errorf("unknown route: %d, %v", r.StatusCode, srv.Err())
	}
	resp, _ = post(t, srv.URL, "{bad json")
	if resp.StatusCode != 400 {
		t.Errorf("bad body: %d", resp.StatusCode)
	}
}

func TestRejectToolsKeepsReply(t *testing.T) {
	srv := New(Reply{RejectTools: true, Content: "text"})
	defer srv.Close()
	resp, body := post(t, srv.URL, toolsReq)
	if resp.StatusCode != 400 || !strings.Contains(body, "enable-auto-tool-choice") || srv.Remaining() != 1 {
		t.Errorf("with tools: %d %s, remaining %d", resp.StatusCode, body, srv.Remaining())
	}
	resp, body = post(t, srv.URL, plainReq)
	if resp.StatusCode != 200 || !strings.Contains(body, `"text"`) || srv.Remaining() != 0 {
		t.Errorf("without tools: %d %s", resp.StatusCode, body)
	}
}

func TestErrorsAndFaults(t *testing.T) {
	srv := New(
		Reply{Status: 429, RetryAfter: "3"},
		Reply{Status: 502, ErrorBody: "<html><title>Bad Gateway</title></html>"},
		Reply{Content: "0123456789", JSON: true, CutAfter: 10},
		Reply{Drop: true},
	)
	defer srv.Close()
	resp, body := post(t, srv.URL, plainReq)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || !strings.Contains(body, `"code":429`) {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = post(t, srv.URL, plainReq)
	if resp.StatusCode != 502 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "Bad Gateway") {
		t.Errorf("502: %d %s", resp.StatusCode, body)
	}
	_, body = post(t, srv.URL, plainReq)
	if !strings.Contains(body, "read error") || len(strings.SplitN(body, "<read", 2)[0]) != 10 {
		t.Errorf("cut answer: %q", body)
	}
	if _, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(plainReq)); err == nil {
		t.Errorf("dropped connection answered")
	}
}

func readEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var evs []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			evs = append(evs, d)
		}
	}
	return evs
}

func TestStream(t *testing.T) {
	srv := New(
		Reply{Content: "abcdef", Reasoning: "xy", Fragment: 2, ToolCalls: []Call{{ID: "k", Name: "run", Args: `{"c":1}`}}, Usage: nil, KeepAlive: true},
		Reply{Content: "x", NoDone: true, StreamError: "boom"},
	)
	defer srv.Close()
	streamReq := strings.Replace(plainReq, `"stream":false`, `"stream":true`, 1)
	resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(streamReq))
	if err != nil {
		t.Fatal(err)
	}
	evs := readEvents(t, resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
	// role, 1 reasoning, 3 content, tool head, 4 args pieces, finish, [DONE]
	if len(evs) != 12 || evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[1], `"reasoning_content":"xy"`) ||
		!strings.Contains(evs[5], `"id":"k"`) || !strings.Contains(evs[10], `"finish_reason":"tool_calls"`) {
		t.Errorf("events:\n%s", strings.Join(evs, "\n"))
	}
	resp, err = http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(streamReq))
	if err != nil {
		t.Fatal(err)
	}
	evs = readEvents(t, resp.Body)
	resp.Body.Close()
	if last := evs[len(evs)-1]; !strings.Contains(last, `"error"`) || !strings.Contains(last, "boom") {
		t.Errorf("stream error events: %q", evs)
	}
}

func TestDelayHonoursCancel(t *testing.T) {
	srv := New(Reply{Delay: time.Hour})
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/chat/completions", strings.NewReader(plainReq))
	client := &http.Client{Timeout: 50 * time.Millisecond}
	if _, err := client.Do(req); err == nil {
		t.Fatalf("delayed request answered")
	}
	// Close returns only once the handler has ended: the delay was cancelled.
}

func TestReplyJSON(t *testing.T) {
	var rs []Reply
	in := `[{"content":"hi","delay":"1.5s","tool_calls":[{"name":"run","args":"{}","args_object":true}],"status":429,"retry_after":"2","reject_tools":true,"cut_after":5,"usage":{"prompt_tokens":3}}]`
	if err := json.Unmarshal([]byte(in), &rs); err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if r.Content != "hi" || r.Delay != 1500*time.Millisecond || !r.ToolCalls[0].ArgsObject || r.Status != 429 ||
		r.RetryAfter != "2" || !r.RejectTools || r.CutAfter != 5 || r.Usage.PromptTokens != 3 {
		t.Errorf("decoded %+v", r)
	}
	if err := json.Unmarshal([]byte(`[{"delay":"soon"}]`), &rs); err == nil {
		t.Errorf("bad delay accepted")
	}
}

func TestDemo(t *testing.T) {
	tools := []Tool{{Type: "function"}}
	r := Demo(Request{Tools: tools, Messages: []Message{{Role: "user", Content: "disk?"}}})
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "run" || !strings.Contains(r.ToolCalls[0].Args, "df -h") {
		t.Errorf("demo first reply with tools: %+v", r)
	}
	r = Demo(Request{Messages: []Message{{Role: "user", Content: "disk?"}}})
	if !strings.Contains(r.Content, "```bash\ndf -h\n```") {
		t.Errorf("demo first reply in text: %+v", r)
	}
	out := "Filesystem Size Used Avail Use% Mounted on\n/dev/sda1 100G 93G 7G 93% /\ntmpfs 1G 0 1G 0% /tmp"
	r = Demo(Request{Tools: tools, Messages: []Message{{Role: "user"}, {Role: "assistant"}, {Role: "tool", Content: out}}})
	if !strings.Contains(r.Content, "93%") || !strings.Contains(r.Content, "/dev/sda1") || !strings.Contains(r.Content, "attention") {
		t.Errorf("demo summary: %q", r.Content)
	}
	r = Demo(Request{Messages: []Message{{Role: "user"}, {Role: "assistant", Content: "```bash\ndf -h\n```"}, {Role: "user", Content: "no figures"}}})
	if !strings.Contains(r.Content, "could not read") {
		t.Errorf("demo summary of odd output: %q", r.Content)
	}
}

func TestNewFuncConcurrent(t *testing.T) {
	srv := NewFunc(func(r Request) Reply { return Reply{Content: "n"} })
	defer srv.Close()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(plainReq))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = errors.New(resp.Status)
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := len(srv.Requests()); n != 8 {
		t.Errorf("recorded %d", n)
	}
}
