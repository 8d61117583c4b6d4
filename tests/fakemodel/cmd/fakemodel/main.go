// Command fakemodel serves a scripted OpenAI-compatible model on 127.0.0.1,
// so thinbot can be tried and tested offline.
//
//	fakemodel -demo                  # answers "run df -h", then summarises
//	fakemodel -script replies.json   # a JSON list of fakemodel.Reply objects
//
// It prints the base URL to use as AGENT_BASE_URL and serves until
// interrupted. A script that runs out answers HTTP 500, unless -repeat
// starts it over.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakemodel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 8089, "TCP port on 127.0.0.1 (0 picks a free one)")
	script := fs.String("script", "", "JSON file with a list of replies")
	demo := fs.Bool("demo", false, "serve the built-in demo (run df -h, then summarise)")
	repeat := fs.Bool("repeat", false, "start the script over when it runs out")
	rejectTools := fs.Bool("reject-tools", false, "answer requests with tools with vLLM's 400, as a server without tool calling")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*script == "") == !*demo {
		return errors.New("give exactly one of -script FILE or -demo")
	}
	var replies []fakemodel.Reply
	if *script != "" {
		b, err := os.ReadFile(*script)
		if err != nil {
			return fmt.Errorf("read script: %w", err)
		}
		if err := json.Unmarshal(b, &replies); err != nil {
			return fmt.Errorf("script %s: %w", *script, err)
		}
		if len(replies) == 0 {
			return fmt.Errorf("script %s: no replies", *script)
		}
	}
	h := fakemodel.NewHandlerFunc(replyFunc(replies, *demo, *repeat, *rejectTools))

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "fakemodel: serving on http://%s/v1 (AGENT_BASE_URL)\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := h.Err(); err != nil {
		fmt.Fprintln(stderr, err)
	}
	return nil
}

// replyFunc serves the demo or the script, in order, optionally repeating.
func replyFunc(replies []fakemodel.Reply, demo, repeat, rejectTools bool) func(fakemodel.Request) fakemodel.Reply {
	var mu sync.Mutex
	next := 0
	return func(req fakemodel.Request) fakemodel.Reply {
		if rejectTools && req.HasTools() {
			return fakemodel.Reply{RejectTools: true}
		}
		if demo {
			return fakemodel.Demo(req)
		}
		mu.Lock()
		defer mu.Unlock()
		if next >= len(replies) {
			if !repeat {
				return fakemodel.Reply{Status: http.StatusInternalServerError,
					ErrorBody: `{"error":{"message":"fakemodel: script exhausted (no reply left)","type":"server_error","code":500}}`}
			}
			next = 0
		}
		r := replies[next]
		if r.RejectTools && req.HasTools() {
			return r // kept for the retry without tools
		}
		next++
		return r
	}
}
