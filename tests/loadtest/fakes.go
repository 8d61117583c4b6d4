package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/thinbot/thinbot/tests/fakemattermost"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// fakesEnv, set in the environment of this program (or its test binary),
// makes it serve the fakes instead of driving a load: see serveFakes.
const fakesEnv = "THINBOT_LOADTEST_FAKES"

// fakesProfileEnv, set beside fakesEnv, names the file into which the
// fakes process writes its CPU profile (loadtest -profile: fakes-cpu.pprof).
const fakesProfileEnv = "THINBOT_LOADTEST_FAKES_PROFILE"

// fakesInfo is what the fakes process tells the driver on its first line.
type fakesInfo struct {
	MMURL      string `json:"mm_url"`
	BotID      string `json:"bot_id"`
	BotToken   string `json:"bot_token"`
	AliceID    string `json:"alice_id"`
	AliceToken string `json:"alice_token"`
	Channel    string `json:"channel"`
	ModelURL   string `json:"model_url"`
	Control    string `json:"control"`
}

// fakesStats is what the fakes saw, read at the end of a run.
type fakesStats struct {
	WebSockets int                    `json:"websockets"`
	Failures   []string               `json:"failures"`
	ModelCalls int                    `json:"model_calls"`
	ModelErr   string                 `json:"model_err"`
	Calls      map[string][]time.Time `json:"calls"`
	// BotRequests counts the bot's requests to the chat server by
	// "METHOD path" with ids folded to ":id" (issue #20: chat calls per command).
	BotRequests map[string]int `json:"bot_requests"`
}

type threadPost struct {
	UserID  string `json:"user_id"`
	Message string `json:"message"`
}

// serveFakes runs the fake Mattermost and the scripted model in this
// process, so that they do not share the driver's (or the daemon's)
// scheduler and garbage collector; main calls it when fakesEnv is set, to
// "STEPS LATENCY". It prints a fakesInfo line, serves a control API on
// 127.0.0.1 for the driver, and returns when stdin closes.
func serveFakes(spec string, stdin io.Reader, stdout io.Writer) error {
	var steps int
	var latency time.Duration
	var lat string
	if _, err := fmt.Sscan(spec, &steps, &lat); err != nil {
		return fmt.Errorf("%s=%q: %w", fakesEnv, spec, err)
	}
	latency, err := time.ParseDuration(lat)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", fakesEnv, spec, err)
	}
	if path := os.Getenv(fakesProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	mm := fakemattermost.New(nil)
	defer mm.Close()
	alice := mm.AddUser("alice")
	channel := mm.AddChannel("load", mm.Bot.ID, alice.ID)
	rec := &calls{at: map[string][]time.Time{}}
	model := fakemodel.NewFunc(scriptedModel(steps, latency, rec))
	defer model.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /post", func(w http.ResponseWriter, r *http.Request) {
		var p userPost
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The clock starts when the fake takes the post, not when the
		// driver sent it: the figure is the daemon's, without the hop.
		at := time.Now()
		json.NewEncoder(w).Encode(postReply{ID: mm.UserPost(p.User, p.Channel, p.Root, p.Text), At: at})
	})
	// A burst arrives in one request: the posts are taken one after the
	// other, each with its own clock, without one connection per post
	// between the driver and the fakes (which would cost the machine the
	// daemon runs on hundreds of handshakes at the moment it is measured).
	mux.HandleFunc("POST /posts", func(w http.ResponseWriter, r *http.Request) {
		var ps []userPost
		if err := json.NewDecoder(r.Body).Decode(&ps); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := make([]postReply, len(ps))
		for i, p := range ps {
			out[i].At = time.Now()
			out[i].ID = mm.UserPost(p.User, p.Channel, p.Root, p.Text)
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /thread", func(w http.ResponseWriter, r *http.Request) {
		var out []threadPost
		for _, p := range mm.Thread(r.URL.Query().Get("root")) {
			out = append(out, threadPost{UserID: p.UserID, Message: p.Message})
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /wait", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if err := mm.WaitConnections(r.Context(), n); err != nil {
			http.Error(w, err.Error(), http.StatusGatewayTimeout)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st := fakesStats{Failures: mm.Failures(), ModelCalls: len(model.Requests()), BotRequests: map[string]int{}}
		for _, q := range mm.Requests() {
			if q.Path == "/api/v4/websocket" {
				st.WebSockets++
			}
			if q.UserID == mm.Bot.ID {
				st.BotRequests[q.Method+" "+routeOf(q.Path)]++
			}
		}
		if err := model.Err(); err != nil {
			st.ModelErr = err.Error()
		}
		rec.mu.Lock()
		st.Calls = rec.at
		json.NewEncoder(w).Encode(st)
		rec.mu.Unlock()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	info := fakesInfo{MMURL: mm.URL, BotID: mm.Bot.ID, BotToken: mm.Bot.Token, AliceID: alice.ID, AliceToken: alice.Token,
		Channel: channel, ModelURL: model.URL, Control: "http://" + ln.Addr().String()}
	if err := json.NewEncoder(stdout).Encode(info); err != nil {
		return err
	}
	io.Copy(io.Discard, stdin)
	return nil
}

// fakes is the driver's handle on the fakes process.
type fakes struct {
	fakesInfo
	cmd   *exec.Cmd
	stdin io.WriteCloser
	hc    *http.Client
}

// startFakes starts this program again (os.Executable) as the fakes process.
// With a profile directory, the fakes write their CPU profile into it.
func startFakes(ctx context.Context, steps int, latency time.Duration, profile string) (*fakes, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("loadtest: fakes: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s", fakesEnv, steps, latency))
	if profile != "" {
		if err := os.MkdirAll(profile, 0o700); err != nil {
			return nil, fmt.Errorf("loadtest: fakes: %w", err)
		}
		cmd.Env = append(cmd.Env, fakesProfileEnv+"="+filepath.Join(profile, "fakes-cpu.pprof"))
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("loadtest: fakes: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("loadtest: fakes: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadtest: fakes: %w", err)
	}
	// Every thread posts at once: keep a connection per thread.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	f := &fakes{cmd: cmd, stdin: stdin, hc: &http.Client{Transport: tr}}
	line := make(chan error, 1)
	go func() {
		b, err := bufio.NewReader(stdout).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(b, &f.fakesInfo)
		}
		line <- err
		io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case err = <-line:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = errors.New("no answer in 30s")
	}
	if err != nil {
		f.close()
		return nil, fmt.Errorf("loadtest: fakes: %w", err)
	}
	return f, nil
}

// close ends the fakes process and returns its CPU time.
func (f *fakes) close() time.Duration {
	f.stdin.Close()
	done := make(chan struct{})
	go func() { f.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		f.cmd.Process.Kill()
		<-done
	}
	if st := f.cmd.ProcessState; st != nil {
		return st.UserTime() + st.SystemTime()
	}
	return 0
}

func (f *fakes) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.Control+path, rd)
	if err != nil {
		return err
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("fakes %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// userPost is a message the fakes post as a user.
type userPost struct {
	User    string `json:"user"`
	Channel string `json:"channel"`
	Root    string `json:"root"`
	Text    string `json:"text"`
}

type postReply struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// userPost posts text as userID and returns the post id ("" if refused)
// and when the fake took it.
func (f *fakes) userPost(ctx context.Context, userID, channel, root, text string) (string, time.Time) {
	var out postReply
	if f.call(ctx, http.MethodPost, "/post", userPost{User: userID, Channel: channel, Root: root, Text: text}, &out) != nil {
		return "", time.Time{}
	}
	return out.ID, out.At
}

// userPosts posts a burst, in order; a refused post has the id "".
func (f *fakes) userPosts(ctx context.Context, ps []userPost) ([]postReply, error) {
	var out []postReply
	if err := f.call(ctx, http.MethodPost, "/posts", ps, &out); err != nil {
		return nil, err
	}
	if len(out) != len(ps) {
		return nil, fmt.Errorf("fakes: %d posts taken, want %d", len(out), len(ps))
	}
	return out, nil
}

func (f *fakes) thread(ctx context.Context, root string) ([]threadPost, error) {
	var out []threadPost
	err := f.call(ctx, http.MethodGet, "/thread?root="+url.QueryEscape(root), nil, &out)
	return out, err
}

func (f *fakes) waitConnections(ctx context.Context, n int) error {
	return f.call(ctx, http.MethodGet, "/wait?n="+strconv.Itoa(n), nil, nil)
}

func (f *fakes) stats(ctx context.Context) (fakesStats, error) {
	var st fakesStats
	err := f.call(ctx, http.MethodGet, "/stats", nil, &st)
	return st, err
}

// routeOf folds the ids in an API path (26 lowercase letters and digits,
// Mattermost's shape) into ":id", so that requests count by route.
func routeOf(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if len(p) == 26 && strings.IndexFunc(p, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') }) < 0 {
			parts[i] = ":id"
		}
	}
	return strings.Join(parts, "/")
}
