package agentcore

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// encodings are the forms a command or a model turns a secret into, each
// written here independently of derive.
func encodings(secret string) map[string]string {
	rev := []byte(secret)
	slices.Reverse(rev)
	h := hex.EncodeToString([]byte(secret))
	var pct strings.Builder
	for _, c := range []byte(secret) {
		pct.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	j, _ := json.Marshal(secret)
	out := map[string]string{
		"raw": secret, "reversed": string(rev), "hex": h, "HEX": strings.ToUpper(h),
		"query": url.QueryEscape(secret), "path": url.PathEscape(secret), "percent": pct.String(),
		"json": string(j[1 : len(j)-1]),
	}
	for off, pre := range []string{"", "x", "xy"} {
		for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "raw": base64.RawStdEncoding, "url": base64.URLEncoding, "rawurl": base64.RawURLEncoding} {
			out["base64 "+name+" offset "+string(rune('0'+off))] = enc.EncodeToString([]byte(pre + secret + "\n"))
		}
	}
	return out
}

// residue is what is left of enc in got, the scrubbed "<" + enc + ">":
// the characters around the one [REDACTED], or all of enc if it is not
// redacted.
func residue(got string) string {
	inner := strings.TrimSuffix(strings.TrimPrefix(got, "<"), ">")
	l, r, ok := strings.Cut(inner, "[REDACTED]")
	if !ok || strings.Contains(r, "[REDACTED]") {
		return inner
	}
	return l + r
}

// TestDerivedFormsRedacted: every form of the bot's secrets, whole or
// split across lines (a newline or CRLF inserted anywhere inside), is
// redacted; of a base64 form at most the characters that encode its
// neighbours (and the padding) stay.
func TestDerivedFormsRedacted(t *testing.T) {
	for _, secret := range []string{"sk-live-0123456789abcdefXYZ", `pa"ss\wo<rd>&1234`} {
		x := newScrubber([]string{secret}, nil)
		for name, enc := range encodings(secret) {
			limit := 0
			if strings.HasPrefix(name, "base64") {
				limit = 4 // the group holding the neighbour's byte and the padding
			}
			if got := residue(x.scrub("<" + enc + ">")); len(got) > limit {
				t.Errorf("%q %s: %q left of %q", secret, name, got, enc)
			}
			for i := 1; i < len(enc); i++ {
				for _, br := range []string{"\n", "\r\n", `\n`} {
					split := enc[:i] + br + enc[i:]
					if got := residue(x.scrub("<" + split + ">")); len(got) > limit+len(br) {
						t.Fatalf("%q %s split at %d by %q: %q left of %q", secret, name, i, br, got, split)
					}
				}
			}
		}
	}
}

// TestScrubLeavesOtherTextAlone: text without the secrets' forms passes
// unchanged, in payloads too (byte for byte).
func TestScrubLeavesOtherTextAlone(t *testing.T) {
	x := newScrubber([]string{"sk-live-0123456789abcdefXYZ"}, nil)
	for _, s := range []string{"Filesystem Size Used\n/dev/sda1 50G 48G", "c2stbGl2ZS0", "sk-live-0123"} {
		if got := x.scrub(s); got != s {
			t.Errorf("scrub(%q) = %q", s, got)
		}
	}
	p := []byte(`{"a":"x\u003cy","n":1,"b":["sk-live-0123"]}`)
	if got := x.payload(p); string(got) != string(p) {
		t.Errorf("payload = %s", got)
	}
	if got := string(x.payload([]byte(`{"a":"key sk-live-0123456789abcdefXYZ\n","n":1}`))); got != `{"a":"key [REDACTED]\n","n":1}` {
		t.Errorf("payload = %s", got)
	}
}

// TestDerivedFormsInOutput: real tools turn a token file into base64 (at
// three offsets, wrapped), hex, reversed, folded, URL- and JSON-encoded
// text; none of it reaches the model, the hooks or the chain.
func TestDerivedFormsInOutput(t *testing.T) {
	const key = `sk-live-Q2x7"<Zr9&Wd4\Lm3`
	cmd := `base64 tok; (printf x; cat tok) | base64; (printf xy; cat tok) | base64 -w0; echo; base64 -w0 tok | tr '+/' '-_' | tr -d =; echo; ` +
		`xxd -p tok; xxd -p tok | tr a-f A-F; rev tok; fold -w 5 tok; jq -Rr @uri tok; jq -R . tok; sed 's/./&\r\n/7' tok`
	var hooked string
	f := newFixture(t, Config{Secrets: []string{key}}, runCmd(cmd), say("done"))
	if err := os.WriteFile(filepath.Join(f.dir, "tok"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:a", Text: "x", Dir: f.dir, AllowAll: true,
		Hooks: Hooks{Result: func(c CommandInfo, content string, _ bool) { hooked = string(c.Output) + content }}})
	if err != nil {
		t.Fatal(err)
	}
	saw := lastToolContent(f.model.reqs[1])
	if n := strings.Count(saw, "[REDACTED]"); n < 11 {
		t.Errorf("the model saw %d redactions, want 11 at least: %s", n, saw)
	}
	leaks := func(where, s string) {
		for name, enc := range encodings(key) {
			if strings.HasPrefix(name, "base64") {
				enc = enc[4 : len(enc)-4]
			}
			if strings.Contains(strings.NewReplacer("\n", "", "\r", "", `\n`, "", `\r`, "").Replace(s), enc) {
				t.Errorf("%s holds the key's %s form: %s", where, name, s)
			}
		}
	}
	leaks("the model's view", saw)
	leaks("the hooks", hooked)
	for _, e := range f.events(t, "s") {
		var v any
		json.Unmarshal(e.Payload, &v)
		b, _ := json.Marshal(v)
		leaks(e.Type, string(e.Payload)+string(b))
	}
}

// TestSecretsRedactedInEveryWayOut: the model writes the bot's key and its
// forms into its text, reasoning, streamed text and tool arguments (a
// JSON-escaping key, as Go and Python escape it), and runs a command whose
// comment (the model's Requested text) holds it; the command needs an
// approval. Nothing leaves with a form of the key: the chain, the
// approval request, the hooks, /status, the stream and the answer.
func TestSecretsRedactedInEveryWayOut(t *testing.T) {
	const key = `k3y"<Secret>&\Value-0123`
	esc, _ := json.Marshal(key)
	b64 := base64.StdEncoding.EncodeToString([]byte(key))
	// As Python's json.dumps writes them: < > & unescaped.
	args, _ := json.Marshal(map[string]string{"command": "printf %s '" + key + "' >/dev/null # " + b64, "reason": hex.EncodeToString([]byte(key))})
	pyArgs := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(args))
	var status string
	var shown []string
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		shown = append(shown, a.Command, a.Reason, a.Why)
		return ApprovalDecision{Approved: true, By: "user:bob"}, nil
	})
	f := newFixture(t, Config{Secrets: []string{key}},
		func(Request) (Response, error) {
			return Response{Reasoning: "base64 " + b64, FinishReason: "tool_calls",
				ToolCalls: []ToolCall{{ID: "c1", Name: ToolRun, Arguments: pyArgs}}}, nil
		},
		func(r Request) (Response, error) {
			r.OnText("the key: " + b64[:10])
			r.OnText(b64[10:] + " and reversed ")
			return Response{Content: "the key: " + b64 + " and " + string(esc), Reasoning: url.QueryEscape(key), FinishReason: "stop"}, nil
		})
	var streamed strings.Builder
	hooks := Hooks{Text: func(d string) { streamed.WriteString(d) },
		Command: func(c CommandInfo) {
			shown = append(shown, c.Command, c.Requested, c.Reason)
			status = f.a.SessionStatus("s").Current
		},
		Result: func(c CommandInfo, content string, _ bool) {
			shown = append(shown, string(c.Output), content, c.Command)
		}}
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:a", Text: "go", Dir: f.dir, Approver: approver, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{key, string(esc[1 : len(esc)-1]), `k3y\"<Secret>&`, b64[4 : len(b64)-4], hex.EncodeToString([]byte(key)), url.QueryEscape(key)}
	check := func(where, s string) {
		t.Helper()
		for _, b := range bad {
			if strings.Contains(s, b) {
				t.Errorf("%s holds %q: %s", where, b, s)
			}
		}
	}
	check("the answer", res.Answer)
	check("the stream", streamed.String())
	check("/status", status)
	if status == "" || len(shown) < 8 {
		t.Fatalf("the test saw too little: status %q, shown %q", status, shown)
	}
	for _, s := range shown {
		check("a hook or the approval", s)
	}
	requested := false
	for _, e := range f.events(t, "s") {
		check(e.Type, string(e.Payload))
		var gp GatePayload
		if e.Type == EvGateDecision && json.Unmarshal(e.Payload, &gp) == nil && gp.Requested != "" {
			requested = true
		}
		if e.Type == EvAssistantMessage {
			var ap AssistantPayload
			json.Unmarshal(e.Payload, &ap)
			for _, c := range ap.ToolCalls {
				var args map[string]string
				if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
					t.Errorf("recorded arguments are no longer JSON: %s", c.Arguments)
				}
				check("the tool call's arguments", args["command"]+args["reason"])
			}
		}
	}
	if !requested {
		t.Error("no gate decision records a Requested text: the test proves nothing for it")
	}
}

// TestLearnedSecretForms: a token a command printed is masked there, and
// its base64 and reversed forms in the model's later answer are redacted
// too (the scrubber learns what the Masker finds).
func TestLearnedSecretForms(t *testing.T) {
	const token = "ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK"
	b64 := base64.StdEncoding.EncodeToString([]byte(token))
	f := newFixture(t, Config{}, runCmd("cat creds.txt"), say("it is "+b64))
	os.WriteFile(filepath.Join(f.dir, "creds.txt"), []byte("github: "+token+"\n"), 0o600)
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:a", Text: "show", Dir: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Answer, b64[4:len(b64)-4]) || !strings.Contains(res.Answer, "[REDACTED]") {
		t.Errorf("answer = %q", res.Answer)
	}
	for _, e := range f.events(t, "s") {
		if strings.Contains(string(e.Payload), b64[4:len(b64)-4]) || strings.Contains(string(e.Payload), token) {
			t.Errorf("%s holds the token: %s", e.Type, e.Payload)
		}
	}
}
