package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestAPIErrorsAreJSON: every error under /api/ is JSON {"error": ...}:
// the mux's 404, the role check's page, a bad request.
func TestAPIErrorsAreJSON(t *testing.T) {
	r := newRig(t, rigOpts{})
	for _, c := range []struct {
		user, method, path, body string
		code                     int
		want                     string
	}{
		{"alice", "GET", "/api/nothing-here", "", http.StatusNotFound, "not found"},
		{"audrey", "POST", "/api/threads", `{"text":"hi"}`, http.StatusForbidden, "needs the user role"},
		{"alice", "GET", "/api/threads/x/output?command=ls", "", http.StatusBadRequest, "want command, after"},
		{"", "GET", "/api/inbox", "", http.StatusUnauthorized, "not signed in"},
	} {
		code, body := r.do(c.user, c.method, c.path, c.body)
		var v struct{ Error string }
		if err := json.Unmarshal([]byte(body), &v); code != c.code || err != nil || !strings.Contains(v.Error, c.want) {
			t.Errorf("%s %s as %q: %d %q (%v), want %d and JSON naming %q", c.method, c.path, c.user, code, body, err, c.code, c.want)
		}
	}
}

// TestOutputFromTheChain: the whole output of a command the status post
// shows cut, from the chain, for the run that made the post.
func TestOutputFromTheChain(t *testing.T) {
	r := newRig(t, rigOpts{})
	tid := r.newThread("alice", "show the big log")
	r.waitPost(tid, "That was long.")
	status := r.waitPost(tid, "more lines)")
	get := func(n int, after time.Time) (int, string) {
		return r.do("bob", "GET", "/api/threads/"+tid+"/output?command="+url.QueryEscape("seq 1 2000")+
			"&after="+url.QueryEscape(after.Format(time.RFC3339Nano))+"&n="+string(rune('0'+n)), "")
	}
	code, body := get(0, status.Time)
	var v struct {
		Output   string
		Verified bool
	}
	if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil {
		t.Fatalf("output: %d %.200s %v", code, body, err)
	}
	if lines := strings.Split(strings.TrimSuffix(v.Output, "\n"), "\n"); len(lines) != 2000 || lines[1999] != "2000" || !v.Verified {
		t.Errorf("output: %d lines, verified %v", len(lines), v.Verified)
	}
	if code, _ := get(1, status.Time); code != http.StatusNotFound {
		t.Errorf("a second run of the command that never was: %d", code)
	}
	// A time before any run of the thread names no run.
	if code, _ := get(0, status.Time.Add(-time.Hour)); code != http.StatusNotFound {
		t.Errorf("output for a time before the thread: %d", code)
	}
}

func TestSameCommand(t *testing.T) {
	long := "echo " + strings.Repeat("x", 200)
	for _, c := range []struct {
		shown, run string
		want       bool
	}{
		{"seq 1 2000", "seq 1 2000", true},
		{"seq 1 2000", "seq 1  2000\n", true},
		{"echo 'a'", "echo `a`", true},
		{"seq 1 200", "seq 1 2000", false},
		{long[:117] + "...", long, true},
		{"ec...", "echo", false},
	} {
		if got := sameCommand(c.shown, c.run); got != c.want {
			t.Errorf("sameCommand(%q, %q) = %v", c.shown, c.run, got)
		}
	}
}

// TestInboxNamesTheRequester: the inbox names who asked for the command
// (the run's requester, from the bot), not whoever wrote in the thread
// last: bob's message while alice's run thinks must not make the request
// bob's (he would be told it is his own and not be notified of it).
func TestInboxNamesTheRequester(t *testing.T) {
	r := newRig(t, rigOpts{})
	tid := r.newThread("alice", "please slowly create the marker")
	// bob writes while the model is still thinking, before the request.
	if code, body := r.do("bob", "POST", "/api/threads/"+tid+"/messages", `{"text":"I am looking at it too"}`); code != http.StatusAccepted {
		t.Fatalf("bob's message: %d %s", code, body)
	}
	r.waitPost(tid, "Approval needed")
	inbox := func(user string) []inboxItem {
		t.Helper()
		code, body := r.do(user, "GET", "/api/inbox", "")
		var v struct{ Items []inboxItem }
		if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil {
			t.Fatalf("inbox as %s: %d %s %v", user, code, body, err)
		}
		return v.Items
	}
	for user, mine := range map[string]bool{"alice": true, "bob": false} {
		items := inbox(user)
		if len(items) != 1 || items[0].Requester != "alice" || items[0].Mine != mine {
			t.Errorf("inbox as %s = %+v, want one request by alice, mine %v", user, items, mine)
		}
	}
}
